#include "model/packing.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <string>

namespace genemask::model {

std::vector<std::vector<int64_t>> first_fit(const std::vector<int64_t>& lengths, int64_t width) {
  std::vector<int64_t> order(lengths.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t x, int64_t y) { return lengths[static_cast<size_t>(x)] > lengths[static_cast<size_t>(y)]; });
  // First fit: each sample into the first row with room for it.
  std::vector<std::vector<int64_t>> bins;
  std::vector<int64_t> fill;
  for (const int64_t s : order) {
    const int64_t n = lengths[static_cast<size_t>(s)];
    if (n == 0) continue;  // an empty row (none come from the loader) has nothing to place
    if (n > width)
      throw std::invalid_argument(
          fmt::format("packing: a sample of {} positions is longer than the rows of {} it is packed into", n, width));
    size_t k = 0;
    while (k < bins.size() && fill[k] + n > width) ++k;
    if (k == bins.size()) {
      bins.emplace_back();
      fill.push_back(0);
    }
    bins[k].push_back(s);
    fill[k] += n;
  }
  return bins;
}

namespace {

/// Each row's real positions: the prefix its attention mask marks; padding before a real
/// position is an error naming the row and the position.
std::vector<int64_t> row_lengths(const Batch& b) {
  const auto at = [&](int64_t r, int64_t c) { return static_cast<size_t>(r * b.cols + c); };
  std::vector<int64_t> len(static_cast<size_t>(b.rows), 0);
  for (int64_t r = 0; r < b.rows; ++r) {
    int64_t n = 0;
    while (n < b.cols && b.attention_mask[at(r, n)] != 0) ++n;
    for (int64_t c = n; c < b.cols; ++c)
      if (b.attention_mask[at(r, c)] != 0)
        throw std::invalid_argument(fmt::format("packing: row {} of the batch has padding before position {}", r, c));
    len[static_cast<size_t>(r)] = n;
  }
  return len;
}

}  // namespace

PackedBatch pack_batch(const Batch& b, int64_t width) {
  if (width < 1) throw std::invalid_argument(fmt::format("packing width {} must be positive", width));
  const auto at = [&](int64_t r, int64_t c) { return static_cast<size_t>(r * b.cols + c); };
  const std::vector<int64_t> len = row_lengths(b);
  const std::vector<std::vector<int64_t>> bins = first_fit(len, width);  // refuses a sample longer than the width
  std::vector<int64_t> fill;
  for (const auto& bin : bins) {
    int64_t f = 0;
    for (const int64_t s : bin) f += len[static_cast<size_t>(s)];
    fill.push_back(f);
  }
  PackedBatch p;
  p.rows = static_cast<int64_t>(bins.size());
  p.cols = fill.empty() ? 0 : *std::max_element(fill.begin(), fill.end());
  const auto cells = static_cast<size_t>(p.rows * p.cols);
  p.input_ids.assign(cells, 0);
  p.position_ids.assign(cells, 0);
  p.labels.assign(cells, kIgnoreLabel);
  p.packed_index.assign(static_cast<size_t>(b.rows * b.cols), -1);
  p.cu_seqlens.push_back(0);
  for (int64_t r = 0; r < p.rows; ++r) {
    int64_t c = 0;
    for (const int64_t s : bins[static_cast<size_t>(r)]) {
      const int64_t n = len[static_cast<size_t>(s)];
      for (int64_t j = 0; j < n; ++j) {
        const int64_t dst = r * p.cols + c + j;
        p.input_ids[static_cast<size_t>(dst)] = b.input_ids[at(s, j)];
        p.labels[static_cast<size_t>(dst)] = b.labels[at(s, j)];
        p.position_ids[static_cast<size_t>(dst)] = j;
        p.packed_index[at(s, j)] = dst;
      }
      c += n;
      p.cu_seqlens.push_back(r * p.cols + c);
      p.segment_sample.push_back(s);
      p.max_seqlen = std::max(p.max_seqlen, n);
      p.real_tokens += static_cast<uint64_t>(n);
    }
    if (c < p.cols) {  // the row's padding: a segment of its own, which no sample attends to
      for (int64_t j = c; j < p.cols; ++j) p.position_ids[static_cast<size_t>(r * p.cols + j)] = j - c;
      p.cu_seqlens.push_back((r + 1) * p.cols);
      p.segment_sample.push_back(-1);
      p.max_seqlen = std::max(p.max_seqlen, p.cols - c);
    }
  }
  return p;
}

