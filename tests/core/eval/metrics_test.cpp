#include "genemask/eval/metrics.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <stdexcept>

using namespace genemask::metrics;

namespace {

// Brute-force AUC: the fraction of (positive, negative) pairs ordered correctly, ties half.
double auc_pairs(const std::vector<int>& y, const std::vector<double>& s, int pos_label) {
  double wins = 0, pairs = 0;
  for (size_t i = 0; i < y.size(); ++i)
    for (size_t j = 0; j < y.size(); ++j)
      if (y[i] == pos_label && y[j] != pos_label) {
        pairs += 1;
        wins += s[i] > s[j] ? 1.0 : s[i] == s[j] ? 0.5 : 0.0;
      }
  return wins / pairs;
}

}  // namespace

TEST(Metrics, AucPerfectSeparationIsOneAndReversedIsZero) {
  const std::vector<int> y{0, 0, 1, 1, 0, 1};
  const std::vector<double> s{0.1, 0.2, 0.8, 0.9, 0.3, 0.7};
  EXPECT_EQ(roc_auc_binary(y, s), 1.0);
  std::vector<double> r;
  for (double v : s) r.push_back(1 - v);
  EXPECT_EQ(roc_auc_binary(y, r), 0.0);
}

TEST(Metrics, AucAllTiedIsHalf) {
  EXPECT_EQ(roc_auc_binary({0, 1, 1, 0, 1}, {0.5, 0.5, 0.5, 0.5, 0.5}), 0.5);
}

TEST(Metrics, AucHandComputedWithTies) {
  // positives 0.4, 0.6; negatives 0.4, 0.2, 0.6: pairs (0.4: 1 win + tie) (0.6: 2 wins + tie)
  // = (1.5 + 2.5) / 6.
  EXPECT_DOUBLE_EQ(roc_auc_binary({1, 1, 0, 0, 0}, {0.4, 0.6, 0.4, 0.2, 0.6}), 4.0 / 6.0);
}

TEST(Metrics, AucEqualsPairCountingOnRandomTiedScores) {
  std::mt19937_64 rng(3);
  for (int t = 0; t < 200; ++t) {
    const size_t n = 2 + rng() % 60;
    std::vector<int> y(n);
    std::vector<double> s(n);
    for (size_t i = 0; i < n; ++i) {
      y[i] = static_cast<int>(rng() % 2);
      s[i] = static_cast<double>(rng() % 5) / 4.0;  // heavy ties
    }
    y[0] = 0;
    y[1] = 1;
    EXPECT_NEAR(roc_auc_binary(y, s), auc_pairs(y, s, 1), 1e-15);
  }
}

