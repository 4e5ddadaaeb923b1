#pragma once
// Which of genemask's fused paths run, process-wide. Both by default:
//   qkv  Q, K and V as one product of the stacked weights (every device);
//   ln   dropout + residual add + LayerNorm as one GPU kernel each way
//        (residual_layer_norm.hpp; the CPU keeps LibTorch's kernels).
// The environment variable GENEMASK_FUSED chooses others: a comma-separated list of
// "qkv" and "ln", or "none" (to compare with the unfused step, or to rule a fused kernel
// out when a result looks wrong). train_bench's --unfused-qkv / --unfused-ln set them too.
#include <string>

namespace genemask::model {

struct Fusions {
  bool qkv = true, ln = true;
};

/// The fusions in force: GENEMASK_FUSED's (read once; a value that is not such a list is an
/// std::invalid_argument naming the variable and the value), or what set_fusions set.
Fusions fusions();
void set_fusions(Fusions f);
/// GENEMASK_FUSED's text as a Fusions (exposed for the tests).
Fusions parse_fusions(const std::string& text);

}  // namespace genemask::model
