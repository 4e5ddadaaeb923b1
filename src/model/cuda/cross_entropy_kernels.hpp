#pragma once
// The launchers of cuda/cross_entropy.cu (raw pointers: the .cu sees no Torch headers): the MLM
// loss over the decoder's logits [rows, V] row-major (bf16 or fp32), each row `ld` elements
// apart (ld >= V: the columns [V, ld) are a padded product's, no class), and int64 targets, summed
// over the rows, forward and backward, without the fp32 copy of the logits, the log-softmax
// output and the dense gradient that LibTorch's composition writes and reads back.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "model/cuda/launch.hpp"

namespace genemask::model::cuda {

/// The target that adds nothing (CrossEntropyFuncOptions' default ignore_index).
constexpr int64_t kIgnoreTarget = -100;

/// Per row r: stats[2 r] = m, the row's max, and stats[2 r + 1] = log sum_j exp(x[r][j] - m)
/// (in fp32: two passes over the row, as LibTorch's log-softmax), and loss[r] =
/// stats[2 r + 1] - (x[r][target[r]] - m), -log_softmax as LibTorch forms it; all 0 for
/// kIgnoreTarget, whose row is not read (pretrain's fixed-shape steps pad the masked rows to a
/// capacity with such targets); loss NaN for a target outside [0, V) (never a silent number:
/// LibTorch's path stops at a device assert there).
/// The columns [V, ld) are not read.
void cross_entropy_forward(bool x_bf16, const void* x, const int64_t* target, float* stats, float* loss,
                           int64_t rows, int V, int ld, cudaStream_t stream);
/// dx[r][j] = g * (exp((x[r][j] - m) - log sum) - [j == target[r]]) from the forward's stats,
/// rounded to x's dtype; 0 on rows whose target is kIgnoreTarget, NaN on rows whose target is
/// outside [0, V). g: one fp32 on the device (the summed loss's gradient, read there, so a CUDA
/// graph replays it with whatever the step put there). dx has x's row stride ld; its columns
/// [V, ld) are written 0 on every row.
void cross_entropy_backward(bool x_bf16, const void* x, const int64_t* target, const float* stats, const float* g,
                            void* dx, int64_t rows, int V, int ld, cudaStream_t stream);

}  // namespace genemask::model::cuda
