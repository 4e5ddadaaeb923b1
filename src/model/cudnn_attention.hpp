#pragma once
// Attention within ragged segments by cuDNN's SDPA (its Hopper and Ampere kernels), through
// cuDNN's frontend with genemask's own cache of cuDNN graphs: packed rows' attention with
// fusions.hpp's cudnn-varlen (bert.hpp's packed_attention).
//
// Why not LibTorch's: at::_cudnn_attention_forward with cumulative sequence lengths (its
// nested-tensor path, PyTorch 2.11) looks its graph cache up but never fills it, so every
// call builds and plans a cuDNN graph again (about 40 ms a call, reported upstream), and it
// counts the ragged offsets in whole contiguous tokens, so Q, K and V had to be copied out of
// the fused Q/K/V product. Here a graph is built once per shape (segment count, heads, the
// longest segment rounded up, head size, the inputs' strides, dropout) and replayed, and Q,
// K and V are read where the product wrote them (the offsets count in their own token stride).
//
// What it computes: softmax(q k^T / sqrt(d)) v within each segment, in fp32 inside cuDNN's
// kernels with 16-bit inputs and output (as flash attention's varlen kernels; not their bits),
// dropout on the probabilities drawn by cuDNN's Philox from the GPU's default generator
// (torch::manual_seed and checkpoints govern it; the same state gives the same draws, also in a
// CUDA graph's replays, each replay drawing anew).
#include <torch/torch.h>

#include <cstdint>
#include <stdexcept>
#include <string>

namespace genemask::model {

/// cuDNN could not build or plan a graph for the inputs (cuDNN's reason in what()): thrown
/// before anything ran, so the caller may take another kernel.
struct CudnnGraphUnsupported : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Whether this build has the path (a CUDA build that found cuDNN's frontend headers).
bool cudnn_ragged_attention_built();

/// Why it does not take these inputs ("" when it does): q, k and v [R, h, L, d] on one GPU of
/// compute capability 8.0 or more, with cuDNN 9 or newer, in bf16 or fp16 (all three alike), d
/// a multiple of 8 up to 128; each a view whose R x L tokens, row after row, lie equally far
/// apart (a row L tokens on, as the [R, L, h, d] product's views are), heads d or more apart,
/// head elements contiguous; and offsets that fit 32 bits.
std::string cudnn_ragged_attention_refusal(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v);

/// The attention within the segments of `cu_seqlens` ([S + 1] int32 on q's GPU: boundaries
/// over the R x L positions read row after row, from 0 to R x L; zero-length segments allowed,
/// every position in some segment), the longest at most `max_seqlen`; dropout with probability
/// `dropout_p`. [R, h, L, d] (a view of [R, L, h, d]), differentiable in q, k and v. Throws
/// CudnnGraphUnsupported when cuDNN cannot build the graph (a GPU or cuDNN without ragged
/// SDPA), std::invalid_argument for inputs it does not take (the refusal's reason).
torch::Tensor cudnn_ragged_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                     const torch::Tensor& cu_seqlens, int64_t max_seqlen, double dropout_p);

/// The cuDNN graphs built so far in this process (forward and backward): what the cache saves
/// is visible to tests.
int64_t cudnn_ragged_attention_graphs_built();

/// The longest-segment bound a graph is built for: `max_seqlen` rounded up to a multiple of 64
/// (so that batches of nearly the same longest segment share a graph), at least 64.
inline int64_t cudnn_ragged_seqlen_bound(int64_t max_seqlen) {
  return max_seqlen <= 64 ? 64 : (max_seqlen + 63) / 64 * 64;
}

}  // namespace genemask::model
