#include "io/task_table.hpp"

#include <algorithm>
#include <cctype>
#include <fmt/format.h>
#include <fstream>
#include <stdexcept>

#include "io/error.hpp"

namespace genemask::io {
namespace {

/// Splits one line on `delim`, honouring double quotes ("" inside quotes is a quote).
std::vector<std::string> split_fields(const std::string& line, char delim, bool& bad_quote) {
  std::vector<std::string> out;
  std::string cur;
  bool quoted = false, was_quoted = false;
  bad_quote = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        cur.push_back('"');
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        cur.push_back(c);
      }
    } else if (c == '"' && cur.empty() && !was_quoted) {
      quoted = was_quoted = true;
    } else if (c == delim) {
      out.push_back(cur);
      cur.clear();
      was_quoted = false;
    } else {
      cur.push_back(c);
    }
  }
  bad_quote = quoted;
  out.push_back(cur);
  return out;
}

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

std::string kmer_text_to_bases(const std::string& text) {
  std::string bases, prev;
  size_t i = 0, n = 0;
  while (i < text.size()) {
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
    size_t j = i;
    while (j < text.size() && !std::isspace(static_cast<unsigned char>(text[j]))) ++j;
    if (j == i) break;
    std::string tok = text.substr(i, j - i);
    for (auto& c : tok) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    ++n;
    if (tok.find_first_not_of("ACGTNRYSWKMBDHV") != std::string::npos)
      throw std::invalid_argument(fmt::format("token {} '{}' has a character that is not a base ({})", n, printable(tok),
                                              describe_byte(static_cast<unsigned char>(
                                                  tok[tok.find_first_not_of("ACGTNRYSWKMBDHV")]))));
    if (!prev.empty() && tok.size() != prev.size())
      throw std::invalid_argument(
          fmt::format("token {} '{}' has length {}, token 1 has length {}", n, tok, tok.size(), prev.size()));
    if (!prev.empty() && prev.compare(1, prev.size() - 1, tok, 0, tok.size() - 1) != 0)
      throw std::invalid_argument(
          fmt::format("tokens {} '{}' and {} '{}' do not overlap by {} bases", n - 1, prev, n, tok, tok.size() - 1));
    if (prev.empty())
      bases = tok;
    else
      bases.push_back(tok.back());
    prev = std::move(tok);
    i = j;
  }
  return bases;
}

std::vector<TaskRow> read_task_table(const std::string& path, bool label_required) {
  std::ifstream in(path);
  if (!in) throw InputError(path, "cannot open");
  std::string line;
  uint64_t lineno = 0;
  auto next = [&]() {
    if (!std::getline(in, line)) return false;
    ++lineno;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    return true;
  };
  if (!next()) throw InputError(path, 1, "empty file: expected a header with 'sequence' and 'label' columns");
  const char delim = line.find('\t') != std::string::npos ? '\t' : ',';
  bool bad = false;
  auto header = split_fields(line, delim, bad);
  int seq_col = -1, label_col = -1;
  for (size_t i = 0; i < header.size(); ++i) {
    const std::string h = lower(header[i]);
    if (h == "sequence" || h == "seq") seq_col = static_cast<int>(i);
    if (h == "label") label_col = static_cast<int>(i);
  }
  if (label_required && (seq_col < 0 || label_col < 0))
    throw InputError(path, 1, fmt::format("header '{}' lacks a 'sequence' and a 'label' column", line));
  if (seq_col < 0) throw InputError(path, 1, fmt::format("header '{}' lacks a 'sequence' column", line));
  std::vector<TaskRow> rows;
  const size_t need = static_cast<size_t>(std::max(seq_col, label_col)) + 1;
  while (next()) {
    if (line.empty()) continue;
    auto f = split_fields(line, delim, bad);
    if (bad) throw InputError(path, lineno, "unterminated double quote");
    if (f.size() < need)
      throw InputError(path, lineno, fmt::format("expected at least {} fields, found {}", need, f.size()));
    TaskRow r;
    r.line = lineno;
    if (label_col >= 0) r.label = f[static_cast<size_t>(label_col)];
    const std::string& s = f[static_cast<size_t>(seq_col)];
    if (r.label.empty() && label_col >= 0 && label_required) throw InputError(path, lineno, "empty label");
    try {
      if (s.find(' ') != std::string::npos) {
        r.sequence = kmer_text_to_bases(s);
      } else {
        r.sequence = s;
        for (auto& c : r.sequence) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
        const size_t badpos = r.sequence.find_first_not_of("ACGTNRYSWKMBDHV");
        if (badpos != std::string::npos)
          throw std::invalid_argument(fmt::format("{} at position {} is not a base",
                                                  describe_byte(static_cast<unsigned char>(s[badpos])), badpos + 1));
      }
    } catch (const std::invalid_argument& e) {
      throw InputError(path, lineno, fmt::format("bad sequence: {}", e.what()));
    }
    if (r.sequence.empty()) throw InputError(path, lineno, "empty sequence");
    rows.push_back(std::move(r));
  }
  if (rows.empty()) throw InputError(path, "no rows after the header");
  return rows;
}

}  // namespace genemask::io
