// Bias add + erf-GELU after a bias-free matrix product, forward and backward (bias_gelu.hpp).
// The grid tiles [rows, H]: threadIdx.x runs along the columns (V consecutive columns per
// thread: 8 with 16-byte loads where H % 8 == 0 and the pointers are aligned, else 1),
// threadIdx.y and blockIdx.y along the rows (grid-stride). A thread's columns are fixed, so
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

template <typename T, int V>
__global__ void __launch_bounds__(kCols * kRows)
    forward_kernel(const T* __restrict__ z, const float* __restrict__ bias, T* __restrict__ y, int64_t rows, int H) {
  const int col = (static_cast<int>(blockIdx.x) * kCols + static_cast<int>(threadIdx.x)) * V;
  if (col >= H) return;
  float b[V];
  load_n<V>(bias + col, b);
  for (int64_t r = static_cast<int64_t>(blockIdx.y) * kRows + threadIdx.y; r < rows;
       r += static_cast<int64_t>(gridDim.y) * kRows) {
    const int64_t at = r * H + col;
    float v[V];
    load_n<V>(z + at, v);
#pragma unroll
    for (int e = 0; e < V; ++e) v[e] = gelu(v[e] + b[e]);
    store_n<V>(y + at, v);
  }
}

template <typename T, int V>
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
    for (int64_t r = static_cast<int64_t>(blockIdx.y) * kRows + threadIdx.y; r < rows;
         r += static_cast<int64_t>(gridDim.y) * kRows) {
      const int64_t at = r * H + col;
      float g[V], x[V];
      load_n<V>(dy + at, g);
      load_n<V>(z + at, x);
#pragma unroll
      for (int e = 0; e < V; ++e) {
        g[e] = gelu_grad(g[e], x[e] + b[e]);
        acc[e] += g[e];
      }
      store_n<V>(dz + at, g);
    }
  }
  store_block_column_sums<kCols, kRows, V>(acc, tile, H, partial);
}

dim3 grid_for(int64_t rows, int H, int V) {
  const int cols = (H + kCols * V - 1) / (kCols * V);
  return dim3(static_cast<unsigned>(cols), static_cast<unsigned>(bias_gelu_row_blocks(rows)));
}

/// Calls f with V = 8 where H % 8 == 0 and every pointer is 16-byte aligned, else V = 1.
template <typename F>
void with_width(int H, std::initializer_list<const void*> pointers, F&& f) {
  if (vectorized(H, pointers)) f(std::integral_constant<int, kVec>{});
  else f(std::integral_constant<int, 1>{});
}

}  // namespace

int bias_gelu_row_blocks(int64_t rows) {
  const int64_t need = (rows + kRows - 1) / kRows;
  return static_cast<int>(need < kRowBlocks ? need : kRowBlocks);
}

void bias_gelu_forward(bool z_bf16, const void* z, const float* bias, void* y, int64_t rows, int H,
                       cudaStream_t stream) {
  if (rows == 0 || H == 0) return;
  const dim3 block(kCols, kRows);
  with_width(H, {z, bias, y}, [&](auto width) {
    constexpr int V = decltype(width)::value;
    if (z_bf16)
      forward_kernel<__nv_bfloat16, V><<<grid_for(rows, H, V), block, 0, stream>>>(
          static_cast<const __nv_bfloat16*>(z), bias, static_cast<__nv_bfloat16*>(y), rows, H);
    else
      forward_kernel<float, V><<<grid_for(rows, H, V), block, 0, stream>>>(static_cast<const float*>(z), bias,
                                                                          static_cast<float*>(y), rows, H);
  });
}

void bias_gelu_backward(bool z_bf16, const void* dy, const void* z, const float* bias, void* dz, float* partial,
                        int64_t rows, int H, cudaStream_t stream) {
  if (rows == 0 || H == 0) return;
  const dim3 block(kCols, kRows);
  with_width(H, {dy, z, bias, dz}, [&](auto width) {
    constexpr int V = decltype(width)::value;
    if (z_bf16)
      backward_kernel<__nv_bfloat16, V><<<grid_for(rows, H, V), block, 0, stream>>>(
          static_cast<const __nv_bfloat16*>(dy), static_cast<const __nv_bfloat16*>(z), bias,
          static_cast<__nv_bfloat16*>(dz), partial, rows, H);
    else
      backward_kernel<float, V><<<grid_for(rows, H, V), block, 0, stream>>>(
          static_cast<const float*>(dy), static_cast<const float*>(z), bias, static_cast<float*>(dz), partial, rows, H);
  });
}

}  // namespace genemask::model::cuda
