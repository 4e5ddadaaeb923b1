#pragma once
// Distributed k-mer counting: ranks split the genome by balanced byte ranges
// (io::partition), count their share with k-1 bases of overlap, and reduce onto rank 0.
#include <mpi.h>

#include <functional>
#include <string>
#include <vector>

#include "genemask/kmer/kmer_count.hpp"

namespace genemask::hpc {

struct DistributedCountSummary {
  uint64_t acgt_bases = 0, other_bases = 0, file_bytes = 0;
  std::string compression;
  double count_s = 0, reduce_s = 0;  // slowest rank
  double read_s = -1, parse_s = -1;  // slowest rank, with profile=true (else -1)
  uint64_t peak_rss_bytes = 0;       // largest rank
  int ranks = 1;
};

struct DistributedCountResult {
  KmerCounts counts;                 // rank 0 only
  std::vector<RecordInfo> records;   // rank 0 only
  DistributedCountSummary summary;   // all ranks
};

/// Collective over comm. `progress(fraction)` is called on rank 0 as its share advances.
/// profile: first time a read-only and a parse-only pass over each rank's share.
DistributedCountResult count_distributed(const std::string& genome, const CountOptions& opts, MPI_Comm comm,
                                         const std::function<void(double)>& progress = {}, bool profile = false);

/// One rank's stretch of one file of a genome list.
struct FilePart {
  size_t file = 0;         // index into the list
  io::Ownership own;       // the text of the file this rank owns
  uint64_t bytes = 0;      // on-disk bytes of the file in this rank's share (for balance)
};

/// Rank `rank`'s share of several files, balanced by on-disk bytes over their concatenation:
/// cut points at total*r/nranks, so a rank may take the end of one file and the start of the
/// next. Within a file the split is partition()'s: byte offsets for plain files, snapped to
/// block starts for BGZF; a plain gzip file is read whole by every rank whose share touches
/// it, and they own its text round-robin. Every rank computes the same plan.
std::vector<FilePart> partition_files(const std::vector<io::FileInfo>& files, int rank, int nranks,
                                      uint64_t gzip_chunk_bytes = 8u << 20);

/// Rank 0's progress through its parts (in order), in one or more passes over each, as a
/// fraction of its on-disk bytes: at(i, pass) is the position callback to give the reader of
/// part i in that pass (empty when `progress` is), which calls `progress(fraction)`. A pass's
/// share of the whole is its weight (e.g. a parse-only pass that takes a fifth of the time of
/// the next: weights {1, 5}).
class PartsProgress {
 public:
  PartsProgress(const std::vector<io::FileInfo>& files, const std::vector<FilePart>& parts,
                std::function<void(double)> progress, std::vector<double> pass_weights = {1.0});
  ProgressFn at(size_t part, size_t pass = 0) const;

 private:
  struct Span {
    uint64_t start = 0, end = 0;  // file positions the reader reports (compressed bytes)
    double before = 0, weight = 0;  // this part's share of one pass
  };
  std::vector<Span> spans_;
  std::function<void(double)> progress_;
  std::vector<double> pass_start_, pass_share_;  // fractions of the whole
};

/// What count_genomes_distributed hands over, on rank 0, for each genome in list order.
struct GenomeCounted {
  size_t index = 0;
  KmerCounts counts;
  std::vector<RecordInfo> records;
  uint64_t acgt_bases = 0, other_bases = 0, file_bytes = 0;
  std::string compression;
};

struct GenomesCountSummary {
  DistributedCountSummary total;
  std::vector<uint64_t> rank_bytes;  // on-disk bytes each rank was given
  std::vector<double> rank_count_s;  // each rank's counting time
  uint64_t spool_bytes = 0;          // largest rank's spool of finished tables (TMPDIR)
};

/// Counts every file of a genome list (collective over comm). On rank 0, `on_genome` receives
/// each genome's counts in list order (then they are freed), and the result holds the pooled
/// counts (the sum over genomes) with every genome's records. A rank keeps one set of k-mer
/// tables in memory whatever the number of genomes: a table it finished while more of its
/// share remains goes to an unlinked file in $TMPDIR (or /tmp) until rank 0 takes it.
/// Throws InputError for a genome with no A/C/G/T base.
DistributedCountResult count_genomes_distributed(const std::vector<std::string>& files, const CountOptions& opts,
                                                 MPI_Comm comm, const std::function<void(GenomeCounted&&)>& on_genome,
                                                 GenomesCountSummary& summary,
                                                 const std::function<void(double)>& progress = {});

/// What count_distributed holds per rank (the dense k-mer tables of kmax and the
/// --presence15 bitset) and what rank 0 adds to combine and write them; for messages when
/// memory runs out, and for docs/count.md.
struct CountMemory {
  uint64_t rank_bytes = 0, rank0_extra_bytes = 0, presence_bytes = 0;
};
CountMemory count_memory(const CountOptions& opts);

/// Peak resident set of this process in bytes.
uint64_t peak_rss_bytes();

}  // namespace genemask::hpc
