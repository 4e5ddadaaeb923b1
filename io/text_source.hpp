#pragma once
// Sequential access to the uncompressed text of a (possibly compressed) file.
//
// Positions are "virtual offsets" (voffsets), monotone in file order:
//  - plain files and plain gzip: the offset of the byte in the uncompressed text;
//  - BGZF (bgzip): (compressed offset of the block << 16) | offset inside the block,
//    as htslib does, so a rank can start at any block without decompressing earlier ones.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace genemask::io {

enum class Compression { none, gzip, bgzf };
const char* to_string(Compression c);

struct FileInfo {
  std::string path;
  Compression compression = Compression::none;
  uint64_t size_bytes = 0;  // on-disk size
};

/// Opens and sniffs the file (by content, not by name). Throws InputError when unreadable.
FileInfo probe_file(const std::string& path);

/// A plain (uncompressed) FASTA whose last byte is not a line end, the way a file cut short
/// by a stopped download or copy ends: said (warn_unterminated_file) and listed in the
/// summary's unterminated_inputs. gzip and BGZF need no such guess (their end is checked).
/// Reads one byte.
void note_fasta_end(const FileInfo& info);

/// A block of uncompressed text; the voffset of data[i] is voff_base + i.
struct TextBlock {
  const char* data = nullptr;
  size_t size = 0;
  uint64_t voff_base = 0;
};

class TextReader {
 public:
  virtual ~TextReader() = default;
  /// Next block of text; false at the end of the file. Throws InputError on corrupt input
  /// (e.g. a truncated gzip stream).
  virtual bool next(TextBlock& out) = 0;
  /// Bytes of the file consumed so far (for progress reports).
  virtual uint64_t file_pos() const = 0;
};

/// Opens a reader positioned at start_voffset. For plain files any byte offset is allowed,
/// for BGZF the voffset of a block start, for plain gzip only 0.
std::unique_ptr<TextReader> open_text(const FileInfo& info, uint64_t start_voffset = 0);

/// BGZF: compressed offset of the first valid block starting at or after coffset
/// (file size when there is none). Deterministic, so every rank finds the same boundaries.
uint64_t bgzf_block_at_or_after(const FileInfo& info, uint64_t coffset);

/// Which text a rank owns. A FASTA line belongs to the owner of the voffset of the newline
/// that precedes it (the first line of the file belongs to the owner of voffset 0); this
/// lets ranks split anywhere without looking backwards.
struct Ownership {
  enum class Kind { contiguous, round_robin };
  Kind kind = Kind::contiguous;
  uint64_t begin = 0;          // contiguous: [begin, end)
  uint64_t end = UINT64_MAX;
  uint64_t chunk_bytes = 0;    // round_robin: chunk i = [i*chunk, (i+1)*chunk) belongs to rank i % nranks
  int rank = 0;
  int nranks = 1;

  bool owns(uint64_t voff) const {
    if (kind == Kind::contiguous) return voff >= begin && voff < end;
    return static_cast<int>((voff / chunk_bytes) % static_cast<uint64_t>(nranks)) == rank;
  }
  /// Where the reader has to start.
  uint64_t start_voffset() const { return kind == Kind::contiguous ? begin : 0; }
  /// The first voffset > voff where ownership may change (UINT64_MAX if none).
  uint64_t next_boundary_after(uint64_t voff) const {
    if (kind == Kind::contiguous) return voff < end ? end : UINT64_MAX;
    return (voff / chunk_bytes + 1) * chunk_bytes;
  }
  /// True when nothing at or after voff can be owned (the reader may stop).
  bool done_after(uint64_t voff) const { return kind == Kind::contiguous && voff >= end; }
};

/// Balanced split of the file among ranks: equal byte ranges for plain files, equal
/// compressed ranges snapped to block starts for BGZF, round-robin chunks of the text for
/// plain gzip (every rank decompresses the whole stream: recompress with bgzip to scale).
Ownership partition(const FileInfo& info, int rank, int nranks, uint64_t gzip_chunk_bytes = 8u << 20);

/// Removes a UTF-8 byte-order mark (what a spreadsheet's "CSV UTF-8" puts first) from the
/// start of a file's first line; true when there was one. Every reader of text tables calls
/// it on line 1, so the mark never becomes part of a first name, column or path.
bool strip_utf8_bom(std::string& first_line);

/// Throws InputError (path:lineno) when a line of a text table holds a zero byte: no text
/// format has one, and a download that reserved the file's size and stopped leaves zeros
/// where the rest should be (read as a field, they made the refusal a puzzle). Every line
/// reader of tables calls it.
void check_no_zero_byte(const std::string& path, uint64_t lineno, std::string_view line);

/// Calls fn(line, lineno) for every line of a plain or compressed text file, in order: lineno
/// is 1-based, a UTF-8 byte-order mark before line 1 is skipped (strip_utf8_bom) and a '\r'
/// at the end of a line is removed; a line with a zero byte is refused (check_no_zero_byte).
/// With stop_prefix, reading ends
/// before the first line that starts with it (GFF3's "##FASTA" section). Returns true when the
/// file's last line has no line end (the sign of a file cut short), false otherwise.
bool for_each_line(const std::string& path, const std::function<void(const std::string& line, uint64_t lineno)>& fn,
                   const std::string& stop_prefix = {});

/// for_each_line for a user's table (BED, VCF, a genome list, a chromosome map): a last line
/// without a line end is said (warn_unterminated_last_line), with `what` of it.
void for_each_table_line(const std::string& path, const std::function<void(const std::string& line, uint64_t lineno)>& fn,
                         std::string_view what = "its last row may be partial, and rows after it missing,");

/// 1-based line number of the byte at voffset (re-reads the file from the start; used
/// only to report errors).
uint64_t line_of_voffset(const FileInfo& info, uint64_t voffset);

}  // namespace genemask::io
