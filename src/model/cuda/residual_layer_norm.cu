// Fused dropout + residual add + LayerNorm, forward and backward (residual_layer_norm.hpp),
// optionally with a bf16 copy of the output written in the same pass and its gradient summed
// with the fp32 output's in the backward kernel.
// One warp per row: each lane holds H / 32 of the row's values in registers (H <= 1024),
// the row's sums go through warp shuffles; grid-stride over rows.
#include "model/cuda/residual_layer_norm_kernels.hpp"
#include "model/cuda/vec.cuh"

#include <ATen/cuda/PhiloxUtils.cuh>
#include <curand_kernel.h>

#include <cstdint>
#include <initializer_list>
#include <type_traits>

namespace genemask::model::cuda {
namespace {

constexpr int kWarps = 8;  // rows in flight per block

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

/// The backward kernels' last stage: each warp has put its sums of gamma's (which = 0) or
/// beta's (1) gradient into red[warp][column]; the block's sum per column goes to
/// partial[block][which][column] (the host sums the blocks).
__device__ __forceinline__ void sum_block_partials(float (&red)[kWarps][kMaxHidden], int H, float* partial, int which) {
  __syncthreads();
  for (int j = threadIdx.x; j < H; j += kWarps * 32) {
    float t = 0;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) t += red[w][j];
    partial[(static_cast<int64_t>(blockIdx.x) * 2 + which) * H + j] = t;
  }
  __syncthreads();
}

// PER: values per lane (H <= 32 * PER), a compile-time size so that they stay in registers.
template <typename T, int kPerLane>
__global__ void __launch_bounds__(kWarps * 32)
    forward_kernel(const T* __restrict__ h, const float* __restrict__ residual, const float* __restrict__ gamma,
                   const float* __restrict__ beta, float* __restrict__ y, __nv_bfloat16* __restrict__ y_low,
                   float* __restrict__ sum, uint8_t* __restrict__ keep, float* __restrict__ mean_out,
                   float* __restrict__ rstd_out, int64_t rows, int H, float p, float eps, at::PhiloxCudaState philox) {
  const int lane = threadIdx.x & 31;
  const float scale = p > 0 ? 1.f / (1.f - p) : 1.f;
  const auto seeds = at::cuda::philox::unpack(philox);
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * kWarps + (threadIdx.x >> 5); r < rows;
       r += static_cast<int64_t>(gridDim.x) * kWarps) {
    const int64_t base = r * H;
    float v[kPerLane];
    curandStatePhilox4_32_10_t st;
    float4 u = make_float4(1.f, 1.f, 1.f, 1.f);
    if (p > 0) curand_init(std::get<0>(seeds), static_cast<uint64_t>(r) * 32 + lane, std::get<1>(seeds), &st);
    float s = 0;
#pragma unroll
    for (int k = 0; k < kPerLane; ++k) {
      const int j = lane + 32 * k;
      if (j < H) {
        float hv = load(h, base + j);
        if (p > 0) {
          if ((k & 3) == 0) u = curand_uniform4(&st);
          const float x = (k & 3) == 0 ? u.x : (k & 3) == 1 ? u.y : (k & 3) == 2 ? u.z : u.w;
          const bool kept = x < 1.f - p;  // u in (0, 1]: kept with probability 1 - p
          keep[base + j] = kept;
          hv = kept ? hv * scale : 0.f;
        }
        v[k] = residual[base + j] + hv;
        s += v[k];
      } else {
        v[k] = 0;
      }
    }
    const float mean = warp_sum(s) / H;
    float var = 0;
#pragma unroll
    for (int k = 0; k < kPerLane; ++k)
      if (lane + 32 * k < H) var += (v[k] - mean) * (v[k] - mean);
    const float rstd = rsqrtf(warp_sum(var) / H + eps);
#pragma unroll
    for (int k = 0; k < kPerLane; ++k) {
      const int j = lane + 32 * k;
      if (j < H) {
        sum[base + j] = v[k];
        const float out = (v[k] - mean) * rstd * gamma[j] + beta[j];
        y[base + j] = out;
        if (y_low) y_low[base + j] = __float2bfloat16(out);
      }
    }
    if (lane == 0) {
      mean_out[r] = mean;
      rstd_out[r] = rstd;
    }
  }
}

