// Counting a genome list: ranks split the concatenated files by bytes, count their parts,
// and rank 0 collects each genome's tables in list order (docs/count.md, "Many genomes").
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fmt/format.h>

#include "hpc/count.hpp"
#include "hpc/mpi.hpp"
#include "hpc/serialize.hpp"
#include <boost/serialization/utility.hpp>
#include "io/error.hpp"

namespace genemask::hpc {

namespace {

/// What a rank tells rank 0 about one of its parts.
struct PartInfo {
  uint64_t file = 0, acgt = 0, other = 0;
  std::vector<RecordSegment> segments;
  template <class A>
  void serialize(A& ar, const unsigned int) {
    ar & file & acgt & other & segments;
  }
};

/// Finished k-mer tables waiting for rank 0, in an unlinked temporary file: nothing is left
/// behind however the process ends.
class TableSpool {
 public:
  ~TableSpool() {
    if (fd_ >= 0) ::close(fd_);
  }
  uint64_t put(const std::vector<uint64_t>& a, const std::vector<uint64_t>& b) {
    open_if_needed();
    const uint64_t at = end_;
    const uint64_t part = (a.size() + b.size()) * sizeof(uint64_t);
    write_all(a, part);
    write_all(b, part);
    return at;
  }
  void get(uint64_t at, std::vector<uint64_t>& a, std::vector<uint64_t>& b) const {
    read_all(at, a);
    read_all(at + a.size() * sizeof(uint64_t), b);
  }
  uint64_t bytes() const { return end_; }

 private:
  void open_if_needed() {
    if (fd_ >= 0) return;
    const char* env = std::getenv("TMPDIR");
    dir_ = env && *env ? env : "/tmp";
    std::string name = dir_ + "/genemask-count-XXXXXX";
    fd_ = ::mkstemp(name.data());
    if (fd_ < 0)
      throw std::runtime_error(fmt::format("cannot create a temporary file in {} for the k-mer tables of finished "
                                           "genomes: {} (set TMPDIR to a writable directory)",
                                           dir_, io::open_error_reason(errno)));
    ::unlink(name.c_str());
  }
  /// `part`: the bytes of a genome part's tables (both vectors), for the message.
  void write_all(const std::vector<uint64_t>& v, uint64_t part) {
    const char* p = reinterpret_cast<const char*>(v.data());
    size_t left = v.size() * sizeof(uint64_t);
    while (left > 0) {
      const ssize_t w = ::pwrite(fd_, p, left, static_cast<off_t>(end_));
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        const int err = w < 0 ? errno : EIO;
        throw io::WriteError(fmt::format("cannot keep the k-mer tables of finished genomes in {} ({} bytes so far): "
                                         "{}; set TMPDIR to a disk with room (each genome part takes {} bytes)",
                                         dir_, end_, io::write_error_reason(err), part),
                             err);
      }
      p += w;
      left -= static_cast<size_t>(w);
      end_ += static_cast<uint64_t>(w);
    }
  }
  void read_all(uint64_t at, std::vector<uint64_t>& v) const {
    char* p = reinterpret_cast<char*>(v.data());
    size_t left = v.size() * sizeof(uint64_t);
    while (left > 0) {
      const ssize_t r = ::pread(fd_, p, left, static_cast<off_t>(at));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) throw std::runtime_error(fmt::format("cannot read back the k-mer tables kept in {}", dir_));
      p += r;
      left -= static_cast<size_t>(r);
      at += static_cast<uint64_t>(r);
    }
  }
  int fd_ = -1;
  uint64_t end_ = 0;
  std::string dir_;
};

uint64_t cut(uint64_t total, int r, int nranks) {
  return static_cast<uint64_t>((static_cast<unsigned __int128>(total) * static_cast<unsigned>(r)) /
                               static_cast<unsigned>(nranks));
}

}  // namespace

