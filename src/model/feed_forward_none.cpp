// The fused feed-forward in a build without CUDA: never taken (feed_forward.hpp).
#include "model/feed_forward.hpp"

#include <stdexcept>

namespace genemask::model {

bool fused_feed_forward_built() { return false; }

bool fused_feed_forward_can_implement(int64_t, int64_t, int64_t, int64_t) { return false; }

bool fused_feed_forward_runs_on(const torch::Device&) { return false; }

bool fused_feed_forward_takes(const torch::Tensor&, const torch::Tensor&, const torch::Tensor&, const torch::Tensor&,
                              const torch::Tensor&) {
  return false;
}

torch::Tensor fused_feed_forward(const torch::Tensor&, const torch::Tensor&, const torch::Tensor&,
                                 const torch::Tensor&, const torch::Tensor&, const torch::Tensor&,
                                 const torch::Tensor&, const torch::Tensor&) {
  throw std::invalid_argument("fused feed-forward: this build has no CUDA");
}

FeedForwardCounts fused_feed_forward_counts() { return {}; }

}  // namespace genemask::model