template <typename T, int kPerLane>
__global__ void __launch_bounds__(kWarps * 32)
    backward_kernel(const float* __restrict__ dy, const __nv_bfloat16* __restrict__ dy_low,
                    const float* __restrict__ sum, const uint8_t* __restrict__ keep,
                    const float* __restrict__ mean_in, const float* __restrict__ rstd_in, const float* __restrict__ gamma,
                    T* __restrict__ dh, float* __restrict__ d_residual, float* __restrict__ partial, int64_t rows, int H,
                    float p) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const float scale = p > 0 ? 1.f / (1.f - p) : 1.f;
  float dgamma[kPerLane], dbeta[kPerLane];
#pragma unroll
  for (int k = 0; k < kPerLane; ++k) dgamma[k] = dbeta[k] = 0;
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * kWarps + warp; r < rows; r += static_cast<int64_t>(gridDim.x) * kWarps) {
    const int64_t base = r * H;
    const float mean = mean_in[r], rstd = rstd_in[r];
    float xhat[kPerLane], g[kPerLane];
    float sg = 0, sgx = 0;
#pragma unroll
    for (int k = 0; k < kPerLane; ++k) {
      const int j = lane + 32 * k;
      if (j < H) {
        // y's gradient: the fp32 output's plus its bf16 copy's (either may be absent).
        const float d = (dy ? dy[base + j] : 0.f) + (dy_low ? __bfloat162float(dy_low[base + j]) : 0.f);
        xhat[k] = (sum[base + j] - mean) * rstd;
        g[k] = d * gamma[j];
        dgamma[k] += d * xhat[k];
        dbeta[k] += d;
        sg += g[k];
        sgx += g[k] * xhat[k];
      } else {
        xhat[k] = g[k] = 0;
      }
    }
    const float mg = warp_sum(sg) / H, mgx = warp_sum(sgx) / H;
#pragma unroll
    for (int k = 0; k < kPerLane; ++k) {
      const int j = lane + 32 * k;
      if (j < H) {
        const float ds = rstd * (g[k] - mg - xhat[k] * mgx);
        d_residual[base + j] = ds;
        store(dh, base + j, p > 0 ? (keep[base + j] ? ds * scale : 0.f) : ds);
      }
    }
  }
  // The block's gamma and beta sums: the warps' in shared memory, summed per column.
  __shared__ float red[kWarps][kMaxHidden];
  for (int which = 0; which < 2; ++which) {
#pragma unroll
    for (int k = 0; k < kPerLane; ++k) {
      const int j = lane + 32 * k;
      if (j < H) red[warp][j] = which == 0 ? dgamma[k] : dbeta[k];
    }
    sum_block_partials(red, H, partial, which);
  }
}

