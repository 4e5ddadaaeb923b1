#pragma once
// What a masking strategy does, measured on real samples (`mask-stats --by-kmer`): how often
// each 6-mer is masked against how often it occurs, the masked fraction by position in the
// sample, the masked spans, and leakage across the overlapping tokens: a masked 6-mer whose
// six bases can all be read off unmasked neighbours (token t covers bases t..t+5, so a span
// of fewer than 6 masked tokens between unmasked ones hides nothing) is no prediction task.
// Torch-free; the counts are exact integers, so that an independent implementation of the
// masking gives the same ones (tests/cli/test_mask_audit.py).
#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace genemask {

class MaskAudit {
 public:
  static constexpr int kDeciles = 10;
  static constexpr int kEdge = 5;  // tokens at each end of a sample counted apart

  /// One sample: its 6-mer token ids (no [CLS]/[SEP]) and which of them were masked.
  void add(const uint16_t* tokens, size_t n, const std::vector<uint8_t>& masked);

  uint64_t samples() const { return samples_; }
  uint64_t tokens() const { return tokens_; }
  uint64_t masked() const { return masked_; }
  double masked_fraction() const { return tokens_ ? static_cast<double>(masked_) / static_cast<double>(tokens_) : 0.0; }
  /// Per 6-mer (by counter code, A=0 C=1 G=2 T=3): occurrences and masked occurrences.
  const std::vector<uint64_t>& kmer_tokens() const { return kmer_tokens_; }
  const std::vector<uint64_t>& kmer_masked() const { return kmer_masked_; }
  /// Tokens and masked tokens by relative position decile (position j of n: decile 10 j / n).
  const std::array<uint64_t, kDeciles>& decile_tokens() const { return decile_tokens_; }
  const std::array<uint64_t, kDeciles>& decile_masked() const { return decile_masked_; }
  /// The first and last kEdge tokens of each sample, and the tokens between.
  uint64_t edge_tokens() const { return edge_tokens_; }
  uint64_t edge_masked() const { return edge_masked_; }
  /// Maximal runs of masked tokens: length -> count.
  const std::map<uint64_t, uint64_t>& spans() const { return spans_; }
  uint64_t span_count() const { return span_count_; }
  /// Spans in which some masked token's six bases are all visible in unmasked tokens.
  uint64_t leaking_spans() const { return leaking_spans_; }
  /// Masked tokens whose six bases are all visible in unmasked tokens.
  uint64_t leaking_tokens() const { return leaking_tokens_; }
  /// Masked tokens by how many of their six bases no unmasked token shows (0..6): a random
  /// 6-token span hides one base of each, GeneMask's 11-token span all six of tau's.
  const std::array<uint64_t, 7>& hidden_per_token() const { return hidden_per_token_; }
  /// Bases hidden by all spans (not covered by any unmasked token), for the mean per span.
  uint64_t hidden_bases() const { return hidden_bases_; }

 private:
  uint64_t samples_ = 0, tokens_ = 0, masked_ = 0;
  std::vector<uint64_t> kmer_tokens_ = std::vector<uint64_t>(4096, 0), kmer_masked_ = std::vector<uint64_t>(4096, 0);
  std::array<uint64_t, kDeciles> decile_tokens_{}, decile_masked_{};
  uint64_t edge_tokens_ = 0, edge_masked_ = 0;
  std::map<uint64_t, uint64_t> spans_;
  uint64_t span_count_ = 0, leaking_spans_ = 0, leaking_tokens_ = 0, hidden_bases_ = 0;
  std::array<uint64_t, 7> hidden_per_token_{};
};

/// The splice-site dinucleotide a 6-mer carries at its ends: "GT" when it starts with GT
/// (a donor's intron start), "AG" when it ends with AG (an acceptor's intron end), "GT,AG"
/// for both, "" otherwise. `kmer` is the 6-mer in ACGT letters.
std::string splice_motif(const std::string& kmer);

}  // namespace genemask
