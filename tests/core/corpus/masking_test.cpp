#include "genemask/corpus/masking.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <random>
#include <set>

#include "genemask/kmer/kmer.hpp"
#include "genemask/corpus/tokenizer.hpp"

using namespace genemask;

namespace {

std::vector<uint16_t> random_tokens(std::mt19937_64& rng, size_t bases) {
  std::string s(bases, 'A');
  for (auto& c : s) c = "ACGT"[rng() % 4];
  return tokenize(s);
}

std::vector<uint32_t> identity_grank() {  // rank = 1 + code
  std::vector<uint32_t> g(4096);
  std::iota(g.begin(), g.end(), 1u);
  return g;
}

std::vector<size_t> positions(const std::vector<uint8_t>& m) {
  std::vector<size_t> p;
  for (size_t i = 0; i < m.size(); ++i)
    if (m[i]) p.push_back(i);
  return p;
}

std::vector<size_t> range(size_t lo, size_t hi) {  // inclusive
  std::vector<size_t> r;
  for (size_t i = lo; i <= hi; ++i) r.push_back(i);
  return r;
}

MaskingConfig genemask_config(std::vector<uint32_t> grank) {
  MaskingConfig c;
  c.kind = MaskingKind::genemask;
  c.grank = std::move(grank);
  return c;
}

}  // namespace

TEST(RandomMasking, SixTokenSpansClipped) {
  std::mt19937_64 rng(1);
  auto t = random_tokens(rng, 35);  // 30 tokens
  Masker m(MaskingConfig{});
  std::vector<uint8_t> out;
  m.apply_centres(t.data(), t.size(), {10}, out);
  EXPECT_EQ(positions(out), range(8, 13));
  m.apply_centres(t.data(), t.size(), {0}, out);
  EXPECT_EQ(positions(out), range(0, 3));
  m.apply_centres(t.data(), t.size(), {29}, out);
  EXPECT_EQ(positions(out), range(27, 29));
}

TEST(GeneMaskMasking, BestRankedSixMerGetsElevenSpan) {
  std::mt19937_64 rng(2);
  auto t = random_tokens(rng, 45);  // 40 tokens
  auto grank = std::vector<uint32_t>(4096, 4000);
  grank[token_to_kmer(t[12])] = 1;  // the 6-mer at position 12 is the best in the window 8..13
  Masker m(genemask_config(grank));
  std::vector<uint8_t> out;
  m.apply_centres(t.data(), t.size(), {10}, out);
  EXPECT_EQ(positions(out), range(7, 17));  // [tau-5, tau+5] around tau = 12
}

TEST(GeneMaskMasking, LooksUpTheKmerNotThePosition) {
  // The reference code ranks the integer position as if it were a token id. Make the
  // 6-mers whose ids equal the window positions (8..13) excellent and the real best 6-mer
  // sit at position 9: only a lookup by k-mer picks tau = 9.
  std::mt19937_64 rng(3);
  auto t = random_tokens(rng, 45);
  std::vector<uint32_t> grank(4096, 3000);
  for (uint16_t id = 8; id <= 13; ++id) grank[token_to_kmer(id)] = 1 + id;  // ranks 9..14
  for (size_t i = 8; i <= 13; ++i)
    if (i != 9 && grank[token_to_kmer(t[i])] < 3000) grank[token_to_kmer(t[i])] = 3000;
  grank[token_to_kmer(t[9])] = 100;
  Masker m(genemask_config(grank));
  std::vector<uint8_t> out;
  m.apply_centres(t.data(), t.size(), {10}, out);
  EXPECT_EQ(positions(out), range(4, 14));  // tau = 9
}

TEST(GeneMaskMasking, HighLowSplit) {
  std::mt19937_64 rng(4);
  auto t = random_tokens(rng, 505);  // 500 tokens
  // Ten centres 40 apart; centre i's window best rank is set to decrease with i, so the
  // last five centres are the "high" half.
  std::vector<uint64_t> centres;
  auto grank = std::vector<uint32_t>(4096, 4096);
  std::vector<size_t> taus;
  for (int i = 0; i < 10; ++i) {
    const size_t c = 20 + 40 * static_cast<size_t>(i);
    centres.push_back(c);
    for (size_t j = c - 2; j <= c + 3; ++j) grank[token_to_kmer(t[j])] = std::min(grank[token_to_kmer(t[j])], 4090u);
  }
  for (int i = 0; i < 10; ++i) {
    const size_t tau = centres[static_cast<size_t>(i)] + 1;
    grank[token_to_kmer(t[tau])] = 100 - static_cast<uint32_t>(i);
    taus.push_back(tau);
  }
  Masker m(genemask_config(grank));
  std::vector<uint8_t> out;
  m.apply_centres(t.data(), t.size(), centres, out);
  std::vector<size_t> want;
  for (int i = 0; i < 10; ++i) {
    auto r = i >= 5 ? range(taus[static_cast<size_t>(i)] - 5, taus[static_cast<size_t>(i)] + 5)
                    : range(centres[static_cast<size_t>(i)] - 2, centres[static_cast<size_t>(i)] + 3);
    want.insert(want.end(), r.begin(), r.end());
  }
  EXPECT_EQ(positions(out), want);
  EXPECT_EQ(positions(out).size(), 5u * 11 + 5u * 6);
}

