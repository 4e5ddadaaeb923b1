// genemask/overlap.hpp against brute force: k-mer sets as std::set of strings, fractions
// counted by substring comparison, percentiles by the closed form of numpy's "linear".
#include "genemask/kmer/overlap.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>
#include <string>

namespace genemask::overlap {
namespace {

std::string random_seq(std::mt19937_64& rng, size_t n, double p_n = 0.0) {
  std::string s(n, 'A');
  std::uniform_real_distribution<double> u(0, 1);
  for (auto& c : s) c = u(rng) < p_n ? 'N' : "ACGTacgt"[rng() % 8];
  return s;
}

std::string upper(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

std::string revcomp(const std::string& s) {
  std::string r(s.rbegin(), s.rend());
  for (auto& c : r) c = c == 'A' ? 'T' : c == 'C' ? 'G' : c == 'G' ? 'C' : 'A';
  return r;
}

bool valid(const std::string& s) { return s.find_first_not_of("ACGT") == std::string::npos; }

TEST(Overlap, KmerSetAndFractionsMatchBruteForce) {
  std::mt19937_64 rng(11);
  for (int k : {1, 3, 6, 15, 21}) {
    std::set<std::string> truth;
    KmerSet set(k);
    for (int i = 0; i < 30; ++i) {
      const std::string s = random_seq(rng, 5 + rng() % 200, 0.03);
      set.add_sequence(s);
      const std::string u = upper(s);
      for (size_t p = 0; p + static_cast<size_t>(k) <= u.size(); ++p)
        if (valid(u.substr(p, static_cast<size_t>(k)))) truth.insert(u.substr(p, static_cast<size_t>(k)));
    }
    set.finish();
    EXPECT_EQ(set.size(), truth.size()) << "k=" << k;
    for (int i = 0; i < 40; ++i) {
      // test sequences share pieces with the training set so fractions are not all 0
      std::string t = random_seq(rng, rng() % 120, 0.05);
      if (!truth.empty() && i % 2) t += *std::next(truth.begin(), static_cast<long>(rng() % truth.size())) + "GATTACA";
      for (bool both : {false, true}) {
        const auto r = sequence_overlap(t, k, both, set);
        uint64_t n = 0, found = 0;
        const std::string u = upper(t);
        for (size_t p = 0; p + static_cast<size_t>(k) <= u.size(); ++p) {
          const std::string w = u.substr(p, static_cast<size_t>(k));
          if (!valid(w)) continue;
          ++n;
          found += truth.count(w) || (both && truth.count(revcomp(w)));
        }
        EXPECT_EQ(r.kmers, n);
        EXPECT_EQ(r.found, found) << "k=" << k << " both=" << both << " seq=" << t;
        if (n == 0) {
          EXPECT_TRUE(std::isnan(r.fraction()));
        } else {
          EXPECT_DOUBLE_EQ(r.fraction(), static_cast<double>(found) / static_cast<double>(n));
        }
      }
    }
  }
}

TEST(Overlap, ReverseComplementCode) {
  std::mt19937_64 rng(3);
  for (int i = 0; i < 200; ++i) {
    const int k = 1 + static_cast<int>(rng() % 31);
    std::string s = upper(random_seq(rng, static_cast<size_t>(k)));
    uint64_t c = 0, rc = 0;
    ASSERT_TRUE(encode_kmer(s, c));
    ASSERT_TRUE(encode_kmer(revcomp(s), rc));
    EXPECT_EQ(reverse_complement(c, k), rc) << s;
  }
}

TEST(Overlap, PresenceBitsFollowTheCountsLayout) {
  std::vector<uint64_t> words(num_kmers(15) / 64, 0);
  uint64_t code = 0;
  ASSERT_TRUE(encode_kmer("ACGTACGTACGTACG", code));
  words[code / 64] |= uint64_t{1} << (code % 64);
  PresenceBits bits{&words};
  const auto r = sequence_overlap("ACGTACGTACGTACGT", 15, false, bits);  // ACGT..ACG, then CGT..CGT
  EXPECT_EQ(r.kmers, 2u);
  EXPECT_EQ(r.found, 1u);
  const auto both = sequence_overlap("CGTACGTACGTACGT", 15, true, bits);  // revcomp of ACGT...ACG
  EXPECT_EQ(both.found, 1u);
}

// numpy.percentile(x, q) default: sorted x, h = (n-1) q/100, linear between neighbours.
TEST(Overlap, PercentileIsNumpyLinear) {
  EXPECT_DOUBLE_EQ(percentile({1, 2, 3, 4}, 50), 2.5);
  EXPECT_DOUBLE_EQ(percentile({4, 1, 3, 2}, 95), 3.85);  // h = 2.85: 3 + 0.85 * (4 - 3)
  EXPECT_DOUBLE_EQ(percentile({7}, 95), 7);
  EXPECT_DOUBLE_EQ(percentile({0, 10, std::nan("")}, 25), 2.5);  // NaN ignored
  EXPECT_TRUE(std::isnan(percentile({std::nan("")}, 50)));
  EXPECT_TRUE(std::isnan(percentile({}, 50)));
  EXPECT_DOUBLE_EQ(percentile({5, 1, 9}, 0), 1);
  EXPECT_DOUBLE_EQ(percentile({5, 1, 9}, 100), 9);
  EXPECT_THROW(percentile({1}, 101), std::invalid_argument);
}

}  // namespace
}  // namespace genemask::overlap
