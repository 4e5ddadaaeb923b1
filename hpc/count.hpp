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
