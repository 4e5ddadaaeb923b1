#pragma once
// The launchers of cuda/cross_entropy.cu (raw pointers: the .cu sees no Torch headers): the MLM
// loss over the decoder's logits [rows, V] row-major (bf16 or fp32) and int64 targets, summed
// over the rows, forward and backward, without the fp32 copy of the logits, the log-softmax
// output and the dense gradient that LibTorch's composition writes and reads back.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "model/cuda/launch.hpp"

namespace genemask::model::cuda {

/// The target that adds nothing (CrossEntropyFuncOptions' default ignore_index).
constexpr int64_t kIgnoreTarget = -100;

/// Per row r: lse[r] = log sum_j exp(x[r][j]) (the max first, then the sum of exp(x - max), in
/// fp32: two passes over the row, as LibTorch's log-softmax) and loss[r] = lse[r] -
/// x[r][target[r]]; both 0 for kIgnoreTarget, whose row is not read (pretrain's fixed-shape
/// steps pad the masked rows to a capacity with such targets); loss NaN for a target outside
/// [0, V) (never a silent number: LibTorch's path stops at a device assert there).
void cross_entropy_forward(bool x_bf16, const void* x, const int64_t* target, float* lse, float* loss, int64_t rows,
                           int V, cudaStream_t stream);
/// dx[r][j] = g * (exp(x[r][j] - lse[r]) - [j == target[r]]), rounded to x's dtype; 0 on rows
/// whose target is kIgnoreTarget. g: one fp32 on the device (the summed loss's gradient, read
/// there, so a CUDA graph replays it with whatever the step put there).
void cross_entropy_backward(bool x_bf16, const void* x, const int64_t* target, const float* lse, const float* g,
                            void* dx, int64_t rows, int V, cudaStream_t stream);

}  // namespace genemask::model::cuda
