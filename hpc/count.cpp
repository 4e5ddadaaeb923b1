#include "hpc/count.hpp"

#include <sys/resource.h>

#include <chrono>
#include <fmt/format.h>

#include "hpc/mpi.hpp"
#include "hpc/serialize.hpp"
#include "io/error.hpp"

namespace genemask::hpc {

CountMemory count_memory(const CountOptions& opts) {
  CountMemory m;
  const uint64_t dense = num_kmers(opts.kmax), tails = RankCounts::tail_offset(opts.kmax);
  m.presence_bytes = opts.presence15 ? num_kmers(15) / 8 : 0;
  // uint64 counters of k = kmax and of the shorter k-mers at record ends, uint16 batches.
  m.rank_bytes = dense * (sizeof(uint64_t) + sizeof(uint16_t)) + tails * sizeof(uint64_t) + m.presence_bytes;
  // The counts of every k (as large as the dense table and its tails again), then the
  // counts.h5 image built in memory before it is written.
  m.rank0_extra_bytes = 2 * ((dense + tails) * sizeof(uint64_t) + m.presence_bytes);
  return m;
}

uint64_t peak_rss_bytes() {
  struct rusage ru {};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<uint64_t>(ru.ru_maxrss) * 1024;
}

DistributedCountResult count_distributed(const std::string& genome, const CountOptions& opts, MPI_Comm comm,
                                         const std::function<void(double)>& progress, bool profile) {
  using clock = std::chrono::steady_clock;
  const int rank = comm_rank(comm), size = comm_size(comm);
  const io::FileInfo info = io::probe_file(genome);
  const io::Ownership own = io::partition(info, rank, size);

  const PartsProgress shown({info}, {FilePart{0, own, info.size_bytes}},
                            rank == 0 ? progress : std::function<void(double)>());
  const ProgressFn on_pos = shown.at(0);

  ScanProfile prof;
  if (profile) prof = profile_scan(info, own);

  auto t0 = clock::now();
  RankCounts local = count_owned(info, own, opts, on_pos);
  double count_s = std::chrono::duration<double>(clock::now() - t0).count();

  auto t1 = clock::now();
  reduce_sum_u64(local.dense, 0, comm);
  reduce_sum_u64(local.tails, 0, comm);
  if (opts.presence15) reduce_bor_u64(local.presence15, 0, comm);
  std::vector<uint64_t> bases = {local.acgt_bases, local.other_bases};
  reduce_sum_u64(bases, 0, comm);
  std::vector<std::vector<RecordSegment>> segs = gather_serialized(local.segments, 0, comm);
  double reduce_s = std::chrono::duration<double>(clock::now() - t1).count();

  DistributedCountResult res;
  if (rank == 0) {
    std::vector<RecordSegment> all;
    for (auto& s : segs) all.insert(all.end(), s.begin(), s.end());
    res.records = stitch_records(info, std::move(all));
    if (bases[0] == 0)
      throw io::InputError(genome, fmt::format("has no A, C, G or T base ({} bases in {} record(s), all N or other "
                                               "IUPAC codes): no k-mer to count",
                                               bases[1], res.records.size()));
    local.acgt_bases = bases[0];
    local.other_bases = bases[1];
    res.counts = finalize_counts(local);
  }
  auto& s = res.summary;
  std::vector<uint64_t> b = {bases[0], bases[1]};
  bcast_u64(b, 0, comm);
  s.acgt_bases = b[0];
  s.other_bases = b[1];
  s.file_bytes = info.size_bytes;
  s.compression = io::to_string(info.compression);
  s.count_s = allreduce_max_double(count_s, comm);
  s.reduce_s = allreduce_max_double(reduce_s, comm);
  s.peak_rss_bytes = allreduce_max_u64(peak_rss_bytes(), comm);
  s.ranks = size;
  if (profile) {
    s.read_s = allreduce_max_double(prof.read_s, comm);
    s.parse_s = allreduce_max_double(prof.parse_s, comm);
  }
  return res;
}

}  // namespace genemask::hpc
