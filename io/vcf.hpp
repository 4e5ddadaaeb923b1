#pragma once
// Variants for `genemask variants`: VCF records (plain, gzip or bgzip) and the reference
// and alternative sequence windows around them, or a TSV of ready-made sequence pairs.
#include <cstdint>
#include <string>
#include <vector>

namespace genemask::io {

struct Variant {
  std::string id;      // VCF ID ("." when none) or the TSV's id
  std::string chrom;   // empty for TSV input
  uint64_t pos = 0;    // 1-based position of REF's first base (0 for TSV input)
  std::string ref, alt;  // alleles, upper case (empty for TSV input)
  uint64_t line = 0;   // 1-based line of the input file
  std::string ref_seq, alt_seq;  // the sequences scored, upper case
};

struct VcfStats {
  uint64_t records = 0;          // data lines
  uint64_t skipped_symbolic = 0; // ALT alleles that are not bases (<DEL>, *, ., breakends)
};

/// Data lines of a VCF: CHROM POS ID REF ALT (further columns ignored), one Variant per
/// ALT allele (multi-allelic lines give several). REF and ALT are bases (ACGTN, any case;
/// indels allowed); symbolic ALT alleles are skipped and counted. Errors name file:line.
std::vector<Variant> read_vcf(const std::string& path, VcfStats* stats);

/// A TSV with a header naming the columns id, ref_sequence and alt_sequence (other columns
/// ignored): sequences of bases (IUPAC letters, any case). Errors name file:line.
std::vector<Variant> read_variant_tsv(const std::string& path);

/// The fields of a line split at every `delim`, empty fields kept ("a,,b" -> a, "", b; "" -> "").
std::vector<std::string> split_fields(const std::string& line, char delim);

/// Cuts ref_seq/alt_seq from the genome (any FASTA form; chromosome names matched with or
/// without "chr"): `before` bases before POS, REF (resp. ALT), `after` bases after REF's
/// last base. REF must equal the genome there (else InputError vcf_path:line with both).
/// Windows running off the chromosome are dropped and counted in *off_chromosome. A variant
/// listed twice (by the record its chromosome resolves to) is an InputError naming both lines.
/// Returns the variants kept, in input order.
std::vector<Variant> cut_variant_windows(std::vector<Variant> variants, const std::string& vcf_path,
                                         const std::string& genome, uint64_t before, uint64_t after,
                                         uint64_t* off_chromosome);

}  // namespace genemask::io