TEST(GeneMaskMasking, FewCentresAreAllHigh) {
  std::mt19937_64 rng(5);
  auto t = random_tokens(rng, 305);
  Masker m(genemask_config(identity_grank()));
  std::vector<uint8_t> out;
  std::vector<uint64_t> centres = {20, 60, 100, 140, 180, 220, 260, 290};  // m = 8
  m.apply_centres(t.data(), t.size(), centres, out);
  EXPECT_EQ(positions(out).size(), 8u * 11);
}

TEST(PmiVocabMasking, MasksEveryTokenOverlappingTheUnit) {
  const std::string bases = "ACGTACGTCCCCCGGTTAAGT";  // 21 bases, 16 tokens
  auto t = tokenize(bases);
  MaskingConfig c;
  c.kind = MaskingKind::pmi_vocab;
  uint64_t code;
  encode_kmer("CCCCC", code);
  c.pmi_units = {{5, code}};
  Masker m(c);
  std::vector<uint8_t> out;
  m.apply_centres(t.data(), t.size(), {10}, out);  // base 10 lies in CCCCC = bases [8, 13)
  EXPECT_EQ(positions(out), range(3, 12));         // tokens t with 8-5 <= t <= 12
  m.apply_centres(t.data(), t.size(), {0}, out);   // base 0: a one-base unit
  EXPECT_EQ(positions(out), range(0, 0));
}

TEST(Masking, ExpectedFractionsAndReplacementRule) {
  std::mt19937_64 rng(6);
  std::vector<std::vector<uint16_t>> samples;
  for (int i = 0; i < 3000; ++i) samples.push_back(random_tokens(rng, 515));
  for (auto kind : {MaskingKind::random, MaskingKind::genemask}) {
    MaskingConfig cfg;
    cfg.kind = kind;
    cfg.grank = identity_grank();
    Masker m(cfg);
    uint64_t interior = 0, masked_interior = 0, total_masked = 0, as_mask = 0, as_random = 0, kept = 0;
    MaskedSample s;
    for (size_t i = 0; i < samples.size(); ++i) {
      const auto& t = samples[i];
      m.mask(t.data(), t.size(), 42, 0, i, s);
      EXPECT_EQ(s.labels.front(), kIgnoreLabel);
      EXPECT_EQ(s.labels.back(), kIgnoreLabel);
      EXPECT_EQ(s.input_ids.front(), kCls);
      EXPECT_EQ(s.input_ids.back(), kSep);
      for (size_t j = 1; j + 1 < s.labels.size(); ++j) {
        const bool is_masked = s.labels[j] != kIgnoreLabel;
        if (j > 20 && j + 20 < s.labels.size()) {
          ++interior;
          masked_interior += is_masked;
        }
        if (!is_masked) {
          EXPECT_EQ(s.input_ids[j], t[j - 1]);
          continue;
        }
        ++total_masked;
        EXPECT_EQ(s.labels[j], t[j - 1]);
        if (s.input_ids[j] == kMask) ++as_mask;
        else if (s.input_ids[j] == t[j - 1]) ++kept;
        else {
          ++as_random;
          EXPECT_GE(s.input_ids[j], kFirstKmerToken);
        }
      }
    }
    const double frac = static_cast<double>(masked_interior) / static_cast<double>(interior);
    if (kind == MaskingKind::random) {
      EXPECT_NEAR(frac, 1 - std::pow(1 - 0.025, 6), 0.004);  // closed form, interior tokens
    } else {
      EXPECT_GT(frac, 0.12);  // the paper's ~15% (p = 15%/8.5, overlaps lower it)
      EXPECT_LT(frac, 0.16);
    }
    const double n = static_cast<double>(total_masked);
    EXPECT_NEAR(as_mask / n, 0.8, 0.01);
    EXPECT_NEAR(as_random / n, 0.1, 0.01);
    EXPECT_NEAR(kept / n, 0.1, 0.01);
  }
}

