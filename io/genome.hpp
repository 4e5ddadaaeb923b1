#pragma once
// Whole-chromosome access for the dataset builders: any FASTA form (plain, gzip, bgzip),
// one chromosome in memory at a time (GRCh38 chr1: ~250 MB).
#include <cstdint>
#include <functional>
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

}  // namespace genemask::io
