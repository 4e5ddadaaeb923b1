#include "genemask/tasks/splice.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <map>
#include <stdexcept>
#include <tuple>
#include <unordered_map>

#include "genemask/rng.hpp"
#include "io/bed.hpp"
#include "io/error.hpp"
#include "io/genome.hpp"

namespace genemask::dataset {
namespace {


// A window before sorting into genomic order.
struct Pending {
  uint64_t start;
  char strand;
  std::string label;
  Example ex;
};

// Cuts [start, start + w) on `strand`; false (counted) when off the chromosome or not ACGT.
bool cut(const std::string& chrom, const std::string& seq, int64_t start, uint64_t w, char strand,
         const std::string& label, const std::string& transcript, std::vector<Pending>& out, DatasetStats& stats) {
  if (start < 0 || static_cast<uint64_t>(start) + w > seq.size()) {
    ++stats.dropped["off_chromosome"];
    return false;
  }
  const auto s = static_cast<uint64_t>(start);
  std::string v = seq.substr(s, w);
  if (!is_acgt(v)) {
    ++stats.dropped["contains_n"];
    return false;
  }
  Example ex;
  ex.sequence = strand == '-' ? reverse_complement(v) : std::move(v);
  ex.label = label;
  ex.id = fmt::format("{}:{}-{}({}):{}", chrom, s, s + w, strand, transcript);
  out.push_back({s, strand, label, std::move(ex)});
  return true;
}

}  // namespace

void validate(const SpliceOptions& o) {
  if (o.window < 6 || o.window % 2 != 0)
    throw std::invalid_argument(
        fmt::format("--window must be even and at least 6 (the site sits between its two halves), got {}", o.window));
  if (!(o.negatives_per_site >= 0) || !std::isfinite(o.negatives_per_site))
    throw std::invalid_argument(fmt::format("--negatives-per-site must be >= 0, got {}", o.negatives_per_site));
  if (o.exon_feature.empty() || o.exon_feature.find_first_of("\t\n") != std::string::npos)
    throw std::invalid_argument(
        fmt::format("--exon-feature must be a GTF/GFF3 feature type such as exon or CDS, got '{}'", o.exon_feature));
}

SpliceCounts splice_windows(const std::string& chrom, const std::string& seq,
                            const std::vector<const io::TranscriptExons*>& transcripts, const SpliceOptions& o,
                            std::vector<Example>& out, DatasetStats& stats) {
  validate(o);
  const uint64_t w = o.window;
  const auto half = static_cast<int64_t>(w / 2);
  SpliceCounts counts;

  // Every exon boundary of every transcript excludes non-splice windows around it.
  std::vector<uint64_t> boundaries;
  // Distinct sites (x, strand, label) and introns (a, b, strand), each with its first transcript.
  std::map<std::tuple<uint64_t, char, std::string>, std::string> sites;
  std::map<std::tuple<uint64_t, uint64_t, char>, std::string> introns;
  for (const io::TranscriptExons* t : transcripts) {
    for (const auto& [s, e] : t->exons) {
      boundaries.push_back(s);
      boundaries.push_back(e);
    }
    if (t->strand != '+' && t->strand != '-') {
      ++counts.unstranded_transcripts;
      continue;
    }
    for (size_t i = 0; i + 1 < t->exons.size(); ++i) {
      const uint64_t a = t->exons[i].second, b = t->exons[i + 1].first;  // intron [a, b)
      const bool plus = t->strand == '+';
      sites.try_emplace({a, t->strand, plus ? kDonorLabel : kAcceptorLabel}, t->id);
      sites.try_emplace({b, t->strand, plus ? kAcceptorLabel : kDonorLabel}, t->id);
      introns.try_emplace({a, b, t->strand}, t->id);
    }
  }
  std::sort(boundaries.begin(), boundaries.end());
  boundaries.erase(std::unique(boundaries.begin(), boundaries.end()), boundaries.end());

  std::vector<Pending> pending;
  for (const auto& [key, transcript] : sites) {
    const auto& [x, strand, label] = key;
    (label == kDonorLabel ? counts.donor_sites : counts.acceptor_sites) += 1;
    cut(chrom, seq, static_cast<int64_t>(x) - half, w, strand, label, transcript, pending, stats);
  }

  // Non-splice windows: 2R per intron on average (an intron has one donor and one
  // acceptor), starts uniform over the positions p in [a, b - W] whose window [p, p + W]
  // (closed: touching a boundary counts) holds no boundary.
  const double per_intron = 2.0 * o.negatives_per_site;
  const uint64_t chrom_key = fnv1a(chrom);
  for (const auto& [key, transcript] : introns) {
    const auto& [a, b, strand] = key;
    ++counts.introns;
    if (b > seq.size() || b < a + w) {
      ++counts.introns_without_room;
      continue;
    }
    // Allowed starts: [a, b - w] minus [x - w, x] for each boundary x in [a, b].
    std::vector<std::pair<uint64_t, uint64_t>> allowed;  // closed ranges
    uint64_t lo = a;
    const uint64_t hi = b - w;
    for (auto it = std::lower_bound(boundaries.begin(), boundaries.end(), a);
         it != boundaries.end() && *it <= b && lo <= hi; ++it) {
      const uint64_t x = *it;
      const uint64_t ban_lo = x >= w ? x - w : 0;
      if (ban_lo > lo) allowed.emplace_back(lo, std::min(hi, ban_lo - 1));
      lo = std::max(lo, x + 1);
    }
    if (lo <= hi) allowed.emplace_back(lo, hi);
    uint64_t room = 0;
    for (const auto& [l, h] : allowed) room += h - l + 1;
    if (room == 0) {
      ++counts.introns_without_room;
      continue;
    }
    Rng rng(o.seed, Stream::shuffle, chrom_key ^ 0x5b1ce5b1ce5b1ceULL,
            splitmix64(a) ^ splitmix64(b + (strand == '-' ? 1ULL << 62 : 0)));
    const double u = rng.uniform();
    uint64_t n = room;  // a rate past the room (up to 1e300: past 2^64) takes every allowed position
    if (per_intron < static_cast<double>(room)) {
      const auto whole = static_cast<uint64_t>(std::floor(per_intron));
      n = std::min(whole + (u < per_intron - static_cast<double>(whole) ? 1 : 0), room);
    }
    std::vector<uint64_t> picked;
    for (uint64_t tries = 0; picked.size() < n && tries < 20 * n + 20; ++tries) {
      uint64_t k = rng.below(room);
      uint64_t p = 0;
      for (const auto& [l, h] : allowed) {
        if (k <= h - l) {
          p = l + k;
          break;
        }
        k -= h - l + 1;
      }
      if (std::find(picked.begin(), picked.end(), p) == picked.end()) picked.push_back(p);
    }
    for (uint64_t p : picked)
      cut(chrom, seq, static_cast<int64_t>(p), w, strand, kNonSpliceLabel, transcript, pending, stats);
  }

  std::stable_sort(pending.begin(), pending.end(), [](const Pending& x, const Pending& y) {
    return std::tie(x.start, x.strand, x.label) < std::tie(y.start, y.strand, y.label);
  });
  for (auto& p : pending) out.push_back(std::move(p.ex));
  return counts;
}

void resolve_splice_duplicates(std::vector<Example>& examples, DatasetStats& stats, uint64_t max_per_class,
                               uint64_t seed) {
  struct Seen {
    std::string label;
    bool ambiguous = false;
    uint64_t count = 0;
  };
  std::unordered_map<std::string, Seen> seen;
  for (const auto& e : examples) {
    auto [it, fresh] = seen.try_emplace(e.sequence, Seen{e.label, false, 0});
    ++it->second.count;
    if (!fresh && it->second.label != e.label) it->second.ambiguous = true;
  }
  std::vector<Example> kept;
  for (auto& e : examples) {
    auto it = seen.find(e.sequence);
    if (it->second.ambiguous) {
      ++stats.dropped["ambiguous"];
      continue;
    }
    if (it->second.count == 0) {  // a later copy of a kept sequence
      ++stats.dropped["duplicate"];
      continue;
    }
    it->second.count = 0;
    kept.push_back(std::move(e));
  }
  if (max_per_class > 0) {
    std::map<std::string, std::vector<std::pair<uint64_t, size_t>>> by_class;  // label -> (hash, index)
    for (size_t i = 0; i < kept.size(); ++i)
      by_class[kept[i].label].emplace_back(Rng(seed, Stream::shuffle, fnv1a(kept[i].sequence)).next(), i);
    std::vector<char> keep(kept.size(), 1);
    for (auto& [label, v] : by_class) {
      if (v.size() <= max_per_class) continue;
      std::sort(v.begin(), v.end());
      for (size_t j = max_per_class; j < v.size(); ++j) keep[v[j].second] = 0;
      stats.dropped["over_max_per_class"] += v.size() - max_per_class;
    }
    std::vector<Example> capped;
    for (size_t i = 0; i < kept.size(); ++i)
      if (keep[i]) capped.push_back(std::move(kept[i]));
    kept = std::move(capped);
  }
  examples = std::move(kept);
}

SpliceBuild build_splice_dataset(const std::string& genome, const std::string& annotation, const SpliceOptions& o) {
  validate(o);
  SpliceBuild r;
  for (const char* reason : {"off_chromosome", "contains_n", "duplicate", "ambiguous"}) r.stats.dropped[reason] = 0;
  const auto records = io::genome_records(genome);
  std::vector<std::string> names;
  for (const auto& rec : records) names.push_back(rec.name);
  const auto transcripts = io::read_transcript_exons(annotation, o.exon_feature);
  r.transcripts = transcripts.size();

  io::SeqidResolver resolver(names, o.chrom_map.empty() ? std::vector<std::pair<std::string, std::string>>{}
                                                        : io::read_chrom_map(o.chrom_map));
  std::vector<std::vector<const io::TranscriptExons*>> per_record(records.size());
  for (const auto& t : transcripts) {
    if (t.exons.size() >= 2) ++r.multi_exon_transcripts;
    size_t ri = 0;
    try {
      ri = resolver.resolve(t.seqid, annotation, t.line, genome);
    } catch (const io::InputError& e) {
      if (o.skip_unknown_chromosomes) {
        ++r.unknown_chromosome_transcripts;
        continue;
      }
      // The resolver's message, plus which transcript and this command's way out.
      const std::string prefix = fmt::format("{}:{}: ", annotation, t.line);
      std::string msg = e.what();
      if (msg.rfind(prefix, 0) == 0) msg.erase(0, prefix.size());
      throw io::InputError(annotation, t.line,
                           fmt::format("transcript '{}': {}; or leave such transcripts out with "
                                       "--skip-unknown-chromosomes",
                                       t.id, msg));
    }
    const auto& rec = records[ri];
    if (t.exons.back().second > rec.length)
      throw io::InputError(annotation, t.line,
                           fmt::format("transcript '{}' has an exon at {}-{} (1-based, inclusive), beyond the end of "
                                       "{} (length {}) in {}: is the annotation for this genome assembly?",
                                       t.id, t.exons.back().first + 1, t.exons.back().second, rec.name, rec.length,
                                       genome));
    per_record[ri].push_back(&t);
  }
  std::vector<bool> wanted(names.size());
  for (size_t i = 0; i < names.size(); ++i) wanted[i] = !per_record[i].empty();
  r.chromosomes = static_cast<uint64_t>(std::count(wanted.begin(), wanted.end(), true));

  io::for_each_wanted_record(genome, records, wanted, [&](size_t ri, const std::string& seq) {
    const SpliceCounts c = splice_windows(names[ri], seq, per_record[ri], o, r.examples, r.stats);
    r.counts.donor_sites += c.donor_sites;
    r.counts.acceptor_sites += c.acceptor_sites;
    r.counts.introns += c.introns;
    r.counts.introns_without_room += c.introns_without_room;
    r.counts.unstranded_transcripts += c.unstranded_transcripts;
  });
  resolve_splice_duplicates(r.examples, r.stats, o.max_per_class, o.seed);
  return r;
}

}  // namespace genemask::dataset
