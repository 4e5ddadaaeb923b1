#include "genemask/corpus/shard_build.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <stdexcept>
#include <unordered_map>

#include "genemask/rng.hpp"
#include "genemask/corpus/tokenizer.hpp"
#include "io/fasta_scan.hpp"
#include "io/sha256.hpp"
#include "io/shard_file.hpp"

namespace genemask {
namespace {

/// Pass 1 handler: bases per owned stretch.
class RecordScanHandler {
 public:
  RecordScanHandler(const io::FileInfo& f, const ProgressFn& progress) : file_(f), progress_(progress) {}
  void header(std::string_view name, uint64_t voff, bool owned) {
    if (owned) segs_.push_back(RecordSegment{voff, std::string(name), 0});
  }
  bool bases(const char* p, size_t n, uint64_t voff, bool owned) {
    if (!owned) return false;
    uint64_t b = 0;
    for (size_t i = 0; i < n; ++i) {
      const uint8_t c = io::kSeqClass[static_cast<unsigned char>(p[i])];
      if (c == io::kInvalid) io::fail_invalid_base(file_, voff + i, static_cast<unsigned char>(p[i]));
      b += c != io::kSkip;
    }
    if (!segs_.empty()) segs_.back().bases += b;
    return true;
  }
  void end_owned() {}
  void begin_owned(bool, uint64_t voff) { segs_.push_back(RecordSegment{voff, std::string(), 0}); }
  void block_done(uint64_t pos) {
    if (progress_) progress_(pos);
  }
  void finish() {}
  std::vector<RecordSegment> take() { return std::move(segs_); }

 private:
  const io::FileInfo& file_;
  const ProgressFn& progress_;
  std::vector<RecordSegment> segs_;
};

class ShardWriter {
 public:
  ShardWriter(const ShardBuildOptions& o, std::string split) : o_(o), split_(std::move(split)) {}
  void add(uint64_t sample_index, uint32_t chrom, uint64_t start, uint32_t genome, const std::vector<uint16_t>& tokens) {
    d_.tokens.insert(d_.tokens.end(), tokens.begin(), tokens.end());
    d_.offsets.push_back(d_.tokens.size());
    d_.sample_index.push_back(sample_index);
    d_.chrom.push_back(chrom);
    d_.start.push_back(start);
    if (o_.genomes > 0) d_.genome.push_back(genome);
    if (d_.tokens.size() >= o_.shard_tokens) flush();
  }
  void flush() {
    if (d_.samples() == 0) return;
    ShardFileInfo info;
    info.split = split_;
    info.file = fmt::format("{}-r{:05d}-{:05d}.h5", split_, o_.rank, seq_++);
    info.samples = d_.samples();
    info.tokens = d_.tokens.size();
    info.first_sample = d_.sample_index.front();
    info.last_sample = d_.sample_index.back();
    const std::string path = o_.out_dir + "/" + info.file;
    io::write_shard(path, d_, split_, o_.recipe.seed, o_.vocab_sha256);
    info.sha256 = io::sha256_file(path);
    files.push_back(info);
    d_.clear();
  }
  std::vector<ShardFileInfo> files;

 private:
  const ShardBuildOptions& o_;
  std::string split_;
  io::ShardData d_;
  int seq_ = 0;
};

/// Pass 2 handler: cuts candidates as the bases stream by.
class ShardHandler {
 public:
  ShardHandler(const io::FileInfo& file, const std::vector<ChromPlan>& plan, const std::vector<StretchStart>& starts,
               const ShardBuildOptions& o, ShardWriter& train, ShardWriter& valid, ShardBuildStats& stats,
               uint32_t genome, const ProgressFn& progress)
      : file_(file), plan_(plan), o_(o), train_(train), valid_(valid), stats_(stats), genome_(genome),
        progress_(progress) {
    for (const auto& s : starts) starts_.emplace(s.voff, s);
  }

