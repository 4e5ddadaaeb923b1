#pragma once
// n / d for a divisor d fixed before a kernel runs, by a multiply-high, an add and a shift
// instead of a division, which a GPU computes in a long sequence of instructions (longer for
// 64 bits): the method of Granlund and Montgomery ("Division by invariant integers using
// multiplication", 1994), in the form LibTorch's IntDivider uses. Exact for 1 <= d < 2^31 and
// 0 <= n < 2^31. Host and device: the host sets it up (and the tests check it there, with the
// very arithmetic of the device).
#include <cstdint>

#include "model/cuda/host_device.hpp"

namespace genemask::model::cuda {

struct IntDivider {
  uint32_t d = 1, magic = 1;
  uint32_t shift = 0;
  IntDivider() = default;
  /// d in [1, 2^31): the caller checks.
  explicit IntDivider(uint32_t divisor) : d(divisor) {
    while (shift < 32 && (uint64_t{1} << shift) < d) ++shift;  // ceil(log2 d)
    // floor(2^32 (2^shift - d) / d) + 1: below 2^32 for every d < 2^31 (1 for powers of two).
    magic = static_cast<uint32_t>(((uint64_t{1} << 32) * ((uint64_t{1} << shift) - d)) / d + 1);
  }
  /// n / d for n in [0, 2^31).
  GENEMASK_HOST_DEVICE uint32_t div(uint32_t n) const {
#if defined(__CUDA_ARCH__)
    const uint32_t t = __umulhi(n, magic);
#else
    const uint32_t t = static_cast<uint32_t>((static_cast<uint64_t>(n) * magic) >> 32);
#endif
    return (t + n) >> shift;  // t <= n < 2^31: the sum fits 32 bits
  }
};

}  // namespace genemask::model::cuda
