#pragma once
// The CPU's bf16 linear layer with its bias added in oneDNN's product epilogue.
//
// Under CPU bf16 autocast, ATen's linear is an addmm: it copies the bias into its whole
// [rows, out] output and then runs oneDNN's product with a "sum" post-op that reads that
// output back. For the feed-forward's [rows, 3072] output that is two extra passes over
// memory each step (cold in a training step: docs/benchmarks.md). oneDNN's linear
// (mkldnn::_linear_pointwise) takes the bias in the product's epilogue instead: the same
// arithmetic (the product accumulated in fp32, the bf16 bias added to it once, one rounding),
// so the same numbers. The backward runs the very products and sum ATen's addmm backward
// runs (grad . W, grad^T . x, the bias's gradient summed over rows in bf16), so gradients are
// the same too (Fusions::cpu_bias; tests/model/linear_cpu_test.cpp checks both bit for bit).
#include <torch/torch.h>

namespace genemask::model {

/// Whether cpu_bias_linear computes at::linear(x, weight, bias) here: the fusion on, x on the
/// CPU and contiguous, bf16 autocast on for the CPU (or x, weight and bias bf16 already),
/// a bias, a product large enough for ATen to send it to oneDNN itself, and a LibTorch and
/// CPU on which ATen's bf16 products run through oneDNN (AVX-512 BW/VL/DQ).
bool cpu_bias_linear_takes(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias);

/// at::linear(x, weight, bias) in bf16 through oneDNN with the bias in the epilogue; the
/// weight and bias cast as autocast casts them (its weight cache included).
torch::Tensor cpu_bias_linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias);

}  // namespace genemask::model
