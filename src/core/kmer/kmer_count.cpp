#include "genemask/kmer/kmer_count.hpp"

#include <algorithm>
#include <chrono>
#include <fmt/format.h>
#include <unordered_map>

#include "io/fasta_scan.hpp"

namespace genemask {
namespace {

constexpr int kPresenceK = 15;

/// Scanner handler that does the counting. kPresence adds the 15-mer presence set.
///
/// Ownership of k-mers: a k-mer belongs to the rank that owns the line of its first base.
/// In the common case every position of the current run is owned ("clean") and the fast
/// loop runs. After our text ends (lookahead) or when ownership resumes in the middle of a
/// run (round-robin gzip chunks), `ownbits` records the ownership of the last W positions
/// (bit i = the base i positions back) and only owned starts are counted.
template <bool kPresence>
class CountHandler {
 public:
  CountHandler(const io::FileInfo& file, const CountOptions& opts, const ProgressFn& progress)
      : file_(file), K_(opts.kmax), maskK_(kmer_mask(opts.kmax)), progress_(progress) {
    W_ = kPresence ? std::max(K_, kPresenceK) : K_;
    wmask_ = (uint32_t{1} << W_) - 1;
    dense16_.assign(num_kmers(K_), 0);
    out_.dense.assign(num_kmers(K_), 0);
    out_.kmax = K_;
    out_.tails.assign(RankCounts::tail_offset(K_), 0);
    if (kPresence) out_.presence15.assign(num_kmers(kPresenceK) / 64, 0);
  }

  void header(std::string_view name, uint64_t voff, bool owned) {
    flush_tail();
    if (owned) {
      close_segment();
      clean_ = true;
      out_.segments.push_back(RecordSegment{voff, std::string(name), 0});
      seg_start_ = bases_total();
    } else {
      lookahead_done_ = true;
    }
  }

  bool bases(const char* p, size_t n, uint64_t voff, bool owned) {
    if (!owned && lookahead_done_) return false;
    if (owned && clean_) {
      fast_loop(p, n, voff);
      return true;
    }
    return general_loop(p, n, voff, owned);
  }

  void end_owned() {
    close_segment();
    clean_ = false;
    ownbits_ = wmask_;
    lookahead_left_ = W_ - 1;
    lookahead_done_ = run_ == 0;  // nothing of ours is pending
  }

  void begin_owned(bool continuing, uint64_t voff) {
    close_segment();
    if (!continuing) {
      run_ = 0;
      clean_ = true;
    }
    lookahead_done_ = false;
    out_.segments.push_back(RecordSegment{voff, std::string(), 0});
    seg_start_ = bases_total();
  }

  void block_done(uint64_t file_pos) {
    if (progress_) progress_(file_pos);
  }

  void finish() {
    flush_tail();
    close_segment();
    fold();
  }

  RankCounts take() { return std::move(out_); }

 private:
  uint64_t bases_total() const { return out_.acgt_bases + out_.other_bases; }
  void close_segment() {
    if (!out_.segments.empty()) out_.segments.back().bases += bases_total() - seg_start_;
    seg_start_ = bases_total();
  }

  [[noreturn]] void invalid(const char* p, size_t i, uint64_t voff) {
    io::fail_invalid_base(file_, voff + i, static_cast<unsigned char>(p[i]));
  }

  void fast_loop(const char* p, size_t n, uint64_t voff) {
    // Sub-chunks bound the pending batch without a capacity check per base.
    while (n > kSubChunk) {
      fast_loop_part(p, kSubChunk, voff);
      p += kSubChunk;
      voff += kSubChunk;
      n -= kSubChunk;
    }
    fast_loop_part(p, n, voff);
  }

