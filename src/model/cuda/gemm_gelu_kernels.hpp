#pragma once
// The feed-forward's first product with the bias and erf-GELU in its epilogue, and the second
// product's input gradient with GELU's derivative and the bias gradient in its epilogue
// (cuda/gemm_gelu.cu, CUTLASS 3 kernels for Hopper: sm_90a). Raw pointers: the .cu sees no
// Torch headers. Every pointer is device memory, bf16 unless named fp32; matrices row-major.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "model/cuda/gemm_gelu_shape.hpp"

namespace genemask::model::cuda {

/// The kernels' schedules: `cooperative` (two warp groups on each 128 x 128 tile; the one the
/// model's node runs) and `pingpong` (two warp groups on alternate 64 x 128 tiles, one's
/// epilogue beside the other's products), which kernel_bench times beside it. The bias
/// gradient's sums follow the tiles, so the two give it other roundings.
enum class GemmGeluKernel { cooperative, pingpong };

/// Whether this build holds the kernels (CUTLASS's headers found, sm_90a compiled). Where not,
/// every call below returns false and launches nothing.
bool gemm_gelu_built();


/// Whether CUTLASS takes the node's two products (the cooperative schedule) at these sizes:
/// the forward's [rows, K] x [N, K]ᵀ and the backward's [rows, H] x [H, N] (a host check of the
/// shapes, nothing launched). False without the kernels.
bool gemm_gelu_can_implement(int64_t rows, int64_t N, int64_t K, int64_t H);

/// Forward: z = x [rows, K] · w [N, K]ᵀ + bias [N] (fp32), accumulated in fp32; aux = z and
/// y = GELU(z) (erf form, in fp32), both [rows, N] rounded to bf16 once. `workspace` holds at
/// least gemm_bias_gelu_workspace(...) bytes (for the same sizes, GPU and sm_count: its
/// multiprocessors). False, nothing launched, where the kernel cannot
/// take the shape or pointers (16-byte alignment) or the build has none.
size_t gemm_bias_gelu_workspace(int64_t rows, int64_t N, int64_t K, int sm_count,
                                GemmGeluKernel kernel = GemmGeluKernel::cooperative);
bool gemm_bias_gelu(const void* x, const void* w, const float* bias, void* y, void* aux, int64_t rows, int64_t N,
                    int64_t K, void* workspace, int sm_count, cudaStream_t stream,
                    GemmGeluKernel kernel = GemmGeluKernel::cooperative);

/// Backward: dz = (dy [rows, H] · w2 [H, N]) ⊙ GELU'(aux) [rows, N] (the forward's z), in fp32,
/// rounded to bf16 once; dbias [N] (fp32) = the column sums of dz before rounding, summed in an
/// order fixed by the shape (per tile, then the tiles in order: the same bits every call).
/// `workspace` as above, with gemm_dgelu_workspace(...) bytes.
size_t gemm_dgelu_workspace(int64_t rows, int64_t N, int64_t H, int sm_count,
                            GemmGeluKernel kernel = GemmGeluKernel::cooperative);
bool gemm_dgelu(const void* dy, const void* w2, const void* aux, void* dz, float* dbias, int64_t rows, int64_t N,
                int64_t H, void* workspace, int sm_count, cudaStream_t stream,
                GemmGeluKernel kernel = GemmGeluKernel::cooperative);

}  // namespace genemask::model::cuda
