// A build without cuDNN's frontend (a CPU LibTorch, or the headers not found): packed
// attention never takes cuDNN's ragged path (cudnn_attention.hpp).
#include "model/cudnn_attention.hpp"

#include <stdexcept>

namespace genemask::model {

bool cudnn_ragged_attention_built() { return false; }

std::string cudnn_ragged_attention_refusal(const torch::Tensor&, const torch::Tensor&, const torch::Tensor&) {
  return "this build has no cuDNN frontend (a CUDA LibTorch and nvidia-cudnn-frontend's headers)";
}

torch::Tensor cudnn_ragged_attention(const torch::Tensor&, const torch::Tensor&, const torch::Tensor&,
                                     const torch::Tensor&, int64_t, double) {
  throw std::invalid_argument("cuDNN's attention over ragged segments: " +
                              cudnn_ragged_attention_refusal({}, {}, {}));
}

int64_t cudnn_ragged_attention_graphs_built() { return 0; }

}  // namespace genemask::model
