#pragma once
// The paper's memorisation check (`genemask overlap`): the fraction of a test sequence's
// k-mers (15-mers in the paper) found in a reference set: the training sequences of the
// task, or the pretraining corpus (the 15-mer presence bitset of counts.h5). Exact sets,
// no Bloom filter. Codes as in kmer.hpp: 2 bits per base, A=0 C=1 G=2 T=3.
#include <cmath>
#include <cstdint>
#include <string_view>
#include <vector>

#include "genemask/kmer/kmer.hpp"

namespace genemask::overlap {

/// The exact set of k-mers (1 <= k <= 31) of some sequences: sorted unique codes.
/// k-mers with a base other than ACGT (any case) are skipped.
class KmerSet {
 public:
  explicit KmerSet(int k);
  void add_sequence(std::string_view seq);
  /// Sorts and de-duplicates; call once after the last add_sequence, before contains().
  void finish();
  bool contains(uint64_t code) const;
  size_t size() const { return codes_.size(); }
  int k() const { return k_; }

 private:
  int k_;
  bool finished_ = false;
  std::vector<uint64_t> codes_;
};

/// The 15-mer presence set of counts.h5 (/presence/k15): bit i of word i/64.
struct PresenceBits {
  const std::vector<uint64_t>* words = nullptr;
  bool contains(uint64_t code) const { return ((*words)[code >> 6] >> (code & 63)) & 1u; }
};

/// Code of the reverse complement of a k-mer code.
uint64_t reverse_complement(uint64_t code, int k);

struct SequenceOverlap {
  uint64_t kmers = 0;   // k-mer positions without a non-ACGT base
  uint64_t found = 0;   // of those, the positions whose k-mer is in the set
  /// found / kmers; NaN when the sequence has no valid k-mer.
  double fraction() const { return kmers ? static_cast<double>(found) / static_cast<double>(kmers) : std::nan(""); }
};

/// Counts the k-mer positions of `seq` and those whose k-mer is in `set` (every position
/// counts, so a repeated k-mer counts each time). both_strands: a k-mer also counts as found
/// when its reverse complement is in the set.
template <class Set>
SequenceOverlap sequence_overlap(std::string_view seq, int k, bool both_strands, const Set& set) {
  SequenceOverlap r;
  const uint64_t mask = kmer_mask(k);
  uint64_t code = 0;
  int valid = 0;  // consecutive ACGT bases ending here
  for (char c : seq) {
    int b;
    switch (c) {
      case 'A': case 'a': b = 0; break;
      case 'C': case 'c': b = 1; break;
      case 'G': case 'g': b = 2; break;
      case 'T': case 't': b = 3; break;
      default: b = -1;
    }
    if (b < 0) {
      valid = 0;
      continue;
    }
    code = ((code << 2) | static_cast<uint64_t>(b)) & mask;
    if (++valid < k) continue;
    ++r.kmers;
    if (set.contains(code) || (both_strands && set.contains(reverse_complement(code, k)))) ++r.found;
  }
  return r;
}

/// The q-th percentile (0 <= q <= 100) of the non-NaN values, numpy's default method
/// ("linear", Hyndman & Fan type 7): sorted x, h = (n - 1) q / 100,
/// x[floor h] + (h - floor h) (x[floor h + 1] - x[floor h]). NaN when no value is left.
double percentile(std::vector<double> values, double q);

}  // namespace genemask::overlap
