#pragma once
// The launchers of cuda/column_sum.cu (raw pointers: the .cu sees no Torch headers): column
// sums of a row-major [rows, N] matrix in fp32, the bias gradient of a linear layer; and the
// same sums over the Q/K/V product's three output gradients, stacked into that matrix in the
// same pass.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "model/cuda/int_divider.hpp"
#include "model/cuda/launch.hpp"

namespace genemask::model::cuda {

/// The rows of column_sum's partial sums for a [rows, N] matrix: one per block along the
/// rows, from the shape alone (about 1024 blocks in all, at most one per 32 rows), so that
/// the sums' order is fixed by the shape, whatever the GPU.
int column_sum_row_blocks(int64_t rows, int N);

/// partial[b][j] = the sum over block b's rows of x[r][j], in fp32 (x bf16 when x_bf16, else
/// fp32); partial is [column_sum_row_blocks(rows, N), N] fp32, and the column sums are the
/// sums of its rows. Each thread adds its rows in order; 16-byte loads where N % 8 == 0 and x
/// is 16-byte aligned, and four rows' loads in flight per thread. Which rows each column's sum
/// takes, and in which order, comes from the shape alone: the same bits with 16-byte loads or
/// without.
void column_sum(bool x_bf16, const void* x, float* partial, int64_t rows, int N, cudaStream_t stream);

/// The Q/K/V product's three output gradients as the attention's backward leaves them: each a
/// [B, L, heads, head_dim] view (any strides in elements, the last one 1) of its own memory,
/// all of one dtype. Row r of the stack is (b, l) = (r / L, r % L), r / L by `by_L`
/// (IntDivider(L): rows and L below 2^31).
struct StackParts {
  const void* base[3];
  int64_t batch_stride[3], row_stride[3], head_stride[3];
  IntDivider by_L;
  int heads, head_dim;
};

/// Whether stack_column_sum's 16-byte path applies (else it runs one column per thread): every
/// part's base and `out` 16-byte aligned, head_dim and every stride multiples of 8.
bool stack_parts_vectorized(const StackParts& parts, const void* out);

/// out [rows, 3 H] (H = heads x head_dim; rows = B x L < 2^31) = the three parts side by side, each
/// row's Q, K, V in that order (what stacking them with LibTorch gives), and `partial` the
/// column sums of out exactly as column_sum(x_bf16, out, partial, rows, 3 H) would make them
/// (the same grid and order: the same bits), in one pass: the parts are read once and out
/// written once. NaN payloads are not kept (a NaN stays a NaN).
void stack_column_sum(bool x_bf16, const StackParts& parts, void* out, float* partial, int64_t rows,
                      cudaStream_t stream);

}  // namespace genemask::model::cuda
