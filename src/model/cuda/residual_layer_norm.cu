// Fused dropout + residual add + LayerNorm, forward and backward (residual_layer_norm.hpp),
// optionally with a bf16 copy of the output written in the same pass and its gradient summed
// with the fp32 output's in the backward kernel.
// One warp per row: each lane holds H / 32 of the row's values in registers (H <= 1024),
// the row's sums go through warp shuffles; grid-stride over rows. The backward sums gamma's
// and beta's gradients over its rows either in registers (8 warps a block, at most 528 blocks)
// or, with `smem_sums` (fusions.hpp's ln-smem), in shared memory, one slot per warp and column:
// the registers it frees let several blocks of 4 warps share an SM (at H = 768 the register
// version needs 144 registers a thread, so one block of 8 warps per SM), and the grid is as
// many blocks as fit the GPU at once.
// kLean (fusions.hpp's ln-lean): the forward saves neither the pre-norm sum nor a keep byte
// per element, only the keep mask's bits (keep_bits.hpp), and the backward computes the sum
// again from h, the residual and those bits, with the forward's own arithmetic (dropped_sum),
// so both give the same bits as the kernels that save the sum.
#include "model/cuda/keep_bits.hpp"
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

/// The pre-norm sum of one element: residual + dropout(h), dropout's product and the add each
/// rounded (as LibTorch's dropout and add are), never contracted into one fused multiply-add,
/// so that the lean backward's sum is the forward's to the bit. drop: p > 0.
__device__ __forceinline__ float dropped_sum(float residual, float h, bool kept, float scale, bool drop) {
  return drop ? __fadd_rn(residual, kept ? __fmul_rn(h, scale) : 0.f) : __fadd_rn(residual, h);
}

/// The backward kernels' last stage (register sums): each warp has put its sums of gamma's
/// (which = 0) or beta's (1) gradient into red[warp][column]; the block's sum per column goes
/// to partial[block][which][column] (the host sums the blocks).
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

/// Warps per block of the backward kernels: 8 with register sums, 4 with shared-memory sums
/// (their shared memory is 2 x warps x H floats, 32 KiB at H = 1024: no opt-in needed).
template <bool kSmem>
constexpr int backward_warps() {
  return kSmem ? 4 : kWarps;
}
/// The blocks per SM the compiler is asked to fit (__launch_bounds__'s second argument, which
/// caps the registers): with register sums none (0: the compiler's own choice, as before
/// ln-smem existed; an explicit 1 makes ptxas give the H = 768 kernel 158 registers instead of
/// 144); with shared-memory sums, as many as the registers of `values` per-lane values (the
/// row's x-hat and gradient) allow without spilling: 6 blocks (80 registers) up to 32 values,
/// 5 (96) up to 48 (at 6, the H = 768 kernel spilled 132 bytes), else 4 (128).
template <bool kSmem>
constexpr int backward_min_blocks(int values) {
  return !kSmem ? 0 : values <= 32 ? 6 : values <= 48 ? 5 : 4;
}
constexpr size_t smem_sums_bytes(int H) { return sizeof(float) * 2 * backward_warps<true>() * static_cast<size_t>(H); }

/// Shared-memory sums, last stage: slot(which, warp, column) gives where warp `warp` summed
/// column `column`'s gamma (which = 0) or beta (1) gradient; the block's sum per column, over
/// the warps in order, goes to partial[block][which][column].
template <typename Slot>
__device__ __forceinline__ void sum_smem_partials(const float* acc, int H, float* partial, const Slot& slot) {
  __syncthreads();
  for (int which = 0; which < 2; ++which)
    for (int j = threadIdx.x; j < H; j += blockDim.x) {
      float t = 0;
#pragma unroll
      for (int w = 0; w < backward_warps<true>(); ++w) t += acc[slot(which, w, j)];
      partial[(static_cast<int64_t>(blockIdx.x) * 2 + which) * H + j] = t;
    }
}

/// Zeroes the block's shared-memory sums (2 x warps x H floats) before the rows.
__device__ __forceinline__ void zero_smem_sums(float* acc, int H) {
  for (int i = threadIdx.x; i < 2 * backward_warps<true>() * H; i += blockDim.x) acc[i] = 0;
  __syncthreads();
}

