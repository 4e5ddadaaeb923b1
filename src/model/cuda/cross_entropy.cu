// The MLM loss over the decoder's logits, summed over the rows, forward and backward
// (cross_entropy_kernels.hpp). One block per row; its threads stride along the row, and the
// row's max and sum meet in shared memory, in a fixed order (the same bits for the same
// inputs). The logits are read in their own dtype and computed in fp32.
#include "model/cuda/cross_entropy_kernels.hpp"
#include "model/cuda/vec.cuh"

#include <cmath>
#include <cstdint>

namespace genemask::model::cuda {
namespace {

constexpr int kThreads = 256;

/// The block's reduction of v by op (max or sum), returned to every thread; red holds a
/// value per warp. Fixed order: lanes by xor shuffles, then the warps in order.
template <typename Op>
__device__ __forceinline__ float block_reduce(float v, float* red, Op op) {
  v = warp_reduce(v, op);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();  // red may still be read from the last reduction
  if (lane == 0) red[warp] = v;
  __syncthreads();
  float t = red[0];
#pragma unroll
  for (int w = 1; w < kThreads / 32; ++w) t = op(t, red[w]);
  return t;
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    forward_kernel(const T* __restrict__ x, const int64_t* __restrict__ target, float* __restrict__ stats,
                   float* __restrict__ loss, int V, int ld) {
  __shared__ float red[kThreads / 32];
  const int64_t r = blockIdx.x;
  const T* row = x + r * ld;
  const int64_t t = target[r];
  if (t == kIgnoreTarget) {  // adds nothing, and its row is not read (the whole block returns)
    if (threadIdx.x == 0) stats[2 * r] = 0.f, stats[2 * r + 1] = 0.f, loss[r] = 0.f;
    return;
  }
  float m = -INFINITY;
  for (int j = threadIdx.x; j < V; j += kThreads) m = fmaxf(m, load(row, j));
  m = block_reduce(m, red, Max{});
  float s = 0;
  for (int j = threadIdx.x; j < V; j += kThreads) s += expf(load(row, j) - m);
  s = block_reduce(s, red, Sum{});
  if (threadIdx.x == 0) {
    // -log_softmax[t] as LibTorch's log-softmax forms it: log(s) - (x_t - max), never through
    // max + log(s), whose rounding at the scale of the max would leave the target's gradient
    // g (p - 1) off by ulps of the max where p is near 1.
    const float ls = logf(s);
    stats[2 * r] = m;
    stats[2 * r + 1] = ls;
    loss[r] = t >= 0 && t < V ? ls - (load(row, t) - m) : NAN;
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    backward_kernel(const T* __restrict__ x, const int64_t* __restrict__ target, const float* __restrict__ stats,
                    const float* __restrict__ g, T* __restrict__ dx, int V, int ld) {
  const int64_t r = blockIdx.x;
  const T* row = x + r * ld;
  T* out = dx + r * ld;
  // The padding's columns [V, ld) are no class: their gradient is 0 on every row.
  for (int j = V + threadIdx.x; j < ld; j += kThreads) store(out, j, 0.f);
  const int64_t t = target[r];
  if (t == kIgnoreTarget) {
    for (int j = threadIdx.x; j < V; j += kThreads) store(out, j, 0.f);
    return;
  }
  if (t < 0 || t >= V) {  // its loss is NaN: so is its gradient, never a finite step from a bad target
    for (int j = threadIdx.x; j < V; j += kThreads) store(out, j, NAN);
    return;
  }
  const float m = stats[2 * r], ls = stats[2 * r + 1], scale = *g;
  for (int j = threadIdx.x; j < V; j += kThreads)
    store(out, j, scale * (expf((load(row, j) - m) - ls) - (j == t ? 1.f : 0.f)));
}

}  // namespace

void cross_entropy_forward(bool x_bf16, const void* x, const int64_t* target, float* stats, float* loss,
                           int64_t rows, int V, int ld, cudaStream_t stream) {
  if (rows == 0) return;
  const dim3 grid(static_cast<unsigned>(rows)), block(kThreads);
  if (x_bf16)
    forward_kernel<__nv_bfloat16><<<grid, block, 0, stream>>>(static_cast<const __nv_bfloat16*>(x), target, stats, loss,
                                                               V, ld);
  else
    forward_kernel<float><<<grid, block, 0, stream>>>(static_cast<const float*>(x), target, stats, loss, V, ld);
}

void cross_entropy_backward(bool x_bf16, const void* x, const int64_t* target, const float* stats, const float* g,
                            void* dx, int64_t rows, int V, int ld, cudaStream_t stream) {
  if (rows == 0) return;
  const dim3 grid(static_cast<unsigned>(rows)), block(kThreads);
  if (x_bf16)
    backward_kernel<__nv_bfloat16><<<grid, block, 0, stream>>>(static_cast<const __nv_bfloat16*>(x), target, stats, g,
                                                                static_cast<__nv_bfloat16*>(dx), V, ld);
  else
    backward_kernel<float><<<grid, block, 0, stream>>>(static_cast<const float*>(x), target, stats, g,
                                                        static_cast<float*>(dx), V, ld);
}

}  // namespace genemask::model::cuda
