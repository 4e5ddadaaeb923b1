#pragma once
// The launchers of cuda/residual_layer_norm.cu (raw pointers: the .cu sees no Torch headers
// beyond ATen's Philox state). Every pointer is device memory, row-major [rows, H].
#include <ATen/cuda/PhiloxCudaState.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "model/cuda/keep_bits.hpp"
#include "model/cuda/launch.hpp"
#include "model/cuda/smem_sum_slots.hpp"

namespace genemask::model::cuda {

constexpr int kMaxHidden = 1024;
/// 32-bit random numbers each (row, lane) draws, for either kernel: its share of a row (in
/// whole 8-element chunks for the vectorised one), rounded up to Philox's 4.
inline uint64_t philox_increment(int H) {
  const int scalar = ((H + 31) / 32 + 3) / 4 * 4, chunks = (H / 8 + 31) / 32 * 8;
  return static_cast<uint64_t>(scalar > chunks ? scalar : chunks);
}
/// The most blocks the backward kernel takes for `rows` rows: the rows `partial` must have.
/// smem_sums: gamma's and beta's sums in shared memory (fusions.hpp's ln-smem where
/// takes_smem_sums says so), else in registers.
int backward_partial_rows(int64_t rows, bool smem_sums);

/// h_bf16: h is bf16 (else fp32). y_low: bf16, y rounded to nearest, written in the same pass
/// when not null. keep, written when p > 0 (else unused): a byte per element, or with `lean`
/// (fusions.hpp's ln-lean) the bits of keep_bits.hpp, [rows, keep_bytes_per_row(H)]. sum: the
/// pre-norm sum, written unless `lean` (then unused: null).
void residual_layer_norm_forward(bool h_bf16, const void* h, const float* residual, const float* gamma,
                                 const float* beta, float* y, void* y_low, float* sum, uint8_t* keep, float* mean,
                                 float* rstd, int64_t rows, int H, float p, float eps, at::PhiloxCudaState philox,
                                 bool lean, cudaStream_t stream);
/// y's gradient is dy (fp32) + dy_low (bf16, y_low's), summed in registers; either may be null
/// (no gradient). The pre-norm sum is `sum`, or with `lean` (sum null) the forward's h and
/// residual with the keep bits (h and residual null otherwise); keep as the forward wrote it.
/// dh in h's dtype; partial: [backward_partial_rows(rows, smem_sums), 2, H] fp32, of which the
/// kernel writes the first `blocks` rows (gamma's then beta's sums per block); returns `blocks`.
/// The same inputs on the same GPU give the same blocks and bits, and `lean` the same bits as
/// not.
int residual_layer_norm_backward(bool h_bf16, const float* dy, const void* dy_low, const float* sum, const void* h,
                                 const float* residual, const uint8_t* keep, const float* mean, const float* rstd,
                                 const float* gamma, void* dh, float* d_residual, float* partial, int64_t rows, int H,
                                 float p, bool smem_sums, bool lean, cudaStream_t stream);

}  // namespace genemask::model::cuda
