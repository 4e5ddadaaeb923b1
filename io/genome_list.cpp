#include "io/genome_list.hpp"

#include <sys/stat.h>

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <fmt/format.h>
#include <map>

#include "io/error.hpp"
#include "io/listed_paths.hpp"
#include "io/parse_number.hpp"
#include "io/text_source.hpp"

namespace genemask::io {

namespace {

std::vector<std::string> split_tabs(const std::string& line) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t tab = line.find('\t', start);
    out.push_back(line.substr(start, tab == std::string::npos ? std::string::npos : tab - start));
    if (tab == std::string::npos) break;
    start = tab + 1;
  }
  return out;
}

std::string resolve(const std::string& list_dir, const std::string& p) {
  return p.empty() || p[0] == '/' ? p : list_dir + p;
}

}  // namespace

std::string genome_name_problem(const std::string& name) {
  if (name.empty()) return "is empty";
  if (name.size() > 64) return fmt::format("is {} characters long (at most 64)", name.size());
  if (name[0] == '.' || name[0] == '-') return "starts with '.' or '-'";
  for (unsigned char c : name)
    if (!std::isalnum(c) && c != '.' && c != '_' && c != '-')
      return fmt::format("has {} (use letters, digits, '.', '_' and '-')",
                         c == ' '          ? std::string("a space")
                         : std::isgraph(c) ? fmt::format("the character '{}'", static_cast<char>(c))
                                           : "the " + describe_byte(c));
  return {};
}

GenomeList read_genome_list(const std::string& list_path) {
  check_input(list_path);
  GenomeList list;
  list.path = list_path;
  const std::string dir = directory_of(list_path);
  const ListedPaths listed(list_path, "list");
  bool seen_row = false;
  for_each_table_line(list_path, [&](const std::string& raw, uint64_t lineno) {
    if (raw.empty() || raw[0] == '#') return;
    if (raw.find_first_not_of(" \t") == std::string::npos) return;
    auto cols = split_tabs(raw);
    for (auto& c : cols) {  // stray spaces around a cell (an editor's alignment) are not part of it
      const size_t a = c.find_first_not_of(' '), b = c.find_last_not_of(' ');
      c = a == std::string::npos ? std::string() : c.substr(a, b - a + 1);
    }
    if (!seen_row && cols.size() >= 2 && cols[0] == "name" && cols[1] == "path") {  // the header row
      seen_row = true;
      return;
    }
    seen_row = true;
    if (cols.size() < 2 || cols.size() > 4)
      throw InputError(list_path, lineno,
                       fmt::format("{} tab-separated column(s) in '{}': a genome list row is name<TAB>path, then "
                                   "optionally <TAB>weight and <TAB>genes file",
                                   cols.size(), excerpt(raw, 80)));
    GenomeEntry g;
    g.line = lineno;
    g.name = cols[0];
    if (const auto p = genome_name_problem(g.name); !p.empty())
      throw InputError(list_path, lineno, fmt::format("genome name '{}' {}", excerpt(g.name, 80), p));
    g.path_text = cols[1];
    if (g.path_text.empty())
      throw InputError(list_path, lineno, fmt::format("genome '{}' has an empty path", g.name));
    g.path = resolve(dir, g.path_text);
    if (const auto p = input_problem(g.path); !p.empty())
      throw InputError(list_path, lineno, fmt::format("genome '{}': {} {}{}", g.name, printable(g.path), p,
                                                      listed.elsewhere(g.path_text)));
    if (const auto why = listed.ambiguity(g.path_text, g.path); !why.empty())
      throw InputError(list_path, lineno, fmt::format("genome '{}': {}", g.name, why));
    struct stat st {};
    if (::stat(g.path.c_str(), &st) != 0)
      throw InputError(list_path, lineno, fmt::format("genome '{}': cannot stat {}", g.name, printable(g.path)));
    g.size_bytes = static_cast<uint64_t>(st.st_size);
    g.device = static_cast<uint64_t>(st.st_dev);
    g.inode = static_cast<uint64_t>(st.st_ino);
    if (g.size_bytes == 0)
      throw InputError(list_path, lineno,
                       fmt::format("genome '{}': {} is empty (0 bytes): a download that did not finish?", g.name,
                                   printable(g.path)));
    if (cols.size() >= 3 && !cols[2].empty()) {
      const std::string& w = cols[2];
      const auto v = parse_decimal_double(w);
      if (!v || !(*v > 0))
        throw InputError(list_path, lineno,
                         fmt::format("genome '{}': weight '{}' is not a positive finite number (a decimal such "
                                     "as 2 or 0.5)", g.name,
                                     excerpt(w, 40)));
      g.weight = *v;
    }
    if (cols.size() >= 4 && !cols[3].empty()) {
      g.genes = resolve(dir, cols[3]);
      if (const auto p = input_problem(g.genes); !p.empty())
        throw InputError(list_path, lineno,
                         fmt::format("genes file of genome '{}': {} {}{}", g.name, printable(g.genes), p,
                                     listed.elsewhere(cols[3])));
      if (const auto why = listed.ambiguity(cols[3], g.genes); !why.empty())
        throw InputError(list_path, lineno, fmt::format("genes file of genome '{}': {}", g.name, why));
    }
    for (const auto& o : list.genomes) {
      if (o.name == g.name)
        throw InputError(list_path, lineno,
                         fmt::format("genome name '{}' is already used on line {}: names must be unique", g.name,
                                     o.line));
      if (o.device == g.device && o.inode == g.inode)
        throw InputError(list_path, lineno,
                         fmt::format("genome '{}': {} is the same file as genome '{}' on line {} ({}): list each "
                                     "genome once",
                                     g.name, printable(g.path_text), o.name, o.line, printable(o.path_text)));
    }
    list.genomes.push_back(std::move(g));
  });
  if (list.genomes.empty())
    throw InputError(list_path, "lists no genome: each row is name<TAB>path[<TAB>weight[<TAB>genes]]");
  return list;
}

std::vector<std::string> same_genome_warnings(const GenomeList& list,
                                              const std::vector<std::vector<std::pair<std::string, uint64_t>>>& records) {
  std::vector<std::string> out;
  std::map<std::vector<std::pair<std::string, uint64_t>>, size_t> first;
  for (size_t i = 0; i < records.size() && i < list.genomes.size(); ++i) {
    if (records[i].empty()) continue;
    const auto [it, fresh] = first.emplace(records[i], i);
    if (fresh) continue;
    const GenomeEntry &g = list.genomes[i], &o = list.genomes[it->second];
    // Names and lengths only: a strain of the same layout (SNPs only) matches too, so it is
    // said as what it may be.
    out.push_back(fmt::format("{}:{}: genome '{}' ({}) has the record names and lengths of genome '{}' on line {} "
                              "({}), {} records: if it is the same genome listed twice (a copy in another format), it "
                              "is pooled twice: remove one of the lines, or weight genomes with --genome-weights when "
                              "pretraining; a strain or assembly of the same layout is fine",
                              list.path, g.line, g.name, printable(g.path), o.name, o.line, printable(o.path),
                              records[i].size()));
  }
  return out;
}

}  // namespace genemask::io
