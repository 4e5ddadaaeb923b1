// The fused residual LayerNorm's autograd node on a CUDA LibTorch (residual_layer_norm_none.cpp
// elsewhere); the kernels are in cuda/residual_layer_norm.cu.
#include "model/residual_layer_norm.hpp"

#include <ATen/cuda/CUDAGeneratorImpl.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <fmt/format.h>

#include <cstdint>
#include <mutex>
#include <stdexcept>

#include "model/cuda/residual_layer_norm_kernels.hpp"
#include "model/fusions.hpp"

namespace genemask::model {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct ResidualLayerNorm : torch::autograd::Function<ResidualLayerNorm> {
  /// Outputs: {y} or, with `copy`, {y, y in bf16}.
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& h_in, const torch::Tensor& residual_in,
                               const torch::Tensor& gamma_in, const torch::Tensor& beta_in, double p, double eps,
                               bool copy) {
    const c10::cuda::CUDAGuard on_device(h_in.device());  // the launch on the inputs' GPU and its stream
    const auto h = h_in.contiguous(), residual = residual_in.contiguous();
    const auto gamma = gamma_in.contiguous(), beta = beta_in.contiguous();
    const int H = static_cast<int>(h.size(-1));
    const int64_t rows = h.numel() / H;
    const auto f32 = residual.options().dtype(torch::kFloat32);
    // ln-lean (fusions.hpp): no pre-norm sum saved, the keep mask as bits; the backward
    // computes the sum again from h and the residual, which it then keeps instead.
    const bool lean = fusions().ln_lean;
    auto y = torch::empty_like(residual, f32);
    const auto sum = lean ? torch::Tensor() : torch::empty_like(residual, f32);
    const auto y_low = copy ? torch::empty_like(residual, residual.options().dtype(torch::kBFloat16)) : torch::Tensor();
    auto mean = torch::empty({rows}, f32), rstd = torch::empty({rows}, f32);
    torch::Tensor keep;
    at::PhiloxCudaState philox;
    if (p > 0) {
      keep = lean ? torch::empty({rows, cuda::keep_bytes_per_row(H)}, residual.options().dtype(torch::kUInt8))
                  : torch::empty(residual.sizes(), residual.options().dtype(torch::kUInt8));
      // The default generator of this GPU: torch::manual_seed and checkpoints govern it.
      auto gen = at::cuda::detail::getDefaultCUDAGenerator(h.device().index());
      std::lock_guard<std::mutex> lock(gen.mutex());
      philox = gen.get<at::CUDAGeneratorImpl>()->philox_cuda_state(cuda::philox_increment(H));
    }
    cuda::residual_layer_norm_forward(h.scalar_type() == torch::kBFloat16, h.data_ptr(), residual.data_ptr<float>(),
                                      gamma.data_ptr<float>(), beta.data_ptr<float>(), y.data_ptr<float>(),
                                      copy ? y_low.data_ptr() : nullptr, lean ? nullptr : sum.data_ptr<float>(),
                                      p > 0 ? keep.data_ptr<uint8_t>() : nullptr, mean.data_ptr<float>(),
                                      rstd.data_ptr<float>(), rows, H, static_cast<float>(p), static_cast<float>(eps),
                                      philox, lean, c10::cuda::getCurrentCUDAStream());
    cuda::check_launch("fused residual LayerNorm", "forward");
    // Saved: the sum, or (lean) h and the residual; either way the keep mask, the rows' mean
    // and 1 / std, and gamma.
    // With ln-lean, h and the residual as fresh copies where they are not 16-byte aligned (a
    // view some elements in): its backward then takes the same kernel (8-element or
    // one-element, which add in different orders) as the backward without it, which reads
    // neither, and gives the same bits. (The forward above ran on them as they are, as it
    // does without ln-lean.)
    auto aligned = [](const torch::Tensor& t) {
      return reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 != 0 ? t.clone() : t;
    };
    if (lean) ctx->save_for_backward({aligned(h), aligned(residual), keep, mean, rstd, gamma});
    else ctx->save_for_backward({sum, torch::Tensor(), keep, mean, rstd, gamma});
    ctx->saved_data["lean"] = lean;
    ctx->saved_data["p"] = p;
    ctx->saved_data["h_dtype"] = static_cast<int64_t>(h.scalar_type());
    ctx->saved_data["smem_sums"] = fusions().ln_smem;  // the backward kernel's gamma/beta sums (fusions.hpp)
    // An output without a gradient (the copy the last layer makes no product of, or y when
    // only its copy is read) comes as an undefined tensor, not as zeros filled for the kernel
    // to read.
    ctx->set_materialize_grads(false);
    if (copy) return {y, y_low};
    return {y};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const bool lean = ctx->saved_data["lean"].toBool();
    // lean: saved[0] is h and saved[1] the residual, else saved[0] is the sum.
    const auto &keep = saved[2], &mean = saved[3], &rstd = saved[4], &gamma = saved[5];
    const torch::Tensor& like = lean ? saved[1] : saved[0];  // fp32, the rows' shape
    const double p = ctx->saved_data["p"].toDouble();
    const auto h_dtype = static_cast<torch::ScalarType>(ctx->saved_data["h_dtype"].toInt());
    const bool has_dy = grads[0].defined(), has_low = grads.size() > 1 && grads[1].defined();
    if (!has_dy && !has_low) return {torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor(),
                                     torch::Tensor(), torch::Tensor(), torch::Tensor()};
    const auto dy = has_dy ? grads[0].to(torch::kFloat32).contiguous() : torch::Tensor();
    const auto dy_low = has_low ? grads[1].to(torch::kBFloat16).contiguous() : torch::Tensor();
    const int H = static_cast<int>(like.size(-1));
    const int64_t rows = like.numel() / H;
    auto d_residual = torch::empty_like(like), dh = torch::empty(like.sizes(), like.options().dtype(h_dtype));
    const bool smem_sums = cuda::takes_smem_sums(H, ctx->saved_data["smem_sums"].toBool());
    auto partial = torch::empty({cuda::backward_partial_rows(rows, smem_sums), 2, H}, like.options());
    const int blocks = cuda::residual_layer_norm_backward(
        h_dtype == torch::kBFloat16, has_dy ? dy.data_ptr<float>() : nullptr, has_low ? dy_low.data_ptr() : nullptr,
        lean ? nullptr : saved[0].data_ptr<float>(), lean ? saved[0].data_ptr() : nullptr,
        lean ? saved[1].data_ptr<float>() : nullptr, p > 0 ? keep.data_ptr<uint8_t>() : nullptr,
        mean.data_ptr<float>(), rstd.data_ptr<float>(), gamma.data_ptr<float>(), dh.data_ptr(),
        d_residual.data_ptr<float>(), partial.data_ptr<float>(), rows, H, static_cast<float>(p), smem_sums, lean,
        c10::cuda::getCurrentCUDAStream());
    cuda::check_launch("fused residual LayerNorm", "backward");
    auto sums = partial.narrow(0, 0, blocks).sum(0);  // [2, H]
    return {dh, d_residual, sums[0], sums[1], torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

bool fused_residual_layer_norm_takes(const torch::Tensor& h, const torch::Tensor& residual, const torch::Tensor& gamma) {
  return h.is_cuda() && (h.scalar_type() == torch::kBFloat16 || h.scalar_type() == torch::kFloat32) &&
         residual.scalar_type() == torch::kFloat32 && gamma.scalar_type() == torch::kFloat32 &&
         residual.device() == h.device() && gamma.device() == h.device() && h.sizes() == residual.sizes() &&
         h.dim() >= 1 && h.size(-1) > 0 && h.size(-1) <= cuda::kMaxHidden && gamma.numel() == h.size(-1);
}

namespace {
variable_list apply_checked(const torch::Tensor& h, const torch::Tensor& residual, const torch::Tensor& gamma,
                            const torch::Tensor& beta, double p, double eps, bool copy) {
  if (!fused_residual_layer_norm_takes(h, residual, gamma))
    throw std::invalid_argument("fused residual LayerNorm: inputs it does not take (see fused_residual_layer_norm_takes)");
  if (beta.scalar_type() != torch::kFloat32 || beta.device() != h.device() || beta.numel() != h.size(-1))
    throw std::invalid_argument(fmt::format("fused residual LayerNorm: beta must be {} fp32 values on {} (got {} {} on {})",
                                            h.size(-1), h.device().str(), beta.numel(),
                                            c10::toString(beta.scalar_type()), beta.device().str()));
  if (!(p >= 0 && p < 1)) throw std::invalid_argument(fmt::format("fused residual LayerNorm: dropout {} not in [0, 1)", p));
  return ResidualLayerNorm::apply(h, residual, gamma, beta, p, eps, copy);
}
}  // namespace

torch::Tensor fused_residual_layer_norm(const torch::Tensor& h, const torch::Tensor& residual, const torch::Tensor& gamma,
                                        const torch::Tensor& beta, double p, double eps) {
  return apply_checked(h, residual, gamma, beta, p, eps, false)[0];
}

std::pair<torch::Tensor, torch::Tensor> fused_residual_layer_norm_with_copy(const torch::Tensor& h,
                                                                            const torch::Tensor& residual,
                                                                            const torch::Tensor& gamma,
                                                                            const torch::Tensor& beta, double p,
                                                                            double eps) {
  auto out = apply_checked(h, residual, gamma, beta, p, eps, true);
  return {out[0], out[1]};
}

}  // namespace genemask::model
