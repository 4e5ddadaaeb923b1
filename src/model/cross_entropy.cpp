// The fused MLM loss's autograd node on a CUDA LibTorch (cross_entropy_none.cpp elsewhere);
// the kernels are in cuda/cross_entropy.cu.
#include "model/cross_entropy.hpp"

#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <stdexcept>

#include "model/cuda/cross_entropy_kernels.hpp"

namespace genemask::model {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct FusedCrossEntropy : torch::autograd::Function<FusedCrossEntropy> {
  /// classes: the row's first `classes` columns are the classes; the rest, a padded product's.
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& logits_in, const torch::Tensor& targets_in,
                               int64_t classes) {
    const c10::cuda::CUDAGuard on_device(logits_in.device());  // the launch on the logits' GPU and its stream
    const auto logits = logits_in.contiguous(), targets = targets_in.contiguous();
    const int64_t rows = logits.size(0);
    const int V = static_cast<int>(classes), ld = static_cast<int>(logits.size(1));
    const auto f32 = logits.options().dtype(torch::kFloat32);
    auto stats = torch::empty({rows, 2}, f32), loss = torch::empty({rows}, f32);  // per row: max, log sum
    cuda::cross_entropy_forward(logits.scalar_type() == torch::kBFloat16, logits.data_ptr(),
                                targets.data_ptr<int64_t>(), stats.data_ptr<float>(), loss.data_ptr<float>(), rows, V,
                                ld, c10::cuda::getCurrentCUDAStream());
    cuda::check_launch("fused cross-entropy", "forward");
    ctx->save_for_backward({logits, targets, stats});
    ctx->saved_data["classes"] = classes;
    return loss.sum();
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &logits = saved[0], &targets = saved[1], &stats = saved[2];
    // The summed loss's gradient stays on the device: read by the kernel, never by the host.
    const auto g = grads[0].to(torch::kFloat32).contiguous();
    const int64_t rows = logits.size(0);
    const int V = static_cast<int>(ctx->saved_data["classes"].toInt()), ld = static_cast<int>(logits.size(1));
    auto dlogits = torch::empty_like(logits);  // the padding's columns written 0 by the kernel
    cuda::cross_entropy_backward(logits.scalar_type() == torch::kBFloat16, logits.data_ptr(),
                                 targets.data_ptr<int64_t>(), stats.data_ptr<float>(), g.data_ptr<float>(),
                                 dlogits.data_ptr(), rows, V, ld, c10::cuda::getCurrentCUDAStream());
    cuda::check_launch("fused cross-entropy", "backward");
    return {dlogits, torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

bool fused_cross_entropy_takes(const torch::Tensor& logits, const torch::Tensor& targets, int64_t classes) {
  return logits.defined() && targets.defined() && logits.is_cuda() && logits.dim() == 2 &&
         (logits.scalar_type() == torch::kBFloat16 || logits.scalar_type() == torch::kFloat32) &&
         logits.size(1) > 0 && logits.size(1) <= (int64_t{1} << 30) &&
         (classes == -1 || (classes > 0 && classes <= logits.size(1))) &&
         logits.size(0) < (int64_t{1} << 31) &&  // one block a row: a grid's x is below 2^31
         targets.device() == logits.device() &&
         targets.scalar_type() == torch::kLong && targets.dim() == 1 && targets.size(0) == logits.size(0);
}

torch::Tensor fused_cross_entropy_sum(const torch::Tensor& logits, const torch::Tensor& targets, int64_t classes) {
  if (!fused_cross_entropy_takes(logits, targets, classes))
    throw std::invalid_argument("fused cross-entropy: inputs it does not take (see fused_cross_entropy_takes)");
  return FusedCrossEntropy::apply(logits, targets, classes == -1 ? logits.size(1) : classes);
}

}  // namespace genemask::model
