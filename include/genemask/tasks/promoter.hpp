#pragma once
// `genemask dataset promoter`: TSS-centred windows from a genome plus DeePromoter negatives.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "genemask/tasks/task_dataset.hpp"

namespace genemask::dataset {

/// A window by offsets relative to the TSS, both inclusive, on the TSS's strand: offset 0 is
/// the TSS base, -1 the base upstream of it. Prom-core = {-34, 35} (70 bp), Prom-300 =
/// {-249, 50} (300 bp).
struct TssWindow {
  int64_t first = -34, last = 35;
  uint64_t length() const { return static_cast<uint64_t>(last - first + 1); }
};

/// "-34:35", or a preset name ("prom-core", "prom-300"). Throws std::invalid_argument.
TssWindow parse_tss_window(const std::string& text);

/// The window's bases read 5'->3' on the TSS's strand: on '+' chrom[tss+first, tss+last],
/// on '-' the reverse complement of chrom[tss-last, tss-first]. False when it runs off the
/// chromosome (out untouched).
bool cut_tss_window(const std::string& chrom, uint64_t tss, char strand, TssWindow w, std::string& out);

/// The 20 DeePromoter parts of a sequence of length L: part i = [floor(i*L/20), floor((i+1)*L/20)),
/// so parts differ in length by at most one base (for L = 70: ten of 3 and ten of 4 bases).
std::vector<std::pair<size_t, size_t>> deepromoter_parts(size_t length, int parts = 20);

struct Negative {
  std::string sequence;
  std::vector<int> kept;  // indices of the parts copied from the positive (8 of 20, sorted)
};

/// DeePromoter's negative of a positive: 8 of the 20 parts, chosen by a stream keyed by
/// (seed, positive), are kept; each of the other 12 is replaced by uniform random bases, or
/// with `shuffle` by a random permutation of its own bases (composition kept per part).
Negative deepromoter_negative(const std::string& positive, uint64_t seed, bool shuffle);

/// A TATA box: the consensus TATAWAWR (W = A/T, R = A/G) starting at an offset in -31..-25
/// (EPD's "-28 +/- 3") on the TSS's strand.
bool has_tata_box(const std::string& chrom, uint64_t tss, char strand);

/// The shortest window `--negatives shuffle` takes: its 20 parts of 3 bases or more.
inline constexpr uint64_t kMinShuffleWindow = 60;

struct PromoterOptions {
  std::string genome, tss;        // FASTA; BED or SGA (by name: *.sga[.gz] is SGA)
  TssWindow window;
  bool shuffle_negatives = false; // --negatives shuffle (a window of at least kMinShuffleWindow bp)
  uint64_t seed = 42;
  enum class Tata { all, tata_only, non_tata_only } tata = Tata::all;
  std::string tata_list;          // promoter names that have a TATA box (else the motif rule)
  uint64_t bed_tss_offset = 0;    // for BED without a thick part
  std::string chrom_map;          // optional "input<TAB>genome" name aliases
};

/// Positives ("1", one per usable TSS, in input order) each followed by its negative ("0").
/// Fills stats.dropped ("off_chromosome", "contains_n", "not_tata", "tata"). A TSS outside
/// its chromosome, or on a chromosome the genome lacks, is an InputError with file:line.
std::vector<Example> build_promoter(const PromoterOptions& o, DatasetStats& stats);

}  // namespace genemask::dataset