  void header(std::string_view, uint64_t voff, bool owned) {
    if (!owned) {
      done_ = true;  // a header ends any lookahead; candidates never run past their record
      return;
    }
    enter(voff);
  }
  void begin_owned(bool continuing, uint64_t voff) {
    done_ = false;
    if (!continuing) enter(voff);
  }
  void end_owned() { done_ = !active_; }
  void block_done(uint64_t pos) {
    if (progress_) progress_(pos);
  }
  void finish() {}  // the writers are flushed after the rank's last stretch

  bool bases(const char* p, size_t n, uint64_t voff, bool owned) {
    if (!owned && done_) return false;
    if (chrom_ < 0) return !owned ? false : true;  // cannot happen for well-formed plans
    for (size_t i = 0; i < n; ++i) {
      const unsigned char ch = static_cast<unsigned char>(p[i]);
      const uint8_t c = io::kSeqClass[ch];
      if (c == io::kSkip) continue;
      if (c == io::kInvalid) io::fail_invalid_base(file_, voff + i, ch);
      if (!active_ && next_ < cands_.size() && pos_ == cands_[next_].start) {
        if (!owned) {  // a candidate that starts beyond our text is not ours
          done_ = true;
          return false;
        }
        active_ = true;
        buf_.clear();
      }
      if (active_) {
        buf_.push_back(static_cast<char>(ch >= 'a' ? ch - 32 : ch));
        if (buf_.size() == cands_[next_].bases) {
          emit();
          active_ = false;
          ++next_;
          if (!owned) {
            done_ = true;
            return false;
          }
        }
      } else if (!owned) {
        done_ = true;
        return false;
      }
      ++pos_;
    }
    return true;
  }

 private:
  void enter(uint64_t voff) {
    auto it = starts_.find(voff);
    if (it == starts_.end()) throw std::logic_error(fmt::format("no stretch starts at voffset {}", voff));
    const uint32_t chrom = it->second.chrom;
    if (static_cast<int64_t>(chrom) != chrom_) {
      chrom_ = chrom;
      cands_ = candidates(plan_[chrom].length, chrom, o_.recipe, plan_[chrom].boundaries);
    }
    pos_ = it->second.base_offset;
    active_ = false;
    next_ = static_cast<size_t>(std::lower_bound(cands_.begin(), cands_.end(), pos_,
                                                 [](const Candidate& c, uint64_t p) { return c.start < p; }) -
                                cands_.begin());
  }

  void emit() {
    ++stats_.candidates;
    for (char c : buf_) {
      if (c != 'A' && c != 'C' && c != 'G' && c != 'T') {
        ++stats_.dropped_non_acgt;
        return;
      }
    }
    ++stats_.kept;
    const auto& cand = cands_[next_];
    const uint64_t index = plan_[static_cast<size_t>(chrom_)].first_sample + next_;
    tokens_ = tokenize(buf_);
    const bool valid = is_validation(o_.recipe.seed, index, o_.valid_fraction);
    if (valid) {
      ++stats_.samples_valid;
      stats_.tokens_valid += tokens_.size();
      valid_.add(index, static_cast<uint32_t>(chrom_), cand.start, genome_, tokens_);
    } else {
      ++stats_.samples_train;
      stats_.tokens_train += tokens_.size();
      train_.add(index, static_cast<uint32_t>(chrom_), cand.start, genome_, tokens_);
    }
    if (genome_ < stats_.genome_samples_train.size()) {
      ++(valid ? stats_.genome_samples_valid : stats_.genome_samples_train)[genome_];
      (valid ? stats_.genome_tokens_valid : stats_.genome_tokens_train)[genome_] += tokens_.size();
    }
  }