// PER: values per lane (H <= 32 * PER), a compile-time size so that they stay in registers.
// kLean: `sum` unused, `keep` holds bits (keep_bits.hpp), else a byte per element.
template <typename T, int kPerLane, bool kLean>
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
      bool kept = false;
      if (j < H) {
        float hv = load(h, base + j);
        if (p > 0) {
          if ((k & 3) == 0) u = curand_uniform4(&st);
          const float x = (k & 3) == 0 ? u.x : (k & 3) == 1 ? u.y : (k & 3) == 2 ? u.z : u.w;
          kept = x < 1.f - p;  // u in (0, 1]: kept with probability 1 - p
          if constexpr (!kLean) keep[base + j] = kept;
          hv = kept ? __fmul_rn(hv, scale) : 0.f;
        }
        v[k] = __fadd_rn(residual[base + j], hv);  // dropped_sum's arithmetic, as the lean backward's
        s += v[k];
      } else {
        v[k] = 0;
      }
      if constexpr (kLean) {
        // The whole warp is here (r is the warp's): its 32 flags are 4 bytes of the row.
        if (p > 0) {
          const unsigned ballot = __ballot_sync(0xffffffffu, kept);
          if (writes_ballot_byte(lane, k, H)) keep[keep_byte(r, H, j)] = ballot_byte(ballot, lane);
        }
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
        if constexpr (!kLean) sum[base + j] = v[k];
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

// kSmem: gamma's and beta's sums in shared memory (one slot per warp and column), else in
// registers. kLean: the pre-norm sum from h, residual and the keep bits (`sum` unused), else
// `sum` and a keep byte per element (h and residual unused).
template <typename T, int kPerLane, bool kSmem, bool kLean>
__global__ void __launch_bounds__(backward_warps<kSmem>() * 32, backward_min_blocks<kSmem>(2 * kPerLane))
    backward_kernel(const float* __restrict__ dy, const __nv_bfloat16* __restrict__ dy_low,
                    const float* __restrict__ sum, const T* __restrict__ h, const float* __restrict__ residual,
                    const uint8_t* __restrict__ keep,
                    const float* __restrict__ mean_in, const float* __restrict__ rstd_in, const float* __restrict__ gamma,
                    T* __restrict__ dh, float* __restrict__ d_residual, float* __restrict__ partial, int64_t rows, int H,
                    float p) {
  constexpr int W = backward_warps<kSmem>();
  extern __shared__ float4 smem4[];  // kSmem: [2][W][H] floats, gamma's sums then beta's
  float* acc = reinterpret_cast<float*>(smem4);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const float scale = p > 0 ? 1.f / (1.f - p) : 1.f;
  float dgamma[kPerLane], dbeta[kPerLane];  // register sums (unused with kSmem)
  if constexpr (kSmem) {
    zero_smem_sums(acc, H);
  } else {
#pragma unroll
    for (int k = 0; k < kPerLane; ++k) dgamma[k] = dbeta[k] = 0;
  }
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * W + warp; r < rows; r += static_cast<int64_t>(gridDim.x) * W) {
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
        float sv;
        if constexpr (kLean) {
          const bool kept = p > 0 && kept_bit(keep[keep_byte(r, H, j)], j);
          sv = dropped_sum(residual[base + j], load(h, base + j), kept, scale, p > 0);
        } else {
          sv = sum[base + j];
        }
        xhat[k] = (sv - mean) * rstd;
        g[k] = d * gamma[j];
        if constexpr (kSmem) {
          float* a = acc + warp * H + j;  // lanes on consecutive columns: no bank conflicts
          a[0] += d * xhat[k];
          a[W * H] += d;
        } else {
          dgamma[k] += d * xhat[k];
          dbeta[k] += d;
        }
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
        bool kept = true;
        if (p > 0) kept = kLean ? kept_bit(keep[keep_byte(r, H, j)], j) : keep[base + j] != 0;
        store(dh, base + j, p > 0 ? (kept ? ds * scale : 0.f) : ds);
      }
    }
  }
  if constexpr (kSmem) {
    sum_smem_partials(acc, H, partial, [&](int which, int w, int j) { return (which * W + w) * H + j; });
  } else {
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
}

// The same two kernels over 8-element chunks (16-byte loads and stores): for H % 8 == 0
// and 16-byte aligned rows. KC: chunks per lane (H <= 8 * 32 * KC). A lane's chunk c covers
// elements 8c .. 8c + 7 of the row; its random numbers come from its own Philox stream,
// 8 per chunk. With kLean, chunk c's keep bits are byte c of the row's.
template <typename T, int KC, bool kLean>
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
          unsigned bits = 0;
