#pragma once
// The launchers of cuda/bias_gelu.cu (raw pointers: the .cu sees no Torch headers). Every
// pointer is device memory; z, y, dy and dz are row-major [rows, H], bias is [H] fp32.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "model/cuda/launch.hpp"
#include "model/cuda/rows_in_flight.hpp"

namespace genemask::model::cuda {

/// The rows of the backward's partial bias sums for `rows` rows: one per block along the
/// rows (at most 128, whatever the GPU, so the sums' order is fixed by the shape).
int bias_gelu_row_blocks(int64_t rows);

/// y = GELU(z + bias), erf form, computed in fp32; z and y bf16 (z_bf16) or fp32. False, and
/// nothing launched, for rows_in_flight other than 1, 2 or 4.
bool bias_gelu_forward(bool z_bf16, const void* z, const float* bias, void* y, int64_t rows, int H,
                       cudaStream_t stream, int rows_in_flight = kBiasGeluRowsInFlight);
/// dz = dy * GELU'(z + bias), in z's dtype; partial: [bias_gelu_row_blocks(rows), H] fp32, each
/// row a block's column sums of dz (in fp32, before dz is rounded): bias's gradient is their sum.
/// False, and nothing launched, for rows_in_flight other than 1, 2 or 4.
bool bias_gelu_backward(bool z_bf16, const void* dy, const void* z, const float* bias, void* dz, float* partial,
                        int64_t rows, int H, cudaStream_t stream, int rows_in_flight = kBiasGeluRowsInFlight);

}  // namespace genemask::model::cuda