  /// The hot loop. Increments of dense counters commute, so their indices are queued and
  /// applied in batches with software prefetch: the table (4 MiB at k=10) exceeds L2.
  void fast_loop_part(const char* p, size_t n, uint64_t voff) {
    if (npend_ + n > kPendCap) drain();
    uint64_t code = code_, run = run_, acgt = 0;
    uint32_t* pend = pend_.data() + npend_;
    const uint64_t maskK = maskK_;
    const uint64_t K = static_cast<uint64_t>(K_);
    for (size_t i = 0; i < n; ++i) {
      const uint8_t c = io::kSeqClass[static_cast<unsigned char>(p[i])];
      if (c < 4) {
        code = (code << 2) | c;
        ++run;
        ++acgt;
        *pend = static_cast<uint32_t>(code & maskK);
        pend += run >= K;
        if constexpr (kPresence) {
          if (run >= static_cast<uint64_t>(kPresenceK)) set_presence(code);
        }
      } else if (c == io::kBreak) {
        code_ = code;
        run_ = run;
        flush_tail();
        run = 0;
        ++out_.other_bases;
      } else if (c != io::kSkip) {
        invalid(p, i, voff);
      }
    }
    npend_ = static_cast<size_t>(pend - pend_.data());
    code_ = code;
    run_ = run;
    out_.acgt_bases += acgt;
  }

  void drain() {
    constexpr size_t kAhead = 16;
    uint16_t* dense = dense16_.data();
    const uint32_t* q = pend_.data();
    const size_t n = npend_;
    size_t i = 0;
    for (; i + kAhead < n; ++i) {
      __builtin_prefetch(dense + q[i + kAhead], 1, 3);
      bump(dense, q[i]);
    }
    for (; i < n; ++i) bump(dense, q[i]);
    npend_ = 0;
  }

  /// 16-bit counters keep the k=10 table at 2 MiB (L2-sized); a wrap carries into the
  /// 64-bit table, which is touched once per 65536 increments of a k-mer.
  void bump(uint16_t* dense, uint32_t idx) {
    if (__builtin_expect(++dense[idx] == 0, 0)) out_.dense[idx] += uint64_t{1} << 16;
  }

  bool general_loop(const char* p, size_t n, uint64_t voff, bool owned) {
    const uint32_t own_now = owned ? 1u : 0u;
    for (size_t i = 0; i < n; ++i) {
      const uint8_t c = io::kSeqClass[static_cast<unsigned char>(p[i])];
      if (c < 4) {
        ownbits_ = ((ownbits_ << 1) | own_now) & wmask_;
        code_ = (code_ << 2) | c;
        ++run_;
        if (run_ >= static_cast<uint64_t>(K_) && ((ownbits_ >> (K_ - 1)) & 1u))
          bump(dense16_.data(), static_cast<uint32_t>(code_ & maskK_));
        if constexpr (kPresence) {
          if (run_ >= static_cast<uint64_t>(kPresenceK) && ((ownbits_ >> (kPresenceK - 1)) & 1u))
            set_presence(code_);
        }
        if (owned) {
          ++out_.acgt_bases;
          if (ownbits_ == wmask_) {  // every position that matters is ours again
            clean_ = true;
            fast_loop(p + i + 1, n - i - 1, voff + i + 1);
            return true;
          }
        } else if (--lookahead_left_ == 0) {
          lookahead_done_ = true;
          return false;
        }
      } else if (c == io::kBreak) {
        flush_tail();
        if (!owned) {
          lookahead_done_ = true;
          return false;
        }
        ++out_.other_bases;
        clean_ = true;
        fast_loop(p + i + 1, n - i - 1, voff + i + 1);
        return true;
      } else if (c != io::kSkip) {
        invalid(p, i, voff);
      }
    }
    return true;
  }

  void set_presence(uint64_t code) {
    const uint64_t idx = code & kmer_mask(kPresenceK);
    out_.presence15[idx >> 6] |= uint64_t{1} << (idx & 63);
  }

