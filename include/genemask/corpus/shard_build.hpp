#pragma once
// Building the sharded pretraining corpus from the text a rank owns (see io::Ownership):
// pass 1 (scan_records) finds where each owned stretch lies in its chromosome; pass 2
// (build_owned_shards) streams the bases, cuts the candidate segments that start on owned
// lines (reading past its text to finish the last one), drops those with a non-ACGT base,
// tokenizes the rest and writes shard files. The global sample index of a candidate is
// its chromosome's first index plus its number within the chromosome: it does not depend
// on the bases or on the rank count.
#include <cstdint>
#include <string>
#include <vector>

#include "genemask/kmer/kmer_count.hpp"
#include "genemask/corpus/segments.hpp"
#include "io/text_source.hpp"

namespace genemask {

/// Pass 1: the record stretches this rank owns (no counting; one parse of its text).
/// `progress` is called with the reader's file position after each block.
std::vector<RecordSegment> scan_records(const io::FileInfo& file, const io::Ownership& own,
                                        const ProgressFn& progress = {});

/// Where an owned stretch starts: chromosome and base offset. Computed on rank 0 from all
/// ranks' segments (sorted by voffset), then shared.
struct StretchStart {
  uint64_t voff = 0;
  uint32_t chrom = 0;
  uint64_t base_offset = 0;
};
std::vector<StretchStart> locate_stretches(std::vector<RecordSegment> segments);

struct ChromPlan {
  std::string name;
  uint64_t length = 0;
  uint64_t first_sample = 0;         // global index of its first candidate
  uint64_t candidates = 0;
  std::vector<uint64_t> boundaries;  // GB variant: sorted gene boundaries (0-based)
};
/// Numbers the candidates of all chromosomes (every rank computes the same plan).
std::vector<ChromPlan> plan_chromosomes(const std::vector<RecordInfo>& records, const SegmentRecipe& recipe,
                                        std::vector<std::vector<uint64_t>> boundaries = {});

struct ShardBuildOptions {
  SegmentRecipe recipe;
  double valid_fraction = 0.1;
  std::string out_dir;
  uint64_t shard_tokens = uint64_t{1} << 24;  // tokens per shard file (32 MiB of uint16)
  int rank = 0;
  std::string vocab_sha256;
  uint32_t genomes = 0;  // > 0: built from a genome list: samples record their genome
};

/// What one rank holds to write its shards: a train and a valid shard of up to
/// shard_tokens tokens (uint16, plus 28 bytes of offsets, index, chromosome and start per
/// sample of at least min_tokens), each up to twice that while its vectors grow, and the
/// HDF5 image of the one being written. For messages when memory runs out (--shard-tokens
/// lowers it).
uint64_t shard_buffer_bytes(const ShardBuildOptions& opts);

struct ShardFileInfo {
  std::string file, split, sha256;
  uint64_t samples = 0, tokens = 0, first_sample = 0, last_sample = 0;
};

struct ShardBuildStats {
  uint64_t candidates = 0, kept = 0, dropped_non_acgt = 0;
  uint64_t samples_train = 0, samples_valid = 0, tokens_train = 0, tokens_valid = 0;
  std::vector<ShardFileInfo> files;
  // Per genome (genome lists; ShardBuildOptions::genomes entries).
  std::vector<uint64_t> genome_samples_train, genome_samples_valid, genome_tokens_train, genome_tokens_valid;
};

/// One stretch of text a rank owns, of one file of a genome list: `starts` are that file's
/// stretch starts (chromosome indices global across the list).
struct OwnedText {
  const io::FileInfo* file = nullptr;
  io::Ownership own;
  const std::vector<StretchStart>* starts = nullptr;
  uint32_t genome = 0;
  ProgressFn progress;  // called with the reader's file position after each block
};

/// Pass 2 for one rank. Throws io::InputError on bad input.
ShardBuildStats build_owned_shards(const io::FileInfo& file, const io::Ownership& own,
                                   const std::vector<ChromPlan>& plan, const std::vector<StretchStart>& starts,
                                   const ShardBuildOptions& opts);

/// Pass 2 over several stretches (in file order), into one rank's shard files.
ShardBuildStats build_owned_shards(const std::vector<OwnedText>& parts, const std::vector<ChromPlan>& plan,
                                   const ShardBuildOptions& opts);

/// True when the sample goes to the validation split (a pure function of seed and index).
bool is_validation(uint64_t seed, uint64_t sample_index, double valid_fraction);

}  // namespace genemask
