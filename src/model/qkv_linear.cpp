// The Q/K/V product's autograd node (qkv_linear.hpp), in every build: LibTorch's operations,
// and on a GPU the stacking kernel through linear_bgrad.hpp's stack_column_sums.
#include "model/qkv_linear.hpp"

#include <cstdint>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>

#include "model/linear_bgrad.hpp"
#include "model/weight_copies.hpp"

namespace genemask::model {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

/// Shapes qkv_linear takes: x [B, L, K], weight [3 H, K], bias [3 H], heads dividing H.
bool shapes_fit(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias, int64_t heads) {
  if (!x.defined() || !weight.defined() || !bias.defined() || x.dim() != 3 || weight.dim() != 2 || bias.dim() != 1)
    return false;
  const int64_t N = weight.size(0);
  // B x L rows below 2^31: the stacking kernel's row index (linear_bgrad.hpp's stack_column_sums).
  return x.size(2) == weight.size(1) && bias.size(0) == N && heads > 0 && N > 0 && N % (3 * heads) == 0 &&
         x.size(0) * x.size(1) <= std::numeric_limits<int32_t>::max();
}

struct QkvLinear : torch::autograd::Function<QkvLinear> {
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& weight,
                               const torch::Tensor& bias, int64_t heads, const std::optional<torch::Tensor>& weight_low,
                               const std::optional<torch::Tensor>& bias_low) {
    const auto xb = x.to(torch::kBFloat16).contiguous();
    const auto wb = bf16_operand(weight, weight_low.value_or(torch::Tensor()));
    const auto y = at::linear(xb, wb, bf16_operand(bias, bias_low.value_or(torch::Tensor())));
    ctx->save_for_backward({xb, wb});
    ctx->saved_data["x_dtype"] = static_cast<int64_t>(x.scalar_type());
    const int64_t B = x.size(0), L = x.size(1), H = weight.size(0) / 3;
    return y.view({B, L, 3, heads, H / heads}).unbind(2);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &xb = saved[0], &wb = saved[1];
    const int64_t K = xb.size(-1), N = wb.size(0), M = xb.numel() / K;
    // The parts' shape from any defined gradient (at least one is, or autograd would not call).
    torch::Tensor like;
    for (const auto& g : grads)
      if (g.defined()) like = g;
    for (auto& g : grads) g = g.defined() ? g.to(torch::kBFloat16) : torch::zeros(like.sizes(), like.options().dtype(torch::kBFloat16));
    torch::Tensor dy, db;
    if (grads[0].is_cuda()) {
      std::tie(dy, db) = stack_column_sums(grads[0], grads[1], grads[2]);
    } else {
      dy = torch::stack({grads[0], grads[1], grads[2]}, 2).view({M, N});
      db = dy.sum(0, /*keepdim=*/false, torch::kFloat32);
    }
    torch::Tensor dx, dw;
    if (ctx->needs_input_grad(0)) {
      const auto x_dtype = static_cast<torch::ScalarType>(ctx->saved_data["x_dtype"].toInt());
      dx = at::mm(dy, wb).view(xb.sizes()).to(x_dtype);
    }
    if (ctx->needs_input_grad(1)) dw = at::mm(dy.t(), xb.view({M, K})).to(torch::kFloat32);
    if (!ctx->needs_input_grad(2)) db = torch::Tensor();
    return {dx, dw, db, torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

bool qkv_linear_takes(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias, int64_t heads) {
  return linear_bgrad_takes(x, weight, bias) && shapes_fit(x, weight, bias, heads);
}

std::vector<torch::Tensor> qkv_linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                                      int64_t heads, const torch::Tensor& weight_low, const torch::Tensor& bias_low) {
  if (!shapes_fit(x, weight, bias, heads))
    throw std::invalid_argument("Q/K/V product: x [B, L, K], weight [3 H, K] and bias [3 H], with " +
                                std::to_string(heads) + " heads dividing H");
  // The copies as optional arguments: not inputs of the node when undefined.
  return QkvLinear::apply(x, weight, bias, heads, std::optional<torch::Tensor>(weight_low),
                          std::optional<torch::Tensor>(bias_low));
}

}  // namespace genemask::model
