#include "genemask/corpus/mask_audit.hpp"

#include <algorithm>

#include "genemask/corpus/tokenizer.hpp"

namespace genemask {

void MaskAudit::add(const uint16_t* t, size_t n, const std::vector<uint8_t>& masked) {
  ++samples_;
  tokens_ += n;
  for (size_t j = 0; j < n; ++j) {
    const bool m = masked[j] != 0;
    masked_ += m;
    if (t[j] >= kFirstKmerToken && t[j] < kVocabSize) {
      const uint32_t code = token_to_kmer(t[j]);
      ++kmer_tokens_[code];
      kmer_masked_[code] += m;
    }
    const size_t d = j * kDeciles / n;
    ++decile_tokens_[d];
    decile_masked_[d] += m;
    if (j < kEdge || j + kEdge >= n) {
      ++edge_tokens_;
      edge_masked_ += m;
    }
  }
  // Spans: maximal runs [a, b] of masked tokens. Token k covers bases k..k+5; the unmasked
  // token a-1 (when a > 0) shows the bases up to a+4, the unmasked token b+1 (when b+1 < n)
  // those from b+1 on. A base of the span's tokens is hidden when neither shows it.
  for (size_t a = 0; a < n;) {
    if (!masked[a]) {
      ++a;
      continue;
    }
    size_t b = a;
    while (b + 1 < n && masked[b + 1]) ++b;
    ++spans_[b - a + 1];
    ++span_count_;
    const auto visible = [&](size_t x) { return (a > 0 && x <= a + 4) || (b + 1 < n && x >= b + 1); };
    for (size_t x = a; x <= b + 5; ++x) hidden_bases_ += !visible(x);
    bool leaks = false;
    for (size_t k = a; k <= b; ++k) {
      size_t hidden = 0;
      for (size_t x = k; x < k + 6; ++x) hidden += !visible(x);
      ++hidden_per_token_[hidden];
      leaking_tokens_ += hidden == 0;
      leaks = leaks || hidden == 0;
    }
    leaking_spans_ += leaks;
    a = b + 1;
  }
}

std::string splice_motif(const std::string& kmer) {
  const bool gt = kmer.size() >= 2 && kmer.compare(0, 2, "GT") == 0;
  const bool ag = kmer.size() >= 2 && kmer.compare(kmer.size() - 2, 2, "AG") == 0;
  return gt && ag ? "GT,AG" : gt ? "GT" : ag ? "AG" : "";
}

}  // namespace genemask
