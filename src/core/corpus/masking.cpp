#include "genemask/corpus/masking.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <stdexcept>

#include "genemask/kmer/kmer.hpp"
#include "genemask/corpus/tokenizer.hpp"

namespace genemask {

std::vector<std::string> masking_names() {
  std::vector<std::string> names;
  for (const auto& [kind, name] : kMaskingNames) names.push_back(name);
  return names;
}

MaskingKind parse_masking(const std::string& name) {
  for (const auto& [kind, known] : kMaskingNames)
    if (name == known) return kind;
  throw std::invalid_argument(fmt::format("unknown masking '{}' (expected one of: {})", name, fmt::join(masking_names(), ", ")));
}

std::string to_string(MaskingKind k) {
  for (const auto& [kind, name] : kMaskingNames)
    if (kind == k) return name;
  return "?";
}

namespace {
constexpr int kMaxUnit = 10;
constexpr uint32_t kWorstRank = 0xffffffffu;
}  // namespace

Masker::Masker(MaskingConfig cfg) : cfg_(std::move(cfg)) {
  p_ = cfg_.center_prob >= 0 ? cfg_.center_prob : (cfg_.kind == MaskingKind::genemask ? 0.0176 : 0.025);
  if (!(p_ > 0 && p_ < 1)) throw std::invalid_argument(fmt::format("centre probability must be in (0, 1), got {}", p_));
  log1m_p_ = std::log1p(-p_);
  if (cfg_.kind == MaskingKind::genemask) {
    if (cfg_.grank.size() != 4096)
      throw std::invalid_argument("genemask masking needs the GRANK list of all 4096 6-mers (genemask npmi)");
    token_rank_.assign(kVocabSize, kWorstRank);
    for (uint32_t code = 0; code < 4096; ++code) token_rank_[kmer_to_token(code)] = cfg_.grank[code];
  }
  if (cfg_.kind == MaskingKind::pmi_vocab) {
    if (cfg_.pmi_units.empty()) throw std::invalid_argument("pmi-vocab masking needs a vocabulary (genemask pmi-vocab)");
    unit_bits_.resize(kMaxUnit + 1);
    for (int k = 1; k <= kMaxUnit; ++k) unit_bits_[static_cast<size_t>(k)].assign((num_kmers(k) + 63) / 64, 0);
    for (auto [k, code] : cfg_.pmi_units) {
      if (k < 1 || k > kMaxUnit || code >= num_kmers(k))
        throw std::invalid_argument(fmt::format("vocabulary k-mer of length {} is outside 1..{}", k, kMaxUnit));
      unit_bits_[static_cast<size_t>(k)][code >> 6] |= uint64_t{1} << (code & 63);
    }
  }
}

Masker::~Masker() = default;
Masker::Masker(Masker&&) noexcept = default;
Masker& Masker::operator=(Masker&&) noexcept = default;

void Masker::select(const uint16_t* t, size_t n, Rng& rng, std::vector<uint8_t>& masked) const {
  // Centres: a Bernoulli(p) process over tokens (over bases for pmi-vocab), drawn as gaps.
  const size_t positions = cfg_.kind == MaskingKind::pmi_vocab ? (n ? n + 5 : 0) : n;
  thread_local std::vector<uint64_t> centres;
  centres.clear();
  for (uint64_t c = rng.geometric(log1m_p_); c < positions; c += 1 + rng.geometric(log1m_p_)) centres.push_back(c);
  apply_centres(t, n, centres, masked);
}

void Masker::apply_centres(const uint16_t* t, size_t n, const std::vector<uint64_t>& centre_list,
                           std::vector<uint8_t>& masked) const {
  masked.assign(n, 0);
  if (n == 0) return;
  auto mark = [&](int64_t lo, int64_t hi) {  // inclusive, clipped
    lo = std::max<int64_t>(lo, 0);
    hi = std::min<int64_t>(hi, static_cast<int64_t>(n) - 1);
    for (int64_t i = lo; i <= hi; ++i) masked[static_cast<size_t>(i)] = 1;
  };
  switch (cfg_.kind) {
    case MaskingKind::random: {
      for (uint64_t c : centre_list)
        if (c < n) mark(static_cast<int64_t>(c) - 2, static_cast<int64_t>(c) + 3);
      break;
    }
    case MaskingKind::genemask: {
      struct Centre {
        uint32_t rank;
        int64_t c, tau;
      };
      thread_local std::vector<Centre> centres;
      centres.clear();
      for (uint64_t c : centre_list) {
        if (c >= n) continue;
        const int64_t ci = static_cast<int64_t>(c);
        Centre best{kWorstRank, ci, ci};
        bool found = false;
        for (int64_t i = std::max<int64_t>(ci - 2, 0); i <= std::min<int64_t>(ci + 3, static_cast<int64_t>(n) - 1); ++i) {
          const uint32_t r = token_rank_[t[i] < kVocabSize ? t[i] : kUnk];
          if (!found || r < best.rank) {
            best.rank = r;
            best.tau = i;
            found = true;
          }
        }
        centres.push_back(best);
      }
      // Stable by rank: an insertion sort, as a sample has few centres (about 9 in 510
      // tokens), without the buffer std::stable_sort allocates.
      for (size_t i = 1; i < centres.size(); ++i) {
        const Centre x = centres[i];
        size_t j = i;
        for (; j > 0 && centres[j - 1].rank > x.rank; --j) centres[j] = centres[j - 1];
        centres[j] = x;
      }
      const size_t m = centres.size();
      const size_t high = m <= 8 ? m : (m + 1) / 2;
      for (size_t i = 0; i < m; ++i) {
        if (i < high)
          mark(centres[i].tau - 5, centres[i].tau + 5);
        else
          mark(centres[i].c - 2, centres[i].c + 3);
      }
      break;
    }
    case MaskingKind::pmi_vocab: {
      // Bases as 2-bit codes (4 = unknown), rebuilt from the overlapping tokens.
      const size_t L = n + 5;
      thread_local std::vector<uint8_t> b;
      thread_local std::vector<uint32_t> unit_start, unit_end;
      b.assign(L, 4);
      for (size_t i = 0; i < n; ++i) {
        if (t[i] < kFirstKmerToken || t[i] >= kVocabSize) continue;
        const uint32_t code = token_to_kmer(t[i]);
        if (i == 0)
          for (size_t j = 0; j < 5; ++j) b[j] = static_cast<uint8_t>((code >> (2 * (5 - j))) & 3);
        b[i + 5] = static_cast<uint8_t>(code & 3);
        if (i > 0 && t[i - 1] < kFirstKmerToken)  // after an [UNK], this token's first bases are known again
          for (size_t j = 0; j < 5; ++j) b[i + j] = static_cast<uint8_t>((code >> (2 * (5 - j))) & 3);
      }
      // Greedy longest-match units: unit_start[x] / unit_end[x] bound the unit of base x.
      unit_start.resize(L);
      unit_end.resize(L);
      size_t i = 0;
      while (i < L) {
        uint64_t prefix[kMaxUnit + 1];
        int known = 0;
        uint64_t c = 0;
        for (int k = 1; k <= kMaxUnit && i + static_cast<size_t>(k) <= L && b[i + static_cast<size_t>(k) - 1] < 4; ++k) {
          c = (c << 2) | b[i + static_cast<size_t>(k) - 1];
          prefix[k] = c;
          known = k;
        }
        size_t len = 1;
        for (int k = known; k >= 2; --k) {
          const uint64_t code = prefix[k];
          if ((unit_bits_[static_cast<size_t>(k)][code >> 6] >> (code & 63)) & 1u) {
            len = static_cast<size_t>(k);
            break;
          }
        }
        for (size_t x = i; x < i + len; ++x) {
          unit_start[x] = static_cast<uint32_t>(i);
          unit_end[x] = static_cast<uint32_t>(i + len);
        }
        i += len;
      }
      // A token t covers bases [t, t+6): it overlaps unit [s, e) when s-5 <= t <= e-1.
      for (uint64_t c0 : centre_list)
        if (c0 < L) mark(static_cast<int64_t>(unit_start[c0]) - 5, static_cast<int64_t>(unit_end[c0]) - 1);
      break;
    }
  }
}

template <class Id, class Label>
void Masker::mask_rows(const uint16_t* tokens, size_t n, uint64_t seed, uint64_t epoch, uint64_t sample_index, Id* ids,
                       Label* labels) const {
  Rng rng(seed, Stream::mask, epoch, sample_index);
  thread_local std::vector<uint8_t> masked;
  select(tokens, n, rng, masked);
  for (size_t i = 0; i < n; ++i) {
    ids[i] = tokens[i];
    labels[i] = kIgnoreLabel;
    // An [UNK] 6-mer (a base other than ACGT: the Python package's sequences; shards hold
    // none) in a span stays as it is, without a label: no model learns to predict [UNK], and
    // no random 6-mer stands for bases that are not known (transformers' and DNABERT's
    // collators leave every special token, [UNK] included, out of the masking).
    if (!masked[i] || tokens[i] < kFirstKmerToken) continue;
    const uint16_t id = tokens[i];
    labels[i] = id;
    const double r = rng.uniform();
    if (r < cfg_.mask_token_prob)
      ids[i] = kMask;
    else if (r < cfg_.mask_token_prob + cfg_.random_token_prob)
      ids[i] = static_cast<Id>(kFirstKmerToken + rng.below(4096));
  }
}

void Masker::mask(const uint16_t* tokens, size_t n, uint64_t seed, uint64_t epoch, uint64_t sample_index,
                  MaskedSample& out) const {
  out.input_ids.resize(n + 2);
  out.labels.resize(n + 2);
  out.input_ids[0] = kCls;
  out.input_ids[n + 1] = kSep;
  out.labels[0] = out.labels[n + 1] = kIgnoreLabel;
  mask_rows(tokens, n, seed, epoch, sample_index, out.input_ids.data() + 1, out.labels.data() + 1);
}

void Masker::mask_into(const uint16_t* tokens, size_t n, uint64_t seed, uint64_t epoch, uint64_t sample_index,
                       int64_t* ids, int64_t* labels) const {
  mask_rows(tokens, n, seed, epoch, sample_index, ids, labels);
}

}  // namespace genemask
