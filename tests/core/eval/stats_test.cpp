#include "genemask/eval/stats.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

using namespace genemask::stats;

TEST(Stats, MeanAndSampleStd) {
  EXPECT_EQ(mean({1, 2, 3, 4}), 2.5);
  EXPECT_NEAR(stddev({1, 2, 3, 4}), std::sqrt(5.0 / 3.0), 1e-15);  // ddof = 1
  EXPECT_EQ(stddev({7}), 0.0);
  EXPECT_EQ(stddev({2, 2, 2}), 0.0);
  EXPECT_THROW(mean({}), std::invalid_argument);
}

TEST(Stats, PairedTTestClosedFormWithTwoPairs) {
  // d = {1, 3}: mean 2, sd sqrt(2), t = 2 / (sqrt(2)/sqrt(2)) = 2, df = 1.
  // The t(1) distribution is Cauchy: P(|T| > 2) = 1 - 2 atan(2) / pi.
  const TTest r = paired_t_test({2, 4}, {1, 1});
  EXPECT_TRUE(r.defined);
  EXPECT_NEAR(r.t, 2.0, 1e-15);
  EXPECT_EQ(r.df, 1.0);
  EXPECT_NEAR(r.p, 1 - 2 * std::atan(2.0) / M_PI, 1e-15);
}

TEST(Stats, PairedTTestDfTwoClosedForm) {
  // t(2) tail: P(|T| > t) = 1 - t / sqrt(t^2 + 2). d = {1, 2, 4}: mean 7/3, sd sqrt(7/3).
  const TTest r = paired_t_test({1, 2, 4}, {0, 0, 0});
  const double t = (7.0 / 3) / (std::sqrt(7.0 / 3) / std::sqrt(3.0));
  EXPECT_NEAR(r.t, t, 1e-14);
  EXPECT_NEAR(r.p, 1 - t / std::sqrt(t * t + 2), 1e-14);
  // Swapping the samples flips t, keeps p.
  const TTest s = paired_t_test({0, 0, 0}, {1, 2, 4});
  EXPECT_NEAR(s.t, -t, 1e-14);
  EXPECT_NEAR(s.p, r.p, 1e-15);
}

TEST(Stats, PairedTTestDegenerateCases) {
  TTest r = paired_t_test({0.5}, {0.4});  // n < 2
  EXPECT_FALSE(r.defined);
  EXPECT_EQ(r.p, 1.0);
  EXPECT_EQ(r.t, 0.0);
  EXPECT_TRUE(std::isnan(r.df));  // no degrees of freedom, not 0
  r = paired_t_test({}, {});
  EXPECT_FALSE(r.defined);
  EXPECT_EQ(r.p, 1.0);
  r = paired_t_test({0.5, 0.6, 0.7}, {0.5, 0.6, 0.7});  // all differences 0
  EXPECT_FALSE(r.defined);
  EXPECT_EQ(r.p, 1.0);
  r = paired_t_test({2, 3, 4}, {1, 2, 3});  // constant shift of +1
  EXPECT_FALSE(r.defined);
  EXPECT_EQ(r.p, 0.0);
  EXPECT_EQ(r.t, std::numeric_limits<double>::infinity());
  EXPECT_THROW(paired_t_test({1, 2}, {1}), std::invalid_argument);
  EXPECT_THROW(paired_t_test({1, std::nan("")}, {1, 2}), std::invalid_argument);
}

TEST(Stats, MarkersAtTheThresholds) {
  EXPECT_STREQ(significance_marker(0.0099), "**");
  EXPECT_STREQ(significance_marker(0.01), "*");
  EXPECT_STREQ(significance_marker(0.0499), "*");
  EXPECT_STREQ(significance_marker(0.05), "\u2020");
  EXPECT_STREQ(significance_marker(0.0999), "\u2020");
  EXPECT_STREQ(significance_marker(0.1), "");
  EXPECT_STREQ(significance_marker(1.0), "");
  EXPECT_STREQ(significance_marker_latex(0.07), "$\\dagger$");
  EXPECT_STREQ(significance_marker_latex(0.001), "**");
  EXPECT_EQ(std::string(significance_marker(0.07)), "\xE2\x80\xA0");
}

TEST(Stats, LegendNamesEachMarkerAtItsThreshold) {
  EXPECT_EQ(significance_legend(false), "\\*\\* p < 0.01, \\* p < 0.05, \u2020 p < 0.1");
  EXPECT_EQ(significance_legend(true), "** p $<$ 0.01, * p $<$ 0.05, $\\dagger$ p $<$ 0.1");
}
