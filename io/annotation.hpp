#pragma once
// GTF / GFF3 gene annotations: gene boundaries for the gene-boundary (GB) corpus variant.
#include <cstdint>
#include <string>
#include <vector>

namespace genemask::io {

struct GeneInterval {
  std::string seqid;
  uint64_t start = 0, end = 0;  // 0-based, half-open
  char strand = '.';
};

/// Reads the features of type "gene" (and "*_gene", e.g. ncRNA_gene) of a GTF or GFF3
/// file (.gz allowed). Comments and directives are skipped; GFF3's ##FASTA section ends
/// the features. Malformed lines (column count, coordinates, strand, a GTF gene without
/// gene_id) are errors with file:line and the value.
std::vector<GeneInterval> read_genes(const std::string& path);

/// Maps an annotation sequence name to a FASTA record name: exact, else with the "chr"
/// prefix added or removed (chrM <-> MT). Returns -1 when there is no match.
int match_seqid(const std::string& seqid, const std::vector<std::string>& fasta_names);

/// Sorted, unique gene boundaries (gene starts and ends, 0-based) per FASTA record.
std::vector<std::vector<uint64_t>> gene_boundaries(const std::string& annotation_path,
                                                   const std::vector<std::string>& fasta_names);

}  // namespace genemask::io
