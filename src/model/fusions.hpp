#pragma once
// Which of genemask's fused paths run, process-wide. All but bgrad by default (ln-smem,
// bias-sum, ce and ln-lean since 2026-11-30, when an H200 ran their tests and timed them: the
// four together +4.4% on the dnabert graph step at batch 64, +8.7% on logo's at 256;
// docs/benchmarks.md):
//   qkv      Q, K and V as one product of the stacked weights (every device);
//   ln       dropout + residual add + LayerNorm as one GPU kernel each way
//            (residual_layer_norm.hpp; the CPU keeps LibTorch's kernels);
//   ln-bf16  under bf16 autocast, that kernel also writes the bf16 copy of its output that
//            the next matrix product reads, and sums the copy's gradient with the output's
//            in its backward (fused_residual_layer_norm_with_copy). On since a GPU run checked
//            and timed it (+6.7% dnabert, +4.3% logo; docs/benchmarks.md); on the CPU (or
//            with ln off) the copy is the cast autocast would make, so the numbers are the
//            same either way.
//   gelu     the feed-forward's bias add and erf-GELU as one GPU kernel each way after a
//            bias-free product, its backward summing the bias's gradient in the same pass
//            (bias_gelu.hpp; the CPU keeps the product's bias and LibTorch's GELU). On since
//            a GPU run checked and timed it (+1.0% dnabert, +1.8% logo); it changes the
//            numbers, so a checkpoint records it, and a run resumed without GENEMASK_FUSED
//            keeps what its checkpoint recorded (trainer.cpp's adopt_run_fusions).
//   bgrad    on a GPU under bf16, the linear layers' bias gradients summed in the epilogue
//            of their weight-gradient product (cuBLASLt's BGRADB; linear_bgrad.hpp), the
//            weight's gradient out of that product in fp32. Off by default: checked on a
//            GPU, it gained nothing measurable (dnabert +0.2%, logo -2%; docs/benchmarks.md);
//            kept for its fp32 weight gradients. It changes the numbers (recorded, like gelu).
//   cpu-bias on the CPU under bf16, the linear layers' bias added in the epilogue of oneDNN's
//            product (linear_cpu.hpp) instead of copied into the output that the product
//            then reads back (ATen's addmm): the same numbers, two passes over the output
//            fewer (+2-5% on the packed bf16 logo step of an AMX Xeon; docs/benchmarks.md).
//   ln-smem  with ln on a GPU, its backward kernel sums gamma's and beta's gradients in shared
//            memory (one slot per warp and column) instead of registers: at BERT's H = 768 the
//            register sums hold the kernel to 144 registers a thread, one block of 8 warps per
//            SM; in shared memory, 96 registers and 5 blocks of 4 warps, on a grid of as many
//            blocks as fit the GPU at once (cuda/residual_layer_norm.cu). Only above H = 256
//            (LOGO's 256 keeps the register sums, which leave more warps there). On by default
//            since the H200 run (+1.8% dnabert alone). It sums
//            the gradients of gamma and beta in another grouping, so it changes their rounding
//            (recorded, like gelu); the other gradients keep their bits.
//   bias-sum on a GPU under bf16, the linear layers' bias gradients summed by genemask's own
//            column-sum kernel in fp32 (cuda/column_sum.cu, four rows' loads in flight per
//            thread) instead of ATen's reduction, which the last H200 profile put at 2.6 ms of
//            a 54 ms dnabert step for about 3 GB read (about a quarter of the bandwidth); the
//            weight's gradient stays the eager bf16 product (linear_bgrad.hpp). For the
//            Q/K/V product the same kernel also stacks the three output gradients in the pass
//            that sums them (qkv_linear.hpp; the same bits as LibTorch's stack and then the
//            sums). bgrad, when on too, takes precedence. On by default since the H200 run
//            (+2.2% dnabert alone). It changes the bias gradients' rounding (recorded, like
//            gelu).
//   ce       on a GPU, the MLM loss over the decoder's logits as one kernel each way
//            (cross_entropy.hpp): each row's log-sum-exp from the logits in their own dtype
//            (bf16 under autocast) and, backward, their gradient in that dtype, instead of
//            LibTorch's fp32 copy, log-softmax and dense NLL gradient (about 2.9 GB a step at
//            logo 256 x 512, whose vocabulary of 4101 is 16 times its hidden size). On by
//            default since the H200 run (+5.6% logo alone). It sums each row in another order
//            (recorded, like gelu).
//   weight-bf16  under bf16 autocast in `pretrain` (and train_bench), the bf16 copies of the
//            weights and biases that the matrix products read kept between steps and made
//            again once per optimizer step (weight_copies.hpp), instead of autocast's cast of
//            every weight in every micro-batch's forward pass (and, for the Q/K/V product, of
//            the concatenated weights). The copies are those casts' values and pass the
//            gradients back as the casts do, so a step computes the same bits either way
//            (checked on the CPU in CI), and a checkpoint does not record it.
//   ln-lean  with ln on a GPU, the fused LayerNorm's forward saves neither the pre-norm sum
//            (4 bytes an element) nor a keep byte per element, only the dropout mask's bits
//            (cuda/keep_bits.hpp), and its backward computes the sum again from h and the
//            residual, which it keeps instead (6 bytes read): by the bytes 34 down to about 30
//            an element over the two kernels, most of it off the forward. The sum is computed
//            with the forward's very arithmetic (each rounding explicit), so a step computes
//            the same bits either way and a checkpoint does not record it. On by default since
//            the H200 run (+1.4% dnabert alone).
//   ce-pad   on a GPU, the MLM loss's decoder product made over its classes padded with zero
//            rows of weight and bias to a multiple of 8 (the vocabulary's 4101 to 4104), the
//            loss reading each row's 4101 real columns (the fused kernel with a row stride,
//            cross_entropy.hpp; LibTorch's composition on their view): cuBLAS has no aligned
//            kernel for a row of 4101 bf16 values, and the H200 profile of 2026-12-01 put its
//            Turing-era unaligned kernels (cutlass_75 ... align1, about 75 TFLOP/s) at 1.2 ms
//            of the 15.3 ms `logo` step. The padding's logits are 0 and no class; its weight
//            and bias gradients are dropped. Off by default until a GPU run has checked and
//            timed it (the kernels' row stride is tested on a GPU only); another product kernel
//            may round the logits otherwise (recorded, like gelu).
//   cudnn-varlen  on a GPU, packed rows' attention (bert.hpp's packed_attention) by cuDNN's
//            SDPA over ragged segments instead of flash attention's varlen kernel: the H200
//            profile of 2026-12-01 put flash's varlen (Ampere's kernels) at about half the
//            throughput of cuDNN's Hopper kernels on the padded batches. Through cuDNN's
//            frontend with genemask's own graph cache (cudnn_attention.hpp: LibTorch 2.11's
//            ragged path plans a new cuDNN graph on every call), reading Q, K and V where the
//            product wrote them. Off by default until a GPU run has checked and timed it; it
//            changes the numbers (another kernel, its own dropout draws: recorded, like gelu).
//            Where cuDNN cannot build its graph, flash attention's kernels run (said once).
//   gemm-gelu  on a Hopper GPU (compute capability 9.0) under bf16, the feed-forward as one
//            node whose products carry the elementwise work in their epilogues
//            (feed_forward.hpp; CUTLASS kernels, cuda/gemm_gelu.cu): the first adds the bias
//            and applies the erf-GELU as it stores, keeping the pre-activation for the
//            backward; the backward's product that makes GELU's output gradient multiplies it
//            by GELU's derivative and sums the bias's gradient as it stores. That takes the
//            separate bias + GELU kernels' passes over the 4H-wide activations (an H200's
//            kernel_bench put them at 2.65 ms of `logo`'s 15.1 ms step at 256, 4.1 of
//            `dnabert`'s 51.4 at 64) down to the epilogues' extra reads and writes. Elsewhere
//            (another GPU, the CPU, fp32, a build without CUTLASS) the separate nodes run.
//            Off by default until a GPU run has checked and timed it; it changes the numbers
//            (GELU from the fp32 accumulator: recorded, like gelu).
// The environment variable GENEMASK_FUSED chooses others: a comma-separated list of
// "qkv", "ln", "ln-bf16", "gelu", "bgrad", "cpu-bias", "ln-smem", "bias-sum", "ce",
// "weight-bf16", "ln-lean", "ce-pad", "cudnn-varlen" and "gemm-gelu", or "none" (to compare with the unfused step, or to rule
// a fused kernel out when a result looks wrong). train_bench's --unfused-qkv, --unfused-ln,
// --no-ln-bf16, --no-fused-gelu, --bgrad, --no-cpu-bias, --ln-smem, --bias-sum, --fused-ce,
// --no-weight-bf16, --ln-lean, --no-ce-pad, --cudnn-varlen and --gemm-gelu set them instead (their defaults:
// GENEMASK_FUSED's, where set).
#include <string>

