#pragma once
// Task tables: the released few-shot TSV (header "sequence" "label", every field
// double-quoted, the sequence as space-separated overlapping 6-mers) and plain
// `sequence,label` CSV/TSV with raw bases. Quoting is optional; extra columns are ignored.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace genemask::io {

struct TaskRow {
  std::string sequence;  // bases, upper case
  std::string label;
  uint64_t line = 0;     // 1-based line in the file
  uint64_t last_line = 0;  // its last line: later than `line` when a quoted field holds line breaks
  // The table's last row, and the file's last line has no line end: the file may have been cut
  // short inside this row (read_task_table warns; finetune counts it as unterminated_tables).
  bool unterminated = false;
};

/// Reads and checks a task table. k-mer text must be tokens of one length overlapping by
/// k-1 bases; raw sequences must be IUPAC letters. Errors name the file, the line and the
/// value (an empty file, a missing column or one given twice, a bad token, an empty sequence
/// or label, a table without any A, C, G or T). A UTF-8 byte order mark is skipped. Labels
/// are classes as written, so one that would be a class apart by its spelling (a leading or
/// trailing space, a no-break or zero-width space, a full-width digit; a number not written as a
/// plain integer: "1.0", "01", "+1") is an error.
/// Without `label_required`, a table may lack the label column (unlabelled sequences for a
/// model to run on); its rows then have empty labels.
std::vector<TaskRow> read_task_table(const std::string& path, bool label_required = true);

/// Why `label` cannot be a class name as written ("" when it can): a leading or trailing
/// space; a Unicode space or an invisible character not shown as the label reads (a no-break
/// space, a zero-width space: shown_alike_key); a full-width form ("１"); or a number not
/// written as a plain integer ("1.0", "01", "+1"), each of which would make a class apart from
/// the same label written plainly.
std::string label_problem(const std::string& label);

/// Splits one line of a table on `delim`, honouring double quotes ("" inside quotes is a
/// quote); bad_quote is set when a quote is left open at the end of the line.
std::vector<std::string> split_quoted_fields(const std::string& line, char delim, bool& bad_quote);

/// Bases from overlapping k-mer text ("AAACGG AACGGA ..."); throws std::invalid_argument
/// naming the token that does not fit.
std::string kmer_text_to_bases(const std::string& text);

/// The position of the first character of `text` that is not a base (A, C, G, T, N or another
/// IUPAC code, either case), or npos.
size_t first_non_base(std::string_view text);
/// What is wrong at text[bad] (a position first_non_base found): "'U' at position 7 is not a
/// base (A, C, G, T, N or another IUPAC code, any case)".
std::string non_base_problem(std::string_view text, size_t bad);

/// A sequence given as text, as upper-case bases: bases (any case), or DNABERT's 6-mer text
/// (kmer_text_to_bases) when it has a space. The rule of a task table's sequence column, and
/// of the Python tokenizer. Throws std::invalid_argument naming the token, or the character
/// and its 1-based position.
std::string sequence_text_to_bases(const std::string& text);

}  // namespace genemask::io
