#pragma once
// What genemask's kernel launchers share (no CUDA headers needed to include it).
#include <stdexcept>
#include <string>

namespace genemask::model::cuda {

/// The last CUDA error as text, or nullptr (checked after each launch; cudaGetLastError,
/// which also clears it). Defined in cuda/residual_layer_norm.cu.
const char* last_launch_error();

/// After a launch: a CUDA error, if any, as std::runtime_error naming the kernel and the step
/// ("fused bias + GELU (backward): CUDA error: ...").
inline void check_launch(const char* kernel, const char* what) {
  if (const char* e = last_launch_error())
    throw std::runtime_error(std::string(kernel) + " (" + what + "): CUDA error: " + e);
}

/// A 16-byte aligned pointer (the 8-element loads and stores need one).
inline bool aligned16(const void* p) { return reinterpret_cast<unsigned long long>(p) % 16 == 0; }

}  // namespace genemask::model::cuda
