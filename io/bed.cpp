#include "io/bed.hpp"

#include <cctype>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <functional>
#include <map>
#include <string_view>
#include <utility>

#include "io/error.hpp"
#include "io/parse_number.hpp"
#include "io/text_source.hpp"

namespace genemask::io {
namespace {

std::vector<std::string> split(const std::string& line, char delim) {
  std::vector<std::string> f;
  size_t i = 0;
  while (true) {
    size_t j = line.find(delim, i);
    f.push_back(line.substr(i, j == std::string::npos ? std::string::npos : j - i));
    if (j == std::string::npos) break;
    i = j + 1;
  }
  return f;
}

uint64_t parse_u64(const std::string& path, uint64_t lineno, const std::string& v, const char* what) {
  const auto out = parse_decimal_u64(v);
  if (!out) throw InputError(path, lineno, fmt::format("{} is not a non-negative integer: '{}'", what, v));
  return *out;
}

/// `why`: what the strand orients ("TSS windows are strand-aware").
char parse_strand(const std::string& path, uint64_t lineno, const std::string& v, bool dot_ok, const char* why) {
  if (v == "+" || v == "-") return v[0];
  if (dot_ok && v == ".") return '+';
  throw InputError(path, lineno, fmt::format("strand must be '+' or '-'{}, found '{}' ({})", dot_ok ? " (or '.')" : "", v,
                                             why));
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

std::vector<TssSite> read_tss_bed(const std::string& path, uint64_t tss_offset) {
  std::vector<TssSite> out;
  for_each_table_line(path, [&](const std::string& line, uint64_t ln) {
    if (line.empty() || line[0] == '#' || line.rfind("track", 0) == 0 || line.rfind("browser", 0) == 0) return;
    auto f = split(line, '\t');
    if (f.size() < 6)
      throw InputError(path, ln,
                       fmt::format("expected at least 6 tab-separated BED columns (chrom, start, end, name, score, "
                                   "strand), found {}",
                                   f.size()));
    const uint64_t start = parse_u64(path, ln, f[1], "column 2 (start)");
    const uint64_t end = parse_u64(path, ln, f[2], "column 3 (end)");
    if (end <= start) throw InputError(path, ln, fmt::format("end {} is not after start {}", end, start));
    TssSite s;
    s.chrom = f[0];
    s.name = f[3];
    s.strand = parse_strand(path, ln, f[5], false, "TSS windows are strand-aware");
    s.line = ln;
    bool thick = false;
    // Columns 7-8 present but both empty (a table's blank cells) are as absent, as the docs say.
    if (f.size() >= 8 && !(f[6].empty() && f[7].empty())) {
      const uint64_t ts = parse_u64(path, ln, f[6], "column 7 (thickStart)");
      const uint64_t te = parse_u64(path, ln, f[7], "column 8 (thickEnd)");
      if (te > ts) {
        if (ts < start || te > end)
          throw InputError(path, ln, fmt::format("thick part {}-{} lies outside the interval {}-{}", ts, te, start, end));
        s.pos = s.strand == '+' ? ts : te - 1;
        thick = true;
      }
    }
    if (!thick) {
      if (tss_offset >= end - start)
        throw InputError(path, ln,
                         fmt::format("TSS offset {} does not fit in the {} bp interval {}-{}", tss_offset, end - start,
                                     start, end));
      s.pos = s.strand == '+' ? start + tss_offset : end - 1 - tss_offset;
    }
    out.push_back(std::move(s));
  });
  if (out.empty()) throw InputError(path, "no BED records found");
  return out;
}

std::vector<TssSite> read_tss_sga(const std::string& path) {
  std::vector<TssSite> out;
  for_each_table_line(path, [&](const std::string& line, uint64_t ln) {
    if (line.empty() || line[0] == '#') return;
    auto f = split(line, '\t');
    if (f.size() < 5)
      throw InputError(path, ln,
                       fmt::format("expected at least 5 tab-separated SGA columns (chrom, feature, position, strand, "
                                   "count), found {}",
                                   f.size()));
    TssSite s;
    s.chrom = f[0];
    const uint64_t pos = parse_u64(path, ln, f[2], "column 3 (position)");
    if (pos == 0) throw InputError(path, ln, "column 3 (position) is 1-based and cannot be 0");
    s.pos = pos - 1;
    s.strand = parse_strand(path, ln, f[3], false, "TSS windows are strand-aware");
    if (f.size() >= 6) s.name = f[5];
    s.line = ln;
    out.push_back(std::move(s));
  });
  if (out.empty()) throw InputError(path, "no SGA records found");
  return out;
}

std::vector<TssSite> read_tss(const std::string& path, uint64_t bed_tss_offset) {
  if (ends_with(path, ".sga") || ends_with(path, ".sga.gz")) return read_tss_sga(path);
  return read_tss_bed(path, bed_tss_offset);
}

std::vector<IntervalRow> read_interval_csv(const std::string& path) {
  std::vector<IntervalRow> out;
  int ci = -1, cr = -1, cs = -1, ce = -1, cst = -1;
  size_t ncols = 0;
  for_each_table_line(path, [&](const std::string& line, uint64_t ln) {
    if (line.empty()) return;
    auto f = split(line, ',');
    if (ln == 1) {
      // Columns by name, whatever their case, spaces or quotes ("Strand", " strand"): a
      // column missed here would be read as absent (every interval on '+', say).
      for (size_t i = 0; i < f.size(); ++i) {
        std::string name = f[i];
        const size_t a = name.find_first_not_of(" \t\""), b = name.find_last_not_of(" \t\"");
        name = a == std::string::npos ? "" : name.substr(a, b - a + 1);
        for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        int* col = name == "id"                                            ? &ci
                   : name == "region" || name == "chr" || name == "chrom" ? &cr  // some sets say chr
                   : name == "start"                                       ? &cs
                   : name == "end"                                         ? &ce
                   : name == "strand"                                      ? &cst
                                                                           : nullptr;
        if (!col) continue;
        if (*col >= 0)
          throw InputError(path, ln, fmt::format("header '{}' names the column {} twice (fields {} and {})", line,
                                                 name, *col + 1, i + 1));
        *col = static_cast<int>(i);
      }
      std::vector<std::string> missing;
      for (const auto& [col, name] : {std::pair{cr, "region"}, std::pair{cs, "start"}, std::pair{ce, "end"},
                                      std::pair{cst, "strand"}})
        if (col < 0) missing.emplace_back(name);
      if (!missing.empty())
        throw InputError(path, ln,
                         fmt::format("header '{}' lacks the column{} {} (expected 'id,region,start,end,strand'; "
                                     "strand '+', '-' or '.')",
                                     line, missing.size() > 1 ? "s" : "", fmt::join(missing, ", ")));
      ncols = f.size();
      return;
    }
    if (f.size() != ncols)
      throw InputError(path, ln, fmt::format("expected {} comma-separated fields, found {}", ncols, f.size()));
    IntervalRow r;
    r.id = ci >= 0 ? f[static_cast<size_t>(ci)] : std::to_string(ln - 1);
    r.chrom = f[static_cast<size_t>(cr)];
    r.start = parse_u64(path, ln, f[static_cast<size_t>(cs)], "start");
    r.end = parse_u64(path, ln, f[static_cast<size_t>(ce)], "end");
    if (r.end <= r.start) throw InputError(path, ln, fmt::format("end {} is not after start {}", r.end, r.start));
    r.strand = parse_strand(path, ln, f[static_cast<size_t>(cst)], true,
                            "a '-' interval is read as its reverse complement");
    r.line = ln;
    out.push_back(std::move(r));
  });
  if (ncols == 0) throw InputError(path, 1, "empty file: expected a header 'id,region,start,end,strand'");
  return out;
}

std::vector<std::pair<std::string, std::string>> read_chrom_map(const std::string& path) {
  std::vector<std::pair<std::string, std::string>> out;
  std::map<std::string, std::pair<std::string, uint64_t>> seen;  // input name -> genome name, line
  for_each_table_line(path, [&](const std::string& line, uint64_t ln) {
    if (line.empty() || line[0] == '#') return;
    auto f = split(line, '\t');
    if (f.size() < 2 || f[0].empty() || f[1].empty())
      throw InputError(path, ln, fmt::format("expected 'input-name<TAB>genome-name', found '{}'", line));
    // One name mapped to two records: which one the coordinates are on cannot be known.
    const auto [it, first] = seen.emplace(f[0], std::pair{f[1], ln});
    if (!first) {
      if (it->second.first != f[1])
        throw InputError(path, ln, fmt::format("maps '{}' to '{}', but line {} maps it to '{}': one name, one record",
                                               f[0], f[1], it->second.second, it->second.first));
      return;  // the same alias again
    }
    out.emplace_back(f[0], f[1]);
  });
  return out;
}

namespace {
/// The number of an NC_ accession ("NC_000001.11" -> 1), 0 when it is not one.
uint64_t refseq_number(const std::string& accession) {
  if (accession.rfind("NC_", 0) != 0) return 0;
  const size_t dot = accession.find('.');
  const std::string digits = accession.substr(3, dot == std::string::npos ? std::string::npos : dot - 3);
  const auto n = digits.size() == 6 ? parse_decimal_u64(digits) : std::nullopt;
  return n.value_or(0);
}
}  // namespace

std::string refseq_organism(const std::string& accession) {
  const uint64_t n = refseq_number(accession);
  if ((n >= 1 && n <= 24) || n == 12920) return "human";
  if ((n >= 67 && n <= 87) || n == 5089) return "mouse";
  return "";
}

std::string refseq_to_ucsc(const std::string& accession) {
  const uint64_t n = refseq_number(accession);
  if (n >= 1 && n <= 22) return fmt::format("chr{}", n);  // human
  if (n == 23) return "chrX";
  if (n == 24) return "chrY";
  if (n == 12920) return "chrM";
  if (n >= 67 && n <= 85) return fmt::format("chr{}", n - 66);  // mouse
  if (n == 86) return "chrX";
  if (n == 87) return "chrY";
  if (n == 5089) return "chrM";
  return "";
}

}  // namespace genemask::io
