#include "io/task_table.hpp"

#include <cerrno>
#include <algorithm>
#include <cctype>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <fstream>
#include <stdexcept>

#include "io/error.hpp"
#include "io/output_guard.hpp"
#include "io/table_text.hpp"
#include "io/text_source.hpp"

namespace genemask::io {

std::vector<std::string> split_quoted_fields(const std::string& line, char delim, bool& bad_quote) {
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

namespace {

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }

/// Whether `s` reads as a number (1, 01, +1, 1.0, .5, 1e0, -2): such a label must be an
/// integer as `str(int)` writes it, or "1.0" and "01" would be classes apart from "1".
bool looks_numeric(const std::string& s) {
  size_t i = 0, digits = 0;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
  while (i < s.size() && is_digit(s[i])) ++i, ++digits;
  if (i < s.size() && s[i] == '.') {
    ++i;
    while (i < s.size() && is_digit(s[i])) ++i, ++digits;
  }
  if (digits == 0) return false;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    size_t j = i + 1;
    if (j < s.size() && (s[j] == '+' || s[j] == '-')) ++j;
    if (j >= s.size() || !is_digit(s[j])) return false;
    while (j < s.size() && is_digit(s[j])) ++j;
    i = j;
  }
  return i == s.size();
}

/// 0, 7, 42, -1: no sign but '-', no leading zero, no decimals or exponent.
bool is_plain_integer(const std::string& s) {
  const size_t b = !s.empty() && s[0] == '-' ? 1 : 0;
  if (b == s.size() || (s[b] == '0' && s.size() > b + 1) || (b == 1 && s == "-0")) return false;
  return std::all_of(s.begin() + static_cast<std::ptrdiff_t>(b), s.end(), is_digit);
}

/// The position of the first full-width form (U+FF01-U+FF5E: "１", "Ａ"), or npos.
size_t first_fullwidth_char(std::string_view s) {
  for (size_t i = 0; i + 2 < s.size(); ++i) {
    const auto b1 = static_cast<unsigned char>(s[i + 1]), b2 = static_cast<unsigned char>(s[i + 2]);
    if (static_cast<unsigned char>(s[i]) == 0xEF && ((b1 == 0xBC && b2 >= 0x81 && b2 <= 0xBF) || (b1 == 0xBD && b2 >= 0x80 && b2 <= 0x9E)))
      return i;
  }
  return std::string_view::npos;
}

/// The code point of the three-byte UTF-8 character at s[at].
unsigned fullwidth_code_point(std::string_view s, size_t at) {
  return (static_cast<unsigned char>(s[at]) & 0x0Fu) << 12 | (static_cast<unsigned char>(s[at + 1]) & 0x3Fu) << 6 |
         (static_cast<unsigned char>(s[at + 2]) & 0x3Fu);
}

}  // namespace

std::string label_problem(const std::string& label) {
  const char* kSpace = " \t\r\n\v\f";
  const size_t b = label.find_first_not_of(kSpace);
  if (b != 0 || label.find_last_not_of(kSpace) + 1 != label.size()) {
    const std::string trimmed = b == std::string::npos ? "" : label.substr(b, label.find_last_not_of(kSpace) + 1 - b);
    return fmt::format("label '{}' has a leading or trailing space, which would make it a class apart from '{}'; "
                       "remove the space",
                       label, trimmed);
  }
  // The same by a space or an invisible character no one sees ("1" + a no-break space from a
  // spreadsheet, "1" + a zero-width space), or by a full-width form ("１" for "1").
  if (const size_t at = first_unshown_char(label); at != std::string::npos)
    return fmt::format("label '{}' (as JSON: {}) holds a space or an invisible character that is not ASCII (at byte {}), "
                       "which would make it a class apart from '{}', as it reads; write it in ASCII",
                       label, nlohmann::json(label).dump(-1, ' ', /*ensure_ascii=*/true), at + 1,
                       shown_alike_key(label));
  if (const size_t at = first_fullwidth_char(label); at != std::string::npos)
    return fmt::format("label '{}' holds a full-width character (U+{:04X} at byte {}), which would make it a class apart "
                       "from the same label in ASCII; write it in ASCII",
                       label, fullwidth_code_point(label, at), at + 1);
  if (looks_numeric(label) && !is_plain_integer(label))
    return fmt::format("label '{}' is a number not written as a plain integer (0, 1, 2, ...), so it would be a class "
                       "apart from the same number written plainly; write class labels as integers without leading "
                       "zeros, '+' or decimals, or as names",
                       label);
  return "";
}

namespace {

/// The column index of `names` (lower case) in `header`, -1 when absent; two columns of
/// those names are an error (which one would the rows mean?).
int find_column(const std::vector<std::string>& header, std::initializer_list<const char*> names,
                const std::string& path, const std::string& line) {
  int col = -1;
  for (size_t i = 0; i < header.size(); ++i) {
    const std::string h = lower(header[i]);
    if (std::none_of(names.begin(), names.end(), [&](const char* n) { return h == n; })) continue;
    if (col >= 0)
      throw InputError(path, 1,
                       fmt::format("header '{}' has two '{}' columns (columns {} and {}): keep one", line,
                                   *names.begin(), col + 1, i + 1));
    col = static_cast<int>(i);
  }
  return col;
}

}  // namespace

size_t first_non_base(std::string_view text) { return text.find_first_not_of("ACGTNRYSWKMBDHVacgtnryswkmbdhv"); }

std::string non_base_problem(std::string_view text, size_t bad) {
  return fmt::format("{} at position {} is not a base (A, C, G, T, N or another IUPAC code, any case)",
                     describe_byte(static_cast<unsigned char>(text[bad])), bad + 1);
}

