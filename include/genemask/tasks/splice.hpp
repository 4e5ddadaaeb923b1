#pragma once
// Splice-40-style windows (Torch-free): donor, acceptor and non-splice windows cut from a
// genome at the exon boundaries of a GTF/GFF3 annotation. docs/datasets.md ("splice")
// describes the conventions with a worked example.
//
// Coordinates are 0-based. A site is a cut point x between bases x-1 and x; its window is
// genome[x - W/2, x + W/2), reverse complemented on the minus strand so that it reads 5'->3'
// on the transcript's strand. For an intron [a, b) of a transcript:
//   + strand: donor at x = a (W/2 exon bases, then W/2 intron bases), acceptor at x = b
//             (W/2 intron bases, then W/2 exon bases);
//   - strand: donor at x = b, acceptor at x = a (after reverse complementing, the same
//             exon|intron and intron|exon halves as on the plus strand).
// So the first exon of a transcript (in transcript order) has no acceptor, the last no
// donor, and single-exon transcripts give nothing.
#include <cstdint>
#include <string>
#include <vector>

#include "genemask/tasks/task_dataset.hpp"
#include "io/annotation.hpp"

namespace genemask::dataset {

// Label order of the released Splice-40 data (its label-1 windows carry the donor consensus
// MAG|GTRAGT, its label-0 windows the acceptor's polypyrimidine tract and AG).
inline constexpr const char* kAcceptorLabel = "0";
inline constexpr const char* kDonorLabel = "1";
inline constexpr const char* kNonSpliceLabel = "2";

struct SpliceOptions {
  uint64_t window = 40;             // bases, even, >= 6 (one 6-mer)
  uint64_t seed = 42;               // negatives and the --max-per-class choice
  double negatives_per_site = 0.5;  // each distinct intron gives 2R non-splice windows on average
  uint64_t max_per_class = 0;       // 0: keep all; else at most this many per class (chosen by seed)
  bool skip_unknown_chromosomes = false;  // else a transcript on a sequence the genome lacks is an error
  std::string chrom_map;                  // optional "input<TAB>genome" name aliases (io::read_chrom_map)
  std::string exon_feature = "exon";      // feature type read as exons ("CDS": coding exons only)
};

/// Throws std::invalid_argument naming the option when an option is out of range.
void validate(const SpliceOptions& o);

/// What one chromosome gave, before de-duplication (the windows' counts by reason go to
/// stats.dropped: "off_chromosome", "contains_n").
struct SpliceCounts {
  uint64_t donor_sites = 0, acceptor_sites = 0;  // distinct (position, strand) sites
  uint64_t introns = 0;                          // distinct (start, end, strand) introns
  uint64_t introns_without_room = 0;             // no window fits between boundaries
  uint64_t unstranded_transcripts = 0;           // strand '.' or '?': boundaries only
};

/// Appends the windows of one chromosome (sequence upper case) to `out`, in genomic order.
/// `transcripts` are those on this chromosome (exons sorted and merged, as
/// io::read_transcript_exons returns them, within the sequence). Every exon start and end
/// of every transcript (any strand, single-exon ones too) is a boundary: a non-splice
/// window [p, p+W) lies inside an intron and has no boundary x with p <= x <= p+W.
/// Deterministic in (seed, chromosome name, intron coordinates).
SpliceCounts splice_windows(const std::string& chrom, const std::string& seq,
                            const std::vector<const io::TranscriptExons*>& transcripts, const SpliceOptions& o,
                            std::vector<Example>& out, DatasetStats& stats);

/// The same sequence more than once: with one label, the first is kept (the others counted
/// as "duplicate"); with two or more labels, all of them are dropped ("ambiguous", counted
/// per window). Then, with max_per_class > 0, each class keeps the max_per_class windows
/// with the smallest hash of (seed, sequence) ("over_max_per_class"). Order is kept.
void resolve_splice_duplicates(std::vector<Example>& examples, DatasetStats& stats, uint64_t max_per_class,
                               uint64_t seed);

struct SpliceBuild {
  std::vector<Example> examples;  // de-duplicated, ready for write_task_dataset
  DatasetStats stats;             // dropped windows by reason
  SpliceCounts counts;            // summed over chromosomes
  uint64_t transcripts = 0, multi_exon_transcripts = 0, unknown_chromosome_transcripts = 0;
  uint64_t chromosomes = 0;       // genome records with at least one transcript
};

/// Reads the annotation and the genome (any FASTA form, one chromosome in memory at a
/// time) and builds the windows. Annotation sequence names are matched to genome records
/// by io::SeqidResolver (exact, --chrom-map alias, chr prefix either way, RefSeq NC_
/// accession). Errors (io::InputError, file:line): a transcript on a sequence the genome
/// lacks (unless skip_unknown_chromosomes), an exon beyond the end of its chromosome.
SpliceBuild build_splice_dataset(const std::string& genome, const std::string& annotation, const SpliceOptions& o);

}  // namespace genemask::dataset
