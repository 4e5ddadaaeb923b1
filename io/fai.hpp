#pragma once
// samtools-compatible FASTA index (.fai): NAME LENGTH OFFSET LINEBASES LINEWIDTH, tab-separated.
// Used for random access by region on plain (uncompressed) FASTA files.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace genemask::io {

struct FaiEntry {
  std::string name;
  uint64_t length = 0;      // bases
  uint64_t offset = 0;      // byte offset of the first base
  uint64_t line_bases = 0;  // bases per full line
  uint64_t line_bytes = 0;  // bytes per full line, newline included
};

class FaiIndex {
 public:
  /// Parses a .fai file; errors name the file, the line and the bad field.
  static FaiIndex load(const std::string& fai_path);
  /// Loads FASTA.fai if it exists next to the FASTA file.
  static std::optional<FaiIndex> load_if_present(const std::string& fasta_path);
  /// Indexes a plain FASTA file (what `samtools faidx` does). Requires equal line widths
  /// inside each record (the last line may be shorter).
  static FaiIndex build(const std::string& fasta_path);
  /// Writes the index atomically (temporary name, then rename).
  void write(const std::string& fai_path) const;

  const std::vector<FaiEntry>& entries() const { return entries_; }
  const FaiEntry* find(const std::string& name) const;

 private:
  std::vector<FaiEntry> entries_;
};

/// When GENOME.fai exists, the records a reader found (names and lengths, in file order)
/// must be the ones it lists: a FASTA cut short (a truncated download) or changed after it
/// was indexed is an InputError naming the index and the first difference.
void check_against_fai(const std::string& genome, const std::vector<std::string>& names,
                       const std::vector<uint64_t>& lengths);

/// Bases [start, end) (0-based) of a record of a plain FASTA file, upper-cased.
/// Throws InputError when the region is outside the record.
std::string fetch_region(const std::string& fasta_path, const FaiIndex& index, const std::string& name,
                         uint64_t start, uint64_t end);

}  // namespace genemask::io
