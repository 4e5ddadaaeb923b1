// The fused bias gradient in a build whose LibTorch has no CUDA: never taken.
#include "model/linear_bgrad.hpp"

#include <stdexcept>
#include <utility>

namespace genemask::model {

bool linear_bgrad_runs_on(const torch::Device&) { return false; }

bool linear_bgrad_takes(const torch::Tensor&, const torch::Tensor&, const torch::Tensor&) { return false; }

torch::Tensor linear_bgrad(const torch::Tensor&, const torch::Tensor&, const torch::Tensor&, BiasGrad,
                           const torch::Tensor&, const torch::Tensor&) {
  throw std::invalid_argument("fused bias gradient: this build's LibTorch has no CUDA");
}

torch::Tensor column_sums(const torch::Tensor&) {
  throw std::invalid_argument("column sums: this build's LibTorch has no CUDA");
}

std::pair<torch::Tensor, torch::Tensor> stack_column_sums(const torch::Tensor&, const torch::Tensor&,
                                                          const torch::Tensor&) {
  throw std::invalid_argument("stacked column sums: this build's LibTorch has no CUDA");
}

LinearBgradCounts linear_bgrad_counts() { return {}; }

}  // namespace genemask::model
