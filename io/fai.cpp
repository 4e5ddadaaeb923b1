#include "io/fai.hpp"

#include <cerrno>
#include <cstdio>
#include <fmt/format.h>
#include <fstream>
#include <sstream>
#include <sys/stat.h>
#include <unordered_map>
#include <unordered_set>

#include "io/atomic_file.hpp"
#include "io/error.hpp"
#include "io/parse_number.hpp"
#include "io/fasta_scan.hpp"
#include "io/text_source.hpp"

namespace genemask::io {

FaiIndex FaiIndex::load(const std::string& fai_path) {
  std::ifstream in(fai_path);
  if (!in) throw InputError(fai_path, "cannot open index: " + open_error_reason(errno));
  FaiIndex idx;
  std::unordered_set<std::string> names;
  std::string line;
  uint64_t lineno = 0;
  static const char* kFields[] = {"NAME", "LENGTH", "OFFSET", "LINEBASES", "LINEWIDTH"};
  while (std::getline(in, line)) {
    ++lineno;
    if (line.empty()) continue;
    std::vector<std::string> f;
    std::stringstream ss(line);
    std::string tok;
    while (std::getline(ss, tok, '\t')) f.push_back(tok);
    if (f.size() < 5)
      throw InputError(fai_path, lineno,
                       fmt::format("expected 5 tab-separated fields (NAME LENGTH OFFSET LINEBASES LINEWIDTH), found {}",
                                   f.size()));
    FaiEntry e;
    e.name = f[0];
    uint64_t* vals[] = {&e.length, &e.offset, &e.line_bases, &e.line_bytes};
    for (int i = 0; i < 4; ++i) {
      const std::string& s = f[static_cast<size_t>(i + 1)];
      const auto v = parse_decimal_u64(s);
      if (!v)
        throw InputError(fai_path, lineno, fmt::format("field {} is not a non-negative integer: '{}'", kFields[i + 1], s));
      *vals[i] = *v;
    }
    if (e.line_bases == 0 || e.line_bytes < e.line_bases)
      throw InputError(fai_path, lineno,
                       fmt::format("inconsistent line sizes for '{}': LINEBASES {} LINEWIDTH {}", e.name, e.line_bases,
                                   e.line_bytes));
    if (!names.insert(e.name).second) throw InputError(fai_path, lineno, fmt::format("duplicate name '{}'", e.name));
    idx.entries_.push_back(std::move(e));
  }
  return idx;
}

std::optional<FaiIndex> FaiIndex::load_if_present(const std::string& fasta_path) {
  struct stat st {};
  const std::string fai = fasta_path + ".fai";
  if (::stat(fai.c_str(), &st) != 0) return std::nullopt;
  return load(fai);
}

FaiIndex FaiIndex::build(const std::string& fasta_path) {
  FileInfo info = probe_file(fasta_path);
  if (info.compression != Compression::none)
    throw InputError(fasta_path, "can only index an uncompressed FASTA file (decompress it first)");
  auto reader = open_text(info, 0);
  FaiIndex idx;
  std::unordered_map<std::string, std::pair<std::string, uint64_t>> names;  // key -> (name, line)
  FaiEntry* cur = nullptr;
  std::string line;
  uint64_t line_start = 0, lineno = 0;
  bool short_line_seen = false;
  auto finish_line = [&]() {
    ++lineno;
    uint64_t bytes = line.size() + 1;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!line.empty() && line[0] == '>') {
      std::string name = line.substr(1, line.find_first_of(" \t") == std::string::npos ? std::string::npos
                                                                                         : line.find_first_of(" \t") - 1);
      if (name.empty()) throw InputError(fasta_path, lineno, "empty record name after '>'");
      const auto [first, fresh] = names.try_emplace(record_name_key(name), name, lineno);
      if (!fresh)
        throw InputError(fasta_path, lineno, duplicate_record_problem(name, first->second.first, first->second.second));
      idx.entries_.push_back(FaiEntry{name, 0, line_start + bytes, 0, 0});
      cur = &idx.entries_.back();
      short_line_seen = false;
    } else if (cur) {
      if (line.empty()) {
        short_line_seen = true;
      } else {
        if (cur->line_bases == 0) {
          cur->line_bases = line.size();
          cur->line_bytes = bytes;
        } else if (short_line_seen || line.size() > cur->line_bases || bytes - line.size() != cur->line_bytes - cur->line_bases) {
          throw InputError(fasta_path, lineno,
                           fmt::format("record '{}' has lines of different lengths; it cannot be indexed "
                                       "(rewrap it, e.g. with `seqkit seq -w 60`)",
                                       cur->name));
        }
        if (line.size() < cur->line_bases) short_line_seen = true;
        cur->length += line.size();
      }
    } else if (!line.empty()) {
      throw InputError(fasta_path, lineno, "not a FASTA file: the first line must start with '>'");
    }
    line_start += bytes;
    line.clear();
  };
  TextBlock b;
  while (reader->next(b)) {
    for (size_t i = 0; i < b.size; ++i) {
      if (b.data[i] == '\n') finish_line();
      else line.push_back(b.data[i]);
    }
  }
  if (!line.empty()) {
    line_start -= 1;  // no newline at the end of the file
    finish_line();
  }
  return idx;
}

