#include "io/rank_tables.hpp"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <optional>
#include <fmt/format.h>
#include <fstream>
#include <sstream>
#include <unordered_map>

#include "io/atomic_file.hpp"
#include "io/error.hpp"
#include "io/parse_number.hpp"
#include "io/text_source.hpp"

namespace genemask::io {
namespace {


std::vector<std::string> split_tabs(const std::string& line) {
  std::vector<std::string> f;
  std::stringstream ss(line);
  std::string tok;
  while (std::getline(ss, tok, '\t')) f.push_back(tok);
  return f;
}

struct TableReader {
  std::string path;
  std::ifstream in;
  uint64_t lineno = 0;
  // The type is checked before the stream opens it: a directory opens and reads as an empty
  // file, a FIFO blocks.
  TableReader(const std::string& p, const char* header) : path((check_input_type(p), p)), in(p) {
    if (!in) throw InputError(path, "cannot open: " + open_error_reason(errno));
    std::string line;
    if (!next(line)) throw InputError(path, 1, "empty file: expected a header line");
    if (line != header)
      throw InputError(path, 1, fmt::format("unexpected header '{}' (expected '{}')", line, header));
  }
  bool next(std::string& line) {
    if (!std::getline(in, line)) return false;
    ++lineno;
    // genemask ends every line it writes: a last line without its end is a file cut short
    // (a copy stopped, a download cut), whose last value is partial and later rows missing.
    if (in.eof())
      throw InputError(path, lineno, "the last line has no line end: the file was cut short (genemask ends every "
                                     "line of the tables it writes); use the whole file, or write it again");
    if (lineno == 1) strip_utf8_bom(line);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    check_no_zero_byte(path, lineno, line);
    return true;
  }
  uint64_t u64(const std::string& s, const char* col) const {
    const auto v = parse_decimal_u64(s);
    if (!v) throw InputError(path, lineno, fmt::format("column {}: not a non-negative integer: '{}'", col, s));
    return *v;
  }
  double f64(const std::string& s, const char* col) const {
    // What fmt_double writes: a decimal, or nan (a k-mer never seen); inf is read to be
    // refused by the rows' checks, with their reason.
    if (s == "nan") return std::numeric_limits<double>::quiet_NaN();
    if (s == "inf" || s == "-inf") return s[0] == '-' ? -HUGE_VAL : HUGE_VAL;
    const auto v = parse_decimal_double(s);
    if (!v) throw InputError(path, lineno, fmt::format("column {}: not a number: '{}'", col, s));
    return *v;
  }
  void kmer(const std::string& s, size_t& len) const {
    if (s.empty() || s.find_first_not_of("ACGT") != std::string::npos)
      throw InputError(path, lineno, fmt::format("column kmer: '{}' is not an upper-case ACGT k-mer", s));
    if (len && s.size() != len)
      throw InputError(path, lineno, fmt::format("k-mer '{}' has length {}, earlier rows have {}", s, s.size(), len));
    len = s.size();
  }
  void rank(uint64_t r, uint64_t expected) const {
    if (r != expected)
      throw InputError(path, lineno, fmt::format("rank {} out of order (expected {})", r, expected));
  }
};

std::string pmi_vocab_end_line(size_t rows) { return fmt::format("# end: {} rows", rows); }

// -0 (an NPMI of a k-mer seen once: 0 / -log p) written as 0.
std::string fmt_double(double v) { return std::isnan(v) ? std::string("nan") : fmt::format("{}", v == 0 ? 0.0 : v); }

}  // namespace

void write_npmi_tsv(const std::string& path, const std::vector<NpmiRow>& rows) {
  AtomicFile f(path);
  auto& o = f.stream();
  o << kNpmiHeader << '\n';
  for (const auto& r : rows)
    o << r.rank << '\t' << r.kmer << '\t' << r.count << '\t' << fmt_double(r.pmi) << '\t' << fmt_double(r.npmi) << '\t'
      << (r.below_min_count ? 1 : 0) << '\n';
  f.commit();
}

std::vector<NpmiRow> read_npmi_tsv(const std::string& path) {
  TableReader t(path, kNpmiHeader);
  std::vector<NpmiRow> rows;
  std::unordered_map<std::string, uint64_t> first_line;  // k-mer -> its line
  std::string line;
  size_t len = 0;
  while (t.next(line)) {
    if (line.empty()) continue;
    auto f = split_tabs(line);
    if (f.size() != 6) throw InputError(path, t.lineno, fmt::format("expected 6 tab-separated columns, found {}", f.size()));
    NpmiRow r;
    r.rank = t.u64(f[0], "rank");
    t.rank(r.rank, rows.size() + 1);
    t.kmer(f[1], len);
    r.kmer = f[1];
    r.count = t.u64(f[2], "count");
    r.pmi = t.f64(f[3], "pmi");
    r.npmi = t.f64(f[4], "npmi");
    // NaN means "never seen" (count 0) and nothing else. (The paper's discounted NPMI may
    // leave [-1, 1] slightly, so its range is not checked.)
    if ((std::isnan(r.pmi) || std::isnan(r.npmi)) && r.count > 0)
      throw InputError(path, t.lineno, fmt::format("pmi/npmi is NaN for k-mer {} with count {}: NaN is only for "
                                                   "k-mers never seen (count 0)",
                                                   f[1], r.count));
    if (const auto [at, fresh] = first_line.emplace(r.kmer, t.lineno); !fresh)
      throw InputError(path, t.lineno,
                       fmt::format("k-mer {} is listed twice (first at line {}): a ranking lists each k-mer once",
                                   r.kmer, at->second));
    if (f[5] != "0" && f[5] != "1")
      throw InputError(path, t.lineno, fmt::format("column below_min_count: expected 0 or 1, found '{}'", f[5]));
    r.below_min_count = f[5] == "1";
    if (std::isinf(r.pmi) || std::isinf(r.npmi))
      throw InputError(path, t.lineno, fmt::format("pmi/npmi is infinite for k-mer {}: a k-mer seen has a finite "
                                                   "PMI, one never seen has nan",
                                                   r.kmer));
    // The rank order the ranking promises (docs/formats.md), as `genemask npmi` sorts:
    // k-mers at or above --min-count first, then NPMI descending, nan (never seen) last, ties
    // by k-mer code (the k-mers' alphabetical order: A < C < G < T). A table sorted
    // otherwise, or edited, would give GeneMask and `motifs` ranks that are not GRANK's.
    if (!rows.empty()) {
      const NpmiRow& p = rows.back();
      const bool pn = std::isnan(p.npmi), rn = std::isnan(r.npmi);
      const bool in_order = p.below_min_count != r.below_min_count ? !p.below_min_count
                            : pn != rn                              ? !pn
                            : !pn && p.npmi != r.npmi               ? p.npmi > r.npmi
                                                                    : p.kmer < r.kmer;
      if (!in_order)
        throw InputError(path, t.lineno,
                         fmt::format("k-mer {} (npmi {}, below_min_count {}) is ranked after {} (npmi {}, "
                                     "below_min_count {}): the rows are not in rank order (k-mers below the minimum "
                                     "count last, then NPMI descending, nan last, ties by k-mer); use the table "
                                     "`genemask npmi` wrote",
                                     r.kmer, fmt_double(r.npmi), f[5], p.kmer, fmt_double(p.npmi),
                                     p.below_min_count ? 1 : 0));
    }
    rows.push_back(std::move(r));
  }
  if (rows.empty()) throw InputError(path, "no rows: expected one row per k-mer");
  // below_min_count splits the counts at one threshold (--min-count).
  {
    const NpmiRow *low_above = nullptr, *high_below = nullptr;
    for (const auto& r : rows) {
      if (r.below_min_count) {
        if (!high_below || r.count > high_below->count) high_below = &r;
      } else if (!low_above || r.count < low_above->count) {
        low_above = &r;
      }
    }
    if (low_above && high_below && high_below->count >= low_above->count)
      throw InputError(path, fmt::format("k-mer {} (count {}) is marked below_min_count, but {} (count {}) is not: the "
                                         "flag must split the counts at one minimum; use the table `genemask npmi` "
                                         "wrote",
                                         high_below->kmer, high_below->count, low_above->kmer, low_above->count));
  }
  if (rows.size() != (uint64_t{1} << (2 * len)))
    throw InputError(path, fmt::format("has {} rows; a ranking of {}-mers needs {}", rows.size(), len,
                                       uint64_t{1} << (2 * len)));
  return rows;
}

void write_pmi_vocab_tsv(const std::string& path, const std::vector<PmiVocabRow>& rows) {
  AtomicFile f(path);
  auto& o = f.stream();
  o << kPmiVocabHeader << '\n';
  for (const auto& r : rows)
    o << r.rank << '\t' << r.kmer << '\t' << r.kmer.size() << '\t' << r.count << '\t' << fmt_double(r.pmi) << '\n';
  o << pmi_vocab_end_line(rows.size()) << '\n';  // last: a copy cut at a line end lacks it
  f.commit();
}

std::vector<PmiVocabRow> read_pmi_vocab_tsv(const std::string& path) {
  TableReader t(path, kPmiVocabHeader);
  std::vector<PmiVocabRow> rows;
  std::unordered_map<std::string, uint64_t> first_line;  // k-mer -> its line
  std::string line;
  std::optional<uint64_t> end_line;  // the line of `# end: N rows`
  while (t.next(line)) {
    if (line.empty()) continue;
    if (end_line)
      throw InputError(path, t.lineno, fmt::format("a line after the table's end line (line {}): the table ends with "
                                                   "it; use the table `genemask pmi-vocab` wrote",
                                                   *end_line));
    if (line[0] == '#') {
      if (line != pmi_vocab_end_line(rows.size()))
        throw InputError(path, t.lineno, fmt::format("'{}' after {} rows: the table ends with the line '{}' (the "
                                                     "number of rows above it); use the table `genemask pmi-vocab` "
                                                     "wrote",
                                                     excerpt(line, 60), rows.size(), pmi_vocab_end_line(rows.size())));
      end_line = t.lineno;
      continue;
    }
    auto f = split_tabs(line);
    if (f.size() != 5) throw InputError(path, t.lineno, fmt::format("expected 5 tab-separated columns, found {}", f.size()));
    PmiVocabRow r;
    r.rank = t.u64(f[0], "rank");
    t.rank(r.rank, rows.size() + 1);
    size_t len = 0;
    t.kmer(f[1], len);
    r.kmer = f[1];
    if (t.u64(f[2], "k") != r.kmer.size())
      throw InputError(path, t.lineno, fmt::format("column k is {} but the k-mer has length {}", f[2], r.kmer.size()));
    r.count = t.u64(f[3], "count");
    r.pmi = t.f64(f[4], "pmi");
    // What `genemask pmi-vocab` writes (docs/formats.md): k-mers of 2 to 10 bases, each once,
    // seen (count > 0, so a finite PMI), best PMI first, ties by k then k-mer.
    if (r.kmer.size() < kPmiVocabMinK || r.kmer.size() > kPmiVocabMaxK)
      throw InputError(path, t.lineno, fmt::format("k-mer {} has {} bases: the vocabulary holds {}- to {}-mers", r.kmer,
                                                   r.kmer.size(), kPmiVocabMinK, kPmiVocabMaxK));
    if (r.count == 0 || !std::isfinite(r.pmi))
      throw InputError(path, t.lineno, fmt::format("k-mer {} has count {} and pmi {}: a vocabulary k-mer is seen and "
                                                   "has a finite PMI",
                                                   r.kmer, r.count, fmt_double(r.pmi)));
    if (const auto [at, fresh] = first_line.emplace(r.kmer, t.lineno); !fresh)
      throw InputError(path, t.lineno, fmt::format("k-mer {} is listed twice (first at line {})", r.kmer, at->second));
    if (!rows.empty()) {
      const PmiVocabRow& p = rows.back();
      const bool in_order = p.pmi != r.pmi               ? p.pmi > r.pmi
                            : p.kmer.size() != r.kmer.size() ? p.kmer.size() < r.kmer.size()
                                                             : p.kmer < r.kmer;
      if (!in_order)
        throw InputError(path, t.lineno,
                         fmt::format("k-mer {} (pmi {}) is ranked after {} (pmi {}): the rows are not in rank order "
                                     "(PMI descending, ties by k, then k-mer); use the table `genemask pmi-vocab` "
                                     "wrote",
                                     r.kmer, fmt_double(r.pmi), p.kmer, fmt_double(p.pmi)));
    }
    rows.push_back(std::move(r));
  }
  // Every line whole and in order is not enough: a copy cut at a line end (a download or
  // `head` stopped there) reads as a shorter vocabulary, and trained with it silently.
  if (!end_line)
    throw InputError(path, fmt::format("ends after {} rows without its last line '# end: N rows': the file was cut "
                                       "short at a line end (genemask writes that line last), or it was written "
                                       "before pmi_vocab.tsv had it; use the whole file, or write it again with "
                                       "`genemask pmi-vocab`",
                                       rows.size()));
  return rows;
}

}  // namespace genemask::io
