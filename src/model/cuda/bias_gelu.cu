// Bias add + erf-GELU after a bias-free matrix product, forward and backward (bias_gelu.hpp).
// The grid tiles [rows, H]: threadIdx.x runs along the columns (V consecutive columns per
// thread: 8 with 16-byte loads where H % 8 == 0 and the pointers are aligned, else 1),
// threadIdx.y and blockIdx.y along the rows (grid-stride, R of a thread's rows loaded before
// the first is used: bias_gelu_kernels.hpp's rows in flight). A thread's columns are fixed, so
// it loads its bias once and, backward, sums its columns' gradient in registers; a block's
// sums meet in shared memory and go to one row of `partial`.
#include "model/cuda/bias_gelu_kernels.hpp"
#include "model/cuda/block_column_sums.cuh"
#include "model/cuda/vec.cuh"

#include <cstdint>
#include <initializer_list>
#include <type_traits>

namespace genemask::model::cuda {
namespace {

constexpr int kCols = 32;        // threads along the columns
constexpr int kRows = 8;         // threads along the rows
constexpr int kRowBlocks = 128;  // most blocks along the rows

// The constants and formulas of ATen's GELU (GeluCUDAKernelImpl, approximate = none), in fp32.
// Rounded to fp32 from double, as ATen's constexpr opmath values are.
constexpr float kAlpha = static_cast<float>(0.70710678118654752440);                                // 1 / sqrt(2)
constexpr float kBeta = static_cast<float>(1.12837916709551257390 * 0.70710678118654752440 * 0.5);  // 1 / sqrt(2 pi)

__device__ __forceinline__ float gelu(float x) { return x * 0.5f * (1.f + erff(x * kAlpha)); }
__device__ __forceinline__ float gelu_grad(float dy, float x) {
  const float cdf = 0.5f * (1.f + erff(x * kAlpha));
  const float pdf = expf(-0.5f * x * x) * kBeta;
  return dy * (cdf + x * pdf);
}

template <typename T, int V, int R>
__global__ void __launch_bounds__(kCols * kRows)
    forward_kernel(const T* __restrict__ z, const float* __restrict__ bias, T* __restrict__ y, int64_t rows, int H) {
  const int col = (static_cast<int>(blockIdx.x) * kCols + static_cast<int>(threadIdx.x)) * V;
  if (col >= H) return;
  float b[V];
  load_n<V>(bias + col, b);
  // The thread's rows, R at a time: all R loads issued before the first is used.
  const int64_t stride = static_cast<int64_t>(gridDim.y) * kRows;
  for (int64_t r = static_cast<int64_t>(blockIdx.y) * kRows + threadIdx.y; r < rows; r += R * stride) {
    float v[R][V];
#pragma unroll
    for (int u = 0; u < R; ++u)
      if (r + u * stride < rows) load_n<V>(z + (r + u * stride) * H + col, v[u]);
#pragma unroll
    for (int u = 0; u < R; ++u)
      if (r + u * stride < rows) {
#pragma unroll
        for (int e = 0; e < V; ++e) v[u][e] = gelu(v[u][e] + b[e]);
        store_n<V>(y + (r + u * stride) * H + col, v[u]);
      }
  }
}

// Each thread adds its rows' gradients in the order of the rows whatever R is, so the block
// sums (and so the bias's gradient) have the same bits for every R.
template <typename T, int V, int R>
__global__ void __launch_bounds__(kCols * kRows)
    backward_kernel(const T* __restrict__ dy, const T* __restrict__ z, const float* __restrict__ bias,
                    T* __restrict__ dz, float* __restrict__ partial, int64_t rows, int H) {
  const int tile = static_cast<int>(blockIdx.x) * kCols * V;  // the block's first column
  const int col = tile + static_cast<int>(threadIdx.x) * V;
  float acc[V];
#pragma unroll
  for (int e = 0; e < V; ++e) acc[e] = 0;
  if (col < H) {
    float b[V];
    load_n<V>(bias + col, b);
    const int64_t stride = static_cast<int64_t>(gridDim.y) * kRows;
    for (int64_t r = static_cast<int64_t>(blockIdx.y) * kRows + threadIdx.y; r < rows; r += R * stride) {
      float g[R][V], x[R][V];
#pragma unroll
      for (int u = 0; u < R; ++u)
        if (r + u * stride < rows) {
          load_n<V>(dy + (r + u * stride) * H + col, g[u]);
          load_n<V>(z + (r + u * stride) * H + col, x[u]);
        }
#pragma unroll
      for (int u = 0; u < R; ++u)
        if (r + u * stride < rows) {
#pragma unroll
          for (int e = 0; e < V; ++e) {
            g[u][e] = gelu_grad(g[u][e], x[u][e] + b[e]);
            acc[e] += g[u][e];
          }
          store_n<V>(dz + (r + u * stride) * H + col, g[u]);
        }
    }
  }
  store_block_column_sums<kCols, kRows, V>(acc, tile, H, partial);
}

dim3 grid_for(int64_t rows, int H, int V) {
  const int cols = (H + kCols * V - 1) / (kCols * V);
  return dim3(static_cast<unsigned>(cols), static_cast<unsigned>(bias_gelu_row_blocks(rows)));
}

/// Calls f with V = 8 where H % 8 == 0 and every pointer is 16-byte aligned, else V = 1, and
/// R = rows_in_flight (1, 2 or 4); false (nothing called) for another R.
template <typename F>
bool with_width_and_rows(int H, int rows_in_flight, std::initializer_list<const void*> pointers, F&& f) {
  auto rows = [&](auto width) {
    switch (rows_in_flight) {
      case 1: f(width, std::integral_constant<int, 1>{}); return true;
      case 2: f(width, std::integral_constant<int, 2>{}); return true;
      case 4: f(width, std::integral_constant<int, 4>{}); return true;
      default: return false;
    }
  };
  if (vectorized(H, pointers)) return rows(std::integral_constant<int, kVec>{});
  return rows(std::integral_constant<int, 1>{});
}

}  // namespace

int bias_gelu_row_blocks(int64_t rows) {
  const int64_t need = (rows + kRows - 1) / kRows;
  return static_cast<int>(need < kRowBlocks ? need : kRowBlocks);
}

bool bias_gelu_forward(bool z_bf16, const void* z, const float* bias, void* y, int64_t rows, int H,
                       cudaStream_t stream, int rows_in_flight) {
  if (rows == 0 || H == 0) return bias_gelu_rows_in_flight_supported(rows_in_flight);
  const dim3 block(kCols, kRows);
  return with_width_and_rows(H, rows_in_flight, {z, bias, y}, [&](auto width, auto in_flight) {
    constexpr int V = decltype(width)::value, R = decltype(in_flight)::value;
    if (z_bf16)
      forward_kernel<__nv_bfloat16, V, R><<<grid_for(rows, H, V), block, 0, stream>>>(
          static_cast<const __nv_bfloat16*>(z), bias, static_cast<__nv_bfloat16*>(y), rows, H);
    else
      forward_kernel<float, V, R><<<grid_for(rows, H, V), block, 0, stream>>>(static_cast<const float*>(z), bias,
                                                                             static_cast<float*>(y), rows, H);
  });
}

bool bias_gelu_backward(bool z_bf16, const void* dy, const void* z, const float* bias, void* dz, float* partial,
                        int64_t rows, int H, cudaStream_t stream, int rows_in_flight) {
  if (rows == 0 || H == 0) return bias_gelu_rows_in_flight_supported(rows_in_flight);
  const dim3 block(kCols, kRows);
  return with_width_and_rows(H, rows_in_flight, {dy, z, bias, dz}, [&](auto width, auto in_flight) {
    constexpr int V = decltype(width)::value, R = decltype(in_flight)::value;
    if (z_bf16)
      backward_kernel<__nv_bfloat16, V, R><<<grid_for(rows, H, V), block, 0, stream>>>(
          static_cast<const __nv_bfloat16*>(dy), static_cast<const __nv_bfloat16*>(z), bias,
          static_cast<__nv_bfloat16*>(dz), partial, rows, H);
    else
      backward_kernel<float, V, R><<<grid_for(rows, H, V), block, 0, stream>>>(
          static_cast<const float*>(dy), static_cast<const float*>(z), bias, static_cast<float*>(dz), partial, rows,
          H);
  });
}

}  // namespace genemask::model::cuda
