#pragma once
// LayerNorm(dropout(h) + residual) as one autograd node: BERT's "dense + dropout + add &
// norm" (HF's BertSelfOutput and BertOutput) after the dense product. On a GPU one kernel
// forward (dropout drawn from the default CUDA generator, the sum, its mean and variance,
// the normalised output) and one backward (the LayerNorm's input gradient, the residual's
// and the dense output's gradients, gamma's and beta's per block); the eager composition
// runs 5 kernels forward and about 8 backward, with a cast between bf16 and fp32 on each
// side of the add. The CPU keeps the eager composition.
//
// What it computes is the eager composition's: y = LayerNorm(residual + dropout(h)) with
// y in fp32 (as autocast runs LayerNorm), h in bf16 or fp32, and dropout with keep
// probability 1 - p and scale 1 / (1 - p). Its random draws are its own (Philox from the
// CUDA generator's seed and offset, so graph-safe, reproducible under torch::manual_seed
// and restored with the generator state a checkpoint saves), not at::dropout's.
//
// What the node keeps for its backward: the pre-norm sum and a keep byte per element, or,
// with fusions().ln_lean (fusions.hpp's ln-lean), h, the residual and the keep mask's bits,
// from which the backward kernel computes the sum again with the forward's own roundings:
// the same bits either way, fewer bytes moved (read at the forward, so a node made under
// one setting keeps it for its backward).
#include <torch/torch.h>

#include <utility>

namespace genemask::model {

/// BERT's residual outputs use the node where fusions().ln (fusions.hpp) and it takes their
/// inputs. Whether the fused node takes these inputs: a CUDA build, h on a GPU in bf16 or fp32,
/// residual, gamma and beta fp32 on the same GPU, hidden size (last dimension) <= 1024.
bool fused_residual_layer_norm_takes(const torch::Tensor& h, const torch::Tensor& residual, const torch::Tensor& gamma);

/// y = LayerNorm(residual + dropout(h, p)) (gamma, beta, eps), differentiable in h,
/// residual, gamma and beta. p = 0 (or evaluation) is no dropout.
torch::Tensor fused_residual_layer_norm(const torch::Tensor& h, const torch::Tensor& residual,
                                        const torch::Tensor& gamma, const torch::Tensor& beta, double p, double eps);

/// The same y (fp32) and, written by the same kernel, y in bf16 (rounded to nearest, as
/// y.to(bf16)): under bf16 autocast the copy the next matrix product reads, where autocast
/// would cast y in a kernel of its own. Both are differentiable: the backward kernel sums the
/// two gradients (y's fp32 and the copy's bf16) in registers, which spares the copy's
/// gradient its cast to fp32 and the separate sum of the two. Either output may go unused.
std::pair<torch::Tensor, torch::Tensor> fused_residual_layer_norm_with_copy(const torch::Tensor& h,
                                                                            const torch::Tensor& residual,
                                                                            const torch::Tensor& gamma,
                                                                            const torch::Tensor& beta, double p,
                                                                            double eps);

}  // namespace genemask::model
