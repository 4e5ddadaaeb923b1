#pragma once
// Q, K and V as one product whose backward stacks their three gradients and sums the bias's
// in one pass: with GENEMASK_FUSED's bias-sum (fusions.hpp) on a GPU under bf16, the fused Q/K/V
// product of BERT's self-attention (bert.cpp).
//
// Without it, the product's output is viewed as [B, L, 3, heads, head_dim] and unbound into
// Q, K and V; in the backward pass LibTorch stacks their gradients into a new [B L, 3 H]
// tensor (a concatenation kernel: 0.9 ms of the 54 ms dnabert step in the last H200 profile),
// and the bias's gradient is a column sum that reads that tensor once more (about 1.8 GB of
// the 3 GB the bias sums read in a dnabert step). Here one kernel reads the three gradients
// once, writes the stack, and sums its columns on the way (cuda/column_sum.cu's
// stack_column_sum): the same stack and the same sums, bit for bit, as the unbound path with
// bias-sum (LibTorch's stack, then column_sums), so it is not a fusion of its own.
//
// On the CPU (the tests; BERT's layers do not take it there) the same node stacks with
// LibTorch and sums in fp32.
#include <torch/torch.h>

#include <vector>

namespace genemask::model {

/// Whether bert.cpp's Q/K/V product takes the node: linear_bgrad_takes(x, weight, bias) (a GPU,
/// bf16 autocast, fp32 weight [N, K] and bias [N], gradients recorded), x [B, L, K], and N =
/// 3 H with H a multiple of heads.
bool qkv_linear_takes(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias, int64_t heads);

/// x·weightᵀ + bias with x, weight and bias cast to bf16 (the operands autocast would make, and
/// at::linear's product), returned as Q, K and V: the [B, L, heads, H / heads] views of its
/// three thirds (what view({B, L, 3, heads, H / heads}).unbind(2) gives), differentiable in x,
/// weight and bias. The gradients: x's from one bf16 product, cast to x's dtype; weight's a
/// bf16 product cast to fp32 (as the eager path makes them), bias's the stacked gradient's
/// column sums in fp32 (stack_column_sums on a GPU; LibTorch's stack and an fp32 sum on the
/// CPU). A Q, K or V gradient that autograd leaves undefined counts as zeros. Throws
/// std::invalid_argument for shapes other than those above. `weight_low` and `bias_low`: bf16
/// copies of weight and bias (weight_copies.hpp's low_stack) that the product reads instead
/// of casting them, or undefined.
std::vector<torch::Tensor> qkv_linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                                      int64_t heads, const torch::Tensor& weight_low = {},
                                      const torch::Tensor& bias_low = {});

}  // namespace genemask::model
