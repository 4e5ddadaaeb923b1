// Column sums of a row-major [rows, N] matrix in fp32 (column_sum_kernels.hpp): the bias
// gradient of a linear layer, the sum of its output gradient over the rows. The grid tiles
// [rows, N]: threadIdx.x runs along the columns (V consecutive columns per thread: 8 with
// 16-byte loads, else 1), threadIdx.y and blockIdx.y along the rows (grid-stride, four rows
// loaded before they are added, so that enough loads are in flight to cover the memory's
// latency); a block's sums meet in shared memory and go to one row of `partial`.
#include "model/cuda/column_sum_kernels.hpp"
#include "model/cuda/block_column_sums.cuh"
#include "model/cuda/vec.cuh"

#include <cstdint>
#include <type_traits>

namespace genemask::model::cuda {
namespace {

constexpr int kCols = 32;            // threads along the columns
constexpr int kRows = 8;             // threads along the rows
constexpr int kUnroll = 4;           // rows loaded at once per thread
constexpr int kTargetBlocks = 1024;  // about 8 resident blocks on each of ~130 SMs

template <typename T, int V>
__global__ void __launch_bounds__(kCols * kRows)
    column_sum_kernel(const T* __restrict__ x, float* __restrict__ partial, int64_t rows, int N) {
  const int tile = static_cast<int>(blockIdx.x) * kCols * V;  // the block's first column
  const int col = tile + static_cast<int>(threadIdx.x) * V;
  float acc[V];
#pragma unroll
  for (int e = 0; e < V; ++e) acc[e] = 0;
  if (col < N) {
    const int64_t stride = static_cast<int64_t>(gridDim.y) * kRows;
    int64_t r = static_cast<int64_t>(blockIdx.y) * kRows + threadIdx.y;
    for (; r + (kUnroll - 1) * stride < rows; r += kUnroll * stride) {
      float v[kUnroll][V];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) load_n<V>(x + (r + u * stride) * N + col, v[u]);
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
#pragma unroll
        for (int e = 0; e < V; ++e) acc[e] += v[u][e];
    }
    for (; r < rows; r += stride) {  // the last rows, fewer than kUnroll per thread
      float v[V];
      load_n<V>(x + r * N + col, v);
#pragma unroll
      for (int e = 0; e < V; ++e) acc[e] += v[e];
    }
  }
  store_block_column_sums<kCols, kRows, V>(acc, tile, N, partial);
}

int column_blocks(int N, int V) { return (N + kCols * V - 1) / (kCols * V); }

}  // namespace

int column_sum_row_blocks(int64_t rows, int N) {
  const int64_t by_rows = (rows + kRows * kUnroll - 1) / (kRows * kUnroll);  // at most one per 32 rows
  const int cols = column_blocks(N, N % kVec == 0 ? kVec : 1);
  int64_t want = kTargetBlocks / (cols > 0 ? cols : 1);
  if (want < 1) want = 1;
  if (want > 65535) want = 65535;
  return static_cast<int>(by_rows < want ? by_rows : want);
}

void column_sum(bool x_bf16, const void* x, float* partial, int64_t rows, int N, cudaStream_t stream) {
  if (rows == 0 || N == 0) return;
  const dim3 block(kCols, kRows);
  // The row blocks come from the shape alone (column_sum_row_blocks); the 16-byte path also
  // needs an aligned x, else the same grid runs one column per thread.
  const unsigned row_blocks = static_cast<unsigned>(column_sum_row_blocks(rows, N));
  auto launch = [&](auto width) {
    constexpr int V = decltype(width)::value;
    const dim3 grid(static_cast<unsigned>(column_blocks(N, V)), row_blocks);
    if (x_bf16)
      column_sum_kernel<__nv_bfloat16, V><<<grid, block, 0, stream>>>(static_cast<const __nv_bfloat16*>(x), partial,
                                                                       rows, N);
    else
      column_sum_kernel<float, V><<<grid, block, 0, stream>>>(static_cast<const float*>(x), partial, rows, N);
  };
  if (vectorized(N, {x})) launch(std::integral_constant<int, kVec>{});
  else launch(std::integral_constant<int, 1>{});
}

}  // namespace genemask::model::cuda