#pragma unroll
          for (int e = 0; e < kVec; ++e) {
            const bool kept = u[e] < 1.f - p;  // u in (0, 1]: kept with probability 1 - p
            if constexpr (kLean) bits |= static_cast<unsigned>(kept) << e;
            else kb[e] = kept;
            hv[e] = kept ? __fmul_rn(hv[e], scale) : 0.f;
          }
          if constexpr (kLean) keep[keep_byte(r, H, c * kVec)] = static_cast<uint8_t>(bits);
          else *reinterpret_cast<uint2*>(keep + base + c * kVec) = *reinterpret_cast<const uint2*>(kb);
        }
#pragma unroll
        for (int e = 0; e < kVec; ++e) {
          v[k][e] = __fadd_rn(rv[e], hv[e]);  // dropped_sum's arithmetic, as the lean backward's
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
        if constexpr (!kLean) store8(sum + base + c * kVec, v[k]);
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

// With kSmem, a warp's sums of chunk c are four float4 slots (smem_sum_slot4).
template <typename T, int KC, bool kSmem, bool kLean>
__global__ void __launch_bounds__(backward_warps<kSmem>() * 32, backward_min_blocks<kSmem>(2 * KC * kVec))
    backward_kernel_vec(const float* __restrict__ dy, const __nv_bfloat16* __restrict__ dy_low,
                        const float* __restrict__ sum, const T* __restrict__ h, const float* __restrict__ residual,
                        const uint8_t* __restrict__ keep,
                        const float* __restrict__ mean_in, const float* __restrict__ rstd_in,
                        const float* __restrict__ gamma, T* __restrict__ dh, float* __restrict__ d_residual,
                        float* __restrict__ partial, int64_t rows, int H, float p) {
  constexpr int W = backward_warps<kSmem>();
  extern __shared__ float4 smem4[];  // kSmem: [2][W][2][C] float4 slots
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, C = H / kVec;
  const float scale = p > 0 ? 1.f / (1.f - p) : 1.f;
  float dgamma[KC][kVec], dbeta[KC][kVec];  // register sums (unused with kSmem)
  if constexpr (kSmem) {
    zero_smem_sums(reinterpret_cast<float*>(smem4), H);
  } else {
#pragma unroll
    for (int k = 0; k < KC; ++k)
#pragma unroll
      for (int e = 0; e < kVec; ++e) dgamma[k][e] = dbeta[k][e] = 0;
  }
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * W + warp; r < rows; r += static_cast<int64_t>(gridDim.x) * W) {
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
        if constexpr (kLean) {
          float hv[kVec], rv[kVec];
          load8(h + base + c * kVec, hv);
          load8(residual + base + c * kVec, rv);
          const unsigned kb = p > 0 ? keep[keep_byte(r, H, c * kVec)] : 0u;
#pragma unroll
          for (int e = 0; e < kVec; ++e) sv[e] = dropped_sum(rv[e], hv[e], ((kb >> e) & 1u) != 0, scale, p > 0);
        } else {
          load8(sum + base + c * kVec, sv);
        }
        load8(gamma + c * kVec, gm);
#pragma unroll
        for (int e = 0; e < kVec; ++e) {
          xhat[k][e] = (sv[e] - mean) * rstd;
          g[k][e] = d[e] * gm[e];
          if constexpr (!kSmem) {
            dgamma[k][e] += d[e] * xhat[k][e];
            dbeta[k][e] += d[e];
          }
          sg += g[k][e];
          sgx += g[k][e] * xhat[k][e];
        }
        if constexpr (kSmem) {
          // Whole float4s in and out (16-byte shared-memory accesses).
          const float* x = xhat[k];
          const int sg0 = smem_sum_slot4(0, warp, 0, c, C, W), sg1 = smem_sum_slot4(0, warp, 1, c, C, W),
                    sb0 = smem_sum_slot4(1, warp, 0, c, C, W), sb1 = smem_sum_slot4(1, warp, 1, c, C, W);
          float4 g0 = smem4[sg0], g1 = smem4[sg1], b0 = smem4[sb0], b1 = smem4[sb1];
          g0.x += d[0] * x[0], g0.y += d[1] * x[1], g0.z += d[2] * x[2], g0.w += d[3] * x[3];
          g1.x += d[4] * x[4], g1.y += d[5] * x[5], g1.z += d[6] * x[6], g1.w += d[7] * x[7];
          b0.x += d[0], b0.y += d[1], b0.z += d[2], b0.w += d[3];
          b1.x += d[4], b1.y += d[5], b1.z += d[6], b1.w += d[7];
          smem4[sg0] = g0, smem4[sg1] = g1, smem4[sb0] = b0, smem4[sb1] = b1;
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
        bool kept[kVec];
#pragma unroll
        for (int e = 0; e < kVec; ++e) kept[e] = true;
        if (p > 0) {
          if constexpr (kLean) {
            const unsigned kb = keep[keep_byte(r, H, c * kVec)];
#pragma unroll
            for (int e = 0; e < kVec; ++e) kept[e] = ((kb >> e) & 1u) != 0;
          } else {
            uint8_t kb[kVec];
            *reinterpret_cast<uint2*>(kb) = *reinterpret_cast<const uint2*>(keep + base + c * kVec);
#pragma unroll
            for (int e = 0; e < kVec; ++e) kept[e] = kb[e] != 0;
          }
        }
#pragma unroll
        for (int e = 0; e < kVec; ++e) {
          ds[e] = rstd * (g[k][e] - mg - xhat[k][e] * mgx);
          dhv[e] = p > 0 ? (kept[e] ? ds[e] * scale : 0.f) : ds[e];
        }
        store8(d_residual + base + c * kVec, ds);
        store8(dh + base + c * kVec, dhv);
      }
    }
  }
  if constexpr (kSmem) {
    sum_smem_partials(reinterpret_cast<const float*>(smem4), H, partial,
                      [&](int which, int w, int j) { return smem_sum_float(which, w, j, C, W); });
  } else {
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
}

