#pragma once
// Element loads and stores shared by genemask's CUDA kernels: one element, or 8 at a time
// (16-byte loads and stores; the pointer must be 16-byte aligned), fp32 or bf16 in memory,
// fp32 in registers (bf16 stores round to nearest); and the warp's reductions.
#include <cuda_bf16.h>

#include <cstdint>
#include <initializer_list>

#include "model/cuda/launch.hpp"

namespace genemask::model::cuda {

constexpr int kVec = 8;

/// Whether the 8-element loads and stores apply: whole chunks of H and 16-byte aligned pointers
/// (then every row and chunk is aligned too). Host side, before a launch.
inline bool vectorized(int H, std::initializer_list<const void*> pointers) {
  if (H % kVec != 0) return false;
  for (const void* q : pointers)
    if (!aligned16(q)) return false;
  return true;
}

__device__ __forceinline__ float load(const float* p, int64_t i) { return p[i]; }
__device__ __forceinline__ float load(const __nv_bfloat16* p, int64_t i) { return __bfloat162float(p[i]); }
__device__ __forceinline__ void store(float* p, int64_t i, float v) { p[i] = v; }
__device__ __forceinline__ void store(__nv_bfloat16* p, int64_t i, float v) { p[i] = __float2bfloat16(v); }

__device__ __forceinline__ void load8(const float* p, float* v) {
  const float4 a = reinterpret_cast<const float4*>(p)[0], b = reinterpret_cast<const float4*>(p)[1];
  v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
}
__device__ __forceinline__ void load8(const __nv_bfloat16* p, float* v) {
  const uint4 raw = *reinterpret_cast<const uint4*>(p);
  const __nv_bfloat162* h2 = reinterpret_cast<const __nv_bfloat162*>(&raw);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 f = __bfloat1622float2(h2[i]);
    v[2 * i] = f.x, v[2 * i + 1] = f.y;
  }
}
__device__ __forceinline__ void store8(float* p, const float* v) {
  reinterpret_cast<float4*>(p)[0] = make_float4(v[0], v[1], v[2], v[3]);
  reinterpret_cast<float4*>(p)[1] = make_float4(v[4], v[5], v[6], v[7]);
}
__device__ __forceinline__ void store8(__nv_bfloat16* p, const float* v) {
  uint4 raw;
  __nv_bfloat162* h2 = reinterpret_cast<__nv_bfloat162*>(&raw);
#pragma unroll
  for (int i = 0; i < 4; ++i) h2[i] = __floats2bfloat162_rn(v[2 * i], v[2 * i + 1]);
  *reinterpret_cast<uint4*>(p) = raw;
}

/// V consecutive elements (V = 8: load8's alignment; V = 1: any).
template <int V, typename T>
__device__ __forceinline__ void load_n(const T* p, float* v) {
  if constexpr (V == kVec) {
    load8(p, v);
  } else {
#pragma unroll
    for (int e = 0; e < V; ++e) v[e] = load(p, e);
  }
}
template <int V, typename T>
__device__ __forceinline__ void store_n(T* p, const float* v) {
  if constexpr (V == kVec) {
    store8(p, v);
  } else {
#pragma unroll
    for (int e = 0; e < V; ++e) store(p, e, v[e]);
  }
}

struct Max {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
struct Sum {
  __device__ float operator()(float a, float b) const { return a + b; }
};

/// The warp's reduction of v by op (Max or Sum), in every lane: xor shuffles at distances 16,
/// 8, 4, 2, 1, so every lane combines the same values in the same grouping (the same bits in
/// each lane, and for the same inputs).
template <typename Op>
__device__ __forceinline__ float warp_reduce(float v, Op op) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ float warp_sum(float v) { return warp_reduce(v, Sum{}); }

}  // namespace genemask::model::cuda