  const io::FileInfo& file_;
  const std::vector<ChromPlan>& plan_;
  const ShardBuildOptions& o_;
  std::unordered_map<uint64_t, StretchStart> starts_;
  ShardWriter& train_;
  ShardWriter& valid_;
  ShardBuildStats& stats_;
  uint32_t genome_;
  const ProgressFn& progress_;
  int64_t chrom_ = -1;
  std::vector<Candidate> cands_;
  size_t next_ = 0;
  uint64_t pos_ = 0;
  bool active_ = false, done_ = false;
  std::string buf_;
  std::vector<uint16_t> tokens_;
};

}  // namespace

uint64_t shard_buffer_bytes(const ShardBuildOptions& opts) {
  const uint64_t samples = opts.shard_tokens / std::max<uint64_t>(1, opts.recipe.min_tokens) + 1;
  const uint64_t shard = opts.shard_tokens * sizeof(uint16_t) +
                         samples * (2 * sizeof(uint64_t) + sizeof(uint32_t) + sizeof(uint64_t));
  return 2 * 2 * shard + shard;
}

bool is_validation(uint64_t seed, uint64_t sample_index, double valid_fraction) {
  return hash_uniform(seed, Stream::split, sample_index) < valid_fraction;
}

std::vector<RecordSegment> scan_records(const io::FileInfo& file, const io::Ownership& own,
                                        const ProgressFn& progress) {
  RecordScanHandler h(file, progress);
  io::scan_fasta(file, own, h);
  return h.take();
}

std::vector<StretchStart> locate_stretches(std::vector<RecordSegment> segments) {
  std::sort(segments.begin(), segments.end(),
            [](const RecordSegment& a, const RecordSegment& b) { return a.voff < b.voff; });
  std::vector<StretchStart> out;
  int64_t chrom = -1;
  uint64_t offset = 0;
  for (const auto& s : segments) {
    if (!s.name.empty()) {
      ++chrom;
      offset = 0;
    }
    if (chrom >= 0) out.push_back(StretchStart{s.voff, static_cast<uint32_t>(chrom), offset});
    offset += s.bases;
  }
  return out;
}

std::vector<ChromPlan> plan_chromosomes(const std::vector<RecordInfo>& records, const SegmentRecipe& recipe,
                                        std::vector<std::vector<uint64_t>> boundaries) {
  std::vector<ChromPlan> plan;
  uint64_t next = 0;
  for (size_t i = 0; i < records.size(); ++i) {
    ChromPlan p;
    p.name = records[i].name;
    p.length = records[i].length;
    if (i < boundaries.size()) p.boundaries = std::move(boundaries[i]);
    p.first_sample = next;
    p.candidates = count_candidates(p.length, i, recipe, p.boundaries);
    next += p.candidates;
    plan.push_back(std::move(p));
  }
  return plan;
}

ShardBuildStats build_owned_shards(const std::vector<OwnedText>& parts, const std::vector<ChromPlan>& plan,
                                   const ShardBuildOptions& opts) {
  ShardWriter train(opts, "train"), valid(opts, "valid");
  ShardBuildStats stats;
  for (auto* v : {&stats.genome_samples_train, &stats.genome_samples_valid, &stats.genome_tokens_train,
                  &stats.genome_tokens_valid})
    v->assign(opts.genomes, 0);
  for (const auto& p : parts) {
    ShardHandler h(*p.file, plan, *p.starts, opts, train, valid, stats, p.genome, p.progress);
    io::scan_fasta(*p.file, p.own, h);
  }
  train.flush();
  valid.flush();
  stats.files = train.files;
  stats.files.insert(stats.files.end(), valid.files.begin(), valid.files.end());
  return stats;
}

ShardBuildStats build_owned_shards(const io::FileInfo& file, const io::Ownership& own,
                                   const std::vector<ChromPlan>& plan, const std::vector<StretchStart>& starts,
                                   const ShardBuildOptions& opts) {
  return build_owned_shards({OwnedText{&file, own, &starts, 0, {}}}, plan, opts);
}

}  // namespace genemask
