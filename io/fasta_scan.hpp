#pragma once
// Streaming FASTA scanner: walks the text a rank owns line by line and hands sequence
// text and headers to a handler. Never holds more than one block of text in memory.
//
// Accepts any line width, CRLF line ends, lowercase (soft-masked) bases, IUPAC codes,
// empty lines. Rejects, with file:line and the offending value: a first line that is
// not a '>' header, an empty record name, control/binary bytes in headers; the handler
// checks sequence bytes (see SeqClass) and empty records.
#include <array>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "io/error.hpp"
#include "io/fasta.hpp"
#include "io/text_source.hpp"

namespace genemask::io {

/// Classes of bytes on sequence lines. A,C,G,T (either case) are 0..3 (2-bit code),
/// whitespace is skipped, N/IUPAC/gap symbols break k-mers, anything else is an error.
enum SeqClass : uint8_t { kBaseA = 0, kBaseC = 1, kBaseG = 2, kBaseT = 3, kSkip = 4, kBreak = 5, kInvalid = 6 };

inline constexpr std::array<uint8_t, 256> make_seq_class_table() {
  std::array<uint8_t, 256> t{};
  for (auto& v : t) v = kInvalid;
  const char* breaks = "NRYSWKMBDHVUnryswkmbdhvu-*.";
  for (const char* p = breaks; *p; ++p) t[static_cast<unsigned char>(*p)] = kBreak;
  t['A'] = t['a'] = kBaseA;
  t['C'] = t['c'] = kBaseC;
  t['G'] = t['g'] = kBaseG;
  t['T'] = t['t'] = kBaseT;
  t['\r'] = t[' '] = t['\t'] = t['\n'] = kSkip;  // '\n' appears in bulk deliveries (see scan_fasta)
  return t;
}
inline constexpr std::array<uint8_t, 256> kSeqClass = make_seq_class_table();

/// Throws InputError for the byte at voffset, with its 1-based line number.
[[noreturn]] void fail_at(const FileInfo& info, uint64_t voffset, const std::string& message);

/// The error for a carriage return inside a header line (a file with CR-only line ends).
[[noreturn]] void fail_cr_only(const FileInfo& info, uint64_t voffset);

/// The error for a byte that cannot be on a sequence line; `record` is named when known.
[[noreturn]] void fail_invalid_base(const FileInfo& info, uint64_t voffset, unsigned char byte,
                                    const std::string& record = {});

/// The key under which a record name must be unique: the name as outputs write it (UTF-8,
/// a byte that is not UTF-8 as \xNN), so that two names written alike are one name.
inline std::string record_name_key(std::string_view name) { return utf8_escaped(name); }

/// The error for a record name given twice (by record_name_key): `name`, first given as
/// `first_name` on `first_line`.
std::string duplicate_record_problem(std::string_view name, std::string_view first_name, uint64_t first_line);

/// Handler concept (all members required):
///   void header(std::string_view name, uint64_t voff, bool owned);
///   bool bases(const char* p, size_t n, uint64_t voff, bool owned);  // owned: return value ignored;
///                                                                    // lookahead: true = want more
///   void end_owned();    // the next lines are not ours: lookahead begins
///   void begin_owned(bool continuing, uint64_t voff);  // a new owned stretch begins (round-robin ownership);
///                                       // continuing: the lookahead was still running, so the
///                                       // text is contiguous with what came before
///   void finish();       // end of the scan (end of file or nothing more to own)
///   void block_done(uint64_t file_pos);  // after each block of text, and once before finish() (progress)
/// In lookahead the scanner stops delivering at the first header (after reporting it) or
/// when bases() returns false.
template <class Handler>
void scan_fasta(const FileInfo& info, const Ownership& own, Handler& h) {
  const uint64_t start = own.start_voffset();
  auto reader = open_text(info, start);
  // State of the current line.
  bool at_line_start = true;  // the next byte begins a line
  bool owned = start == 0 && own.owns(0);
  bool skipping_partial = start != 0;  // inside the line that straddles our start
  bool lookahead = false;              // delivering beyond our text
  bool lookahead_done = false;
  bool in_header = false;
  bool first_line_pending = start == 0;  // the first non-empty line of the file must be a header
  std::string header;
  uint64_t header_voff = 0;
  uint64_t line_voff = start;  // voffset of the current line's first byte
  constexpr size_t kMaxHeaderBytes = 1u << 20;

  // A header line is complete: check it and hand it over.
  auto complete_header = [&]() {
    if (!header.empty() && header.back() == '\r') header.pop_back();
    for (size_t k = 0; k < header.size(); ++k) {
      unsigned char c = static_cast<unsigned char>(header[k]);
      if (c == '\r') fail_cr_only(info, header_voff + k);
      if (c < 0x20 && c != '\t')
        fail_at(info, header_voff + k, fmt::format("invalid {} in header line: binary data?", describe_byte(c)));
    }
    std::string_view name(header);
    name.remove_prefix(1);
    size_t ws = name.find_first_of(" \t");
    if (ws != std::string_view::npos) name = name.substr(0, ws);
    if (name.empty()) fail_at(info, header_voff, "empty record name after '>' (every record needs a name)");
    h.header(name, header_voff, owned);
    if (!owned) lookahead_done = true;  // a header ends any lookahead
  };

  TextBlock blk;
  while (reader->next(blk)) {
    const char* d = blk.data;
    const size_t n = blk.size;
    size_t i = 0;
    while (i < n) {
      const uint64_t voff = blk.voff_base + i;
      // Bulk mode: inside a record we own, hand over everything up to the next '>' or the
      // next ownership boundary in one call (newlines included; they are skip bytes), so
      // the per-line cost disappears. Lines at boundaries go through the line mode below.
      if (owned && !lookahead && !skipping_partial && !in_header && !first_line_pending && own.owns(voff)) {
        size_t limit = n;
        const uint64_t boundary = own.next_boundary_after(voff);
        if (boundary < blk.voff_base + n) limit = static_cast<size_t>(boundary - blk.voff_base);
        if (limit > i && !(at_line_start && d[i] == '>')) {
          const void* gt = std::memchr(d + i, '>', limit - i);
          size_t bulk_end = gt ? static_cast<size_t>(static_cast<const char*>(gt) - d) : limit;
          if (gt && bulk_end > i && d[bulk_end - 1] != '\n') bulk_end = i;  // '>' inside a line: line mode reports it
          if (bulk_end > i) {
            h.bases(d + i, bulk_end - i, voff, true);
            at_line_start = d[bulk_end - 1] == '\n';
            i = bulk_end;
            continue;
          }
        }
      }
      if (at_line_start) {
        at_line_start = false;
        in_header = d[i] == '>';
        if (in_header) {
          header.clear();
          header_voff = voff;
        }
        const bool active = owned || (lookahead && !lookahead_done);
        line_voff = voff;
        bool hold = false;  // a first line that may be an empty CRLF line: decided at its end
        if (first_line_pending && d[i] == '\r') {
          hold = true;
        } else if (first_line_pending && d[i] != '\n') {  // every reader from 0 checks
          first_line_pending = false;
          if (!in_header && n - i >= 4 && std::memcmp(d + i, "\xEF\xBB\xBF>", 4) == 0)
            fail_at(info, voff, std::string(kFastaByteOrderMarkProblem));
          if (!in_header)
            fail_at(info, voff,
                    fmt::format("not a FASTA file: the first line must start with '>' (found {})",
                                describe_byte(static_cast<unsigned char>(d[i]))));
        }
        if (!active || hold) skipping_partial = true;
      }
      const void* nlp = std::memchr(d + i, '\n', n - i);
      const size_t end = nlp ? static_cast<size_t>(static_cast<const char*>(nlp) - d) : n;
      const bool deliver = !skipping_partial && (owned || (lookahead && !lookahead_done));
      if (deliver) {
        if (in_header) {
          // A CR that does not end the line: CR-only line ends make the whole file one header.
          if (const void* cr = std::memchr(d + i, '\r', end - i)) {
            const size_t at = static_cast<size_t>(static_cast<const char*>(cr) - d);
            if (at + 1 < n && d[at + 1] != '\n') fail_cr_only(info, blk.voff_base + at);
          }
          if (header.size() + (end - i) > kMaxHeaderBytes)
            fail_at(info, header_voff, "header line longer than 1 MiB: not a FASTA file?");
          header.append(d + i, end - i);
        } else if (end > i) {
          if (owned) {
            h.bases(d + i, end - i, voff, true);
          } else if (!h.bases(d + i, end - i, voff, false)) {
            lookahead_done = true;
          }
        }
      }
      if (!nlp) break;
      // A line is complete.
      if (first_line_pending && blk.voff_base + end > line_voff + 1)  // more than "\r": not empty
        fail_at(info, line_voff, "not a FASTA file: the first line must start with '>'");
      if (in_header && deliver) complete_header();
      const uint64_t nl_voff = blk.voff_base + end;
      const bool next_owned = own.owns(nl_voff);
      if (owned && !next_owned) {
        h.end_owned();
        lookahead = true;
        lookahead_done = false;
      } else if (!owned && next_owned) {
        h.begin_owned(lookahead && !lookahead_done, nl_voff);
        lookahead = false;
      }
      if (!next_owned && (!lookahead || lookahead_done) && own.done_after(nl_voff)) {
        h.block_done(reader->file_pos());  // the last block this rank reads (its share done)
        h.finish();
        return;
      }
      owned = next_owned;
      skipping_partial = false;
      at_line_start = true;
      i = end + 1;
    }
    h.block_done(reader->file_pos());
  }
  if (first_line_pending && own.owns(0)) {
    if (!at_line_start) fail_at(info, line_voff, "not a FASTA file: the first line must start with '>'");
    fail_at(info, 0, "not a FASTA file: it is empty");
  }
  // The file ends inside a header line (">chr1" without a newline): it is complete too.
  if (!at_line_start && in_header && !skipping_partial && (owned || (lookahead && !lookahead_done))) complete_header();
  h.block_done(info.size_bytes);  // the whole file read (a BGZF file's end-of-file block too)
  h.finish();
}

}  // namespace genemask::io