  /// k-mers starting in the last K-1 positions of the run (they have no K-mer to be
  /// marginalised from); only starts we own count.
  void flush_tail() {
    const uint64_t rmax = std::min<uint64_t>(run_, static_cast<uint64_t>(K_ - 1));
    for (uint64_t r = 1; r <= rmax; ++r) {
      if (!clean_ && !((ownbits_ >> (r - 1)) & 1u)) continue;
      for (uint64_t k = 1; k <= r; ++k) {
        const uint64_t code = (code_ >> (2 * (r - k))) & kmer_mask(static_cast<int>(k));
        ++out_.tails[RankCounts::tail_offset(static_cast<int>(k)) + code];
      }
    }
    run_ = 0;
  }

  void fold() {
    drain();
    for (size_t i = 0; i < dense16_.size(); ++i) out_.dense[i] += dense16_[i];
    std::fill(dense16_.begin(), dense16_.end(), uint16_t{0});
  }

  const io::FileInfo& file_;
  const int K_;
  const uint64_t maskK_;
  int W_;
  uint32_t wmask_;
  ProgressFn progress_;
  std::vector<uint16_t> dense16_;
  static constexpr size_t kSubChunk = 4096, kPendCap = 16384;
  std::vector<uint32_t> pend_ = std::vector<uint32_t>(kPendCap + 1);  // +1: the branch-free store
  size_t npend_ = 0;
  RankCounts out_;
  uint64_t code_ = 0, run_ = 0, seg_start_ = 0;
  bool clean_ = true;
  uint32_t ownbits_ = 0;
  int lookahead_left_ = 0;
  bool lookahead_done_ = false;
};

template <bool kPresence>
RankCounts run_count(const io::FileInfo& file, const io::Ownership& own, const CountOptions& opts,
                     const ProgressFn& progress) {
  CountHandler<kPresence> h(file, opts, progress);
  io::scan_fasta(file, own, h);
  return h.take();
}

/// Parse-only handler for profiling: classifies every byte, keeps no k-mer state.
struct ParseOnlyHandler {
  uint64_t acgt = 0;
  void header(std::string_view, uint64_t, bool) {}
  bool bases(const char* p, size_t n, uint64_t, bool) {
    for (size_t i = 0; i < n; ++i) acgt += io::kSeqClass[static_cast<unsigned char>(p[i])] < 4;
    return false;
  }
  void end_owned() {}
  void begin_owned(bool, uint64_t) {}
  void block_done(uint64_t) {}
  void finish() {}
};

}  // namespace

ScanProfile profile_scan(const io::FileInfo& file, const io::Ownership& own) {
  using clock = std::chrono::steady_clock;
  ScanProfile prof;
  auto t0 = clock::now();
  {
    auto reader = io::open_text(file, own.start_voffset());
    io::TextBlock b;
    uint64_t sum = 0;
    while (reader->next(b)) {
      sum += static_cast<unsigned char>(b.data[b.size - 1]);
      if (own.done_after(b.voff_base + b.size)) break;
    }
    prof.checksum = sum;
  }
  auto t1 = clock::now();
  ParseOnlyHandler h;
  io::scan_fasta(file, own, h);
  prof.checksum += h.acgt;
  auto t2 = clock::now();
  prof.read_s = std::chrono::duration<double>(t1 - t0).count();
  prof.parse_s = std::chrono::duration<double>(t2 - t1).count();
  return prof;
}

uint64_t RankCounts::tail_offset(int k) {
  uint64_t off = 0;
  for (int j = 1; j < k; ++j) off += num_kmers(j);
  return off;
}

void RankCounts::add(const RankCounts& o) {
  if (dense.empty()) {
    *this = o;
    return;
  }
  for (size_t i = 0; i < dense.size(); ++i) dense[i] += o.dense[i];
  for (size_t i = 0; i < tails.size(); ++i) tails[i] += o.tails[i];
  for (size_t i = 0; i < presence15.size(); ++i) presence15[i] |= o.presence15[i];
  acgt_bases += o.acgt_bases;
  other_bases += o.other_bases;
  segments.insert(segments.end(), o.segments.begin(), o.segments.end());
}

RankCounts count_owned(const io::FileInfo& file, const io::Ownership& own, const CountOptions& opts,
                       const ProgressFn& progress) {
  if (opts.kmax < 1 || opts.kmax > kMaxDenseK)
    throw std::invalid_argument(fmt::format("kmax must be in [1, {}], got {}", kMaxDenseK, opts.kmax));
  return opts.presence15 ? run_count<true>(file, own, opts, progress) : run_count<false>(file, own, opts, progress);
}

uint64_t KmerCounts::total(int k) const {
  uint64_t t = 0;
  for (uint64_t c : counts.at(static_cast<size_t>(k))) t += c;
  return t;
}

KmerCounts finalize_counts(const RankCounts& s) {
  KmerCounts out;
  out.kmax = s.kmax;
  out.counts.resize(static_cast<size_t>(s.kmax) + 1);
  out.counts[static_cast<size_t>(s.kmax)] = s.dense;
  // D_k[w] = sum_a D_{k+1}[w a]: prefix marginals of the dense counts.
  std::vector<uint64_t> prev = s.dense;
  for (int k = s.kmax - 1; k >= 1; --k) {
    std::vector<uint64_t> cur(num_kmers(k), 0);
    for (size_t w = 0; w < cur.size(); ++w) cur[w] = prev[4 * w] + prev[4 * w + 1] + prev[4 * w + 2] + prev[4 * w + 3];
    prev = cur;
    const uint64_t off = RankCounts::tail_offset(k);
    for (size_t w = 0; w < cur.size(); ++w) cur[w] += s.tails[off + w];
    out.counts[static_cast<size_t>(k)] = std::move(cur);
  }
  out.presence15 = s.presence15;
  return out;
}

std::vector<RecordInfo> stitch_records(const io::FileInfo& file, std::vector<RecordSegment> segments) {
  std::sort(segments.begin(), segments.end(),
            [](const RecordSegment& a, const RecordSegment& b) { return a.voff < b.voff; });
  std::vector<RecordInfo> records;
  std::unordered_map<std::string, size_t> seen;
  for (const auto& seg : segments) {
    if (seg.name.empty()) {
      if (!records.empty()) records.back().length += seg.bases;
      continue;
    }
    if (!records.empty() && records.back().length == 0)
      io::fail_at(file, records.back().voff, fmt::format("record '{}' has no sequence", records.back().name));
    auto [it, inserted] = seen.emplace(io::record_name_key(seg.name), records.size());
    if (!inserted)
      io::fail_at(file, seg.voff,
                  io::duplicate_record_problem(seg.name, records[it->second].name,
                                               io::line_of_voffset(file, records[it->second].voff)));
    records.push_back(RecordInfo{seg.name, seg.bases, seg.voff});
  }
  if (!records.empty() && records.back().length == 0)
    io::fail_at(file, records.back().voff, fmt::format("record '{}' has no sequence", records.back().name));
  if (records.empty()) throw io::InputError(file.path, "has no FASTA record (no '>' header line): nothing to read");
  return records;
}

KmerCounts brute_force_counts(const std::vector<std::string>& sequences, int kmax, bool presence15) {
  KmerCounts out;
  out.kmax = kmax;
  out.counts.resize(static_cast<size_t>(kmax) + 1);
  for (int k = 1; k <= kmax; ++k) out.counts[static_cast<size_t>(k)].assign(num_kmers(k), 0);
  if (presence15) out.presence15.assign(num_kmers(kPresenceK) / 64, 0);
  for (const auto& s : sequences) {
    for (size_t i = 0; i < s.size(); ++i) {
      for (int k = 1; k <= std::max(kmax, presence15 ? kPresenceK : 0) && i + static_cast<size_t>(k) <= s.size(); ++k) {
        uint64_t code;
        if (!encode_kmer(std::string_view(s).substr(i, static_cast<size_t>(k)), code)) break;
        if (k <= kmax) ++out.counts[static_cast<size_t>(k)][code];
        if (presence15 && k == kPresenceK) out.presence15[code >> 6] |= uint64_t{1} << (code & 63);
      }
    }
  }
  return out;
}

}  // namespace genemask
