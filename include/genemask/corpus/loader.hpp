#pragma once
// The pretraining data loader (Torch-free): reads a shard set, gives rank r of R its share
// of each epoch, masks each sample, pads batches, and prefetches in a background thread so
// the trainer never waits on I/O.
//
// Order: all samples of the split sorted by sample_index; each epoch is a permutation of
// them drawn from (seed, epoch), and the epochs follow one another as one stream: stream
// position g is position g mod N of epoch g / N. Micro-batch k of every rank covers the
// stream positions [kMR, (k+1)MR) (M samples a rank, R ranks), rank r taking kMR + r,
// kMR + r + R, ...: every micro-batch is whole, every sample is trained once an epoch, and
// the samples of a step (R ranks x M x accumulation) are the same for any R, M and
// accumulation of the same product; a micro-batch may hold samples of two epochs, each
// masked by its own. A cursor (epoch, position) is the stream position of the next
// micro-batch, the same on every rank, and resumes exactly.
// With first_samples (validation) only the first first_samples of the epoch's order are
// taken, every one of them: positions r, r+R, ... below it, so ranks may differ by one;
// each rank's last batch of it may be short, and `position` counts that rank's samples.
// With --genome-weights (a shard set of a genome list) the epoch's order is drawn per genome
// instead (genemask/corpus/genome_sampling.hpp); positions are taken the same way.
// The mask of a sample depends only on (seed, epoch, sample_index).
// All HDF5 reads happen on the loader's thread.
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "genemask/corpus/genome_sampling.hpp"
#include "genemask/corpus/masking.hpp"
#include "genemask/corpus/masking_tables.hpp"
#include "io/shard_file.hpp"
#include "io/shard_manifest.hpp"

namespace genemask {

struct LoaderCursor {
  uint64_t epoch = 0;
  uint64_t position = 0;  // index into this rank's sequence of the epoch
  bool operator==(const LoaderCursor& o) const { return epoch == o.epoch && position == o.position; }
};

struct Batch {
  int64_t rows = 0, cols = 0;             // cols = longest sample + 2 ([CLS], [SEP])
  std::vector<int64_t> input_ids;         // rows x cols, [PAD] = 0
  std::vector<int64_t> labels;            // -100 except on masked tokens
  std::vector<int64_t> attention_mask;    // 1 on real positions, 0 on padding
  std::vector<uint64_t> sample_index;
  std::vector<uint32_t> genome;           // genome index per row (shard sets of a genome list; else empty)
  std::vector<uint64_t> epoch;            // the epoch of each row (its mask's; two in a batch at an epoch's end)
  LoaderCursor next;                      // cursor after this batch (for checkpoints)
  double produce_s = 0;                   // seconds DataLoader's thread spent reading and masking it
  uint64_t real_tokens() const;
};

/// How much of a shard set to check when it is opened. Always: the manifest (each shard once,
/// totals, ranges), each shard's offsets, sample indices, split and counts against it, no
/// sample in two shards, and the token ids of every sample as it is read.
struct ShardChecks {
  bool verify = false;  // also each shard's SHA-256 against the manifest and all its token ids (both splits)
  bool checksums = true;  // the SHA-256 of the split's shards (part, part + parts, ...) against the manifest
  int part = 0, parts = 1;  // verify shards part, part + parts, ... only (ranks share the work)
};

/// All samples of one split of a shard directory, in sample_index order.
class ShardSet {
 public:
  ShardSet(const std::string& dir, const std::string& split, const ShardChecks& checks = {});
  size_t size() const { return order_.size(); }
  uint64_t sample_index(size_t i) const { return order_[i].sample_index; }
  void read(size_t i, std::vector<uint16_t>& out) const;
  uint64_t total_tokens() const { return total_tokens_; }
  /// Genome of sample i; the manifest's genomes (empty for a set of one --genome).
  uint32_t genome(size_t i) const { return sample_genome_.empty() ? 0 : sample_genome_[i]; }
  const std::vector<uint32_t>& sample_genomes() const { return sample_genome_; }
  const std::vector<io::ManifestGenome>& genomes() const { return genomes_; }

