// The fused bias + GELU in a build whose LibTorch has no CUDA: never taken.
#include "model/bias_gelu.hpp"

#include <stdexcept>

namespace genemask::model {

bool fused_bias_gelu_runs_on(const torch::Device&) { return false; }

bool fused_bias_gelu_takes(const torch::Tensor&, const torch::Tensor&) { return false; }

torch::Tensor fused_bias_gelu(const torch::Tensor&, const torch::Tensor&, int) {
  throw std::invalid_argument("fused bias + GELU: this build's LibTorch has no CUDA");
}

}  // namespace genemask::model
