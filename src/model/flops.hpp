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
/// reports ("NVIDIA H100 80GB HBM3", "NVIDIA H200", "NVIDIA A100-SXM4-80GB", ...): H100 SXM
/// and H200 989, H100 PCIe 756, H100 NVL 835, A100 312; 0 for a GPU not in the table
/// (printed as "unknown").
double datasheet_bf16_tflops(const std::string& gpu_name);

/// achieved / peak, or a negative number when the peak is unknown (0).
double mfu(double achieved_tflops, double peak_tflops);

}  // namespace genemask::model
