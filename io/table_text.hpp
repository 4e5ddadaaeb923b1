#pragma once
// Fields of the tables genemask writes (predictions.tsv, overlap.tsv, variants.tsv, task
// tables, the report's CSV), so that the standard readers of the format read them back as
// written: pandas.read_csv (sep="\t" or ","), R's read.delim and Python's csv module. A field
// that holds the separator, a line break or a double quote is written in double quotes with
// its quotes doubled (RFC 4180); bytes that are not UTF-8 are escaped (\xNN), since those
// readers decode UTF-8. Labels are classes as written, so a label with a tab or a comma is
// kept, and comes back whole.
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

}  // namespace genemask::io
