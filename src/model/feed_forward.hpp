#pragma once
// BERT's feed-forward, GELU(x·W1ᵀ + b1)·W2ᵀ + b2 (HF's BertIntermediate and the output
// layer's product), as one autograd node whose two products carry the elementwise work in
// their epilogues (fusions.hpp's gemm-gelu; CUTLASS kernels for Hopper, cuda/gemm_gelu.cu):
//   forward:  the first product adds b1 and applies the erf-GELU as it stores its tile, and
//             stores z = x·W1ᵀ + b1 beside it for the backward (the separate bias + GELU
//             kernel's read of z goes);
//   backward: the product dy·W2 that makes GELU's output gradient multiplies it by GELU'(z)
//             as it stores it, and sums b1's gradient over the rows in the same epilogue (the
//             4H-wide gradient is written once, as dz, instead of written, read back and
//             written again).
// The output product, its bias's gradient (the column-sum kernel, as bias-sum sums it) and
// the weights' and input's gradients are the eager bf16 products. What it computes: z and
// GELU(z) from the product's fp32 accumulator (the separate kernel adds b1 to the bf16-rounded
// product), dz from the bf16-rounded z, b1's gradient summed in fp32 per tile: the same values
// within bf16 rounding, not bit for bit, so a checkpoint records gemm-gelu.
#include <torch/torch.h>

#include <cstdint>

namespace genemask::model {

/// Whether this build holds the node's kernels (a CUDA build with CUTLASS's headers found).
bool fused_feed_forward_built();
/// Whether CUTLASS takes the node's two products for `rows` rows of width K, an intermediate
/// width N and an output width H (its own host check of the sizes; no GPU needed). False
/// without the kernels. fused_feed_forward_takes asks it, and says once when it refuses.
bool fused_feed_forward_can_implement(int64_t rows, int64_t N, int64_t K, int64_t H);
/// Whether the node can run on `device`: a CUDA build with the kernels (CUTLASS found) and a
/// GPU of compute capability 9.0.
bool fused_feed_forward_runs_on(const torch::Device& device);
/// Whether the node takes these: a build with the kernels, x on a GPU of compute capability
/// 9.0 (Hopper: H100, H200) in bf16 or fp32 with last size K, bf16 autocast on for CUDA,
/// fp32 weights w1 [N, K], w2 [K', N] and biases b1 [N], b2 [K'] on that GPU, K, N and K'
/// multiples of 8, and CUTLASS's own check of the sizes (said once where it refuses; an
/// operand not 16-byte aligned is copied by the node, not refused). BERT's layers use the node where
/// fusions().gemm_gelu and this hold; elsewhere the product, the bias + GELU and the output
/// product as separate nodes.
bool fused_feed_forward_takes(const torch::Tensor& x, const torch::Tensor& w1, const torch::Tensor& b1,
                              const torch::Tensor& w2, const torch::Tensor& b2);

/// GELU(x·w1ᵀ + b1)·w2ᵀ + b2 in bf16 ([..., K']), differentiable in x, w1, b1, w2 and b2.
/// The *_low: bf16 copies of the parameters (weight_copies.hpp) that the products read instead
/// of casting them, or undefined. std::invalid_argument where fused_feed_forward_takes does not
/// hold.
torch::Tensor fused_feed_forward(const torch::Tensor& x, const torch::Tensor& w1, const torch::Tensor& b1,
                                 const torch::Tensor& w2, const torch::Tensor& b2, const torch::Tensor& w1_low = {},
                                 const torch::Tensor& w2_low = {}, const torch::Tensor& b2_low = {});

/// How many forward and backward passes the node has run since the process started (for the
/// tests and the benchmark's record).
struct FeedForwardCounts {
  int64_t forward = 0, backward = 0;
};
FeedForwardCounts fused_feed_forward_counts();

}  // namespace genemask::model