TEST(Masking, PureFunctionOfSeedEpochAndIndex) {
  std::mt19937_64 rng(7);
  auto t = random_tokens(rng, 515);
  MaskingConfig cfg;
  cfg.kind = MaskingKind::genemask;
  cfg.grank = identity_grank();
  Masker a(cfg), b(cfg);
  MaskedSample x, y, z;
  a.mask(t.data(), t.size(), 1, 3, 99, x);
  b.mask(t.data(), t.size(), 1, 3, 99, y);
  EXPECT_EQ(x.input_ids, y.input_ids);
  EXPECT_EQ(x.labels, y.labels);
  a.mask(t.data(), t.size(), 1, 4, 99, z);
  EXPECT_NE(x.labels, z.labels);
}

// Reference for Gene-PMI-VOC written the plain way: strings, a set of vocabulary words,
// greedy longest match from 10 down to 2 bases, then every token overlapping the unit.
TEST(PmiVocabMasking, EqualsAPlainStringImplementation) {
  std::mt19937_64 rng(8);
  std::set<std::string> words;
  MaskingConfig c;
  c.kind = MaskingKind::pmi_vocab;
  for (int i = 0; i < 3000; ++i) {
    const int k = 2 + static_cast<int>(rng() % 9);
    std::string w(static_cast<size_t>(k), 'A');
    for (auto& ch : w) ch = "ACGT"[rng() % 3];  // skewed, so that words actually occur
    words.insert(w);
  }
  for (const auto& w : words) {
    uint64_t code;
    encode_kmer(w, code);
    c.pmi_units.emplace_back(static_cast<int>(w.size()), code);
  }
  Masker m(c);
  for (int trial = 0; trial < 200; ++trial) {
    std::string s(6 + rng() % 200, 'A');
    for (auto& ch : s) ch = "ACGT"[rng() % 3];
    auto t = tokenize(s);
    std::vector<size_t> start(s.size()), end(s.size());
    for (size_t i = 0; i < s.size();) {
      size_t len = 1;
      for (size_t k = std::min<size_t>(10, s.size() - i); k >= 2; --k)
        if (words.count(s.substr(i, k))) {
          len = k;
          break;
        }
      for (size_t x = i; x < i + len; ++x) {
        start[x] = i;
        end[x] = i + len;
      }
      i += len;
    }
    std::vector<uint64_t> centres;
    for (size_t x = 0; x < s.size(); ++x)
      if (rng() % 10 == 0) centres.push_back(x);
    std::vector<uint8_t> want(t.size(), 0), got;
    for (uint64_t x : centres)
      for (size_t j = 0; j < t.size(); ++j)
        if (j + 5 >= start[x] && j < end[x]) want[j] = 1;
    m.apply_centres(t.data(), t.size(), centres, got);
    EXPECT_EQ(got, want) << s;
  }
}

// mask_into (int64 rows, for the Python package) writes exactly what mask writes between
// [CLS] and [SEP], for every strategy.
TEST(Masking, MaskIntoWritesWhatMaskWrites) {
  std::mt19937_64 rng(11);
  std::vector<MaskingConfig> configs(3);
  configs[0].kind = MaskingKind::random;
  configs[1] = genemask_config(identity_grank());
  configs[2].kind = MaskingKind::pmi_vocab;
  for (uint64_t code = 0; code < 64; ++code) configs[2].pmi_units.emplace_back(3, code * 7 % 64);
  for (const auto& cfg : configs) {
    Masker m(cfg);
    for (uint64_t i = 0; i < 50; ++i) {
      auto t = random_tokens(rng, 6 + rng() % 600);
      if (i % 7 == 0 && !t.empty()) t[rng() % t.size()] = kUnk;
      MaskedSample want;
      m.mask(t.data(), t.size(), 5, 2, i, want);
      std::vector<int64_t> ids(t.size(), -1), labels(t.size(), -1);
      m.mask_into(t.data(), t.size(), 5, 2, i, ids.data(), labels.data());
      ASSERT_EQ(want.input_ids.size(), t.size() + 2);
      EXPECT_EQ(std::vector<int64_t>(want.input_ids.begin() + 1, want.input_ids.end() - 1), ids) << to_string(cfg.kind);
      EXPECT_EQ(std::vector<int64_t>(want.labels.begin() + 1, want.labels.end() - 1), labels) << to_string(cfg.kind);
      EXPECT_EQ(want.input_ids.front(), kCls);
      EXPECT_EQ(want.input_ids.back(), kSep);
      EXPECT_EQ(want.labels.front(), kIgnoreLabel);
      EXPECT_EQ(want.labels.back(), kIgnoreLabel);
    }
  }
}
