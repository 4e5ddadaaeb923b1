#pragma once
// Fields of the tables genemask writes (predictions.tsv, overlap.tsv, variants.tsv, task
// tables, the report's CSV), so that the standard readers of the format read them back as
// written: pandas.read_csv (sep="\t" or ","), R's read.delim and Python's csv module. A field
// that holds the separator, a line break or a double quote is written in double quotes with
// its quotes doubled (RFC 4180); bytes that are not UTF-8 are escaped (\xNN), since those
// readers decode UTF-8. Labels are classes as written, so a label with a tab or a comma is
// kept, and comes back whole. The report's Markdown and LaTeX cells are escaped here too.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <iterator>
#include <string>
#include <string_view>
#include <tuple>

#include "io/error.hpp"

namespace genemask::io {

/// The position of the first control character of a name, or npos: a byte below 0x20 or 0x7f
/// (a line break, a tab, an escape), and in UTF-8 the C1 controls (U+0080-U+009F, NEL among
/// them), the line and paragraph separators (U+2028, U+2029) and the bidirectional controls
/// (U+202A-U+202E, U+2066-U+2069: they reorder the text shown after them). Model, task and
/// group names are printed into Markdown rows, LaTeX comment lines and job lists, where a line
/// break starts a line of its own (a `%` comment of table1.tex went on as live LaTeX).
inline size_t first_control_char(std::string_view name) {
  for (size_t i = 0; i < name.size(); ++i) {
    const auto b = [&](size_t k) { return i + k < name.size() ? static_cast<unsigned char>(name[i + k]) : 0u; };
    if (b(0) < 0x20 || b(0) == 0x7f) return i;
    if (b(0) == 0xC2 && b(1) >= 0x80 && b(1) <= 0x9F) return i;
    if (b(0) == 0xE2 && b(1) == 0x80 && b(2) >= 0xA8 && b(2) <= 0xAE) return i;
    if (b(0) == 0xE2 && b(1) == 0x81 && b(2) >= 0xA6 && b(2) <= 0xA9) return i;
  }
  return std::string_view::npos;
}

/// The control character at name[at] (first_control_char's position), for a message: "byte
/// 0x0a" for an ASCII one, "U+2028" for a UTF-8 one.
inline std::string describe_control_char(std::string_view name, size_t at) {
  const auto b = [&](size_t k) { return at + k < name.size() ? static_cast<unsigned char>(name[at + k]) & 0xFFu : 0u; };
  if (b(0) == 0xC2) return fmt::format("U+{:04X}", b(1));  // C1: U+0080-U+009F
  if (b(0) == 0xE2) return fmt::format("U+{:04X}", 0x2000u | (b(1) & 0x3Fu) << 6 | (b(2) & 0x3Fu));
  return describe_byte(static_cast<unsigned char>(name[at]));
}

/// The UTF-8 characters shown as a space (no-break, en to hair, narrow no-break, medium
/// mathematical, ideographic; `space` true) or not shown at all (zero-width space, non-joiner,
/// joiner, word joiner, byte-order mark, soft hyphen; `space` false) at name[i]: their length
/// in bytes, 0 for any other character.
inline size_t unshown_char_at(std::string_view name, size_t i, bool& space) {
  static const char* const kSpaces[] = {"\xC2\xA0", "\xE2\x80\x80", "\xE2\x80\x81", "\xE2\x80\x82", "\xE2\x80\x83",
                                        "\xE2\x80\x84", "\xE2\x80\x85", "\xE2\x80\x86", "\xE2\x80\x87", "\xE2\x80\x88",
                                        "\xE2\x80\x89", "\xE2\x80\x8A", "\xE2\x80\xAF", "\xE2\x81\x9F", "\xE3\x80\x80"};
  static const char* const kInvisible[] = {"\xE2\x80\x8B", "\xE2\x80\x8C", "\xE2\x80\x8D",
                                           "\xE2\x81\xA0", "\xEF\xBB\xBF", "\xC2\xAD"};
  for (const auto& [list, n, is_space] : {std::tuple{kSpaces, std::size(kSpaces), true},
                                          std::tuple{kInvisible, std::size(kInvisible), false}})
    for (size_t k = 0; k < n; ++k)
      if (const std::string_view c = list[k]; name.substr(i, c.size()) == c) {
        space = is_space;
        return c.size();
      }
  return 0;
}

/// The position of the first Unicode space or invisible character (unshown_char_at), or npos.
inline size_t first_unshown_char(std::string_view name) {
  bool space = false;
  for (size_t i = 0; i < name.size(); ++i)
    if (unshown_char_at(name, i, space) > 0) return i;
  return std::string_view::npos;
}

/// A name as a table shows it: without leading and trailing spaces, each run of spaces as one
/// (ASCII white space and the Unicode spaces alike), without the invisible characters. Two
/// names with one key are told apart by nothing a reader sees.
inline std::string shown_alike_key(std::string_view name) {
  std::string out;
  bool space = false;
  for (size_t i = 0; i < name.size();) {
    bool is_space = false;
    size_t n = unshown_char_at(name, i, is_space);
    if (n == 0 && std::isspace(static_cast<unsigned char>(name[i]))) n = 1, is_space = true;
    if (n > 0) {
      space = space || is_space;
      i += n;
      continue;
    }
    if (space && !out.empty()) out += ' ';
    space = false;
    out += name[i++];
  }
  return out;
}

/// `text` as one field of a table separated by `sep` ('\t' or ',').
inline std::string table_field(std::string_view text, char sep) {
  const std::string s = utf8_escaped(text);
  if (s.find_first_of(std::string{sep, '\n', '\r', '"'}) == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

inline std::string tsv_field(std::string_view text) { return table_field(text, '\t'); }
inline std::string csv_field(std::string_view text) { return table_field(text, ','); }

/// `text` as the text of a Markdown table cell: one line, with the characters that Markdown
/// reads as markup or as a cell boundary escaped.
inline std::string md_text(std::string_view text) {
  std::string o;
  for (char c : text) {
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';  // a row of a Markdown table is one line
    // Markup characters, and < > [ ] (HTML tags and links: "<b>x</b>" rendered as bold).
    if (c == '|' || c == '*' || c == '_' || c == '`' || c == '\\' || c == '<' || c == '>' || c == '[' || c == ']')
      o += '\\';
    o += c;
  }
  return o;
}

/// `text` as a Markdown code span: in a fence of one backtick more than its longest run of
/// backticks (a job key "a`b" closed "`a`" early), padded with spaces where it begins or ends
/// with one.
inline std::string md_code(std::string_view text) {
  size_t longest = 0, run = 0;
  for (char c : text) longest = std::max(longest, run = c == '`' ? run + 1 : 0);
  const std::string fence(longest + 1, '`');
  const bool pad = !text.empty() && (text.front() == '`' || text.back() == '`');
  // Taken as is: backslash escapes are not read inside a code span.
  return fence + (pad ? " " : "") + std::string(text) + (pad ? " " : "") + fence;
}

/// `text` as LaTeX text: its special characters escaped.
inline std::string tex_text(std::string_view text) {
  std::string o;
  for (char c : text) {
    switch (c) {
      case '&': case '%': case '$': case '#': case '_': case '{': case '}': o += '\\'; o += c; break;
      case '~': o += "\\textasciitilde{}"; break;
      case '^': o += "\\textasciicircum{}"; break;
      case '\\': o += "\\textbackslash{}"; break;
      case '<': o += "\\textless{}"; break;  // a bare < > print as inverted ! ? in the default OT1 encoding
      case '>': o += "\\textgreater{}"; break;
      case '|': o += "\\textbar{}"; break;  // a bare | prints as an em dash in OT1
      default: o += c;
    }
  }
  return o;
}

}  // namespace genemask::io
