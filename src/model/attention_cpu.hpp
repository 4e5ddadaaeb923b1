// Attention with dropout on the CPU, as one autograd node computed (batch row, head) by
// (batch row, head) in cache.
//
// LibTorch's CPU flash-attention kernel takes no dropout, so at::scaled_dot_product_attention
// with dropout_p > 0 on the CPU falls back to its math path: scores, softmax, a Bernoulli
// mask drawn element by element, two multiplications forward and two backward, each a pass
// over [B, heads, Lq, L] in memory (docs/benchmarks.md: about five times the time of the
// flash kernel). Here each thread takes one (batch row, head) at a time: the scores through
// oneDNN's matrix products in the inputs' dtype (bf16 under autocast), then row by row in
// fp32 the softmax and the dropout (vectorised kernels), then the product with v; the
// backward computes the probabilities again from each row's saved log-sum-exp and fuses the
// dropout's and the softmax's backward. No [B, heads, Lq, L] tensor is stored. The keep mask
// is a counter-based hash of (seed, element index), so it is the same for any thread count
// and needs no storage; the seed is drawn from LibTorch's default CPU generator, so
// torch::manual_seed and the generator state that checkpoints save govern it as they govern
// Bernoulli dropout.
#pragma once

#include <torch/torch.h>

#include <cstdint>

namespace genemask::model {

/// Attention with dropout on the probabilities: softmax(q k^T / sqrt(d), keys masked out
/// where key_mask is false) with each probability kept with probability 1 - p (24-bit
/// resolution) and scaled by attention_dropout_scale(p), times v. q [B, h, Lq, d], k and v
/// [B, h, L, d] (one floating dtype; k and v are cast to q's), key_mask bool [B, 1, 1, L] or
/// undefined (a key kept by no mask row is an error of the caller: [CLS] is always kept).
/// p in [0, 1); p = 0 is attention without dropout. CPU tensors; differentiable in q, k and
/// v. The same result at any thread count.
/// Packed rows (model/packing.hpp): `segments` (int64, [S + 1]) are the boundaries of the
/// samples over the B x L positions read row after row (0, ..., B x L; no segment spans two
/// rows); each query then attends to the keys of its own segment only, at the cost of the
/// segments' squared lengths, not of B x L^2. With segments, key_mask must be undefined and
/// Lq = L. A probability's keep decision is that of the same element of the whole
/// [B, h, L, L], so the block-diagonal reference (attention_dropout_keep_mask) applies.
torch::Tensor attention_dropout_cpu(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                    const torch::Tensor& key_mask, double p, uint64_t seed,
                                    const torch::Tensor& segments = {});

/// The keep mask attention_dropout_cpu applies for `seed` to probabilities of shape `sizes`
/// (bool, true = kept): for tests and for the reference computation.
torch::Tensor attention_dropout_keep_mask(at::IntArrayRef sizes, double p, uint64_t seed);

/// The factor kept probabilities are scaled by: 1 / (the exact keep probability).
double attention_dropout_scale(double p);

/// A fresh seed from LibTorch's default CPU generator.
uint64_t next_cpu_dropout_seed();

/// How many of LibTorch's intra-op threads the CPU attention spreads `tasks` tasks over (at
/// most one per task; each task run once, else -1). For the tests: the kernel is parallel only
/// where its file is compiled with OpenMP (src/model/CMakeLists.txt).
int attention_cpu_threads_for(int64_t tasks);

}  // namespace genemask::model
