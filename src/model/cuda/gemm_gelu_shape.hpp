#pragma once
// The shapes the feed-forward's fused products take (cuda/gemm_gelu_kernels.hpp), in a header
// without CUDA's: the tests check the rule in every build.
#include <cstdint>

namespace genemask::model::cuda {

/// N (the intermediate width) and K (the hidden width) multiples of 8 (16-byte rows of bf16),
/// rows >= 1, each below 2^31 (CUTLASS's problem shape is int).
inline bool gemm_gelu_shape_supported(int64_t rows, int64_t N, int64_t K) {
  constexpr int64_t kMax = (int64_t{1} << 31) - 1;
  return rows >= 1 && N >= 8 && K >= 8 && N % 8 == 0 && K % 8 == 0 && rows < kMax && N < kMax && K < kMax;
}

}  // namespace genemask::model::cuda
