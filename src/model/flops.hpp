#pragma once
// One definition of model FLOPs and MFU for every figure genemask prints (train_bench,
// gpu-check.sh, pretrain's summary and metrics, the docs). No Torch: plain arithmetic.
//
// Model FLOPs of one training step (forward + backward = 3 x forward, 2 FLOPs per
// multiply-add), over the real (non-pad) tokens only:
//   6 x (matrix-product parameters of the encoder) per real token
//     (per layer 4 H^2 for Q, K, V and the attention output, 2 H F for the feed-forward)
// + 12 x layers x H x sum over samples of length^2
//     (scores and context: 4 l H per token of a sample of l tokens, forward)
// + 6 x (H^2 + H V) per masked row (the MLM head: transform and decoder, which genemask
//     runs on the masked rows only).
// Embedding look-ups, normalisation and elementwise work are not model FLOPs.
#include <cstdint>
#include <string>
#include <vector>

namespace genemask::model {

struct ModelShape {
  int64_t layers = 0, hidden = 0, ffn = 0, vocab = 0;
};

/// The matrix-product parameters of the encoder: layers x (4 H^2 + 2 H F).
double matrix_parameters(const ModelShape& m);

/// Model FLOPs of one training step over `real_tokens` real tokens whose samples' lengths
/// squared sum to `sum_len_sq` (for B unpadded samples of L tokens: B L^2), with `masked`
/// rows through the MLM head.
double training_flops(const ModelShape& m, double real_tokens, double sum_len_sq, double masked);

/// The dense bf16 matrix peak of a GPU from its datasheet, in TFLOP/s, by the name CUDA
/// reports ("NVIDIA H100 80GB HBM3", "NVIDIA H200", "NVIDIA A100-SXM4-80GB", ...): H100 SXM,
/// H200 SXM and GH200 989, H100 NVL and H200 NVL 835, H100 PCIe 756, A100 312 (half the
/// datasheets' "with sparsity" figures); 0 for a GPU not in the table and for a MIG slice
/// ("... MIG 1g.10gb", a share of a GPU no datasheet gives), printed as "unknown".
double datasheet_bf16_tflops(const std::string& gpu_name);

/// The datasheet peak of a run's GPUs, in TFLOP/s: rank i runs on the GPU `gpus[i]` (its host
/// and identity, e.g. "node1 GPU-8f6b..."), whose peak is `peaks[i]`. Each GPU counts once
/// however many ranks share it. 0 (unknown: no MFU) when any rank's peak is 0 or its GPU is
/// "" (a rank on the CPU), or the lists' lengths differ. Pure.
double run_peak_tflops(const std::vector<std::string>& gpus, const std::vector<double>& peaks);

/// achieved / peak, or a negative number when the peak is unknown (0).
double mfu(double achieved_tflops, double peak_tflops);

}  // namespace genemask::model
