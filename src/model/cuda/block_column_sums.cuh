#pragma once
// The last stage of genemask's column-summing kernels (cuda/bias_gelu.cu's backward,
// cuda/column_sum.cu): blocks of kCols x kRows threads, threadIdx.x along the columns (V
// consecutive columns per thread from the block's first column `tile`), threadIdx.y along the
// rows, each thread holding its rows' sums of its columns in `acc`.
#include <cstdint>

#include "model/cuda/vec.cuh"

namespace genemask::model::cuda {

/// The block's column sums: each row of threads' in shared memory, summed per column in a
/// fixed order (deterministic for a given shape), to partial[blockIdx.y][tile + j] for the
/// columns below N.
template <int kCols, int kRows, int V>
__device__ __forceinline__ void store_block_column_sums(const float (&acc)[V], int tile, int N, float* partial) {
  __shared__ float red[kRows][kCols * kVec];
#pragma unroll
  for (int e = 0; e < V; ++e) red[threadIdx.y][threadIdx.x * V + e] = acc[e];
  __syncthreads();
  for (int j = static_cast<int>(threadIdx.y * kCols + threadIdx.x); j < kCols * V; j += kCols * kRows) {
    if (tile + j >= N) continue;
    float t = 0;
#pragma unroll
    for (int w = 0; w < kRows; ++w) t += red[w][j];
    partial[static_cast<int64_t>(blockIdx.y) * N + tile + j] = t;
  }
}

}  // namespace genemask::model::cuda
