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

/// The buffer for `batch_rows` samples of up to `tokens_per_row` tokens of which at most a
/// `max_fraction` is masked: batch_rows x ceil(tokens_per_row x max_fraction), at least 1.
int64_t masked_rows_capacity(int64_t batch_rows, int64_t tokens_per_row, double max_fraction);

}  // namespace genemask::model
