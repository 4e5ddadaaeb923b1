#pragma once
// Where the residual LayerNorm's backward kernel (cuda/residual_layer_norm.cu, with
// fusions.hpp's ln-smem) keeps its sums of gamma's and beta's gradients in shared memory, on
// 8-element chunks. Plain C++ as well as CUDA, so that the CPU tests check the layout.
#include "model/cuda/host_device.hpp"

namespace genemask::model::cuda {

/// Whether the backward kernel sums in shared memory when ln-smem asks it to: only above
/// H = 256, where the register sums cost occupancy (at H <= 256, 58 registers a thread leave
/// 32 warps per SM, against 28 with shared-memory sums: docs/benchmarks.md).
constexpr int kSmemSumsMinHidden = 257;
inline bool takes_smem_sums(int H, bool asked) { return asked && H >= kSmemSumsMinHidden; }

/// Warp `warp` of W sums gamma's (which = 0) or beta's (1) gradient of chunk c (of C = H / 8)
/// in four float4 slots, the chunk's first and second four columns (half = 0, 1): float4
/// slot (which, warp, half, c), so that the 8 lanes of a quarter-warp, on consecutive chunks,
/// touch 8 consecutive float4s (no shared-memory bank conflicts); 2 x W x H floats in all.
GENEMASK_HOST_DEVICE constexpr int smem_sum_slot4(int which, int warp, int half, int c, int C, int W) {
  return ((which * W + warp) * 2 + half) * C + c;
}
/// The float of column j (= 8 c + 4 half + i) in those slots.
GENEMASK_HOST_DEVICE constexpr int smem_sum_float(int which, int warp, int j, int C, int W) {
  return smem_sum_slot4(which, warp, (j % 8) / 4, j / 8, C, W) * 4 + j % 4;
}

}  // namespace genemask::model::cuda
