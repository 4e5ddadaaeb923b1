#pragma once
// PMI_k and NPMI_k of k-mers from genome counts (paper eq. 1 and 2; REFERENCE-NOTES.md):
//   PMI_k(w)  = min over contiguous segmentations s of w, identity excluded, of
//               log( p(w) / prod_{s_i in s} p(s_i) ),  p(x) = count(x) / total_{|x|}
//   NPMI_k(w) = PMI_k(w) * ln f(w) / (ln c + ln f(w)),  f = raw count, c = min count (101)
// Natural logarithms throughout.
#include <cstdint>
#include <string>
#include <vector>

namespace genemask {

class PmiCalculator {
 public:
  /// counts[k] holds 4^k counts for k = 1..kmax (counts[0] unused).
  PmiCalculator(const std::vector<std::vector<uint64_t>>& counts, int kmax);
  /// PMI of the k-mer with 2-bit code `code` (2 <= k <= kmax); NaN when its count is 0.
  /// Dynamic programme over cut points: O(k^2).
  double pmi(uint64_t code, int k) const;
  double log_p(uint64_t code, int k) const { return logp_[static_cast<size_t>(k)][code]; }
  uint64_t count(uint64_t code, int k) const { return (*counts_)[static_cast<size_t>(k)][code]; }
  int kmax() const { return kmax_; }

 private:
  const std::vector<std::vector<uint64_t>>* counts_;
  int kmax_;
  std::vector<std::vector<double>> logp_;
};

/// NPMI with the paper's discount; NaN when f == 0.
double npmi_from_pmi(double pmi, uint64_t f, uint64_t c);

struct NpmiEntry {
  uint64_t rank = 0;  // 1 = highest NPMI
  uint64_t code = 0;
  uint64_t count = 0;
  double pmi = 0, npmi = 0;
  bool below_min_count = false;
};

/// The GRANK list: all 4^k k-mers sorted by NPMI descending; k-mers with count < min_count
/// come last (also by NPMI), k-mers never seen at the very end; ties by k-mer code.
std::vector<NpmiEntry> npmi_ranking(const PmiCalculator& calc, int k, uint64_t min_count);

struct PmiVocabEntry {
  uint64_t rank = 0;
  uint64_t code = 0;
  int k = 0;
  uint64_t count = 0;
  double pmi = 0;
};

/// Gene-PMI-VOC: k-mers with kmin <= k <= kmax and count >= min_count, ranked by PMI_k
/// (descending; ties by k, then code), the top `size` of them.
std::vector<PmiVocabEntry> pmi_vocabulary(const PmiCalculator& calc, int kmin, int kmax, uint64_t min_count,
                                          uint64_t size);

/// Reference for tests: PMI by enumerating all 2^(k-1)-1 segmentations explicitly.
double pmi_brute_force(const PmiCalculator& calc, uint64_t code, int k);

}  // namespace genemask
