#pragma once
// The launcher of cuda/column_sum.cu (raw pointers: the .cu sees no Torch headers): column
// sums of a row-major [rows, N] matrix in fp32, the bias gradient of a linear layer.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "model/cuda/launch.hpp"

namespace genemask::model::cuda {

/// The rows of column_sum's partial sums for a [rows, N] matrix: one per block along the
/// rows, from the shape alone (about 1024 blocks in all, at most one per 32 rows), so that
/// the sums' order is fixed by the shape, whatever the GPU.
int column_sum_row_blocks(int64_t rows, int N);

/// partial[b][j] = the sum over block b's rows of x[r][j], in fp32 (x bf16 when x_bf16, else
/// fp32); partial is [column_sum_row_blocks(rows, N), N] fp32, and the column sums are the
/// sums of its rows. Each thread adds its rows in order; 16-byte loads where N % 8 == 0 and x
/// is 16-byte aligned, and four rows' loads in flight per thread.
void column_sum(bool x_bf16, const void* x, float* partial, int64_t rows, int N, cudaStream_t stream);

}  // namespace genemask::model::cuda
