#pragma once
// manifest.json of a shard directory: written last, so a directory with a manifest holds a
// complete shard set. Readers check format, version and every listed file.
#include <cstdint>
#include <string>
#include <vector>

namespace genemask::io {

inline constexpr const char* kManifestFormat = "genemask-shards";
inline constexpr uint64_t kManifestVersion = 1;

struct ManifestShard {
  std::string file, split, sha256;
  uint64_t samples = 0, tokens = 0, first_sample = 0, last_sample = 0;
};

struct ManifestChrom {
  std::string name;
  uint64_t length = 0;
  uint32_t genome = 0;  // index into ShardManifest::genomes (0 for a set of one --genome)
};

/// One genome of a set built from a genome list (`shards --genomes`).
struct ManifestGenome {
  std::string name, path, genes;  // genes: "" when the list gave none
  uint64_t file_bytes = 0;
  int64_t mtime_ns = 0;           // the source file's modification time (with its size: its identity)
  double weight = 0;              // the list's weight, 0 when it gave none
  uint64_t records = 0, bases = 0;
  uint64_t samples_train = 0, samples_valid = 0, tokens_train = 0, tokens_valid = 0;
};

struct ShardManifest {
  std::string source_genome, genes, command_line, genemask_version, vocab_sha256;
  uint64_t genome_bytes = 0, seed = 0;
  double valid_fraction = 0.1;
  uint32_t max_offset = 1000, min_tokens = 5, max_tokens = 510;
  double full_prob = 0.5;
  std::vector<ManifestChrom> chromosomes;
  std::vector<ManifestGenome> genomes;  // empty for a set of one --genome
  std::vector<ManifestShard> shards;  // train shards first, each split in sample order
  uint64_t candidates = 0, dropped_non_acgt = 0;
};

/// Writes DIR/manifest.json atomically.
void write_manifest(const std::string& dir, const ShardManifest& m);
/// Reads DIR/manifest.json; checks format and version, and that every shard file exists
/// (verify_checksums: also their SHA-256). Errors name the file and what is wrong.
ShardManifest read_manifest(const std::string& dir, bool verify_checksums = false);

/// Throws InputError naming DIR/shard.file when its SHA-256 is not the manifest's.
void verify_shard_checksum(const std::string& dir, const ManifestShard& shard);

}  // namespace genemask::io
