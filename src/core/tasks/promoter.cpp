#include "genemask/tasks/promoter.hpp"

#include <algorithm>
#include <string_view>
#include <fmt/format.h>
#include <stdexcept>
#include <unordered_set>

#include "genemask/rng.hpp"
#include "io/bed.hpp"
#include "io/error.hpp"
#include "io/genome.hpp"
#include "io/parse_number.hpp"
#include "io/text_source.hpp"

namespace genemask::dataset {

namespace {


// Distinguishes the negatives' stream from the split's, which also hashes the sequence.
constexpr uint64_t kNegativeTag = 0x6e65676174697665ULL;  // "negative"

int64_t parse_offset(const std::string& text, const std::string& whole) {
  std::string_view digits = text;
  if (digits.size() > 1 && digits[0] == '+' && digits[1] != '-') digits.remove_prefix(1);
  const auto v = io::parse_decimal_i64(digits);
  if (!v)
    throw std::invalid_argument(
        fmt::format("--window '{}': expected FIRST:LAST offsets from the TSS, e.g. -34:35", whole));
  return *v;
}

}  // namespace

TssWindow parse_tss_window(const std::string& text) {
  if (text == "prom-core") return {-34, 35};
  if (text == "prom-300") return {-249, 50};
  const size_t colon = text.find(':', text.empty() ? 0 : 1);
  if (colon == std::string::npos)
    throw std::invalid_argument(
        fmt::format("--window '{}': expected FIRST:LAST offsets from the TSS (e.g. -34:35) or prom-core / prom-300", text));
  TssWindow w{parse_offset(text.substr(0, colon), text), parse_offset(text.substr(colon + 1), text)};
  if (w.first > w.last)
    throw std::invalid_argument(fmt::format("--window '{}': the first offset is after the last", text));
  if (w.length() < 20)
    throw std::invalid_argument(fmt::format("--window '{}': {} bp is too short (DeePromoter negatives need at least 20)",
                                            text, w.length()));
  return w;
}

bool cut_tss_window(const std::string& chrom, uint64_t tss, char strand, TssWindow w, std::string& out) {
  const int64_t t = static_cast<int64_t>(tss);
  const int64_t n = static_cast<int64_t>(chrom.size());
  // Genome coordinates [lo, hi] of the window, inclusive.
  const int64_t lo = strand == '+' ? t + w.first : t - w.last;
  const int64_t hi = strand == '+' ? t + w.last : t - w.first;
  if (lo < 0 || hi >= n) return false;
  out = chrom.substr(static_cast<size_t>(lo), static_cast<size_t>(hi - lo + 1));
  if (strand == '-') out = reverse_complement(out);
  return true;
}

std::vector<std::pair<size_t, size_t>> deepromoter_parts(size_t length, int parts) {
  std::vector<std::pair<size_t, size_t>> v;
  const size_t p = static_cast<size_t>(parts);
  for (size_t i = 0; i < p; ++i) v.emplace_back(i * length / p, (i + 1) * length / p);
  return v;
}

Negative deepromoter_negative(const std::string& positive, uint64_t seed, bool shuffle) {
  const auto parts = deepromoter_parts(positive.size());
  Rng rng(seed, Stream::shuffle, fnv1a(positive), kNegativeTag);
  // Partial Fisher-Yates: the first 8 of a random permutation of the 20 part indices.
  std::vector<int> order(parts.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  for (size_t i = 0; i < 8; ++i) std::swap(order[i], order[i + rng.below(order.size() - i)]);
  Negative neg;
  neg.kept.assign(order.begin(), order.begin() + 8);
  std::sort(neg.kept.begin(), neg.kept.end());
  neg.sequence = positive;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (std::binary_search(neg.kept.begin(), neg.kept.end(), static_cast<int>(i))) continue;
    auto [b, e] = parts[i];
    if (shuffle) {
      for (size_t j = e - b; j > 1; --j) std::swap(neg.sequence[b + j - 1], neg.sequence[b + rng.below(j)]);
    } else {
      for (size_t j = b; j < e; ++j) neg.sequence[j] = "ACGT"[rng.below(4)];
    }
  }
  return neg;
}

bool has_tata_box(const std::string& chrom, uint64_t tss, char strand) {
  std::string s;
  if (!cut_tss_window(chrom, tss, strand, TssWindow{-31, -18}, s)) return false;
  auto is = [](char c, const char* set) { return std::string_view(set).find(c) != std::string_view::npos; };
  for (size_t i = 0; i + 8 <= s.size(); ++i) {
    const char* m = s.data() + i;
    if (m[0] == 'T' && m[1] == 'A' && m[2] == 'T' && m[3] == 'A' && is(m[4], "AT") && m[5] == 'A' && is(m[6], "AT") &&
        is(m[7], "AG"))
      return true;
  }
  return false;
}

std::vector<Example> build_promoter(const PromoterOptions& o, DatasetStats& stats) {
  // A shuffled part of one or two bases is (nearly) itself: below 60 bp (parts of 3 bases)
  // the "negatives" were near copies of their positives under the other label.
  if (o.shuffle_negatives && o.window.length() < kMinShuffleWindow)
    throw std::invalid_argument(fmt::format("--negatives shuffle needs a window of at least {} bp (parts of 3 bases "
                                            "or more to shuffle); the window is {} bp: use --negatives deepromoter "
                                            "or a longer --window",
                                            kMinShuffleWindow, o.window.length()));
  const auto sites = io::read_tss(o.tss, o.bed_tss_offset);
  const auto records = io::genome_records(o.genome);
  std::vector<std::string> names;
  for (const auto& r : records) names.push_back(r.name);
  io::SeqidResolver resolver(names, o.chrom_map.empty() ? std::vector<std::pair<std::string, std::string>>{}
                                                        : io::read_chrom_map(o.chrom_map));

  // --tata-list: one promoter name per line (plain or gzip; '#' comments, blank lines, a
  // byte-order mark and spaces around a name are skipped). A list none of whose names is a
  // promoter's would silently put every promoter on one side of the filter.
  std::unordered_set<std::string> tata_names;
  if (!o.tata_list.empty()) {
    io::check_input_type(o.tata_list);
    io::for_each_line(o.tata_list, [&](std::string line, uint64_t ln) {
      const size_t a = line.find_first_not_of(" \t"), b = line.find_last_not_of(" \t");
      if (a == std::string::npos || line[a] == '#') return;
      line = line.substr(a, b - a + 1);
      if (line.find_first_of(" \t") != std::string::npos)
        throw io::InputError(o.tata_list, ln,
                             fmt::format("'{}' is not one promoter name: --tata-list takes one name per line (the "
                                         "names of --tss's BED name or SGA annotation field), not a BED or table",
                                         line));
      tata_names.insert(line);
    });
    if (tata_names.empty()) throw io::InputError(o.tata_list, "holds no promoter names");
    uint64_t listed = 0;
    std::string example;
    for (const auto& s : sites) {
      listed += tata_names.count(s.name);
      if (example.empty() && !s.name.empty()) example = s.name;
    }
    if (listed == 0)
      throw io::InputError(o.tata_list,
                           fmt::format("none of its {} names is the name of a promoter of {} ({}): the TATA filter "
                                       "would keep every promoter or none; give the list of the same promoter set",
                                       tata_names.size(), o.tss,
                                       example.empty() ? "its promoters have no names"
                                                       : fmt::format("which names them like '{}'", example)));
  }

  // Check every site before reading any sequence: input errors come first and fast.
  std::vector<std::vector<size_t>> by_record(records.size());
  for (size_t i = 0; i < sites.size(); ++i) {
    const auto& s = sites[i];
    const size_t r = resolver.resolve(s.chrom, o.tss, s.line, o.genome);
    if (s.pos >= records[r].length)
      throw io::InputError(o.tss, s.line,
                           fmt::format("TSS at {} (0-based) is beyond the end of '{}' ({} bp): is this the genome "
                                       "assembly the TSS file was made for?",
                                       s.pos, records[r].name, records[r].length));
    by_record[r].push_back(i);
  }

  std::vector<std::vector<Example>> per_site(sites.size());
  std::vector<bool> wanted(records.size());
  for (size_t r = 0; r < records.size(); ++r) wanted[r] = !by_record[r].empty();
  io::for_each_wanted_record(o.genome, records, wanted, [&](size_t r, const std::string& seq) {
    for (size_t i : by_record[r]) {
      const auto& s = sites[i];
      if (o.tata != PromoterOptions::Tata::all) {
        const bool tata = o.tata_list.empty() ? has_tata_box(seq, s.pos, s.strand) : tata_names.count(s.name) > 0;
        if (tata != (o.tata == PromoterOptions::Tata::tata_only)) {
          ++stats.dropped[tata ? "tata" : "not_tata"];
          continue;
        }
      }
      std::string w;
      if (!cut_tss_window(seq, s.pos, s.strand, o.window, w)) {
        ++stats.dropped["off_chromosome"];
        continue;
      }
      if (!is_acgt(w)) {
        ++stats.dropped["contains_n"];
        continue;
      }
      const std::string id = fmt::format("{}:{}({}){}{}", names[r], s.pos, s.strand, s.name.empty() ? "" : "|", s.name);
      Negative neg = deepromoter_negative(w, o.seed, o.shuffle_negatives);
      // The negative keeps 8 of its positive's 20 parts in place: split with it (by the
      // positive's hash), never a near copy of a training positive in the test split.
      per_site[i].push_back({w, "1", id, ""});
      per_site[i].push_back({std::move(neg.sequence), "0", id + "|negative", w});
    }
  });
  std::vector<Example> out;
  for (auto& v : per_site)
    for (auto& e : v) out.push_back(std::move(e));
  return out;
}

}  // namespace genemask::dataset
