#pragma once
// Sequential FASTA reading for the stages that need whole records in order (tests, shards,
// datasets): bases come upper-cased, whitespace removed, in chunks; never the whole file.
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace genemask::io {

struct FastaVisitor {
  std::function<void(const std::string& name)> on_record;    // a record starts
  std::function<void(std::string_view bases)> on_bases;      // upper-case A,C,G,T,N,IUPAC,'-','*'
  std::function<void()> on_record_end;                       // the record ended
};

/// The error for a FASTA file that starts with a UTF-8 byte-order mark before its first '>'.
inline constexpr std::string_view kFastaByteOrderMarkProblem =
    "starts with a UTF-8 byte-order mark before '>': a FASTA file has none; remove it (e.g. sed -i "
    "'1s/^\\xEF\\xBB\\xBF//' FILE) and run again";

struct FastaRecordSummary {
  std::string name;
  uint64_t length = 0;
};

/// Reads the whole file (.fa, .fa.gz, bgzip) and checks it: a '>' first line, no empty
/// records, unique names, only valid sequence characters. Throws InputError with file:line.
std::vector<FastaRecordSummary> read_fasta(const std::string& path, const FastaVisitor& visitor);

/// Convenience for small files (tests): all records as (name, upper-case sequence).
std::vector<std::pair<std::string, std::string>> read_fasta_all(const std::string& path);

}  // namespace genemask::io