void FaiIndex::write(const std::string& fai_path) const {
  AtomicFile out(fai_path);
  for (const auto& e : entries_)
    out.stream() << e.name << '\t' << e.length << '\t' << e.offset << '\t' << e.line_bases << '\t' << e.line_bytes
                 << '\n';
  out.commit();
}

const FaiEntry* FaiIndex::find(const std::string& name) const {
  for (const auto& e : entries_)
    if (e.name == name) return &e;
  return nullptr;
}

std::string fetch_region(const std::string& fasta_path, const FaiIndex& index, const std::string& name, uint64_t start,
                         uint64_t end) {
  const FaiEntry* e = index.find(name);
  if (!e) throw InputError(fasta_path, fmt::format("no record named '{}' in the index", name));
  if (start > end || end > e->length)
    throw InputError(fasta_path, fmt::format("region {}:{}-{} is outside the record (length {})", name, start, end,
                                             e->length));
  std::string out;
  out.reserve(end - start);
  if (start == end) return out;
  const uint64_t first = e->offset + (start / e->line_bases) * e->line_bytes + start % e->line_bases;
  const uint64_t last = e->offset + ((end - 1) / e->line_bases) * e->line_bytes + (end - 1) % e->line_bases;
  std::string raw(last - first + 1, '\0');
  FILE* f = std::fopen(fasta_path.c_str(), "rb");
  if (!f) throw InputError(fasta_path, "cannot open: " + open_error_reason(errno));
  bool ok = std::fseek(f, static_cast<long>(first), SEEK_SET) == 0 && std::fread(raw.data(), 1, raw.size(), f) == raw.size();
  std::fclose(f);
  if (!ok) throw InputError(fasta_path, "read failed: the .fai index does not match the file (rebuild it)");
  for (char c : raw) {
    if (c == '\n' || c == '\r') continue;
    out.push_back(c >= 'a' && c <= 'z' ? static_cast<char>(c - 32) : c);
  }
  if (out.size() != end - start)
    throw InputError(fasta_path, "the .fai index does not match the file (rebuild it)");
  return out;
}

void check_against_fai(const std::string& genome, const std::vector<std::string>& names,
                       const std::vector<uint64_t>& lengths) {
  auto fai = FaiIndex::load_if_present(genome);
  if (!fai) return;
  const auto& e = fai->entries();
  const std::string hint = "the FASTA is incomplete (a cut download?) or the index is stale: download the FASTA again, "
                           "or delete or rebuild the index (samtools faidx)";
  for (size_t i = 0; i < e.size() && i < names.size(); ++i)
    if (e[i].name != names[i] || e[i].length != lengths[i])
      throw InputError(genome + ".fai", i + 1,
                       fmt::format("says {} has {} bases, the FASTA has {} with {} bases; {}", e[i].name, e[i].length,
                                   names[i], lengths[i], hint));
  if (e.size() != names.size())
    throw InputError(genome + ".fai", fmt::format("lists {} records but {} has {}; {}", e.size(), genome, names.size(),
                                                  hint));
}

}  // namespace genemask::io
