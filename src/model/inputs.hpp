#pragma once
// Sequences to run a model on (`embed`, `predict`), and how long ones are cut into windows
// that fit the model. Torch-free.
#include <cstdint>
#include <string>
#include <vector>

namespace genemask::model {

struct SequenceInputs {
  std::vector<std::string> ids, seqs;
  std::vector<uint64_t> lines;  // table rows: 1-based line in the file (0 for FASTA records)
};

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

}  // namespace genemask::model
