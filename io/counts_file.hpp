#pragma once
// counts.h5: the output of `genemask count` (layout in docs/formats.md).
//   /counts/k<K>    uint64 [4^K], index = 2-bit code (A=0 C=1 G=2 T=3, first base most significant)
//                   attributes: k, total (sum of the dataset)
//   /presence/k15   uint64 [4^15/64], bit i of word i/64 set when 15-mer i occurs (optional)
//   /records/name, /records/length   the FASTA records and their lengths (sequence characters)
//   root attributes: format="genemask-counts", format_version, kmax, totals (per k),
//   acgt_bases, other_bases, source_files, source_sizes, command_line, genemask_version
#include <cstdint>
#include <string>
#include <vector>

namespace genemask::io {

inline constexpr const char* kCountsFormat = "genemask-counts";
inline constexpr uint64_t kCountsFormatVersion = 1;
inline constexpr uint64_t kMaxCountsK = 15;  // the largest kmax a counts file may record (4^15 counts)

struct CountsMeta {
  std::string command_line;
  std::string genemask_version;
  std::vector<std::string> source_files;
  std::vector<uint64_t> source_sizes;
  std::vector<std::string> record_names;
  std::vector<uint64_t> record_lengths;
  uint64_t acgt_bases = 0;
  uint64_t other_bases = 0;
};

struct CountsFile {
  int kmax = 0;
  std::vector<std::vector<uint64_t>> counts;  // counts[k], k = 1..kmax loaded (others empty)
  std::vector<uint64_t> totals;               // totals[k], all k = 1..kmax
  std::vector<uint64_t> presence15;           // loaded only on request
  bool has_presence15 = false;
  CountsMeta meta;
};

/// Writes atomically (temporary name, then rename).
void write_counts_file(const std::string& path, int kmax, const std::vector<std::vector<uint64_t>>& counts,
                       const std::vector<uint64_t>& presence15, const CountsMeta& meta);

/// Reads and checks the format; loads counts for k = 1..load_kmax (0 = all).
/// Throws InputError when the file is not a counts file or lacks the k needed.
CountsFile read_counts_file(const std::string& path, int load_kmax = 0, bool load_presence = false);

}  // namespace genemask::io
