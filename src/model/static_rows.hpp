#pragma once
// The masked rows of a micro-batch in a buffer of fixed size, as a CUDA graph of the step
// needs (static shapes; MLPerf's "maximum predictions per sequence"): the decoder then runs
// on `capacity` rows whatever the batch masked, instead of a data-dependent index_select.
// The padding rows point at position 0 with target -100, which the summed cross-entropy of
// BertForMaskedLM::masked_lm_loss_sum ignores: their loss and their gradient are exactly 0,
// so the loss and every gradient equal the unpadded batch's.
#include <torch/torch.h>

#include <utility>

namespace genemask::model {

/// rows (flat positions) and targets padded to `capacity`; capacity >= rows.numel(), else
/// std::invalid_argument naming both (the caller then runs the step without the graph).
std::pair<torch::Tensor, torch::Tensor> pad_masked_rows(const torch::Tensor& rows, const torch::Tensor& targets,
                                                        int64_t capacity);

}  // namespace genemask::model