#include "model/cuda/rows_in_flight.hpp"

namespace genemask::model {

struct Fusions {
  bool qkv = true, ln = true, ln_bf16 = true, gelu = true, bgrad = false, cpu_bias = true, ln_smem = true,
       bias_sum = true, ce = true, weight_bf16 = true, ln_lean = true, ce_pad = false,
       cudnn_varlen = false, gemm_gelu = false;
};

/// The fusions in force: GENEMASK_FUSED's (read once; a value that is not such a list is an
/// std::invalid_argument naming the variable and the value), or what set_fusions set.
Fusions fusions();
void set_fusions(Fusions f);
/// GENEMASK_FUSED's text as a Fusions (exposed for the tests).
Fusions parse_fusions(const std::string& text);
/// The fusions' names as GENEMASK_FUSED spells them, for messages: "qkv, ln, ..., bias-sum and
/// ce", every one, or (numeric_only) those numeric_fusions can list.
std::string fusion_names(bool numeric_only);
/// The fusions among f that change a step's numbers, as GENEMASK_FUSED spells them (those of
/// "qkv,ln,gelu,bgrad,ln-smem,bias-sum,ce,ce-pad,cudnn-varlen,gemm-gelu" in force, in that order, or
/// "none"): qkv (another
/// product's rounding), ln (on a GPU, its own dropout draws and rounding), gelu (on a GPU, the
/// bias added and its gradient summed in fp32), bgrad (on a GPU, the linear layers' weight and
/// bias gradients in fp32), ln-smem (on a GPU, gamma's and beta's gradients summed in another
/// grouping), bias-sum (on a GPU, the linear layers' bias gradients summed in fp32), ce
/// (on a GPU, each row's log-sum-exp in another order), ce-pad (on a GPU, the decoder's
/// product by another kernel), cudnn-varlen (on a GPU, packed attention by another kernel
/// with its own dropout draws) and gemm-gelu (on a Hopper GPU, GELU from the product's fp32
/// accumulator, its derivative and the bias's gradient in the products' epilogues). ln-bf16, cpu-bias and weight-bf16 are
/// not among them, nor is ln-lean: ln-bf16's copy is the cast autocast would make, cpu-bias
/// computes what ATen's addmm computes, weight-bf16's copies are the casts autocast would
/// make, and ln-lean's sum is the one the forward computed.
/// A checkpoint records it, so that --resume does not continue a run with other numbers.
std::string numeric_fusions(const Fusions& f);
/// `base` with the fusions that change the numbers taken from `numeric` (what --resume adopts
/// from a checkpoint: the others, ln-bf16, cpu-bias, weight-bf16 and ln-lean, stay `base`'s).
Fusions with_numeric_of(Fusions base, const Fusions& numeric);

/// How the fused bias + GELU's kernels run, which is not what they compute (every choice gives
/// the same bits, so a checkpoint does not record it): the rows in flight, 1, 2 or 4
/// (cuda/rows_in_flight.hpp), cuda::kBiasGeluRowsInFlight unless set_gelu_rows_in_flight set
/// another (train_bench's --gelu-rows, to time a choice in the whole step). The setter throws
/// std::invalid_argument for another count, as check_gelu_rows_in_flight does (which the fused
/// node's own entry calls too).
int gelu_rows_in_flight();
void set_gelu_rows_in_flight(int rows);
void check_gelu_rows_in_flight(int rows);

}  // namespace genemask::model
