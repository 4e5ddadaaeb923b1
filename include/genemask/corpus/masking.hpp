#pragma once
// The three MLM masking strategies, Torch-free (REFERENCE-NOTES.md, "Masking"):
//  - random (DNABERT "ORI"): each real token is a centre with p = 0.025; a centre c masks
//    tokens [c-2, c+3] (6 tokens), clipped to the sample.
//  - genemask: centres with p = 0.0176; for each centre the token tau in [c-2, c+3] whose
//    6-mer has the best (lowest) GRANK rank ([UNK] worst); centres sorted by that rank, the
//    better ceil(m/2) ("high", all of them when m <= 8) mask [tau-5, tau+5] (11 tokens, all
//    6 bases of tau hidden), the others [c-2, c+3]. The rank is looked up by the 6-mer at
//    each position (the reference code looks up the position itself: a bug not copied).
//  - pmi-vocab (Gene-PMI-VOC): the bases are split greedily into the longest vocabulary
//    k-mers (10 down to 2; single bases otherwise); each base is a centre with p = 0.025;
//    every token overlapping the PMI unit that contains a centre is masked.
// Then BERT's rule on masked tokens: 80% [MASK], 10% a random 6-mer, 10% unchanged; labels
// are the original ids on masked positions and -100 elsewhere. [CLS]/[SEP]/[PAD] are
// never masked, and an [UNK] in a span is left as it is, unlabelled (shards hold no [UNK];
// a sequence given to the Python package may). The mask of a sample depends only on (seed,
// epoch, sample index).
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "genemask/rng.hpp"

namespace genemask {

enum class MaskingKind { random, genemask, pmi_vocab };
/// The strategies by the names users give them (--masking, state.json, summaries): the one
/// list that parse_masking, to_string and the command-line checks use.
inline constexpr std::pair<MaskingKind, const char*> kMaskingNames[] = {
    {MaskingKind::genemask, "genemask"}, {MaskingKind::random, "random"}, {MaskingKind::pmi_vocab, "pmi-vocab"}};
std::vector<std::string> masking_names();  // "genemask", "random", "pmi-vocab"
MaskingKind parse_masking(const std::string& name);  // std::invalid_argument for another name
std::string to_string(MaskingKind k);

inline constexpr int32_t kIgnoreLabel = -100;

struct MaskingConfig {
  MaskingKind kind = MaskingKind::random;
  double center_prob = -1;  // < 0: the strategy's default (0.025, 0.0176, 0.025)
  /// genemask: GRANK rank (1 = best) of each 6-mer by counter code (A=0 C=1 G=2 T=3).
  std::vector<uint32_t> grank;
  /// pmi-vocab: the vocabulary k-mers as (k, counter code) pairs, 1 <= k <= 10.
  std::vector<std::pair<int, uint64_t>> pmi_units;
  double mask_token_prob = 0.8;    // -> [MASK]
  double random_token_prob = 0.1;  // -> a random 6-mer
};

/// One masked sample, framed: [CLS] t1..tn [SEP].
struct MaskedSample {
  std::vector<uint16_t> input_ids;
  std::vector<int32_t> labels;
};

class Masker {
 public:
  explicit Masker(MaskingConfig cfg);
  ~Masker();
  Masker(Masker&&) noexcept;
  Masker& operator=(Masker&&) noexcept;

  /// tokens: the sample's 6-mer ids without [CLS]/[SEP].
  void mask(const uint16_t* tokens, size_t n, uint64_t seed, uint64_t epoch, uint64_t sample_index,
            MaskedSample& out) const;
  /// The same mask written into a caller's int64 rows (as numpy and PyTorch take them):
  /// ids[i] and labels[i] for token i < n, without [CLS]/[SEP].
  void mask_into(const uint16_t* tokens, size_t n, uint64_t seed, uint64_t epoch, uint64_t sample_index, int64_t* ids,
                 int64_t* labels) const;
  /// Only the choice of positions (0-based over the n tokens), before the 80/10/10 rule.
  void select(const uint16_t* tokens, size_t n, Rng& rng, std::vector<uint8_t>& masked) const;
  /// The spans for given centres (token positions; base positions for pmi-vocab), sorted.
  void apply_centres(const uint16_t* tokens, size_t n, const std::vector<uint64_t>& centres,
                     std::vector<uint8_t>& masked) const;
  const MaskingConfig& config() const { return cfg_; }
  double center_prob() const { return p_; }

 private:
  template <class Id, class Label>
  void mask_rows(const uint16_t* tokens, size_t n, uint64_t seed, uint64_t epoch, uint64_t sample_index, Id* ids,
                 Label* labels) const;

  MaskingConfig cfg_;
  double p_, log1m_p_;
  std::vector<std::vector<uint64_t>> unit_bits_;  // pmi-vocab: bitset per k of vocabulary k-mers
  std::vector<uint32_t> token_rank_;              // genemask: rank by token id
};

}  // namespace genemask