// The same two kernels over 8-element chunks (16-byte loads and stores): for H % 8 == 0
// and 16-byte aligned rows. KC: chunks per lane (H <= 8 * 32 * KC). A lane's chunk c covers
// elements 8c .. 8c + 7 of the row; its random numbers come from its own Philox stream,
// 8 per chunk.
template <typename T, int KC>
__global__ void __launch_bounds__(kWarps * 32)
    forward_kernel_vec(const T* __restrict__ h, const float* __restrict__ residual, const float* __restrict__ gamma,
                       const float* __restrict__ beta, float* __restrict__ y, __nv_bfloat16* __restrict__ y_low,
                       float* __restrict__ sum, uint8_t* __restrict__ keep, float* __restrict__ mean_out,
                       float* __restrict__ rstd_out, int64_t rows, int H, float p, float eps,
                       at::PhiloxCudaState philox) {
  const int lane = threadIdx.x & 31, C = H / kVec;
  const float scale = p > 0 ? 1.f / (1.f - p) : 1.f;
  const auto seeds = at::cuda::philox::unpack(philox);
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * kWarps + (threadIdx.x >> 5); r < rows;
       r += static_cast<int64_t>(gridDim.x) * kWarps) {
    const int64_t base = r * H;
    float v[KC][kVec];
    curandStatePhilox4_32_10_t st;
    if (p > 0) curand_init(std::get<0>(seeds), static_cast<uint64_t>(r) * 32 + lane, std::get<1>(seeds), &st);
    float s = 0;
#pragma unroll
    for (int k = 0; k < KC; ++k) {
      const int c = lane + 32 * k;
      if (c < C) {
        float hv[kVec], rv[kVec];
        load8(h + base + c * kVec, hv);
        load8(residual + base + c * kVec, rv);
        if (p > 0) {
          const float4 u0 = curand_uniform4(&st), u1 = curand_uniform4(&st);
          const float u[kVec] = {u0.x, u0.y, u0.z, u0.w, u1.x, u1.y, u1.z, u1.w};
          uint8_t kb[kVec];
#pragma unroll
          for (int e = 0; e < kVec; ++e) {
            const bool kept = u[e] < 1.f - p;  // u in (0, 1]: kept with probability 1 - p
            kb[e] = kept;
            hv[e] = kept ? hv[e] * scale : 0.f;
          }
          *reinterpret_cast<uint2*>(keep + base + c * kVec) = *reinterpret_cast<const uint2*>(kb);
        }
#pragma unroll
        for (int e = 0; e < kVec; ++e) {
          v[k][e] = rv[e] + hv[e];
          s += v[k][e];
        }
      } else {
#pragma unroll
        for (int e = 0; e < kVec; ++e) v[k][e] = 0;
      }
    }
    const float mean = warp_sum(s) / H;
    float var = 0;
#pragma unroll
    for (int k = 0; k < KC; ++k)
      if (lane + 32 * k < C)
#pragma unroll
        for (int e = 0; e < kVec; ++e) var += (v[k][e] - mean) * (v[k][e] - mean);
    const float rstd = rsqrtf(warp_sum(var) / H + eps);
#pragma unroll
    for (int k = 0; k < KC; ++k) {
      const int c = lane + 32 * k;
      if (c < C) {
        float g[kVec], b[kVec], out[kVec];
        load8(gamma + c * kVec, g);
        load8(beta + c * kVec, b);
#pragma unroll
        for (int e = 0; e < kVec; ++e) out[e] = (v[k][e] - mean) * rstd * g[e] + b[e];
        store8(sum + base + c * kVec, v[k]);
        store8(y + base + c * kVec, out);
        if (y_low) store8(y_low + base + c * kVec, out);
      }
    }
    if (lane == 0) {
      mean_out[r] = mean;
      rstd_out[r] = rstd;
    }
  }
}

template <typename T, int KC>
__global__ void __launch_bounds__(kWarps * 32)
    backward_kernel_vec(const float* __restrict__ dy, const __nv_bfloat16* __restrict__ dy_low,
                        const float* __restrict__ sum, const uint8_t* __restrict__ keep,
                        const float* __restrict__ mean_in, const float* __restrict__ rstd_in,
                        const float* __restrict__ gamma, T* __restrict__ dh, float* __restrict__ d_residual,
                        float* __restrict__ partial, int64_t rows, int H, float p) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, C = H / kVec;
  const float scale = p > 0 ? 1.f / (1.f - p) : 1.f;
  float dgamma[KC][kVec], dbeta[KC][kVec];
#pragma unroll
  for (int k = 0; k < KC; ++k)
