#include "io/annotation.hpp"

#include <algorithm>
#include <exception>
#include <fmt/format.h>
#include <iostream>
#include <map>
#include <optional>
#include <string_view>
#include <tuple>
#include <unordered_map>

#include "io/error.hpp"
#include "io/parse_number.hpp"
#include "io/text_source.hpp"

namespace genemask::io {
namespace {

std::vector<std::string_view> split_tabs(std::string_view line) {
  std::vector<std::string_view> f;
  size_t i = 0;
  while (true) {
    size_t j = line.find('\t', i);
    f.push_back(line.substr(i, j == std::string_view::npos ? std::string_view::npos : j - i));
    if (j == std::string_view::npos) break;
    i = j + 1;
  }
  return f;
}

bool is_gene_type(std::string_view t) {
  const auto ends = [&](std::string_view s) { return t.size() > s.size() && t.substr(t.size() - s.size()) == s; };
  // Ensembl's GFF3 gives pseudogene loci the top-level type "pseudogene" (not *_gene).
  return t == "gene" || t == "pseudogene" || ends("_gene") || ends("_pseudogene");
}

/// A transcript's feature type: mRNA, transcript, and the other RNAs of GFF3 (lnc_RNA, ncRNA,
/// tRNA, rRNA, miRNA, ...; primary_transcript).
bool is_transcript_type(std::string_view t) {
  const auto ends = [&](std::string_view s) { return t.size() >= s.size() && t.substr(t.size() - s.size()) == s; };
  return t == "transcript" || ends("RNA") || ends("_transcript");
}

/// Loci of transcripts: the union of the overlapping ones of one sequence and strand (in
/// order of sequence, strand and start).
std::vector<GeneInterval> merged_loci(std::vector<GeneInterval> transcripts) {
  std::stable_sort(transcripts.begin(), transcripts.end(), [&](const GeneInterval& x, const GeneInterval& y) {
    return std::tie(x.seqid, x.strand, x.start) < std::tie(y.seqid, y.strand, y.start);
  });
  std::vector<GeneInterval> loci;
  for (const auto& t : transcripts) {
    if (!loci.empty() && loci.back().seqid == t.seqid && loci.back().strand == t.strand && t.start < loci.back().end) {
      if (t.end > loci.back().end) {
        loci.back().end = t.end;
        loci.back().line = t.line;
      }
    } else
      loci.push_back(t);
  }
  return loci;
}

/// Of `transcripts`, those no gene of `genes` on their sequence holds whole: loci a file
/// gives as mRNA/transcript lines only, beside gene lines of other loci.
std::vector<GeneInterval> outside_genes(const std::vector<GeneInterval>& genes,
                                        const std::vector<GeneInterval>& transcripts) {
  // Per sequence: genes by start, with the furthest end reached so far.
  std::map<std::string, std::vector<std::pair<uint64_t, uint64_t>>> by_seq;
  for (const auto& g : genes) by_seq[g.seqid].emplace_back(g.start, g.end);
  for (auto& [seq, v] : by_seq) {
    std::sort(v.begin(), v.end());
    for (size_t i = 1; i < v.size(); ++i) v[i].second = std::max(v[i].second, v[i - 1].second);
  }
  std::vector<GeneInterval> out;
  for (const auto& t : transcripts) {
    const auto it = by_seq.find(t.seqid);
    bool held = false;
    if (it != by_seq.end()) {
      const auto& v = it->second;
      const auto after = std::upper_bound(v.begin(), v.end(), std::make_pair(t.start, UINT64_MAX));
      held = after != v.begin() && std::prev(after)->second >= t.end;
    }
    if (!held) out.push_back(t);
  }
  return out;
}


/// The 9 tab-separated columns of a GTF/GFF3 feature line; another count is an error.
std::vector<std::string_view> feature_columns(std::string_view line, const std::string& path, uint64_t lineno) {
  auto f = split_tabs(line);
  if (f.size() != 9) throw InputError(path, lineno, fmt::format("expected 9 tab-separated columns, found {}", f.size()));
  return f;
}

struct Feature {
  uint64_t start = 0, end = 0;  // 0-based, half-open
  char strand = '.';
};

/// Coordinates and strand of a feature: 1-based inclusive start <= end, a strand of
/// + - . ?; errors name file:line and the value.
Feature parse_feature(const std::vector<std::string_view>& f, const std::string& path, uint64_t lineno) {
  uint64_t s = 0, e = 0;
  auto parse = [&](std::string_view v, uint64_t& out, const char* col) {
    out = parse_decimal_u64(v).value_or(0);
    if (out == 0)
      throw InputError(path, lineno, fmt::format("column {} is not a positive integer: '{}'", col, v));
  };
  parse(f[3], s, "4 (start)");
  parse(f[4], e, "5 (end)");
  if (s > e) throw InputError(path, lineno, fmt::format("start {} is after end {}", s, e));
  if (f[6].size() != 1 || std::string_view("+-.?").find(f[6][0]) == std::string_view::npos)
    throw InputError(path, lineno, fmt::format("column 7 (strand) must be +, -, . or ?, found '{}'", f[6]));
  return {s - 1, e, f[6][0]};
}

}  // namespace


std::vector<GeneInterval> read_genes(const std::string& path, GeneSource* source) {
  const bool gtf = path.find(".gtf") != std::string::npos;
  std::vector<GeneInterval> genes, transcripts;
  // A malformed mRNA/transcript line matters only when the file has no gene lines (they were
  // ignored before the fallback existed), so its error waits until then.
  std::exception_ptr transcript_error;
  uint64_t last_line = 0;
  const bool unterminated = for_each_line(path, [&](std::string_view line, uint64_t lineno) {
    last_line = lineno;
    if (line.empty() || line[0] == '#') return;
    const auto f = feature_columns(line, path, lineno);
    if (is_transcript_type(f[2])) {
      if (transcript_error) return;
      try {
        const Feature ft = parse_feature(f, path, lineno);
        transcripts.push_back({std::string(f[0]), ft.start, ft.end, ft.strand, lineno});
      } catch (const InputError&) {
        transcript_error = std::current_exception();
      }
      return;
    }
    if (!is_gene_type(f[2])) return;
    const Feature ft = parse_feature(f, path, lineno);
    if (gtf && f[8].find("gene_id") == std::string_view::npos)
      throw InputError(path, lineno, "GTF gene line without a gene_id attribute");
    genes.push_back({std::string(f[0]), ft.start, ft.end, ft.strand, lineno});
  }, "##FASTA");
  if (unterminated) warn_unterminated_last_line(path, last_line, "its last feature may be partial");
  if (source) *source = GeneSource{};
  if (!genes.empty()) {
    // Loci given only as mRNA/transcript lines, beside gene lines of others, are loci too.
    const auto orphans = outside_genes(genes, transcripts);
    if (orphans.empty()) return genes;
    if (transcript_error) std::rethrow_exception(transcript_error);
    auto loci = merged_loci(orphans);
    if (source) *source = GeneSource{false, orphans.size(), loci.size()};
    genes.insert(genes.end(), loci.begin(), loci.end());
    return genes;
  }
  if (transcript_error) std::rethrow_exception(transcript_error);
  if (transcripts.empty())
    throw InputError(path,
                     "no features of type 'gene', 'mRNA' or 'transcript' found: is this a GTF/GFF3 gene annotation?");
  // No gene lines: each locus is the union of the overlapping transcripts of one sequence
  // and strand.
  auto loci = merged_loci(transcripts);
  if (source) *source = GeneSource{true, transcripts.size(), loci.size()};
  return loci;
}

int match_seqid(const std::string& seqid, const std::vector<std::string>& names) {
  auto find = [&](const std::string& n) -> int {
    auto it = std::find(names.begin(), names.end(), n);
    return it == names.end() ? -1 : static_cast<int>(it - names.begin());
  };
  int i = find(seqid);
  if (i >= 0) return i;
  if (seqid == "MT") return find("chrM");
  if (seqid == "chrM") return find("MT");
  if (seqid.rfind("chr", 0) == 0) return find(seqid.substr(3));
  return find("chr" + seqid);
}

std::string seqid_key(const std::string& seqid) {
  const std::string x = seqid.rfind("chr", 0) == 0 ? seqid.substr(3) : seqid;
  return x == "M" ? "MT" : x;
}

std::vector<std::vector<uint64_t>> gene_boundaries(const std::string& annotation_path,
                                                   const std::vector<std::string>& fasta_names,
                                                   const std::vector<uint64_t>& fasta_lengths, GeneSource* source,
                                                   GeneBoundaryStats* stats) {
  std::vector<std::vector<uint64_t>> out(fasta_names.size());
  std::unordered_map<std::string, int> cache;
  GeneBoundaryStats st;
  const auto genes = read_genes(annotation_path, source);
  st.genes = genes.size();
  for (const auto& g : genes) {
    auto it = cache.find(g.seqid);
    if (it == cache.end()) {
      it = cache.emplace(g.seqid, match_seqid(g.seqid, fasta_names)).first;
      if (it->second < 0) st.unknown_sequences.push_back(g.seqid);
    }
    if (it->second < 0) {  // e.g. scaffolds the FASTA does not have
      ++st.unknown_sequence_genes;
      continue;
    }
    const auto r = static_cast<size_t>(it->second);
    if (g.end > fasta_lengths.at(r))
      throw InputError(annotation_path, g.line,
                       fmt::format("a gene on {} ends at {}, past the end of {} ({} bases) in the genome: is the "
                                   "annotation for this genome assembly?",
                                   g.seqid, g.end, fasta_names[r], fasta_lengths[r]));
    auto& v = out[r];
    v.push_back(g.start);
    v.push_back(g.end);
  }
  if (st.unknown_sequence_genes == st.genes) {
    auto some = [](const std::vector<std::string>& v) {
      std::string s;
      for (size_t i = 0; i < v.size() && i < 3; ++i) s += (i ? ", " : "") + v[i];
      return v.size() > 3 ? s + ", ..." : s;
    };
    throw InputError(annotation_path,
                     fmt::format("none of its {} genes lies on a sequence of the genome: the annotation names {} "
                                 "sequence(s) ({}), the genome {} ({}); is it for this genome assembly?",
                                 st.genes, st.unknown_sequences.size(), some(st.unknown_sequences), fasta_names.size(),
                                 some(fasta_names)));
  }
  for (auto& v : out) {
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
  }
  if (stats) *stats = std::move(st);
  return out;
}

namespace {


std::string_view trim(std::string_view v) {
  while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
  while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
  return v;
}

// GTF attributes: `key "value"; key value;` -> the value of `key`, or nullopt.
/// Calls fn(key, value) for each `;`-separated field of a GTF/GFF3 column 9, the field split
/// at its first `sep` (GTF: a space or tab; GFF3: '='), both parts trimmed. Stops when fn
/// returns true.
/// With `quoted` (GTF), a ';' inside double quotes is part of the value.
template <typename Fn>
void for_each_attribute(std::string_view attrs, std::string_view sep, Fn fn, bool quoted = false) {
  size_t i = 0;
  while (i < attrs.size()) {
    size_t j = i;
    for (bool in_quotes = false; j < attrs.size() && (in_quotes || attrs[j] != ';'); ++j)
      if (quoted && attrs[j] == '"') in_quotes = !in_quotes;
    std::string_view field = trim(attrs.substr(i, j - i));
    i = j + 1;
    const size_t at = field.find_first_of(sep);
    if (at == std::string_view::npos) continue;
    if (fn(field.substr(0, at), trim(field.substr(at + 1)))) return;
  }
}

/// A value opened with '"' and not closed (a line cut short: a truncated download's last
/// line) is an error naming the file and line; read as is, `transcript_id "E2` made a
/// transcript of its own.
std::optional<std::string> gtf_attribute(std::string_view attrs, std::string_view key, const std::string& path,
                                         uint64_t lineno) {
  std::optional<std::string> out;
  for_each_attribute(attrs, " \t", [&](std::string_view k, std::string_view v) {
    if (k != key) return false;
    if (!v.empty() && v.front() == '"') {
      if (v.size() < 2 || v.back() != '"')
        throw InputError(path, lineno, fmt::format("attribute {} has the value '{}', whose double quote is never closed: "
                                                   "the line is cut short (a truncated file?) or malformed",
                                                   key, printable(v)));
      v = v.substr(1, v.size() - 2);
    }
    out = std::string(v);
    return true;
  }, /*quoted=*/true);
  return out;
}

// GFF3 values are percent-encoded (RFC 3986 style) for ; = & , and control characters.
std::string percent_decode(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i] == '%' && i + 2 < v.size() && hex(v[i + 1]) >= 0 && hex(v[i + 2]) >= 0) {
      out.push_back(static_cast<char>(hex(v[i + 1]) * 16 + hex(v[i + 2])));
      i += 2;
    } else {
      out.push_back(v[i]);
    }
  }
  return out;
}

