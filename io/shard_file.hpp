#pragma once
// One HDF5 shard of the pretraining corpus (layout in docs/formats.md):
//   /tokens        uint16 [T]    6-mer ids (DNABERT vocabulary), samples back to back, no [CLS]/[SEP]
//   /offsets       uint64 [N+1]  sample i is tokens[offsets[i] : offsets[i+1]]
//   /sample_index  uint64 [N]    global candidate number, increasing; independent of rank count
//   /chrom         uint32 [N]    index into the manifest's chromosome list
//   /start         uint64 [N]    0-based position of the sample's first base
//   /genome        uint32 [N]    index into the manifest's genome list (shards of a genome list only)
//   attributes: format="genemask-shard", format_version, split, seed, vocab_sha256
#include <cstdint>
#include <string>
#include <vector>

#include "io/h5.hpp"

namespace genemask::io {

inline constexpr const char* kShardFormat = "genemask-shard";
inline constexpr uint64_t kShardFormatVersion = 1;
/// What a shard may hold: 6-mer ids of the DNABERT-6 vocabulary (no specials: segments with a
/// non-ACGT base are dropped), at most 510 per sample (512 positions with [CLS] and [SEP]).
inline constexpr uint16_t kShardFirstToken = 5, kShardLastToken = 4100;
inline constexpr uint64_t kShardMaxSampleTokens = 510;

struct ShardData {
  std::vector<uint16_t> tokens;
  std::vector<uint64_t> offsets{0};
  std::vector<uint64_t> sample_index;
  std::vector<uint32_t> chrom;
  std::vector<uint64_t> start;
  std::vector<uint32_t> genome;  // empty unless the set was built from a genome list
  size_t samples() const { return sample_index.size(); }
  void clear() {
    tokens.clear();
    offsets.assign(1, 0);
    sample_index.clear();
    chrom.clear();
    start.clear();
    genome.clear();
  }
};

/// Writes atomically (temporary name, then rename).
void write_shard(const std::string& path, const ShardData& d, const std::string& split, uint64_t seed,
                 const std::string& vocab_sha256);

/// Random access to the samples of a shard; offsets and provenance are held in memory,
/// tokens are read on demand. A shard is input like any other: opening it checks the
/// offsets (from 0, each sample 1..510 tokens, ending at the token count) and that
/// sample_index increases; every read checks the token ids (5..4100). Errors name the shard
/// and the sample.
class ShardReader {
 public:
  explicit ShardReader(const std::string& path);
  size_t samples() const { return sample_index_.size(); }
  uint64_t tokens() const { return offsets_.back(); }
  const std::vector<uint64_t>& offsets() const { return offsets_; }
  const std::vector<uint64_t>& sample_index() const { return sample_index_; }
  const std::vector<uint32_t>& chrom() const { return chrom_; }
  const std::vector<uint64_t>& start() const { return start_; }
  /// Genome index per sample (empty for a shard of one --genome).
  const std::vector<uint32_t>& genome() const { return genome_; }
  std::string split() const { return split_; }
  /// Tokens of sample i (appended to out after clearing it).
  void read(size_t i, std::vector<uint16_t>& out) const;
  /// All tokens at once (checked).
  std::vector<uint16_t> read_all() const;
  /// Reads every token in blocks and checks the ids (read_all without holding them).
  void verify_tokens() const;
  const std::string& path() const { return path_; }

 private:
  /// Throws naming the shard, the sample and the position of the first id outside 5..4100.
  void check_ids(const uint16_t* ids, uint64_t n, uint64_t first_token) const;

  std::string path_, split_;
  h5::Handle file_, tokens_;
  std::vector<uint64_t> offsets_, sample_index_, start_;
  std::vector<uint32_t> chrom_, genome_;
};

}  // namespace genemask::io
