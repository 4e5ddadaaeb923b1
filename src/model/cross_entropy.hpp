#pragma once
// The MLM loss, summed over the masked rows, as one autograd node: on a GPU one kernel
// forward (each row's log-sum-exp and loss from the logits in their own dtype, bf16 under
// autocast) and one backward (the logits' gradient, in their dtype, from the logits and the
// saved log-sum-exp). LibTorch's composition (the logits cast to fp32, log-softmax, NLL)
// writes the fp32 copy, the log-softmax output and a dense fp32 gradient and reads each back:
// about 2.9 GB a step at `logo` 256 x 512 (15% of 131k rows x 4101 tokens), where the node
// reads the logits twice and writes their gradient once. fusions.hpp's `ce` (on by default
// since an H200 ran its test and timed it: +5.6% on the logo step).
//
// What it computes: the sum over rows of log(sum_j exp(x_j)) - x_target, in fp32 (0 for the
// target -100, as CrossEntropyFuncOptions' ignore_index), and as gradient g * (softmax(x) -
// onehot(target)) rounded to the logits' dtype once; LibTorch's the same formulas with its own
// order of the row's sums, so the same values within fp32 rounding (the loss) and one bf16
// rounding (the gradient), not bit for bit. The CPU keeps LibTorch's composition.
#include <torch/torch.h>

namespace genemask::model {

/// Whether the node takes these inputs: logits [rows, C] on a GPU in bf16 or fp32, targets
/// [rows] int64 on the same GPU (a CUDA build), and `classes` -1 (every column a class) or in
/// 1..C.
bool fused_cross_entropy_takes(const torch::Tensor& logits, const torch::Tensor& targets, int64_t classes = -1);

/// The summed loss (a 0-dim fp32 tensor), differentiable in the logits. The classes are each
/// row's first `classes` columns (-1: all C); the others, a product padded to an aligned width
/// (the decoder's with fusions.hpp's ce-pad), are not read, and their gradient is 0. A target
/// outside [0, classes) other than -100 makes the loss NaN, and that row's gradient too
/// (LibTorch's path stops at a device assert).
torch::Tensor fused_cross_entropy_sum(const torch::Tensor& logits, const torch::Tensor& targets,
                                      int64_t classes = -1);

}  // namespace genemask::model
