#include "genemask/kmer/pmi.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "genemask/kmer/kmer.hpp"
#include "genemask/kmer/kmer_count.hpp"

using namespace genemask;

namespace {

std::vector<std::vector<uint64_t>> random_counts(std::mt19937_64& rng, int kmax) {
  std::vector<std::vector<uint64_t>> c(static_cast<size_t>(kmax) + 1);
  for (int k = 1; k <= kmax; ++k) {
    c[static_cast<size_t>(k)].resize(num_kmers(k));
    for (auto& v : c[static_cast<size_t>(k)]) v = 1 + rng() % 100000;
  }
  return c;
}

}  // namespace

TEST(Pmi, DynamicProgrammeEqualsEnumerationOfSegmentations) {
  std::mt19937_64 rng(1);
  // Arbitrary (inconsistent) counts: the DP must still pick the best segmentation.
  auto counts = random_counts(rng, 8);
  PmiCalculator calc(counts, 8);
  for (int k = 2; k <= 8; ++k)
    for (int t = 0; t < 300; ++t) {
      uint64_t code = rng() % num_kmers(k);
      EXPECT_NEAR(calc.pmi(code, k), pmi_brute_force(calc, code, k), 1e-12) << decode_kmer(code, k);
    }
}

TEST(Pmi, GenomeCountsAllTenMers) {
  std::mt19937_64 rng(5);
  std::string s;
  for (int i = 0; i < 200000; ++i) s.push_back("ACGT"[(rng() % 7) % 4]);  // skewed composition
  auto kc = brute_force_counts({s}, 10, false);
  PmiCalculator calc(kc.counts, 10);
  for (int t = 0; t < 500; ++t) {
    const int k = 2 + static_cast<int>(rng() % 9);
    const uint64_t code = rng() % num_kmers(k);
    const double a = calc.pmi(code, k), b = pmi_brute_force(calc, code, k);
    if (std::isnan(b)) {
      EXPECT_TRUE(std::isnan(a));
    } else {
      EXPECT_NEAR(a, b, 1e-12);
    }
  }
}

TEST(Pmi, TwoMerIsClassicPmiAndNpmiFormula) {
  std::vector<std::vector<uint64_t>> c(3);
  c[1] = {10, 20, 30, 40};
  c[2].assign(16, 1);
  c[2][0b0001] = 85;  // "AC"
  PmiCalculator calc(c, 2);
  const double p_ac = 85.0 / 100.0, p_a = 0.1, p_c = 0.2;
  EXPECT_NEAR(calc.pmi(0b0001, 2), std::log(p_ac / (p_a * p_c)), 1e-12);
  const double pmi = calc.pmi(0b0001, 2);
  EXPECT_NEAR(npmi_from_pmi(pmi, 85, 101), pmi * std::log(85.0) / (std::log(101.0) + std::log(85.0)), 1e-15);
  EXPECT_EQ(npmi_from_pmi(pmi, 1, 101), 0.0);
  EXPECT_TRUE(std::isnan(npmi_from_pmi(pmi, 0, 101)));
}

TEST(Pmi, ThreeMerTakesTheMinimumOverSegmentations) {
  // p(ACG) against (A)(C)(G), (AC)(G), (A)(CG): the largest product wins.
  std::vector<std::vector<uint64_t>> c(4);
  c[1] = {25, 25, 25, 25};
  c[2].assign(16, 10);
  c[2][0b0001] = 40;  // AC frequent -> (AC)(G) is the best explanation
  c[3].assign(64, 5);
  c[3][0b000110] = 100;  // ACG
  PmiCalculator calc(c, 3);
  const double t2 = 40.0 + 15 * 10, t3 = 100.0 + 63 * 5;
  const double lp = std::log(100.0 / t3);
  const double seg_ac_g = std::log(40.0 / t2) + std::log(0.25);
  const double seg_a_cg = std::log(0.25) + std::log(10.0 / t2);
  const double seg_a_c_g = 3 * std::log(0.25);
  EXPECT_NEAR(calc.pmi(0b000110, 3), lp - std::max({seg_ac_g, seg_a_cg, seg_a_c_g}), 1e-12);
}

TEST(Npmi, RankingOrdersAndFlags) {
  std::mt19937_64 rng(9);
  auto counts = random_counts(rng, 3);
  counts[3][5] = 50;  // below c
  counts[3][6] = 0;   // never seen
  PmiCalculator calc(counts, 3);
  auto rows = npmi_ranking(calc, 3, 101);
  ASSERT_EQ(rows.size(), 64u);
  for (size_t i = 0; i < rows.size(); ++i) EXPECT_EQ(rows[i].rank, i + 1);
  EXPECT_EQ(rows[62].code, 5u);
  EXPECT_TRUE(rows[62].below_min_count);
  EXPECT_EQ(rows[63].code, 6u);
  EXPECT_TRUE(std::isnan(rows[63].npmi));
  for (size_t i = 1; i < 62; ++i) EXPECT_GE(rows[i - 1].npmi, rows[i].npmi);
  for (size_t i = 0; i < 62; ++i) {
    EXPECT_FALSE(rows[i].below_min_count);
    EXPECT_DOUBLE_EQ(rows[i].npmi, npmi_from_pmi(pmi_brute_force(calc, rows[i].code, 3), rows[i].count, 101));
  }
}

TEST(PmiVocab, TopNByPmiWithCountThreshold) {
  std::mt19937_64 rng(4);
  auto counts = random_counts(rng, 5);
  PmiCalculator calc(counts, 5);
  auto vocab = pmi_vocabulary(calc, 2, 5, 50000, 100);
  ASSERT_EQ(vocab.size(), 100u);
  // Independent check: enumerate every eligible k-mer, sort by brute-force PMI.
  std::vector<std::tuple<double, int, uint64_t>> all;
  for (int k = 2; k <= 5; ++k)
    for (uint64_t code = 0; code < num_kmers(k); ++code)
      if (counts[static_cast<size_t>(k)][code] >= 50000) all.emplace_back(-pmi_brute_force(calc, code, k), k, code);
  std::sort(all.begin(), all.end());
  for (size_t i = 0; i < vocab.size(); ++i) {
    EXPECT_EQ(vocab[i].k, std::get<1>(all[i]));
    EXPECT_EQ(vocab[i].code, std::get<2>(all[i]));
    EXPECT_GE(vocab[i].count, 50000u);
  }
}

TEST(PmiVocab, BadKRangesSayWhichBoundIsWrong) {
  std::mt19937_64 rng(5);
  auto counts = random_counts(rng, 5);
  PmiCalculator calc(counts, 5);
  auto what = [&](int kmin, int kmax) {
    try {
      pmi_vocabulary(calc, kmin, kmax, 1, 10);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(what(4, 3), "kmin 4 is greater than kmax 3");
  EXPECT_EQ(what(1, 3), "kmin 1 is below 2 (PMI needs a k-mer of two parts)");
  EXPECT_EQ(what(2, 8), "kmax 8 is above 5, the largest k in the counts (count with a larger --kmax)");
}
