#pragma once
// Whole-chromosome access for the dataset builders: any FASTA form (plain, gzip, bgzip),
// one chromosome in memory at a time (GRCh38 chr1: ~250 MB).
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "io/fasta.hpp"

namespace genemask::io {

/// Names and lengths of the genome's records, in file order (from FASTA.fai when present
/// and consistent, else by reading the file once).
std::vector<FastaRecordSummary> genome_records(const std::string& fasta);

/// Calls fn(name, upper-cased sequence) for each record, in file order, for which
/// wanted(name) is true (records not wanted are skipped without being kept in memory).
void for_each_chromosome(const std::string& fasta, const std::function<bool(const std::string&)>& wanted,
                         const std::function<void(const std::string& name, const std::string& seq)>& fn);

/// Maps the sequence names of an annotation to genome records: exact name, then an alias
/// ("input<TAB>genome" pairs, e.g. from --chrom-map), then chr-prefix matching
/// (io::match_seqid), then a human/mouse RefSeq accession (NC_000001.11 -> chr1).
class SeqidResolver {
 public:
  SeqidResolver(std::vector<std::string> genome_names, std::vector<std::pair<std::string, std::string>> aliases = {});
  /// Record index, or throws InputError "file:line: sequence 'X' is not in the genome G
  /// (its records: a, b, c, ...)".
  size_t resolve(const std::string& name, const std::string& file, uint64_t line, const std::string& genome) const;
  const std::vector<std::string>& names() const { return names_; }

 private:
  std::vector<std::string> names_;
  std::vector<std::pair<std::string, std::string>> aliases_;
  mutable std::vector<std::pair<std::string, int>> cache_;
  /// The RefSeq accessions resolved so far, by accession without its version: one file's
  /// accessions must be of one organism and give each chromosome one version (one assembly).
  struct Accession {
    std::string name, file;
    uint64_t line = 0;
  };
  mutable std::map<std::string, Accession> accessions_;
};

/// For builders that group their work by record: calls fn(r, upper-cased sequence) for each
/// record r (an index into `records`, genome_records' list in file order) with wanted[r].
/// A wanted record whose sequence is not the length `records` says, or that the FASTA does
/// not hold (a .fai index left from a FASTA since replaced), is an InputError: the builders'
/// checks of coordinates against the lengths would otherwise have been against another
/// genome's.
void for_each_wanted_record(const std::string& fasta, const std::vector<FastaRecordSummary>& records,
                            const std::vector<bool>& wanted,
                            const std::function<void(size_t record, const std::string& seq)>& fn);

}  // namespace genemask::io