TEST(Metrics, AucSingleClassThrowsWithCounts) {
  try {
    roc_auc_binary({1, 1, 1}, {0.1, 0.2, 0.3});
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("only one class is present (3 positive, 0 negative"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(roc_auc_ovo_macro({0, 0, 1, 1}, std::vector<double>(12, 1.0 / 3), 3), std::invalid_argument);
}

TEST(Metrics, OvoMacroEqualsHandTillPairAverage) {
  std::mt19937_64 rng(9);
  for (int t = 0; t < 50; ++t) {
    const int c = 3 + static_cast<int>(rng() % 2);
    const size_t n = static_cast<size_t>(c) + rng() % 40;
    std::vector<int> y(n);
    std::vector<double> p(n * static_cast<size_t>(c));
    for (size_t i = 0; i < n; ++i) {
      y[i] = i < static_cast<size_t>(c) ? static_cast<int>(i) : static_cast<int>(rng() % static_cast<uint64_t>(c));
      for (int k = 0; k < c; ++k) p[i * static_cast<size_t>(c) + static_cast<size_t>(k)] = static_cast<double>(rng() % 4);
    }
    double sum = 0;
    int pairs = 0;
    for (int a = 0; a < c; ++a)
      for (int b = a + 1; b < c; ++b) {
        double pair = 0;
        for (int pos : {a, b}) {
          std::vector<int> yy;
          std::vector<double> ss;
          for (size_t i = 0; i < n; ++i)
            if (y[i] == a || y[i] == b) {
              yy.push_back(y[i]);
              ss.push_back(p[i * static_cast<size_t>(c) + static_cast<size_t>(pos)]);
            }
          pair += auc_pairs(yy, ss, pos);
        }
        sum += pair / 2;
        ++pairs;
      }
    EXPECT_NEAR(roc_auc_ovo_macro(y, p, c), sum / pairs, 1e-14);
  }
}

TEST(Metrics, ArgmaxTiesGoToLowerIndex) {
  EXPECT_EQ(argmax_rows({0.5, 0.5, 0.2, 0.8, 0.3, 0.3}, 2), (std::vector<int>{0, 1, 0}));
  EXPECT_THROW(argmax_rows({0.1, 0.2, 0.3}, 2), std::invalid_argument);
}

TEST(Metrics, MccHandComputedBinaryAndUndefinedIsZero) {
  // Confusion: TP=3 FN=1 FP=2 TN=4 -> (3*4 - 2*1) / sqrt(5*5*6*4).
  const std::vector<int> y{1, 1, 1, 1, 0, 0, 0, 0, 0, 0};
  const std::vector<int> p{1, 1, 1, 0, 1, 1, 0, 0, 0, 0};
  EXPECT_NEAR(mcc(y, p, 2), 10.0 / std::sqrt(5.0 * 5 * 6 * 4), 1e-15);
  EXPECT_EQ(mcc(y, std::vector<int>(10, 1), 2), 0.0);  // a single predicted class
  EXPECT_EQ(mcc(y, y, 2), 1.0);
}

TEST(Metrics, F1MacroHandComputedWithAbsentClass) {
  // Class 2 never occurs nor is predicted: F1 = 0 for it (zero_division=0), still averaged.
  const std::vector<int> y{0, 0, 1, 1};
  const std::vector<int> p{0, 1, 1, 1};
  const double f0 = 2.0 * 1 / (2 * 1 + 0 + 1), f1 = 2.0 * 2 / (2 * 2 + 1 + 0);
  EXPECT_NEAR(f1_macro(y, p, 3), (f0 + f1 + 0) / 3, 1e-15);
  EXPECT_NEAR(f1_macro(y, p, 2), (f0 + f1) / 2, 1e-15);
  EXPECT_EQ(accuracy(y, p), 0.75);
}

TEST(Metrics, EvaluateBinaryUsesClassOneProbability) {
  const std::vector<int> y{0, 1, 1, 0};
  const std::vector<double> probs{0.9, 0.1, 0.4, 0.6, 0.3, 0.7, 0.35, 0.65};
  const Classification r = evaluate(y, probs, 2);
  EXPECT_EQ(r.n, 4u);
  EXPECT_EQ(r.classes, 2);
  EXPECT_EQ(r.accuracy, 0.75);
  EXPECT_EQ(r.auc, roc_auc_binary(y, {0.1, 0.6, 0.7, 0.65}));
  EXPECT_EQ(r.auc, 0.75);
}

TEST(Metrics, BadInputThrowsWithValue) {
  try {
    accuracy({0, 1}, {0});
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("2 labels but 1 predictions"), std::string::npos) << e.what();
  }
  try {
    mcc({0, 3}, {0, 1}, 2);
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("labels[1] = 3 is outside the classes 0..1"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(evaluate({0, 1}, {0.5, 0.5, 0.5}, 2), std::invalid_argument);
  EXPECT_THROW(evaluate({0, 1}, {0.5, 0.5, 0.5, 0.5}, 1), std::invalid_argument);
  EXPECT_THROW(roc_auc_binary({0, 1}, {0.5, std::nan("")}), std::invalid_argument);
  EXPECT_THROW(f1_macro({}, {}, 2), std::invalid_argument);
}
