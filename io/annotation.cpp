#include "io/annotation.hpp"

#include <algorithm>
#include <charconv>
#include <fmt/format.h>
#include <unordered_map>

#include "io/error.hpp"
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
  return t == "gene" || (t.size() > 5 && t.substr(t.size() - 5) == "_gene");
}

}  // namespace

std::vector<GeneInterval> read_genes(const std::string& path) {
  const FileInfo info = probe_file(path);
  const bool gtf = path.find(".gtf") != std::string::npos;
  auto reader = open_text(info, 0);
  std::vector<GeneInterval> genes;
  std::string line;
  uint64_t lineno = 0;
  bool stop = false;
  auto process = [&]() {
    ++lineno;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line[0] == '#') {
      if (line.rfind("##FASTA", 0) == 0) stop = true;
      return;
    }
    auto f = split_tabs(line);
    if (f.size() != 9)
      throw InputError(path, lineno, fmt::format("expected 9 tab-separated columns, found {}", f.size()));
    if (!is_gene_type(f[2])) return;
    GeneInterval g;
    g.seqid = std::string(f[0]);
    uint64_t s = 0, e = 0;
    auto parse = [&](std::string_view v, uint64_t& out, const char* col) {
      auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
      if (ec != std::errc() || p != v.data() + v.size() || out == 0)
        throw InputError(path, lineno, fmt::format("column {} is not a positive integer: '{}'", col, v));
    };
    parse(f[3], s, "4 (start)");
    parse(f[4], e, "5 (end)");
    if (s > e) throw InputError(path, lineno, fmt::format("start {} is after end {}", s, e));
    if (f[6].size() != 1 || std::string_view("+-.?").find(f[6][0]) == std::string_view::npos)
      throw InputError(path, lineno, fmt::format("column 7 (strand) must be +, -, . or ?, found '{}'", f[6]));
    if (gtf && f[8].find("gene_id") == std::string_view::npos)
      throw InputError(path, lineno, "GTF gene line without a gene_id attribute");
    g.start = s - 1;
    g.end = e;
    g.strand = f[6][0];
    genes.push_back(std::move(g));
  };
  TextBlock b;
  while (!stop && reader->next(b)) {
    for (size_t i = 0; i < b.size && !stop; ++i) {
      if (b.data[i] == '\n') {
        process();
        line.clear();
      } else {
        line.push_back(b.data[i]);
      }
    }
  }
  if (!stop && !line.empty()) process();
  if (genes.empty())
    throw InputError(path, "no features of type 'gene' found: is this a GTF/GFF3 gene annotation?");
  return genes;
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

std::vector<std::vector<uint64_t>> gene_boundaries(const std::string& annotation_path,
                                                   const std::vector<std::string>& fasta_names) {
  std::vector<std::vector<uint64_t>> out(fasta_names.size());
  std::unordered_map<std::string, int> cache;
  for (const auto& g : read_genes(annotation_path)) {
    auto it = cache.find(g.seqid);
    if (it == cache.end()) it = cache.emplace(g.seqid, match_seqid(g.seqid, fasta_names)).first;
    if (it->second < 0) continue;  // e.g. scaffolds the FASTA does not have
    auto& v = out[static_cast<size_t>(it->second)];
    v.push_back(g.start);
    v.push_back(g.end);
  }
  for (auto& v : out) {
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
  }
  return out;
}

}  // namespace genemask::io
