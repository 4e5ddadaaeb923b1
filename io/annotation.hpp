#pragma once
// GTF / GFF3 gene annotations: gene boundaries for the gene-boundary (GB) corpus variant,
// exons grouped by transcript for the splice-site dataset.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace genemask::io {

struct GeneInterval {
  std::string seqid;
  uint64_t start = 0, end = 0;  // 0-based, half-open
  char strand = '.';
  uint64_t line = 0;            // the line that gives `end` (for messages)
};

/// Where read_genes took its genes from.
struct GeneSource {
  bool from_transcripts = false;  // the file has no gene lines: mRNA/transcript spans were used
  // mRNA/transcript lines used: all of them when from_transcripts, else those no gene line
  // holds (loci given as transcripts only, beside gene lines of others); and the loci they
  // made (overlapping ones merged per strand).
  uint64_t transcripts = 0, transcript_loci = 0;
};

/// Reads the features of type "gene" (and "*_gene", e.g. ncRNA_gene, and "pseudogene", the
/// type of Ensembl's GFF3 for pseudogene loci) of a GTF or GFF3 file (.gz allowed). A file
/// without gene lines (many fungal and other GFF3s have mRNA and CDS lines only) gives its
/// mRNA/transcript spans instead, those of one sequence and strand that overlap merged into
/// one locus, as a gene spans its isoforms; so do the mRNA/transcript lines of a file with
/// gene lines that no gene line holds (loci given as transcripts only); `source` says so.
/// Transcripts are the lines of type mRNA, transcript and GFF3's other RNAs (lnc_RNA, ncRNA,
/// tRNA, ..., primary_transcript). Comments and directives are skipped; GFF3's ##FASTA section ends the features.
/// Malformed lines (column count, coordinates, strand, a GTF gene without gene_id) are
/// errors with file:line and the value; a malformed mRNA/transcript line only when the
/// file has no gene lines (otherwise those lines are not used).
std::vector<GeneInterval> read_genes(const std::string& path, GeneSource* source = nullptr);

/// Maps an annotation sequence name to a FASTA record name: exact, else with the "chr"
/// prefix added or removed (chrM <-> MT). Returns -1 when there is no match.
int match_seqid(const std::string& seqid, const std::vector<std::string>& fasta_names);

/// One key for the names match_seqid takes as one sequence: without a "chr" prefix, and
/// "M" (chrM) as "MT" ("chr1" and "1" give "1"; "chrM" and "MT" give "MT").
std::string seqid_key(const std::string& seqid);

/// What gene_boundaries found.
struct GeneBoundaryStats {
  uint64_t genes = 0;                     // genes (or merged transcript loci) read
  uint64_t unknown_sequence_genes = 0;    // on a sequence the FASTA does not have (skipped)
  std::vector<std::string> unknown_sequences;  // their sequence names, in file order, each once
};

/// Sorted, unique gene boundaries (gene starts and ends, 0-based) per FASTA record. Genes on
/// sequences the FASTA lacks (scaffolds, another naming) are skipped and counted in `stats`;
/// when no gene matches any record the annotation is refused (names of both sides in the
/// message), and a gene that ends past its record's end is an error with file:line (a
/// wrong assembly).
std::vector<std::vector<uint64_t>> gene_boundaries(const std::string& annotation_path,
                                                   const std::vector<std::string>& fasta_names,
                                                   const std::vector<uint64_t>& fasta_lengths,
                                                   GeneSource* source = nullptr, GeneBoundaryStats* stats = nullptr);

/// The exons of one transcript, as the annotation gives them.
struct TranscriptExons {
  std::string id;     // GTF transcript_id, GFF3 Parent (one per parent when there are several)
  std::string seqid;  // as written in the annotation (match it with match_seqid)
  char strand = '.';  // + - . ?
  uint64_t line = 0;  // line of the transcript's first exon, for messages
  // 0-based half-open, sorted by start; overlapping or touching exons of one transcript
  // (duplicate lines, zero-length introns) are merged, so consecutive exons are separated
  // by an intron of at least one base.
  std::vector<std::pair<uint64_t, uint64_t>> exons;
};

/// Reads the features of type `feature` ("exon"; "CDS" for annotations without exon lines)
/// of a GTF (by name: the path contains ".gtf") or GFF3
/// file (.gz allowed), grouped by transcript: GTF by the transcript_id attribute, GFF3 by
/// Parent (comma-separated parents: the exon belongs to each). A transcript is keyed by
/// (id, seqid), so an id reused on another sequence (old PAR annotations) is another
/// transcript. Transcripts come in order of their first exon. Errors (file:line, value):
/// malformed columns, an exon without transcript_id/Parent, exons of one transcript on two
/// strands, no such features at all (suggesting CDS when the file has CDS lines but no exons).
std::vector<TranscriptExons> read_transcript_exons(const std::string& path, const std::string& feature = "exon");

}  // namespace genemask::io