 private:
  struct Ref {
    uint64_t sample_index;
    uint32_t shard;
    uint32_t local;
  };
  std::vector<std::unique_ptr<io::ShardReader>> shards_;
  std::vector<Ref> order_;
  uint64_t total_tokens_ = 0;
  std::vector<uint32_t> sample_genome_;  // in order_, when the set has genomes
  std::vector<io::ManifestGenome> genomes_;
};

struct LoaderOptions {
  std::string shard_dir;
  std::string split = "train";
  int rank = 0, world = 1;
  size_t batch_size = 10;
  uint64_t seed = 42;
  bool shuffle = true;
  size_t prefetch_batches = 8;
  ShardChecks checks;
  std::string genome_weights;  // "" = a plain permutation; else bases | uniform | list | temperature:T
  /// 0: the whole split, epoch after epoch as one stream (training). Else only the first
  /// min(first_samples, N) samples of each epoch's order, all of them over the ranks (rank r
  /// takes positions r, r+R, ... below it; a rank may take none, and then has no batch).
  uint64_t first_samples = 0;
};

/// Builds one padded, masked batch from samples (shared by the loader and benchmarks), each
/// sample masked by (seed, its epoch, its sample index).
void build_batch(const std::vector<std::vector<uint16_t>>& samples, const std::vector<uint64_t>& sample_index,
                 const Masker& masker, uint64_t seed, const std::vector<uint64_t>& epochs, Batch& out);
/// The same with one epoch for every sample.
void build_batch(const std::vector<std::vector<uint16_t>>& samples, const std::vector<uint64_t>& sample_index,
                 const Masker& masker, uint64_t seed, uint64_t epoch, Batch& out);

class DataLoader {
 public:
  DataLoader(const LoaderOptions& opts, Masker masker, LoaderCursor start = {});
  ~DataLoader();
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  /// The next batch (blocks until the prefetch thread has it). Never ends: epochs follow.
  Batch next();
  /// With first_samples: the samples this rank takes of them, and its batches (the last one
  /// may be short). In training, an epoch's share of a rank, N / R (a rank may take one more
  /// or one less of a given epoch), and the micro-batches that hold it, rounded up.
  uint64_t samples_per_epoch() const { return per_rank_; }
  uint64_t batches_per_epoch() const { return (per_rank_ + opts_.batch_size - 1) / opts_.batch_size; }
  size_t dataset_size() const { return set_.size(); }
  const ShardSet& shard_set() const { return set_; }
  /// Per genome: the probability of a draw (empty without --genome-weights).
  const std::vector<double>& genome_probabilities() const { return probabilities_; }

 private:
  /// One sample of a micro-batch: slot `slot` of epoch `epoch`'s permutation.
  struct Draw {
    uint64_t epoch, slot;
  };
  void produce();
  /// Training: the next micro-batch of the epochs as one stream (rank r takes stream positions
  /// c.position + j*R + r), and the cursor moved past it on every rank.
  void stream_draws(LoaderCursor& c, std::vector<Draw>& out) const;
  /// Validation's first samples: this rank's next batch of its share of epoch c.epoch
  /// (the last one short), and the cursor moved past it.
  void first_sample_draws(LoaderCursor& c, std::vector<Draw>& out) const;
  const std::vector<uint32_t>& permutation(uint64_t epoch);

  LoaderOptions opts_;
  Masker masker_;
  ShardSet set_;
  uint64_t per_rank_ = 0;
  LoaderCursor cursor_;
  uint64_t perm_epoch_ = UINT64_MAX;
  std::vector<uint32_t> perm_;
  std::vector<double> probabilities_;

  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Batch> queue_;
  std::exception_ptr error_;
  bool stop_ = false;
};

}  // namespace genemask
