#pragma once
// Fields of the tables genemask writes (predictions.tsv, overlap.tsv, variants.tsv, task
// tables, the report's CSV), so that the standard readers of the format read them back as
// written: pandas.read_csv (sep="\t" or ","), R's read.delim and Python's csv module. A field
// that holds the separator, a line break or a double quote is written in double quotes with
// its quotes doubled (RFC 4180); bytes that are not UTF-8 are escaped (\xNN), since those
// readers decode UTF-8. Labels are classes as written, so a label with a tab or a comma is
// kept, and comes back whole. The report's Markdown and LaTeX cells are escaped here too.
#include <string>
#include <string_view>

#include "io/error.hpp"

namespace genemask::io {

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
      default: o += c;
    }
  }
  return o;
}

}  // namespace genemask::io
