#pragma once
// Sequences to run a model on (`embed`, `predict`), and how long ones are cut into windows
// that fit the model. Torch-free.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace genemask::model {

struct SequenceInputs {
  std::vector<std::string> ids, seqs;
  std::vector<uint64_t> lines;  // table rows: 1-based line in the file (0 for FASTA records)
  /// The sequences (indices) with no 6-mer of A, C, G and T alone: their tokens are all
  /// [UNK], so a model's output for them says nothing of their bases.
  std::vector<size_t> unknown_only;
};

/// Says on stderr how many of `in`'s sequences are unknown_only, naming the first (its
/// file:line, or its record), and that their `what` ("scores") say nothing of their bases.
void warn_unknown_only(const SequenceInputs& in, const std::string& path, const std::string& what);

/// Whether `seq` has 6 consecutive bases of A, C, G, T (any case): a 6-mer token that is not [UNK].
bool has_acgt_kmer(std::string_view seq);

/// Of a sequence cut into several windows (window_starts), whether the window of `len`
/// tokens from token `start` has tokens that are all [UNK] (no 6-mer of A, C, G, T alone): its
/// output, averaged into the sequence's with the others, says nothing of its bases.
bool unknown_only_window(std::string_view seq, int64_t start, int64_t len);

/// Says on stderr (when `windows` > 0) that `windows` windows of long sequences had tokens that
/// are all [UNK] and that their `what` are averaged in (unknown_only_windows in the summary).
void warn_unknown_only_windows(uint64_t windows, const std::string& path, const std::string& what);

/// FASTA (plain or compressed; ids are the record names) or a task table (raw bases or
/// 6-mer text, labelled or not; ids are `line<N>`). A sequence shorter than one 6-mer is
/// an error that names the file and the line or record. An uncompressed file that cannot
/// fit in the memory available (model/resources.hpp) is refused before it is read, and
/// running out of memory while reading is an error that names the file.
SequenceInputs read_sequences(const std::string& path);
/// The same without the memory checks.
SequenceInputs read_sequences_unchecked(const std::string& path);

/// Start tokens of the windows of `width` tokens that cover `n` tokens: 0, stride,
/// 2 stride, ... while a window ends before the last token, then one window ending at the
/// last token. One window (start 0) when n <= width. stride in 1..width.
std::vector<int64_t> window_starts(int64_t n, int64_t width, int64_t stride);

/// One window of a sequence: `len` tokens from token `start` of sequence `seq` (an index
/// into the caller's list of the sequences it runs, `mine` below).
struct Window {
  size_t seq;
  int64_t start, len;
};

/// The stride between windows: `stride_option` when > 0, else half a window (at least 1).
/// A stride longer than the window (`width` tokens) is an error naming --stride.
int64_t window_stride(int64_t stride_option, int64_t width);

/// The windows of the sequences seqs[mine[0]], seqs[mine[1]], ... in that order, each cut
/// by window_starts(tokens, width, stride); with what `embed` and `predict` say of them.
struct WindowPlan {
  std::vector<Window> windows;
  std::vector<uint32_t> per_sequence;  // windows of mine[j]
  uint64_t long_sequences = 0;         // sequences of more than one window
  uint64_t unknown_only_windows = 0;   // windows of those whose tokens are all [UNK]
};
WindowPlan plan_windows(const std::vector<std::string>& seqs, const std::vector<size_t>& mine, int64_t width,
                        int64_t stride);

/// The model's input rows of `rows` windows from `w`: [CLS], the window's tokens, [SEP] into
/// `ids`, and 1 over those positions into `mask`; both [rows, cols] row-major and zeroed by
/// the caller, cols at least the longest window's len + 2. A window's bases are
/// seqs[mine[w.seq]], tokenized here from its own bases (no sequence's tokens are kept).
void fill_window_rows(const std::vector<std::string>& seqs, const std::vector<size_t>& mine, const Window* w,
                      int64_t rows, int64_t cols, int64_t* ids, int64_t* mask);

}  // namespace genemask::model