int forward_blocks(int64_t rows) {
  const int64_t need = (rows + kWarps - 1) / kWarps;
  return static_cast<int>(need < 65535 ? need : 65535);
}

}  // namespace

namespace {
constexpr int kRegisterSumsBlocks = 528;  // enough to fill a GPU, few enough that the partials stay small
// The most blocks per SM a shared-memory-sums grid has: backward_min_blocks' largest answer.
constexpr int kMaxSmemBlocksPerSm = backward_min_blocks<true>(0);

int sm_count() {
  int dev = 0, sms = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) {
    (void)cudaGetLastError();  // answered by the fallback: not left for the launch's check to report
    return 1;
  }
  return sms > 0 ? sms : 1;
}

}  // namespace

int backward_partial_rows(int64_t rows, bool smem_sums) {
  const int warps = smem_sums ? backward_warps<true>() : backward_warps<false>();
  const int64_t need = (rows + warps - 1) / warps;
  const int64_t cap = smem_sums ? static_cast<int64_t>(kMaxSmemBlocksPerSm) * sm_count() : kRegisterSumsBlocks;
  return static_cast<int>(need < cap ? need : cap);
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

/// Calls f with std::true_type where `on`, else std::false_type (a run-time choice made a
/// kernel's template argument).
template <typename F>
void with_flag(bool on, F&& f) {
  if (on) f(std::true_type{});
  else f(std::false_type{});
}

void residual_layer_norm_forward(bool h_bf16, const void* h, const float* residual, const float* gamma,
                                 const float* beta, float* y, void* y_low_raw, float* sum, uint8_t* keep, float* mean,
                                 float* rstd, int64_t rows, int H, float p, float eps, at::PhiloxCudaState philox,
                                 bool lean, cudaStream_t stream) {
  if (rows == 0) return;
  auto* y_low = static_cast<__nv_bfloat16*>(y_low_raw);
  const dim3 grid(forward_blocks(rows)), block(kWarps * 32);
  // The kernel for h's dtype.
  auto launch = [&](auto bf16_kernel, auto fp32_kernel) {
    if (h_bf16)
      bf16_kernel<<<grid, block, 0, stream>>>(static_cast<const __nv_bfloat16*>(h), residual, gamma, beta, y, y_low,
                                              sum, keep, mean, rstd, rows, H, p, eps, philox);
    else
      fp32_kernel<<<grid, block, 0, stream>>>(static_cast<const float*>(h), residual, gamma, beta, y, y_low, sum, keep,
                                              mean, rstd, rows, H, p, eps, philox);
  };
  with_flag(lean, [&](auto lean_tag) {
    constexpr bool L = decltype(lean_tag)::value;
    if (vectorized(H, {h, residual, gamma, beta, y, y_low, sum})) {
      with_chunks_per_lane(H, [&](auto kc) {
        constexpr int KC = decltype(kc)::value;
        launch(forward_kernel_vec<__nv_bfloat16, KC, L>, forward_kernel_vec<float, KC, L>);
      });
    } else {
      with_per_lane(H, [&](auto per) {
        constexpr int P = decltype(per)::value;
        launch(forward_kernel<__nv_bfloat16, P, L>, forward_kernel<float, P, L>);
      });
    }
  });
}

int residual_layer_norm_backward(bool h_bf16, const float* dy, const void* dy_low_raw, const float* sum,
                                 const void* h, const float* residual, const uint8_t* keep, const float* mean,
                                 const float* rstd, const float* gamma, void* dh, float* d_residual, float* partial,
                                 int64_t rows, int H, float p, bool smem_sums, bool lean, cudaStream_t stream) {
  if (rows == 0) return 0;
  const auto* dy_low = static_cast<const __nv_bfloat16*>(dy_low_raw);
  int blocks = 0;
  // One kernel's launch: register sums on at most 528 blocks of 8 warps; shared-memory sums on
  // the blocks per SM that the kernel's __launch_bounds__ guarantees (backward_min_blocks of
  // its per-lane values) times the SMs: rows are grid-strided either way. The grid, and so
  // which rows each warp sums into gamma's and beta's gradients, depends on the shape and the
  // GPU's SM count only: not on the registers one instantiation happens to need, so ln-lean's
  // kernels (other registers, the same values a lane) sum in the same grouping as the
  // default's and give the same bits (the occupancy calculator's answer, used before, differed
  // between them on sm_80 for the one-element kernels).
  auto launch = [&](auto kernel, auto smem_tag, int values, auto&&... args) {
    constexpr bool S = decltype(smem_tag)::value;
    const int threads = backward_warps<S>() * 32;
    const size_t bytes = S ? smem_sums_bytes(H) : 0;
    const int64_t need = (rows + backward_warps<S>() - 1) / backward_warps<S>();
    const int64_t cap =
        S ? static_cast<int64_t>(backward_min_blocks<true>(values)) * sm_count() : kRegisterSumsBlocks;
    blocks = static_cast<int>(need < cap ? need : cap);
    kernel<<<blocks, threads, bytes, stream>>>(args...);
  };
  // The kernel for h's dtype (dh's type), with the sums where smem_sums says; `values`: its
  // per-lane values, as its __launch_bounds__ counts them.
  auto run = [&](auto bf16_kernel, auto fp32_kernel, auto smem_tag, int values) {
    if (h_bf16)
      launch(bf16_kernel, smem_tag, values, dy, dy_low, sum, static_cast<const __nv_bfloat16*>(h), residual, keep,
             mean, rstd, gamma, static_cast<__nv_bfloat16*>(dh), d_residual, partial, rows, H, p);
    else
      launch(fp32_kernel, smem_tag, values, dy, dy_low, sum, static_cast<const float*>(h), residual, keep, mean, rstd,
             gamma, static_cast<float*>(dh), d_residual, partial, rows, H, p);
  };
  with_flag(lean, [&](auto lean_tag) {
    constexpr bool L = decltype(lean_tag)::value;
    with_flag(smem_sums, [&](auto tag) {
      constexpr bool S = decltype(tag)::value;
      if (vectorized(H, {dy, dy_low, sum, h, residual, gamma, dh, d_residual})) {
        with_chunks_per_lane(H, [&](auto kc) {
          constexpr int KC = decltype(kc)::value;
          run(backward_kernel_vec<__nv_bfloat16, KC, S, L>, backward_kernel_vec<float, KC, S, L>, tag, 2 * KC * kVec);
        });
      } else {
        with_per_lane(H, [&](auto per) {
          constexpr int P = decltype(per)::value;
          run(backward_kernel<__nv_bfloat16, P, S, L>, backward_kernel<float, P, S, L>, tag, 2 * P);
        });
      }
    });
  });
  return blocks;
}

const char* last_launch_error() {
  const cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? nullptr : cudaGetErrorString(e);
}

}  // namespace genemask::model::cuda
