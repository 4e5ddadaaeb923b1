#pragma once
// Exact counts of all k-mers, k = 1..kmax, in one pass: only kmax-mers are counted densely
// (one increment per base); shorter k-mers are derived by marginalising over the last
// bases, plus the k-mers that start in the last kmax-1 positions before each break
// (N, IUPAC code, record end), which are counted separately ("tails").
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "genemask/kmer/kmer.hpp"
#include "io/text_source.hpp"

namespace genemask {

struct CountOptions {
  int kmax = 10;
  bool presence15 = false;  // also a 4^15-bit set of the 15-mers present
};

/// One stretch of a record seen by one rank: a record start (name set) or the
/// continuation of a record whose header another rank owns (name empty).
struct RecordSegment {
  uint64_t voff = 0;   // voffset of the header line, or of the first owned line
  std::string name;    // empty for a continuation
  uint64_t bases = 0;  // sequence characters (ACGT and N/IUPAC) in this stretch
};

/// What one rank produced: raw counters, to be summed (and OR-ed) over ranks.
struct RankCounts {
  int kmax = 0;
  std::vector<uint64_t> dense;       // 4^kmax counts of kmax-mers
  std::vector<uint64_t> tails;       // concatenated tail counts of k = 1..kmax-1 (tail_offset(k))
  std::vector<uint64_t> presence15;  // 4^15 bits as uint64 words (bit i of word i/64), or empty
  uint64_t acgt_bases = 0, other_bases = 0;
  std::vector<RecordSegment> segments;

  static uint64_t tail_offset(int k);  // start of k's block inside `tails`
  void add(const RankCounts& other);   // sum / OR (for in-process tests and serial use)
};

using ProgressFn = std::function<void(uint64_t file_pos_bytes)>;

/// Counts the k-mers whose first base lies on a line this rank owns (see io::Ownership);
/// reads up to max(kmax,15)-1 bases past its text to finish them. Throws io::InputError.
RankCounts count_owned(const io::FileInfo& file, const io::Ownership& own, const CountOptions& opts,
                       const ProgressFn& progress = {});

/// Time to only read (decompress) this rank's text, and to read and parse it without
/// counting: the split of `genemask count --profile`.
struct ScanProfile {
  double read_s = 0, parse_s = 0;
  uint64_t checksum = 0;  // keeps the work from being optimised away
};
ScanProfile profile_scan(const io::FileInfo& file, const io::Ownership& own);

/// Final counts: counts[k] has 4^k entries for k = 1..kmax (counts[0] unused).
struct KmerCounts {
  int kmax = 0;
  std::vector<std::vector<uint64_t>> counts;
  std::vector<uint64_t> presence15;
  uint64_t total(int k) const;
};

/// Marginalises dense kmax-mer counts and adds the tails.
KmerCounts finalize_counts(const RankCounts& summed);

/// Record names and lengths from the segments of all ranks (any order). Throws
/// io::InputError for a duplicate name or an empty record.
struct RecordInfo {
  std::string name;
  uint64_t length = 0;
  uint64_t voff = 0;
};
std::vector<RecordInfo> stitch_records(const io::FileInfo& file, std::vector<RecordSegment> segments);

/// Reference implementation for tests: counts every k-mer of every record directly.
KmerCounts brute_force_counts(const std::vector<std::string>& sequences, int kmax, bool presence15);

}  // namespace genemask