#pragma unroll
    for (int e = 0; e < kVec; ++e) dgamma[k][e] = dbeta[k][e] = 0;
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * kWarps + warp; r < rows; r += static_cast<int64_t>(gridDim.x) * kWarps) {
    const int64_t base = r * H;
    const float mean = mean_in[r], rstd = rstd_in[r];
    float xhat[KC][kVec], g[KC][kVec];
    float sg = 0, sgx = 0;
#pragma unroll
    for (int k = 0; k < KC; ++k) {
      const int c = lane + 32 * k;
      if (c < C) {
        float d[kVec], sv[kVec], gm[kVec];
        // y's gradient: the fp32 output's plus its bf16 copy's (either may be absent).
        if (dy) {
          load8(dy + base + c * kVec, d);
        } else {
#pragma unroll
          for (int e = 0; e < kVec; ++e) d[e] = 0;
        }
        if (dy_low) {
          float dl[kVec];
          load8(dy_low + base + c * kVec, dl);
#pragma unroll
          for (int e = 0; e < kVec; ++e) d[e] += dl[e];
        }
        load8(sum + base + c * kVec, sv);
        load8(gamma + c * kVec, gm);
#pragma unroll
        for (int e = 0; e < kVec; ++e) {
          xhat[k][e] = (sv[e] - mean) * rstd;
          g[k][e] = d[e] * gm[e];
          dgamma[k][e] += d[e] * xhat[k][e];
          dbeta[k][e] += d[e];
          sg += g[k][e];
          sgx += g[k][e] * xhat[k][e];
        }
      } else {
#pragma unroll
        for (int e = 0; e < kVec; ++e) xhat[k][e] = g[k][e] = 0;
      }
    }
    const float mg = warp_sum(sg) / H, mgx = warp_sum(sgx) / H;
#pragma unroll
    for (int k = 0; k < KC; ++k) {
      const int c = lane + 32 * k;
      if (c < C) {
        float ds[kVec], dhv[kVec];
        uint8_t kb[kVec];
        if (p > 0) *reinterpret_cast<uint2*>(kb) = *reinterpret_cast<const uint2*>(keep + base + c * kVec);
#pragma unroll
        for (int e = 0; e < kVec; ++e) {
          ds[e] = rstd * (g[k][e] - mg - xhat[k][e] * mgx);
          dhv[e] = p > 0 ? (kb[e] ? ds[e] * scale : 0.f) : ds[e];
        }
        store8(d_residual + base + c * kVec, ds);
        store8(dh + base + c * kVec, dhv);
      }
    }
  }
  __shared__ float red[kWarps][kMaxHidden];
  for (int which = 0; which < 2; ++which) {
#pragma unroll
    for (int k = 0; k < KC; ++k) {
      const int c = lane + 32 * k;
      if (c < C)
#pragma unroll
        for (int e = 0; e < kVec; ++e) red[warp][c * kVec + e] = which == 0 ? dgamma[k][e] : dbeta[k][e];
    }
    sum_block_partials(red, H, partial, which);
  }
}

int forward_blocks(int64_t rows) {
  const int64_t need = (rows + kWarps - 1) / kWarps;
  return static_cast<int>(need < 65535 ? need : 65535);
}

}  // namespace

int backward_blocks(int64_t rows) {
  // Enough blocks to fill the GPU, few enough that the partial sums stay small.
  const int64_t need = (rows + kWarps - 1) / kWarps;
  return static_cast<int>(need < 528 ? need : 528);
}

/// Calls f.template operator()<PER>() with the smallest PER in {8, 16, 24, 32} that holds H.
template <typename F>
void with_per_lane(int H, F&& f) {
  const int need = (H + 31) / 32;
  if (need <= 8) f(std::integral_constant<int, 8>{});
  else if (need <= 16) f(std::integral_constant<int, 16>{});
  else if (need <= 24) f(std::integral_constant<int, 24>{});
  else f(std::integral_constant<int, 32>{});
}

/// Calls f with the smallest chunks-per-lane KC in {1, 2, 3, 4} that holds H / 8 chunks.
template <typename F>
void with_chunks_per_lane(int H, F&& f) {
  const int need = (H / kVec + 31) / 32;
  if (need <= 1) f(std::integral_constant<int, 1>{});
  else if (need <= 2) f(std::integral_constant<int, 2>{});
  else if (need <= 3) f(std::integral_constant<int, 3>{});
  else f(std::integral_constant<int, 4>{});
}