// GFF3 attributes: `key=value;key=v1,v2` -> the decoded values of `key` (empty: absent).
std::vector<std::string> gff3_attribute(std::string_view attrs, std::string_view key) {
  std::vector<std::string> out;
  for_each_attribute(attrs, "=", [&](std::string_view k, std::string_view v) {
    if (k != key) return false;
    size_t a = 0;
    while (a <= v.size()) {
      size_t c = v.find(',', a);
      if (c == std::string_view::npos) c = v.size();
      if (c > a) out.push_back(percent_decode(v.substr(a, c - a)));
      a = c + 1;
    }
    return false;  // GFF3 allows a key once; keep reading as before for repeated ones
  });
  return out;
}

}  // namespace

std::vector<TranscriptExons> read_transcript_exons(const std::string& path, const std::string& feature) {
  const bool gtf = path.find(".gtf") != std::string::npos;
  std::vector<TranscriptExons> out;
  std::map<std::pair<std::string, std::string>, size_t> index;  // (id, seqid) -> out[i]
  uint64_t exon_lines = 0, cds_lines = 0, last_line = 0;
  const bool unterminated = for_each_line(path, [&](std::string_view line, uint64_t lineno) {
    last_line = lineno;
    if (line.empty() || line[0] == '#') return;
    const auto f = feature_columns(line, path, lineno);
    cds_lines += f[2] == "CDS";
    if (f[2] != feature) return;
    const Feature ft = parse_feature(f, path, lineno);
    std::vector<std::string> ids;
    if (gtf) {
      auto id = gtf_attribute(f[8], "transcript_id", path, lineno);
      if (!id || id->empty())
        throw InputError(path, lineno,
                         "GTF exon line without a transcript_id attribute (expected e.g. "
                         "transcript_id \"T1\"; in column 9): exons are grouped into transcripts by it");
      ids.push_back(std::move(*id));
    } else {
      ids = gff3_attribute(f[8], "Parent");
      if (ids.empty())
        throw InputError(path, lineno,
                         "GFF3 exon line without a Parent attribute (expected e.g. Parent=transcript:T1 "
                         "in column 9): exons are grouped into transcripts by it");
    }
    ++exon_lines;
    const std::string seqid(f[0]);
    for (auto& id : ids) {
      auto [it, fresh] = index.try_emplace({id, seqid}, out.size());
      if (fresh) {
        TranscriptExons t;
        t.id = id;
        t.seqid = seqid;
        t.strand = f[6][0];
        t.line = lineno;
        out.push_back(std::move(t));
      }
      TranscriptExons& t = out[it->second];
      if (t.strand != f[6][0])
        throw InputError(path, lineno,
                         fmt::format("exon of transcript '{}' on strand '{}', but its exon at line {} is on '{}'",
                                     id, f[6], t.line, t.strand));
      t.exons.emplace_back(ft.start, ft.end);
    }
  }, "##FASTA");
  if (unterminated) warn_unterminated_last_line(path, last_line, "its last feature may be partial");
  if (exon_lines == 0 && feature == "exon" && cds_lines > 0)
    throw InputError(path, fmt::format("no features of type 'exon' found, but {} 'CDS' lines: use --exon-feature CDS "
                                       "to take the coding exons as the exons",
                                       cds_lines));
  if (exon_lines == 0)
    throw InputError(path, fmt::format("no features of type '{}' found: is this a GTF/GFF3 annotation with exons?",
                                       feature));
  for (auto& t : out) {
    std::sort(t.exons.begin(), t.exons.end());
    std::vector<std::pair<uint64_t, uint64_t>> merged;
    for (const auto& x : t.exons) {
      if (!merged.empty() && x.first <= merged.back().second)
        merged.back().second = std::max(merged.back().second, x.second);
      else
        merged.push_back(x);
    }
    t.exons = std::move(merged);
  }
  return out;
}

}  // namespace genemask::io
