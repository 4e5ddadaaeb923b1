#include "io/vcf.hpp"

#include <algorithm>
#include <cctype>
#include <fmt/format.h>
#include <map>
#include <string_view>

#include "io/annotation.hpp"
#include "io/error.hpp"
#include "io/parse_number.hpp"
#include "io/task_table.hpp"
#include "io/genome.hpp"
#include "io/text_source.hpp"

namespace genemask::io {
namespace {

std::string upper(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

bool all_of_chars(const std::string& s, const char* allowed) {
  return !s.empty() && s.find_first_not_of(allowed) == std::string::npos;
}

}  // namespace

std::vector<Variant> read_vcf(const std::string& path, VcfStats* stats) {
  std::vector<Variant> out;
  VcfStats st;
  for_each_table_line(path, [&](const std::string& line, uint64_t lineno) {
    if (line.rfind("##", 0) == 0) return;
    if (line.rfind("#", 0) == 0) return;  // #CHROM header (optional: bare data lines are accepted)
    if (line.empty()) return;
    const auto f = split_fields(line, '\t');
    if (f.size() < 5)
      throw InputError(path, lineno, fmt::format("{} tab-separated fields; a VCF line needs CHROM POS ID REF ALT",
                                                 f.size()));
    ++st.records;
    Variant v;
    v.chrom = f[0];
    v.id = f[2].empty() ? "." : f[2];
    v.line = lineno;
    // Digits only: stoull read "+200" and " 200" as 200, and wrapped "-18446744073709551416" to 200.
    const auto pos = parse_decimal_u64(f[1]);
    if (!pos || *pos == 0)
      throw InputError(path, lineno, fmt::format("POS '{}' is not a 1-based position (decimal digits only)", printable(f[1])));
    v.pos = *pos;
    v.ref = upper(f[3]);
    if (!all_of_chars(v.ref, "ACGTN"))
      throw InputError(path, lineno, fmt::format("REF '{}' is not a sequence of bases (A, C, G, T, N)", f[3]));
    for (const auto& a : split_fields(f[4], ',')) {
      const std::string alt = upper(a);
      if (alt.empty()) throw InputError(path, lineno, fmt::format("ALT '{}' has an empty allele", f[4]));
      if (!all_of_chars(alt, "ACGTN")) {
        if (alt == "." || alt == "*" || alt[0] == '<' || alt.find_first_of("[]") != std::string::npos) {
          ++st.skipped_symbolic;
          continue;
        }
        throw InputError(path, lineno, fmt::format("ALT allele '{}' is not a sequence of bases (A, C, G, T, N)", a));
      }
      if (alt == v.ref)
        throw InputError(path, lineno, fmt::format("ALT allele '{}' is the REF: not a variant; remove the allele", a));
      v.alt = alt;
      out.push_back(v);
    }
  });
  if (stats) *stats = st;
  return out;
}

std::vector<Variant> read_variant_tsv(const std::string& path) {
  std::vector<Variant> out;
  std::map<std::string, uint64_t> ids;  // id -> its line
  int c_id = -1, c_ref = -1, c_alt = -1;
  size_t ncol = 0;
  for_each_table_line(path, [&](const std::string& line, uint64_t lineno) {
    auto f = split_fields(line, '\t');
    for (auto& x : f)
      if (x.size() >= 2 && x.front() == '"' && x.back() == '"') x = x.substr(1, x.size() - 2);
    if (lineno == 1) {
      for (size_t i = 0; i < f.size(); ++i) {
        if (f[i] == "id") c_id = static_cast<int>(i);
        if (f[i] == "ref_sequence") c_ref = static_cast<int>(i);
        if (f[i] == "alt_sequence") c_alt = static_cast<int>(i);
      }
      if (c_id < 0 || c_ref < 0 || c_alt < 0)
        throw InputError(path, 1, fmt::format("header '{}' must name the tab-separated columns id, ref_sequence and "
                                              "alt_sequence",
                                              line));
      ncol = static_cast<size_t>(std::max({c_id, c_ref, c_alt})) + 1;
      return;
    }
    if (line.empty()) return;
    if (f.size() < ncol)
      throw InputError(path, lineno, fmt::format("{} fields; the header names {} or more", f.size(), ncol));
    Variant v;
    v.id = f[static_cast<size_t>(c_id)];
    v.line = lineno;
    v.ref_seq = upper(f[static_cast<size_t>(c_ref)]);
    v.alt_seq = upper(f[static_cast<size_t>(c_alt)]);
    // The bases of a task table (A, C, G, T, N and IUPAC codes): U (RNA) was taken, and made
    // [UNK] 6-mers scored as if they were sequence.
    for (const auto* s : {&v.ref_seq, &v.alt_seq})
      if (const size_t bad = first_non_base(*s); bad != std::string::npos || s->empty())
        throw InputError(path, lineno,
                         s->empty() ? std::string("an empty field is not a sequence of bases")
                                    : fmt::format("'{}': {}", printable(excerpt(*s, 40)), non_base_problem(*s, bad)));
    // One row per id: the id is what names a TSV's variant in variants.tsv and in --compare.
    if (const auto [it, fresh] = ids.emplace(v.id, lineno); !fresh)
      throw InputError(path, lineno, fmt::format("id '{}' is also on line {}: give each variant its own id",
                                                 printable(v.id), it->second));
    out.push_back(std::move(v));
  });
  if (c_id < 0) throw InputError(path, "empty file: expected a header with id, ref_sequence and alt_sequence");
  if (out.empty()) throw InputError(path, "no variants after the header");
  return out;
}

std::vector<Variant> cut_variant_windows(std::vector<Variant> variants, const std::string& vcf_path,
                                         const std::string& genome, uint64_t before, uint64_t after,
                                         uint64_t* off_chromosome) {
  std::vector<std::string> names;
  for (const auto& r : genome_records(genome)) names.push_back(r.name);
  std::map<std::string, std::vector<size_t>> by_record;  // genome record -> variants
  std::map<std::string, size_t> seen;                    // record:pos:ref>alt -> variant
  for (size_t i = 0; i < variants.size(); ++i) {
    const int r = match_seqid(variants[i].chrom, names);
    if (r < 0) {
      std::string present;
      for (size_t j = 0; j < names.size() && j < 10; ++j) present += (j ? ", " : "") + names[j];
      if (names.size() > 10) present += ", ...";
      throw InputError(vcf_path, variants[i].line,
                       fmt::format("chromosome '{}' is not in the genome {} (records: {}): use the genome the VCF "
                                   "was called on",
                                   variants[i].chrom, genome, present));
    }
    // The same variant twice would be scored and ranked twice (and counted twice in a
    // comparison's top N). It is found by the record it resolves to: "1" and "chr1" name one.
    const Variant& v = variants[i];
    const std::string& record = names[static_cast<size_t>(r)];
    if (const auto [it, fresh] = seen.emplace(fmt::format("{}:{}:{}>{}", record, v.pos, v.ref, v.alt), i); !fresh) {
      const Variant& w = variants[it->second];
      const std::string also = fmt::format("variant {}:{}:{}>{} is also on line {}", v.chrom, v.pos, v.ref, v.alt,
                                           w.line);
      if (w.chrom == v.chrom) throw InputError(vcf_path, v.line, also + ": list each variant once");
      throw InputError(vcf_path, v.line,
                       fmt::format("{} (as {}:{}): '{}' and '{}' are both the genome's record '{}'; list each "
                                   "variant once",
                                   also, w.chrom, v.pos, w.chrom, v.chrom, record));
    }
    by_record[record].push_back(i);
  }
  std::vector<char> keep(variants.size(), 0);
  uint64_t off = 0;
  for_each_chromosome(
      genome, [&](const std::string& n) { return by_record.count(n) > 0; },
      [&](const std::string& name, const std::string& seq) {
        for (size_t i : by_record.at(name)) {
          auto& v = variants[i];
          const uint64_t p = v.pos - 1;  // 0-based start of REF
          if (p + v.ref.size() > seq.size())
            throw InputError(vcf_path, v.line,
                             fmt::format("{}:{} REF '{}' runs past the end of {} ({} bases in {})", v.chrom, v.pos,
                                         v.ref, name, seq.size(), genome));
          const std::string g = seq.substr(p, v.ref.size());
          if (g != v.ref)
            throw InputError(vcf_path, v.line,
                             fmt::format("REF '{}' does not match the genome '{}' at {}:{} ({}): is the VCF for "
                                         "this assembly?",
                                         v.ref, g, v.chrom, v.pos, genome));
          if (p < before || p + v.ref.size() + after > seq.size()) {
            ++off;
            continue;
          }
          const std::string left = seq.substr(p - before, before), right = seq.substr(p + v.ref.size(), after);
          v.ref_seq = left + v.ref + right;
          v.alt_seq = left + v.alt + right;
          keep[i] = 1;
        }
      });
  std::vector<Variant> out;
  for (size_t i = 0; i < variants.size(); ++i)
    if (keep[i]) out.push_back(std::move(variants[i]));
  if (off_chromosome) *off_chromosome = off;
  return out;
}

std::vector<std::string> split_fields(const std::string& s, char d) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t i = 0; i <= s.size(); ++i)
    if (i == s.size() || s[i] == d) {
      out.push_back(s.substr(start, i - start));
      start = i + 1;
    }
  return out;
}

}  // namespace genemask::io
