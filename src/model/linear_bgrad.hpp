#pragma once
// A linear layer x·Wᵀ + b under bf16 autocast on a GPU as one autograd node whose backward
// sums the bias's gradient in the epilogue of the weight-gradient product (cuBLASLt's
// BGRADB), instead of a separate reduction that reads the bf16 output gradient once more.
// The weight's gradient comes out of that product in fp32 where cuBLASLt has such a product
// (the eager path rounds it to bf16 and then casts it to the fp32 weight's dtype), else in
// bf16, the bias's likewise: the same values within bf16 rounding, not bit for bit, so
// GENEMASK_FUSED's bgrad is recorded with a checkpoint.
// The forward is the eager one (at::linear on bf16 operands), and so is the input's
// gradient (one bf16 product, cast back to the input's dtype).
// The same node also serves GENEMASK_FUSED's bias-sum (BiasGrad::column_sum): the weight's
// gradient a plain bf16 product as in the eager path, the bias's summed by genemask's own
// column-sum kernel (cuda/column_sum.cu) in fp32, instead of ATen's reduction with its bf16
// output.
#include <torch/torch.h>

#include <utility>

namespace genemask::model {

/// Whether the node can run on `device`: a CUDA build and a GPU.
bool linear_bgrad_runs_on(const torch::Device& device);
/// Whether the node takes these: x on a GPU in bf16 or fp32 with last size K, weight fp32
/// [N, K] and bias fp32 [N] on it, K and N multiples of 8 (16-byte rows in bf16), with bf16
/// autocast on for CUDA and gradients recorded. BERT's linear layers use the node where
/// fusions().bgrad and this hold; elsewhere at::linear.
bool linear_bgrad_takes(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias);

/// How the node sums the bias's gradient: in the epilogue of the weight-gradient product
/// (fusions.hpp's bgrad), or with genemask's column-sum kernel beside a plain weight-gradient
/// product (bias-sum).
enum class BiasGrad { epilogue, column_sum };

/// x·weightᵀ + bias in bf16, differentiable in x, weight and bias. `weight_low` and
/// `bias_low`: bf16 copies of weight and bias (weight_copies.hpp) that the product reads
/// instead of casting them, or undefined.
torch::Tensor linear_bgrad(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                           BiasGrad how = BiasGrad::epilogue, const torch::Tensor& weight_low = {},
                           const torch::Tensor& bias_low = {});

/// The column sums of g ([rows, N], bf16 or fp32, on a GPU, rows > 0 or not) in fp32: a linear
/// layer's bias gradient, by the column-sum kernel (its blocks' sums added by LibTorch). The
/// same bits for the same shape and values on any GPU. Throws without a CUDA build.
torch::Tensor column_sums(const torch::Tensor& g);

/// The Q/K/V product's three output gradients ([B, L, heads, head_dim] each, bf16 or fp32, one
/// dtype, on a GPU, any strides) stacked side by side as the product's [B L, 3 H] gradient
/// (what LibTorch's stack along dim 2 gives), and its column sums in fp32 (what column_sums of
/// the stack gives, bit for bit), in one pass (cuda/column_sum.cu's stack_column_sum). Throws
/// without a CUDA build.
std::pair<torch::Tensor, torch::Tensor> stack_column_sums(const torch::Tensor& q, const torch::Tensor& k,
                                                          const torch::Tensor& v);

/// How many weight gradients went through the fused product since the process started, with
/// fp32 outputs (`fused`) or, where cuBLASLt offered no algorithm for those, bf16 ones
/// (`fused_bf16`), and how many fell back to a product and a separate sum because it offered
/// none for either (for the tests and the benchmark's record); and how many bias gradients
/// the column-sum kernel summed (`column_sums`, BiasGrad::column_sum), and how many Q/K/V
/// gradients it stacked and summed in one pass (`stacked`, qkv_linear.hpp).
struct LinearBgradCounts {
  int64_t fused = 0, fused_bf16 = 0, fallback = 0, column_sums = 0, stacked = 0;
};
LinearBgradCounts linear_bgrad_counts();

}  // namespace genemask::model
