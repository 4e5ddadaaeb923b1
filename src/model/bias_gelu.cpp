// The fused bias + GELU's autograd node on a CUDA LibTorch (bias_gelu_none.cpp elsewhere);
// the kernels are in cuda/bias_gelu.cu.
#include "model/bias_gelu.hpp"

#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <stdexcept>

#include "model/cuda/bias_gelu_kernels.hpp"
#include "model/fusions.hpp"

namespace genemask::model {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct BiasGelu : torch::autograd::Function<BiasGelu> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& z_in, const torch::Tensor& bias_in,
                               int64_t rows_in_flight) {
    const c10::cuda::CUDAGuard on_device(z_in.device());  // the launch on z's GPU and its stream
    const auto z = z_in.contiguous(), bias = bias_in.contiguous();
    const int H = static_cast<int>(z.size(-1));
    auto y = torch::empty_like(z);
    // The launchers refuse only a count fused_bias_gelu has already refused.
    TORCH_INTERNAL_ASSERT(cuda::bias_gelu_forward(z.scalar_type() == torch::kBFloat16, z.data_ptr(),
                                                  bias.data_ptr<float>(), y.data_ptr(), z.numel() / H, H,
                                                  c10::cuda::getCurrentCUDAStream(), static_cast<int>(rows_in_flight)));
    cuda::check_launch("fused bias + GELU", "forward");
    ctx->save_for_backward({z, bias});
    ctx->saved_data["rows_in_flight"] = rows_in_flight;
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &z = saved[0], &bias = saved[1];
    const auto dy = grads[0].to(z.scalar_type()).contiguous();
    const int H = static_cast<int>(z.size(-1));
    const int64_t rows = z.numel() / H;
    auto dz = torch::empty_like(z);
    auto partial = torch::empty({cuda::bias_gelu_row_blocks(rows), H}, z.options().dtype(torch::kFloat32));
    const int64_t rows_in_flight = ctx->saved_data["rows_in_flight"].toInt();
    TORCH_INTERNAL_ASSERT(cuda::bias_gelu_backward(z.scalar_type() == torch::kBFloat16, dy.data_ptr(), z.data_ptr(),
                                                   bias.data_ptr<float>(), dz.data_ptr(), partial.data_ptr<float>(),
                                                   rows, H, c10::cuda::getCurrentCUDAStream(),
                                                   static_cast<int>(rows_in_flight)));
    cuda::check_launch("fused bias + GELU", "backward");
    return {dz, partial.sum(0), torch::Tensor()};
  }
};

}  // namespace

bool fused_bias_gelu_runs_on(const torch::Device& device) { return device.is_cuda(); }

bool fused_bias_gelu_takes(const torch::Tensor& z, const torch::Tensor& bias) {
  return z.defined() && bias.defined() && z.is_cuda() &&
         (z.scalar_type() == torch::kBFloat16 || z.scalar_type() == torch::kFloat32) &&
         bias.scalar_type() == torch::kFloat32 && bias.device() == z.device() && bias.dim() == 1 && z.dim() >= 1 &&
         z.size(-1) > 0 && z.size(-1) <= (int64_t{1} << 30) && bias.numel() == z.size(-1);
}

torch::Tensor fused_bias_gelu(const torch::Tensor& z, const torch::Tensor& bias, int rows_in_flight) {
  if (rows_in_flight == 0) rows_in_flight = gelu_rows_in_flight();
  check_gelu_rows_in_flight(rows_in_flight);
  if (!fused_bias_gelu_takes(z, bias))
    throw std::invalid_argument("fused bias + GELU: inputs it does not take (see fused_bias_gelu_takes)");
  return BiasGelu::apply(z, bias, static_cast<int64_t>(rows_in_flight));
}

}  // namespace genemask::model