void residual_layer_norm_forward(bool h_bf16, const void* h, const float* residual, const float* gamma,
                                 const float* beta, float* y, void* y_low_raw, float* sum, uint8_t* keep, float* mean,
                                 float* rstd, int64_t rows, int H, float p, float eps, at::PhiloxCudaState philox,
                                 cudaStream_t stream) {
  if (rows == 0) return;
  auto* y_low = static_cast<__nv_bfloat16*>(y_low_raw);
  const dim3 grid(forward_blocks(rows)), block(kWarps * 32);
  if (vectorized(H, {h, residual, gamma, beta, y, y_low, sum})) {
    with_chunks_per_lane(H, [&](auto kc) {
      constexpr int KC = decltype(kc)::value;
      if (h_bf16)
        forward_kernel_vec<__nv_bfloat16, KC><<<grid, block, 0, stream>>>(
            static_cast<const __nv_bfloat16*>(h), residual, gamma, beta, y, y_low, sum, keep, mean, rstd, rows, H, p, eps, philox);
      else
        forward_kernel_vec<float, KC><<<grid, block, 0, stream>>>(static_cast<const float*>(h), residual, gamma, beta, y,
                                                                  y_low, sum, keep, mean, rstd, rows, H, p, eps, philox);
    });
    return;
  }
  with_per_lane(H, [&](auto per) {
    constexpr int P = decltype(per)::value;
    if (h_bf16)
      forward_kernel<__nv_bfloat16, P><<<grid, block, 0, stream>>>(static_cast<const __nv_bfloat16*>(h), residual, gamma,
                                                                    beta, y, y_low, sum, keep, mean, rstd, rows, H, p, eps,
                                                                    philox);
    else
      forward_kernel<float, P><<<grid, block, 0, stream>>>(static_cast<const float*>(h), residual, gamma, beta, y, y_low,
                                                            sum, keep, mean, rstd, rows, H, p, eps, philox);
  });
}

void residual_layer_norm_backward(bool h_bf16, const float* dy, const void* dy_low_raw, const float* sum,
                                  const uint8_t* keep, const float* mean, const float* rstd, const float* gamma,
                                  void* dh, float* d_residual, float* partial, int64_t rows, int H, float p,
                                  cudaStream_t stream) {
  if (rows == 0) return;
  const auto* dy_low = static_cast<const __nv_bfloat16*>(dy_low_raw);
  const dim3 grid(backward_blocks(rows)), block(kWarps * 32);
  if (vectorized(H, {dy, dy_low, sum, gamma, dh, d_residual})) {
    with_chunks_per_lane(H, [&](auto kc) {
      constexpr int KC = decltype(kc)::value;
      if (h_bf16)
        backward_kernel_vec<__nv_bfloat16, KC><<<grid, block, 0, stream>>>(
            dy, dy_low, sum, keep, mean, rstd, gamma, static_cast<__nv_bfloat16*>(dh), d_residual, partial, rows, H, p);
      else
        backward_kernel_vec<float, KC><<<grid, block, 0, stream>>>(dy, dy_low, sum, keep, mean, rstd, gamma,
                                                                   static_cast<float*>(dh), d_residual, partial, rows, H, p);
    });
    return;
  }
  with_per_lane(H, [&](auto per) {
    constexpr int P = decltype(per)::value;
    if (h_bf16)
      backward_kernel<__nv_bfloat16, P><<<grid, block, 0, stream>>>(dy, dy_low, sum, keep, mean, rstd, gamma,
                                                                     static_cast<__nv_bfloat16*>(dh), d_residual,
                                                                     partial, rows, H, p);
    else
      backward_kernel<float, P><<<grid, block, 0, stream>>>(dy, dy_low, sum, keep, mean, rstd, gamma, static_cast<float*>(dh),
                                                             d_residual, partial, rows, H, p);
  });
}

const char* last_launch_error() {
  const cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? nullptr : cudaGetErrorString(e);
}

}  // namespace genemask::model::cuda
