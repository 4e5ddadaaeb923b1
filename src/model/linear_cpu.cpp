// The CPU's bf16 linear layer with its bias in oneDNN's epilogue (linear_cpu.hpp).
#include "model/linear_cpu.hpp"

#include <ATen/autocast_mode.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/cpu/Utils.h>

#include <optional>

#include "model/fusions.hpp"

namespace genemask::model {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

/// oneDNN's linear (mkldnn::_linear_pointwise, LibTorch's CPU operator for a product with
/// an epilogue), where this LibTorch has it.
const std::optional<c10::OperatorHandle>& linear_pointwise() {
  static const std::optional<c10::OperatorHandle> op =
      at::hasMKLDNN() ? c10::Dispatcher::singleton().findSchema({"mkldnn::_linear_pointwise", ""}) : std::nullopt;
  return op;
}

/// Whether ATen runs this CPU's bf16 products through oneDNN (ATen's own test,
/// mkldnn_bf16_device_check: AVX-512 with BW, VL and DQ), so that the epilogue's numbers are
/// the ones addmm gives; elsewhere addmm takes another path and the linear stays ATen's.
bool onednn_runs_bf16_products() {
  static const bool yes = [] {
    const auto caps = at::cpu::get_cpu_capabilities();
    auto has = [&](const char* k) {
      const auto it = caps.find(k);
      return it != caps.end() && it->second.isBool() && it->second.toBool();
    };
    return has("avx512_bw") && has("avx512_vl") && has("avx512_dq");
  }();
  return yes;
}

/// x [rows, in] . weight [out, in]^T + bias [out], all bf16 and contiguous.
torch::Tensor product_with_bias(const torch::Tensor& x2, const torch::Tensor& weight, const torch::Tensor& bias) {
  torch::jit::Stack stack{x2, weight, bias, std::string("none"), c10::List<std::optional<c10::Scalar>>(), c10::IValue()};
  linear_pointwise()->callBoxed(&stack);
  return stack[0].toTensor();
}

struct BiasLinear : torch::autograd::Function<BiasLinear> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& weight,
                               const torch::Tensor& bias) {
    ctx->save_for_backward({x, weight});
    auto out = x.sizes().vec();
    out.back() = weight.size(0);
    return product_with_bias(x.view({-1, x.size(-1)}), weight, bias).view(out);
  }

  // ATen's AddmmBackward0 for at::linear's addmm(bias, x, weight.t()): the same products
  // with the same operand layouts (mm_mat1_backward, and mm_mat2_backward's column-major
  // case for weight.t()), and sum_to's sum over the rows for the bias.
  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto& x = saved[0];
    const auto& weight = saved[1];
    const auto g = grads[0].reshape({-1, grads[0].size(-1)});
    torch::Tensor gx, gw, gb;
    if (ctx->needs_input_grad(0)) gx = g.mm(weight).view(x.sizes());
    if (ctx->needs_input_grad(1)) gw = g.t().mm(x.view({-1, x.size(-1)}));
    if (ctx->needs_input_grad(2)) gb = g.sum(0);
    return {gx, gw, gb};
  }
};

bool bf16_here(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias) {
  if (at::autocast::is_autocast_enabled(at::kCPU))
    return at::autocast::get_autocast_dtype(at::kCPU) == at::kBFloat16 && x.is_floating_point() &&
           x.scalar_type() != at::kDouble && weight.scalar_type() != at::kDouble && bias.scalar_type() != at::kDouble;
  return x.scalar_type() == at::kBFloat16 && weight.scalar_type() == at::kBFloat16 &&
         bias.scalar_type() == at::kBFloat16;
}

}  // namespace

bool cpu_bias_linear_takes(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias) {
  if (!fusions().cpu_bias || !bias.defined() || !x.defined() || !x.is_cpu() || !weight.is_cpu() || !bias.is_cpu())
    return false;
  if (x.dim() < 2 || weight.dim() != 2 || bias.dim() != 1 || !x.is_contiguous() || x.size(-1) != weight.size(1) ||
      bias.size(0) != weight.size(0))
    return false;
  if (!bf16_here(x, weight, bias) || !at::globalContext().userEnabledMkldnn() || !linear_pointwise() ||
      !onednn_runs_bf16_products())
    return false;
  // ATen sends a bf16 product to oneDNN only above 16^3 multiply-adds (mkldnn's checksize);
  // below it addmm rounds differently, and the layer stays ATen's.
  const int64_t rows = x.numel() / x.size(-1);
  return rows > 0 && rows * x.size(-1) * weight.size(0) > 16 * 16 * 16;
}

torch::Tensor cpu_bias_linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias) {
  // The casts autocast's linear makes (cached_cast: the weight cast once per autocast region).
  auto cast = [](const torch::Tensor& t) {
    return at::autocast::is_autocast_enabled(at::kCPU) ? at::autocast::cached_cast(at::kBFloat16, t, at::kCPU) : t;
  };
  return BiasLinear::apply(cast(x), cast(weight).contiguous(), cast(bias).contiguous());
}

}  // namespace genemask::model