std::vector<FilePart> partition_files(const std::vector<io::FileInfo>& files, int rank, int nranks,
                                      uint64_t gzip_chunk_bytes) {
  uint64_t total = 0;
  for (const auto& f : files) total += f.size_bytes;
  const uint64_t lo = cut(total, rank, nranks), hi = rank == nranks - 1 ? total : cut(total, rank + 1, nranks);
  // The rank whose share holds global byte x.
  auto owner = [&](uint64_t x) {
    int r = static_cast<int>((static_cast<unsigned __int128>(x) * static_cast<unsigned>(nranks)) / total);
    while (r + 1 < nranks && cut(total, r + 1, nranks) <= x) ++r;
    while (r > 0 && cut(total, r, nranks) > x) --r;
    return r;
  };
  std::vector<FilePart> parts;
  uint64_t at = 0;  // global offset of file i
  for (size_t i = 0; i < files.size(); at += files[i].size_bytes, ++i) {
    const auto& f = files[i];
    const uint64_t fend = at + f.size_bytes;
    if (f.size_bytes == 0 || hi <= at || lo >= fend) continue;
    const uint64_t llo = std::max(lo, at) - at, lhi = std::min(hi, fend) - at;
    FilePart p;
    p.file = i;
    p.bytes = lhi - llo;
    p.own.rank = rank;
    p.own.nranks = nranks;
    switch (f.compression) {
      case io::Compression::none:
        p.own.begin = llo;
        p.own.end = lhi >= f.size_bytes ? UINT64_MAX : lhi;
        break;
      case io::Compression::bgzf: {
        const uint64_t b = llo == 0 ? 0 : io::bgzf_block_at_or_after(f, llo);
        const uint64_t e = lhi >= f.size_bytes ? f.size_bytes : io::bgzf_block_at_or_after(f, lhi);
        if (b >= e) continue;  // no block starts in this rank's bytes: the previous rank reads them
        p.own.begin = b << 16;
        p.own.end = e >= f.size_bytes ? UINT64_MAX : e << 16;
        break;
      }
      case io::Compression::gzip: {
        const int first = owner(at), last = owner(fend - 1);
        p.own.kind = io::Ownership::Kind::round_robin;
        p.own.chunk_bytes = gzip_chunk_bytes;
        p.own.rank = rank - first;
        p.own.nranks = last - first + 1;
        break;
      }
    }
    parts.push_back(p);
  }
  return parts;
}

PartsProgress::PartsProgress(const std::vector<io::FileInfo>& files, const std::vector<FilePart>& parts,
                             std::function<void(double)> progress, std::vector<double> pass_weights)
    : progress_(std::move(progress)) {
  double sum = 0;
  for (double w : pass_weights) sum += w;
  for (double w : pass_weights) {
    pass_start_.push_back(pass_start_.empty() ? 0.0 : pass_start_.back() + pass_share_.back());
    pass_share_.push_back(w / sum);
  }
  uint64_t total = 0;
  for (const auto& p : parts) total += p.bytes;
  double before = 0;
  for (const auto& p : parts) {
    const auto& f = files[p.file];
    const bool bgzf = f.compression == io::Compression::bgzf;
    Span s;
    // The reader reports compressed positions; a round-robin (plain gzip) part reads the whole file.
    if (p.own.kind == io::Ownership::Kind::contiguous) {
      s.start = bgzf ? p.own.begin >> 16 : p.own.begin;
      s.end = p.own.end == UINT64_MAX ? f.size_bytes : (bgzf ? p.own.end >> 16 : p.own.end);
    } else {
      s.end = f.size_bytes;
    }
    s.before = before;
    s.weight = total > 0 ? static_cast<double>(p.bytes) / static_cast<double>(total)
                         : 1.0 / static_cast<double>(parts.size());
    before += s.weight;
    spans_.push_back(s);
  }
}