std::string sequence_text_to_bases(const std::string& text) {
  if (text.find(' ') != std::string::npos) return kmer_text_to_bases(text);
  if (const size_t bad = first_non_base(text); bad != std::string::npos) {
    const unsigned char c = static_cast<unsigned char>(text[bad]);
    throw std::invalid_argument(non_base_problem(text, bad) +
                                (c == '\n' || c == '\r' || c == '\t'
                                     ? ": pass the bases alone (strip line ends; join a FASTA record's lines)"
                                     : ""));
  }
  std::string bases = text;
  for (auto& c : bases) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return bases;
}

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
    if (const size_t bad = first_non_base(tok); bad != std::string::npos)
      throw std::invalid_argument(fmt::format("token {} '{}' has a character that is not a base ({})", n, printable(tok),
                                              describe_byte(static_cast<unsigned char>(tok[bad]))));
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
  check_input_type(path);
  check_file_in_complete_output(path);  // a table of a `dataset` run stopped while publishing
  std::ifstream in(path);
  if (!in) throw InputError(path, "cannot open: " + open_error_reason(errno));
  std::string line;
  uint64_t lineno = 0;
  bool unterminated = false;  // the line read last had no line end
  auto next = [&]() {
    if (!std::getline(in, line)) return false;
    ++lineno;
    unterminated = in.eof();
    if (!line.empty() && line.back() == '\r') line.pop_back();
    check_no_zero_byte(path, lineno, line);
    return true;
  };
  if (!next())
    throw InputError(path, 1, label_required ? "empty file: expected a header with 'sequence' and 'label' columns"
                                             : "empty file: expected FASTA records, or a table with a 'sequence' "
                                               "column");
  strip_utf8_bom(line);
  const char delim = line.find('\t') != std::string::npos ? '\t' : ',';
  bool bad = false;
  auto header = split_quoted_fields(line, delim, bad);
  const int seq_col = find_column(header, {"sequence", "seq"}, path, line);
  const int label_col = find_column(header, {"label"}, path, line);
  if (label_required && (seq_col < 0 || label_col < 0))
    throw InputError(path, 1, fmt::format("header '{}' lacks a 'sequence' and a 'label' column", line));
  if (seq_col < 0) throw InputError(path, 1, fmt::format("header '{}' lacks a 'sequence' column", line));
  std::vector<TaskRow> rows;
  bool any_base = false;  // some sequence has an A, C, G or T
  const size_t need = static_cast<size_t>(std::max(seq_col, label_col)) + 1;
  while (next()) {
    if (line.empty()) continue;
    const uint64_t first_line = lineno;
    auto f = split_quoted_fields(line, delim, bad);
    // A quoted field may hold line breaks (RFC 4180, as pandas and Excel write a label with
    // one): the row goes on until its quotes close.
    for (std::string more; bad;) {
      more = line;
      if (!next())
        throw InputError(path, first_line, "a double quote opened on this line is never closed (the file ends inside "
                                           "a quoted field): close the quote, or remove the stray one");
      if (lineno - first_line > 1000)
        throw InputError(path, first_line, "a double quote opened on this line is not closed within 1000 lines: close "
                                           "the quote, or remove the stray one");
      line = more + "\n" + line;
      f = split_quoted_fields(line, delim, bad);
    }
    if (f.size() < need)
      throw InputError(path, first_line, fmt::format("expected at least {} fields, found {}", need, f.size()));
    // A row wider than the header is a field that is not where the header says (an unquoted
    // delimiter inside a field, or a ragged row): refused, as pandas does, not read by position.
    if (f.size() > header.size())
      throw InputError(path, first_line,
                       fmt::format("has {} fields but the header has {}: a delimiter inside an unquoted field, or a "
                                   "ragged row; quote the field, or make the row as wide as the header",
                                   f.size(), header.size()));
    TaskRow r;
    r.line = first_line;
    r.last_line = lineno;
    if (label_col >= 0) r.label = f[static_cast<size_t>(label_col)];
    const std::string& s = f[static_cast<size_t>(seq_col)];
    if (r.label.empty() && label_col >= 0 && label_required) throw InputError(path, first_line, "empty label");
    if (!r.label.empty() && label_required)  // classes are made of labels only where labels are needed
      if (const std::string why = label_problem(r.label); !why.empty()) throw InputError(path, first_line, why);
    try {
      r.sequence = sequence_text_to_bases(s);
    } catch (const std::invalid_argument& e) {
      throw InputError(path, first_line, fmt::format("bad sequence: {}", e.what()));
    }
    if (r.sequence.empty()) throw InputError(path, first_line, "empty sequence");
    any_base = any_base || r.sequence.find_first_of("ACGT") != std::string::npos;
    rows.push_back(std::move(r));
  }
  // A table cut short (a copy stopped, a download cut) ends inside a row: its rows after the
  // cut are missing, and metrics of it would be of part of the test set.
  if (unterminated && !rows.empty()) {
    warn_unterminated_last_line(path, lineno, "its last row may be partial, and rows after it missing,");
    rows.back().unterminated = true;
  }
  if (rows.empty()) throw InputError(path, "no rows after the header");
  // A model would still score such a table (every prediction a guess: AUC 0.5).
  if (!any_base)
    throw InputError(path, fmt::format("none of its {} sequences has an A, C, G or T (all N or other IUPAC codes, "
                                       "lines {} to {}): nothing to learn or score; is this the table you meant?",
                                       rows.size(), rows.front().line, rows.back().line));
  return rows;
}

}  // namespace genemask::io
