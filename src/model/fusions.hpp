#pragma once
// Which of genemask's fused paths run, process-wide. qkv, ln and ln-bf16 by default:
//   qkv      Q, K and V as one product of the stacked weights (every device);
//   ln       dropout + residual add + LayerNorm as one GPU kernel each way
//            (residual_layer_norm.hpp; the CPU keeps LibTorch's kernels);
//   ln-bf16  under bf16 autocast, that kernel also writes the bf16 copy of its output that
//            the next matrix product reads, and sums the copy's gradient with the output's
//            in its backward (fused_residual_layer_norm_with_copy). On since a GPU run checked
//            and timed it (+6.7% dnabert, +4.3% logo; docs/benchmarks.md); on the CPU (or
//            with ln off) the copy is the cast autocast would make, so the numbers are the
//            same either way.
//   gelu     the feed-forward's bias add and erf-GELU as one GPU kernel each way after a
//            bias-free product, its backward summing the bias's gradient in the same pass
//            (bias_gelu.hpp; the CPU keeps the product's bias and LibTorch's GELU). Off by
//            default: checked on a GPU, it gains 1-2% there, and it changes the numbers a
//            checkpoint records (numeric_fusions), so a run resumed across the change
//            would refuse.
// The environment variable GENEMASK_FUSED chooses others: a comma-separated list of
// "qkv", "ln", "ln-bf16" and "gelu", or "none" (to compare with the unfused step, or to rule
// a fused kernel out when a result looks wrong). train_bench's --unfused-qkv, --unfused-ln,
// --no-ln-bf16 and --fused-gelu set them instead (GENEMASK_FUSED aside).
#include <string>

namespace genemask::model {

struct Fusions {
  bool qkv = true, ln = true, ln_bf16 = true, gelu = false;
};

/// The fusions in force: GENEMASK_FUSED's (read once; a value that is not such a list is an
/// std::invalid_argument naming the variable and the value), or what set_fusions set.
Fusions fusions();
void set_fusions(Fusions f);
/// GENEMASK_FUSED's text as a Fusions (exposed for the tests).
Fusions parse_fusions(const std::string& text);
/// The fusions among f that change a step's numbers, as GENEMASK_FUSED spells them (those of
/// "qkv,ln,gelu" in force, in that order, or "none"): qkv (another product's rounding), ln (on
/// a GPU, its own dropout draws and rounding) and gelu (on a GPU, the bias added and its
/// gradient summed in fp32). ln-bf16 is not among them: its copy is the cast autocast would make.
/// A checkpoint records it, so that --resume does not continue a run with other numbers.
std::string numeric_fusions(const Fusions& f);

}  // namespace genemask::model