ProgressFn PartsProgress::at(size_t part, size_t pass) const {
  if (!progress_ || part >= spans_.size() || pass >= pass_share_.size()) return {};
  const Span s = spans_[part];
  const double start = pass_start_[pass], share = pass_share_[pass];
  return [s, start, share, fn = progress_](uint64_t pos) {
    const double done = static_cast<double>(pos - std::min(pos, s.start));
    const double within = s.end > s.start ? std::min(1.0, done / static_cast<double>(s.end - s.start)) : 1.0;
    fn(std::min(1.0, start + share * (s.before + within * s.weight)));
  };
}

DistributedCountResult count_genomes_distributed(const std::vector<std::string>& files, const CountOptions& opts,
                                                 MPI_Comm comm, const std::function<void(GenomeCounted&&)>& on_genome,
                                                 GenomesCountSummary& summary,
                                                 const std::function<void(double)>& progress) {
  using clock = std::chrono::steady_clock;
  const int rank = comm_rank(comm), size = comm_size(comm);
  std::vector<io::FileInfo> infos;
  for (const auto& f : files) infos.push_back(io::probe_file(f));
  const std::vector<FilePart> parts = partition_files(infos, rank, size);

  uint64_t my_bytes = 0;
  for (const auto& p : parts) my_bytes += p.bytes;
  const uint64_t dense_n = num_kmers(opts.kmax), tails_n = RankCounts::tail_offset(opts.kmax);

  // Phase 1: count each part; finished tables wait in the spool, the last one in memory.
  auto t0 = clock::now();
  std::vector<PartInfo> infos_out;
  std::vector<uint64_t> spooled;  // spool offset per part (the last: unused)
  TableSpool spool;
  RankCounts last;
  std::vector<uint64_t> presence;
  if (opts.presence15) presence.assign(num_kmers(15) / 64, 0);
  const PartsProgress shown(infos, parts, rank == 0 ? progress : std::function<void(double)>());
  for (size_t i = 0; i < parts.size(); ++i) {
    const auto& p = parts[i];
    RankCounts rc = count_owned(infos[p.file], p.own, opts, shown.at(i));
    for (size_t w = 0; w < presence.size() && w < rc.presence15.size(); ++w) presence[w] |= rc.presence15[w];
    rc.presence15.clear();
    rc.presence15.shrink_to_fit();
    infos_out.push_back(PartInfo{p.file, rc.acgt_bases, rc.other_bases, std::move(rc.segments)});
    if (i + 1 < parts.size()) {
      spooled.push_back(spool.put(rc.dense, rc.tails));
    } else {
      spooled.push_back(0);
      last = std::move(rc);
    }
  }
  const double count_s = std::chrono::duration<double>(clock::now() - t0).count();

  // Phase 2: rank 0 takes each genome's tables in list order, from every rank that holds a part.
  auto t1 = clock::now();
  std::vector<std::vector<PartInfo>> all_infos = gather_serialized(infos_out, 0, comm);
  auto load = [&](size_t i, std::vector<uint64_t>& dense, std::vector<uint64_t>& tails) {
    if (i + 1 == parts.size()) {
      dense = std::move(last.dense);
      tails = std::move(last.tails);
    } else {
      dense.assign(dense_n, 0);
      tails.assign(tails_n, 0);
      spool.get(spooled[i], dense, tails);
    }
  };
  DistributedCountResult res;
  RankCounts pooled;
  uint64_t pooled_acgt = 0, pooled_other = 0;
  if (rank != 0) {
    std::vector<uint64_t> dense, tails;
    for (size_t i = 0; i < parts.size(); ++i) {
      load(i, dense, tails);
      send_u64(dense.data(), dense.size(), 0, comm);
      send_u64(tails.data(), tails.size(), 0, comm);
    }
  } else {
    pooled.kmax = opts.kmax;
    pooled.dense.assign(dense_n, 0);
    pooled.tails.assign(tails_n, 0);
    std::vector<size_t> next(static_cast<size_t>(size), 0);  // next part of each rank
    std::vector<uint64_t> dense, tails;
    for (size_t g = 0; g < files.size(); ++g) {
      RankCounts acc;
      acc.kmax = opts.kmax;
      acc.dense.assign(dense_n, 0);
      acc.tails.assign(tails_n, 0);
      std::vector<RecordSegment> segs;
      for (int r = 0; r < size; ++r) {
        auto& list = all_infos[static_cast<size_t>(r)];
        size_t& j = next[static_cast<size_t>(r)];
        while (j < list.size() && list[j].file == g) {
          if (r == 0) {
            load(j, dense, tails);
          } else {
            dense.resize(dense_n);
            tails.resize(tails_n);
            recv_u64(dense.data(), dense_n, r, comm);
            recv_u64(tails.data(), tails_n, r, comm);
          }
          for (uint64_t x = 0; x < dense_n; ++x) acc.dense[x] += dense[x];
          for (uint64_t x = 0; x < tails_n; ++x) acc.tails[x] += tails[x];
          acc.acgt_bases += list[j].acgt;
          acc.other_bases += list[j].other;
          segs.insert(segs.end(), list[j].segments.begin(), list[j].segments.end());
          ++j;
        }
      }
      GenomeCounted gc;
      gc.index = g;
      gc.records = stitch_records(infos[g], std::move(segs));
      if (acc.acgt_bases == 0)
        throw io::InputError(files[g], fmt::format("has no A, C, G or T base ({} bases in {} record(s), all N or "
                                                   "other IUPAC codes): no k-mer to count",
                                                   acc.other_bases, gc.records.size()));
      gc.acgt_bases = acc.acgt_bases;
      gc.other_bases = acc.other_bases;
      gc.file_bytes = infos[g].size_bytes;
      gc.compression = io::to_string(infos[g].compression);
      for (uint64_t x = 0; x < dense_n; ++x) pooled.dense[x] += acc.dense[x];
      for (uint64_t x = 0; x < tails_n; ++x) pooled.tails[x] += acc.tails[x];
      pooled_acgt += acc.acgt_bases;
      pooled_other += acc.other_bases;
      gc.counts = finalize_counts(acc);
      acc = RankCounts{};
      if (on_genome) on_genome(std::move(gc));
    }
  }
  if (opts.presence15) reduce_bor_u64(presence, 0, comm);
  if (rank == 0) {
    pooled.acgt_bases = pooled_acgt;
    pooled.other_bases = pooled_other;
    pooled.presence15 = std::move(presence);
    res.counts = finalize_counts(pooled);
  }
  const double reduce_s = std::chrono::duration<double>(clock::now() - t1).count();

  auto& s = summary.total;
  std::vector<uint64_t> b = {pooled_acgt, pooled_other};
  bcast_u64(b, 0, comm);
  s.acgt_bases = b[0];
  s.other_bases = b[1];
  s.file_bytes = 0;
  for (const auto& i : infos) s.file_bytes += i.size_bytes;
  s.compression = infos.empty() ? "none" : io::to_string(infos[0].compression);
  for (const auto& i : infos)
    if (i.compression != infos[0].compression) s.compression = "mixed";
  s.count_s = allreduce_max_double(count_s, comm);
  s.reduce_s = allreduce_max_double(reduce_s, comm);
  s.peak_rss_bytes = allreduce_max_u64(peak_rss_bytes(), comm);
  s.ranks = size;
  summary.spool_bytes = allreduce_max_u64(spool.bytes(), comm);
  // Balance: every rank's bytes and counting time, gathered for the summary.
  auto gathered = gather_serialized(std::pair<uint64_t, double>{my_bytes, count_s}, 0, comm);
  summary.rank_bytes.clear();
  summary.rank_count_s.clear();
  for (const auto& [bytes, secs] : gathered) {
    summary.rank_bytes.push_back(bytes);
    summary.rank_count_s.push_back(secs);
  }
  return res;
}

}  // namespace genemask::hpc
