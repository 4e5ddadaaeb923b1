#pragma once
// GELU(z + bias) as one autograd node: BERT's intermediate (feed-forward) activation after
// its bias-free product (HF's BertIntermediate). On a GPU one kernel forward and one backward,
// which also sums the bias's gradient over the rows in the same pass; the eager path adds the
// bias in the product's epilogue and then reads the 4H-wide gradient once more to sum it.
// The CPU keeps the eager composition.
//
// What it computes: y = GELU(z + bias), erf form, in fp32 from z (bf16 under autocast, or
// fp32) and bias (fp32), rounded to z's dtype. Where the eager path rounds z + bias to bf16 in
// the product and sums the bias's gradient from the rounded bf16 gradient, the node keeps both
// in fp32: the same values within bf16 rounding, not bit for bit.
#include <torch/torch.h>

namespace genemask::model {

/// Whether the node can run on `device`: a CUDA build and a GPU. BERT's intermediate layer
/// uses it where fusions().gelu (fusions.hpp) and this hold, and then makes its product
/// without the bias.
bool fused_bias_gelu_runs_on(const torch::Device& device);
/// Whether the node takes these inputs: z on a GPU in bf16 or fp32, bias fp32 of z's last
/// size on the same GPU.
bool fused_bias_gelu_takes(const torch::Tensor& z, const torch::Tensor& bias);

/// GELU(z + bias), differentiable in z and bias. rows_in_flight: the kernels' rows loaded at
/// once per thread, forward and backward (cuda/rows_in_flight.hpp: 1, 2 or 4, the same bits
/// for each; std::invalid_argument for another); 0 for fusions.hpp's gelu_rows_in_flight().
torch::Tensor fused_bias_gelu(const torch::Tensor& z, const torch::Tensor& bias, int rows_in_flight = 0);

}  // namespace genemask::model
