// Column sums of a row-major [rows, N] matrix in fp32 (column_sum_kernels.hpp): the bias
// gradient of a linear layer, the sum of its output gradient over the rows. The grid tiles
// [rows, N]: threadIdx.x runs along the columns (V consecutive columns per thread: 8 with
// 16-byte loads, else 1), threadIdx.y and blockIdx.y along the rows (grid-stride, four rows
// loaded before they are added, so that enough loads are in flight to cover the memory's
// latency); a block's sums meet in shared memory and go to one row of `partial`. The rows come
// from a dense matrix (column_sum) or from the Q/K/V product's three gradients, which the same
// pass then writes side by side into the dense matrix (stack_column_sum): the same threads,
// rows and order either way, so the same sums.
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

/// Rows of a dense row-major [rows, N] matrix.
template <typename T>
struct Dense {
  static constexpr bool kStores = false;  // out is not written
  const T* x;
  int N;
  /// Where a thread's column `col` is in row r.
  struct Column {
    const T* at;
    int64_t N;
    __device__ const T* row(int64_t r) const { return at + r * N; }
  };
  __device__ Column column(int col) const { return {x + col, N}; }
};

/// Rows of the Q/K/V gradients as stacked (StackParts): column col of the stack is part
/// col / H's element col % H, that is head (col % H) / head_dim, offset (col % H) % head_dim.
template <typename T>
struct Stacked {
  static constexpr bool kStores = true;  // the rows go to out
  StackParts p;
  struct Column {
    const T* at;
    int64_t batch_stride, row_stride;
    IntDivider by_L;
    /// Row r < 2^31 (the launcher checks): (b, l) = (r / L, r % L) by a multiply-high, not a
    /// 64-bit division per row.
    __device__ const T* row(int64_t r) const {
      const uint32_t b = by_L.div(static_cast<uint32_t>(r));
      return at + b * batch_stride + (r - static_cast<int64_t>(b) * by_L.d) * row_stride;
    }
  };
  __device__ Column column(int col) const {
    const int H = p.heads * p.head_dim, part = col / H, within = col - part * H, head = within / p.head_dim;
    // Selects, not p.base[part]: a kernel parameter indexed at run time would go to local memory.
    auto pick = [part](auto a, auto b, auto c) { return part == 0 ? a : part == 1 ? b : c; };
    const T* base = static_cast<const T*>(pick(p.base[0], p.base[1], p.base[2]));
    return {base + head * pick(p.head_stride[0], p.head_stride[1], p.head_stride[2]) + (within - head * p.head_dim),
            pick(p.batch_stride[0], p.batch_stride[1], p.batch_stride[2]),
            pick(p.row_stride[0], p.row_stride[1], p.row_stride[2]), p.by_L};
  }
};

/// The column sums of the rows `src` gives (and, where Src::kStores, those rows written to the
/// dense [rows, N] out).
template <typename T, int V, typename Src>
__global__ void __launch_bounds__(kCols * kRows)
    column_sum_kernel(Src src, T* __restrict__ out, float* __restrict__ partial, int64_t rows, int N) {
  const int tile = static_cast<int>(blockIdx.x) * kCols * V;  // the block's first column
  const int col = tile + static_cast<int>(threadIdx.x) * V;
  float acc[V];
#pragma unroll
  for (int e = 0; e < V; ++e) acc[e] = 0;
  if (col < N) {
    const auto c = src.column(col);
    const int64_t stride = static_cast<int64_t>(gridDim.y) * kRows;
    int64_t r = static_cast<int64_t>(blockIdx.y) * kRows + threadIdx.y;
    for (; r + (kUnroll - 1) * stride < rows; r += kUnroll * stride) {
      float v[kUnroll][V];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) load_n<V>(c.row(r + u * stride), v[u]);
      if constexpr (Src::kStores) {
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) store_n<V>(out + (r + u * stride) * N + col, v[u]);
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
#pragma unroll
        for (int e = 0; e < V; ++e) acc[e] += v[u][e];
    }
    for (; r < rows; r += stride) {  // the last rows, fewer than kUnroll per thread
      float v[V];
      load_n<V>(c.row(r), v);
      if constexpr (Src::kStores) store_n<V>(out + r * N + col, v);
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

namespace {

/// column_sum_kernel over the rows of source(T{}) for the element type T (bf16 where x_bf16,
/// else fp32), out cast to T*: 16-byte loads where `wide`, else one column per thread. The row
/// blocks come from the shape alone (column_sum_row_blocks); V decides which threads hold
/// which columns, not the rows each column's sum takes or their order (threadIdx.y, blockIdx.y
/// and the row blocks): the same sums with either.
template <typename MakeSource>
void launch_sums(bool x_bf16, bool wide, MakeSource source, void* out, float* partial, int64_t rows, int N,
                 cudaStream_t stream) {
  if (rows == 0 || N == 0) return;
  const dim3 block(kCols, kRows);
  const unsigned row_blocks = static_cast<unsigned>(column_sum_row_blocks(rows, N));
  auto launch = [&](auto width, auto element) {
    constexpr int V = decltype(width)::value;
    using T = decltype(element);
    const dim3 grid(static_cast<unsigned>(column_blocks(N, V)), row_blocks);
    column_sum_kernel<T, V><<<grid, block, 0, stream>>>(source(T{}), static_cast<T*>(out), partial, rows, N);
  };
  auto with_width = [&](auto element) {
    if (wide) launch(std::integral_constant<int, kVec>{}, element);
    else launch(std::integral_constant<int, 1>{}, element);
  };
  if (x_bf16) with_width(__nv_bfloat16{});
  else with_width(float{});
}

}  // namespace

void column_sum(bool x_bf16, const void* x, float* partial, int64_t rows, int N, cudaStream_t stream) {
  auto dense = [&](auto element) {
    using T = decltype(element);
    return Dense<T>{static_cast<const T*>(x), N};
  };
  launch_sums(x_bf16, vectorized(N, {x}), dense, nullptr, partial, rows, N, stream);
}

bool stack_parts_vectorized(const StackParts& parts, const void* out) {
  if (parts.head_dim % kVec != 0 || !aligned16(out)) return false;
  for (int p = 0; p < 3; ++p)
    if (!aligned16(parts.base[p]) || parts.batch_stride[p] % kVec != 0 || parts.row_stride[p] % kVec != 0 ||
        parts.head_stride[p] % kVec != 0)
      return false;
  return true;
}

void stack_column_sum(bool x_bf16, const StackParts& parts, void* out, float* partial, int64_t rows,
                      cudaStream_t stream) {
  // The grid column_sum would use for out (launch_sums), so the same sums.
  auto stacked = [&](auto element) { return Stacked<decltype(element)>{parts}; };
  launch_sums(x_bf16, stack_parts_vectorized(parts, out), stacked, out, partial, rows, 3 * parts.heads * parts.head_dim,
              stream);
}

}  // namespace genemask::model::cuda
