#pragma once
// Packed sequences (`pretrain --packing on`): the samples of a micro-batch placed several to
// a row of the model's width instead of one per row padded to the longest. With samples of
// 5-510 tokens (uniform, as the shards' recipe draws them) a padded batch spends about half
// of its positions on [PAD]; packed, the rows are nearly full. Attention stays within each
// sample (model/bert.hpp: blocked per sample), positions restart at 0 for each sample, and
// each sample's mask and labels are the loader's, so the loss is the same sum over the same
// masked tokens. Torch-free.
#include <cstdint>
#include <vector>

#include "genemask/corpus/loader.hpp"

namespace genemask::model {

struct PackedBatch {
  int64_t rows = 0, cols = 0;  // cols: the fullest row's positions (<= the width packed to)
  std::vector<int64_t> input_ids, position_ids, labels;  // rows x cols; [PAD] = 0, -100 where unmasked
  /// Segment boundaries over the rows x cols positions read row after row: 0, ..., rows x cols.
  /// Every sample is one segment, and so is each row's run of padding after its last sample;
  /// every row starts a segment. Attention never crosses a boundary.
  std::vector<int64_t> cu_seqlens;
  /// Per segment: the sample's row in the unpacked batch, or -1 for a padding run.
  std::vector<int64_t> segment_sample;
  int64_t max_seqlen = 0;  // the longest segment
  uint64_t real_tokens = 0;
  /// Where each position of the unpacked batch went: flat packed index (row x cols + col),
  /// or -1 for its padding. Lets tests and the first-batch dump map one layout onto the other.
  std::vector<int64_t> packed_index;
};

/// Packs `b` into rows of at most `width` positions: first-fit by decreasing length (ties in
/// the batch's order), so the same batch always packs the same way. Each sample's real
/// positions ([CLS] ... [SEP], the loader's attention mask, a prefix of its row) move as one
/// piece. Throws std::invalid_argument when a sample is longer than `width` or a row's mask is
/// not a prefix.
PackedBatch pack_batch(const Batch& b, int64_t width);

/// First fit by decreasing length (ties in the given order): the samples (indices into
/// `lengths`) of each row of `width` positions, rows in the order opened. Zero lengths are
/// left out; a length over `width` throws std::invalid_argument. pack_batch's placement.
std::vector<std::vector<int64_t>> first_fit(const std::vector<int64_t>& lengths, int64_t width);

/// `b` as `--packing off` lays it out, written as segments: each sample alone in its row
/// (its real positions, then the row's padding as a segment of its own), positions 0, 1, ...
/// per sample and per padding run. The same rows, ids and labels as `b`.
PackedBatch one_per_row(const Batch& b);

/// `p` laid into exactly `rows` x `cols` positions, the fixed shape a CUDA graph of the step
/// reads (`pretrain --cuda-graphs`, model/graph_step.hpp): p's rows first, then rows of
/// padding; each row's samples keep their columns, and everything after a row's last sample
/// is one padding segment to the row's end. So every segment is non-empty, and there are
/// at most (samples + rows) of them: each sample, and each row's padding run.
/// `packed_index` and `cu_seqlens` refer to the new layout. Throws std::invalid_argument
/// when p has more rows or columns than that.
PackedBatch widen(const PackedBatch& p, int64_t rows, int64_t cols);

/// `--packing`: "on" or "off" (anything else is an error naming the option).
bool parse_packing(const std::string& value);

}  // namespace genemask::model
