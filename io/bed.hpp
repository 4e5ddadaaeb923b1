#pragma once
// Coordinates of the dataset builders' inputs (plain or gzip):
//  - TSS positions from EPDnew's download formats, BED and SGA;
//  - genomic-benchmarks interval CSVs (`id,region,start,end,strand`).
#include <cstdint>
#include <string>
#include <vector>

namespace genemask::io {

struct TssSite {
  std::string chrom;   // as written in the input
  uint64_t pos = 0;    // 0-based position of the TSS base
  char strand = '+';   // '+' or '-'
  std::string name;    // BED name / SGA annotation field ("" when absent)
  uint64_t line = 0;   // 1-based line in the input, for messages
};

/// BED (>= 6 columns: chrom, start, end, name, score, strand; 0-based half-open). The TSS is
/// the 5' end, on the site's strand, of the thick part (columns 7-8) when given and
/// non-empty, else of the interval shifted by `tss_offset` bases downstream:
///   '+': thickStart (else start + tss_offset);  '-': thickEnd - 1 (else end - 1 - tss_offset).
/// EPDnew's BED (60 bp, -49..+10, thick = TSS..+10) thus gives the TSS itself.
/// "track"/"browser"/'#' lines are skipped. Errors name file:line and the value.
std::vector<TssSite> read_tss_bed(const std::string& path, uint64_t tss_offset = 0);

/// SGA (tab-separated: chrom, feature, position (1-based), strand, count, [annotation...]);
/// TSS = position - 1. The feature is not checked (EPDnew writes "TSS").
std::vector<TssSite> read_tss_sga(const std::string& path);

/// SGA when the name ends in .sga or .sga.gz, else BED.
std::vector<TssSite> read_tss(const std::string& path, uint64_t bed_tss_offset = 0);

struct IntervalRow {
  std::string id;
  std::string chrom;
  uint64_t start = 0, end = 0;  // 0-based, half-open
  char strand = '+';            // '+' or '-' ('.' reads as '+')
  uint64_t line = 0;
};

/// A genomic-benchmarks interval CSV: header `id,region,start,end,strand` (columns found by
/// name, "chr" or "chrom" also accepted for region; extra columns ignored), 0-based half-open coordinates, end > start.
std::vector<IntervalRow> read_interval_csv(const std::string& path);

/// Sequence-name aliases "input<TAB>genome" (one per line, '#' comments) for inputs that
/// name chromosomes differently from the FASTA, e.g. RefSeq accessions.
std::vector<std::pair<std::string, std::string>> read_chrom_map(const std::string& path);

/// The UCSC-style name of a human (GRCh37/38) or mouse (GRCm38/39) RefSeq chromosome
/// accession such as NC_000001.11 -> chr1, NC_000067.7 -> chr1 (EPDnew's SGA files use
/// these); "" when the name is not one of them.
std::string refseq_to_ucsc(const std::string& accession);
/// "human" or "mouse" for the accessions refseq_to_ucsc maps, "" otherwise.
std::string refseq_organism(const std::string& accession);

}  // namespace genemask::io
