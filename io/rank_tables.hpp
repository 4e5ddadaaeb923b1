#pragma once
// Tab-separated ranking tables (layouts in docs/formats.md):
//   npmi.tsv:      rank kmer count pmi npmi below_min_count     (GRANK; rank 1 = highest NPMI)
//   pmi_vocab.tsv: rank kmer k count pmi                        (Gene-PMI-VOC)
//                  and a last line `# end: N rows` (a copy cut at a line end lacks it)
// Floats are written in shortest round-trip form, NaN as "nan".
#include <cstdint>
#include <string>
#include <vector>

namespace genemask::io {

/// The header lines (also how `npmi` and `pmi-vocab` recognise their own earlier outputs).
inline constexpr const char* kNpmiHeader = "rank\tkmer\tcount\tpmi\tnpmi\tbelow_min_count";
inline constexpr const char* kPmiVocabHeader = "rank\tkmer\tk\tcount\tpmi";

struct NpmiRow {
  uint64_t rank = 0;
  std::string kmer;
  uint64_t count = 0;
  double pmi = 0, npmi = 0;
  bool below_min_count = false;
};

struct PmiVocabRow {
  uint64_t rank = 0;
  std::string kmer;
  uint64_t count = 0;
  double pmi = 0;
};

void write_npmi_tsv(const std::string& path, const std::vector<NpmiRow>& rows);
/// Checks the header, column count, numbers, k-mer alphabet, equal k-mer lengths and ranks
/// 1..N in order; errors give file:line and the bad value.
std::vector<NpmiRow> read_npmi_tsv(const std::string& path);

/// The k-mers a Gene-PMI-VOC vocabulary holds: 2 to 10 bases (the masker's spans).
inline constexpr int kPmiVocabMinK = 2, kPmiVocabMaxK = 10;

void write_pmi_vocab_tsv(const std::string& path, const std::vector<PmiVocabRow>& rows);
std::vector<PmiVocabRow> read_pmi_vocab_tsv(const std::string& path);

}  // namespace genemask::io