PackedBatch one_per_row(const Batch& b) {
  PackedBatch p;
  p.rows = b.rows;
  p.cols = b.cols;
  const auto cells = static_cast<size_t>(b.rows * b.cols);
  p.input_ids = b.input_ids;
  p.labels = b.labels;
  p.position_ids.assign(cells, 0);
  p.packed_index.assign(cells, -1);
  p.cu_seqlens.push_back(0);
  const std::vector<int64_t> len = row_lengths(b);
  for (int64_t r = 0; r < b.rows; ++r) {
    const int64_t n = len[static_cast<size_t>(r)];
    for (int64_t c = 0; c < b.cols; ++c) {
      const auto i = static_cast<size_t>(r * b.cols + c);
      p.position_ids[i] = c < n ? c : c - n;
      if (c < n) p.packed_index[i] = static_cast<int64_t>(i);
    }
    if (n > 0) {
      p.cu_seqlens.push_back(r * b.cols + n);
      p.segment_sample.push_back(r);
      p.real_tokens += static_cast<uint64_t>(n);
    }
    if (n < b.cols) {
      p.cu_seqlens.push_back((r + 1) * b.cols);
      p.segment_sample.push_back(-1);
    }
    p.max_seqlen = std::max({p.max_seqlen, n, b.cols - n});
  }
  return p;
}

PackedBatch widen(const PackedBatch& p, int64_t rows, int64_t cols) {
  if (p.rows > rows || p.cols > cols)
    throw std::invalid_argument(fmt::format("packing: a batch of {} x {} positions does not fit the fixed {} x {}", p.rows,
                                            p.cols, rows, cols));
  PackedBatch w;
  w.rows = rows;
  w.cols = cols;
  const auto cells = static_cast<size_t>(rows * cols);
  w.input_ids.assign(cells, 0);
  w.position_ids.assign(cells, 0);
  w.labels.assign(cells, kIgnoreLabel);
  w.real_tokens = p.real_tokens;
  w.cu_seqlens.push_back(0);
  // Where each position of p went (p's own packed_index then maps through it).
  std::vector<int64_t> moved(static_cast<size_t>(p.rows * p.cols), -1);
  size_t seg = 0;
  for (int64_t r = 0; r < rows; ++r) {
    int64_t c = 0;  // the row's real positions so far
    while (r < p.rows && seg < p.segment_sample.size() && p.cu_seqlens[seg] < (r + 1) * p.cols) {
      const int64_t start = p.cu_seqlens[seg], end = p.cu_seqlens[seg + 1];
      if (p.segment_sample[seg] >= 0) {
        for (int64_t i = start; i < end; ++i) {
          const int64_t dst = r * cols + (i - r * p.cols);
          w.input_ids[static_cast<size_t>(dst)] = p.input_ids[static_cast<size_t>(i)];
          w.position_ids[static_cast<size_t>(dst)] = p.position_ids[static_cast<size_t>(i)];
          w.labels[static_cast<size_t>(dst)] = p.labels[static_cast<size_t>(i)];
          moved[static_cast<size_t>(i)] = dst;
        }
        c = end - r * p.cols;
        w.cu_seqlens.push_back(r * cols + c);
        w.segment_sample.push_back(p.segment_sample[seg]);
        w.max_seqlen = std::max(w.max_seqlen, end - start);
      }
      ++seg;
    }
    if (c < cols) {  // the rest of the row: one padding segment
      for (int64_t j = c; j < cols; ++j) w.position_ids[static_cast<size_t>(r * cols + j)] = j - c;
      w.cu_seqlens.push_back((r + 1) * cols);
      w.segment_sample.push_back(-1);
      w.max_seqlen = std::max(w.max_seqlen, cols - c);
    }
  }
  w.packed_index = p.packed_index;
  for (auto& i : w.packed_index)
    if (i >= 0) i = moved[static_cast<size_t>(i)];
  return w;
}

bool parse_packing(const std::string& value) {
  if (value == "on") return true;
  if (value == "off") return false;
  throw std::invalid_argument(fmt::format("--packing must be on or off, got '{}'", value));
}

}  // namespace genemask::model
