// The fused MLM loss in a build whose LibTorch has no CUDA: never taken.
#include "model/cross_entropy.hpp"

#include <stdexcept>

namespace genemask::model {

bool fused_cross_entropy_takes(const torch::Tensor&, const torch::Tensor&, int64_t) { return false; }

torch::Tensor fused_cross_entropy_sum(const torch::Tensor&, const torch::Tensor&, int64_t) {
  throw std::invalid_argument("fused cross-entropy: this build's LibTorch has no CUDA");
}

}  // namespace genemask::model
