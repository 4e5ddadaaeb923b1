// The fused residual LayerNorm in a build whose LibTorch has no CUDA: never taken.
#include "model/residual_layer_norm.hpp"

#include <stdexcept>

namespace genemask::model {

bool fused_residual_layer_norm_takes(const torch::Tensor&, const torch::Tensor&, const torch::Tensor&) { return false; }

torch::Tensor fused_residual_layer_norm(const torch::Tensor&, const torch::Tensor&, const torch::Tensor&,
                                        const torch::Tensor&, double, double) {
  throw std::invalid_argument("fused residual LayerNorm: this build's LibTorch has no CUDA");
}

std::pair<torch::Tensor, torch::Tensor> fused_residual_layer_norm_with_copy(const torch::Tensor&, const torch::Tensor&,
                                                                            const torch::Tensor&, const torch::Tensor&,
                                                                            double, double) {
  throw std::invalid_argument("fused residual LayerNorm: this build's LibTorch has no CUDA");
}

}  // namespace genemask::model
