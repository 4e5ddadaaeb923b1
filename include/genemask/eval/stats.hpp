#pragma once
// Summary statistics and the paired t-test of the report. The Student t tail comes from
// Boost.Math (exact, not a normal approximation), as SciPy's ttest_rel computes it.
#include <cstddef>
#include <limits>
#include <string>
#include <vector>

namespace genemask::stats {

/// Arithmetic mean; throws std::invalid_argument for an empty vector.
double mean(const std::vector<double>& x);
/// Sample standard deviation (ddof = 1, as numpy.std(x, ddof=1)); 0 for fewer than 2 values.
double stddev(const std::vector<double>& x);

struct TTest {
  double t = 0, p = 1;  // two-sided p-value
  double df = std::numeric_limits<double>::quiet_NaN();  // NaN where undefined (see each test)
  bool defined = false;  // false when n < 2 or all differences are equal (p reported as 1 or 0)
};

/// Paired two-sided t-test of a against b (pairs a[i], b[i]), as scipy.stats.ttest_rel(a, b):
/// d = a - b, t = mean(d) / (std(d, ddof=1) / sqrt(n)), df = n - 1, p = 2 P(T_df > |t|).
/// Degenerate cases, where SciPy returns nan or inf, give `defined = false` and:
///   n < 2                          -> t = 0, p = 1, df NaN (no evidence; SciPy: nan)
///   all differences 0              -> t = 0, p = 1 (SciPy: nan)
///   all differences equal, not 0   -> t = +-inf, p = 0 (as SciPy)
/// Throws std::invalid_argument when the sizes differ or a value is not finite.
TTest paired_t_test(const std::vector<double>& a, const std::vector<double>& b);

/// Welch's two-sided t-test of a against b (independent samples, unequal variances), as
/// scipy.stats.ttest_ind(a, b, equal_var=False): t = (mean(a) - mean(b)) / sqrt(va/na + vb/nb)
/// with the sample variances (ddof = 1), df by Welch-Satterthwaite, p = 2 P(T_df > |t|).
/// Degenerate cases give `defined = false`:
///   fewer than 2 values on a side  -> t = 0, p = 1 (SciPy: nan)
///   both variances 0, means equal  -> t = 0, p = 1 (SciPy: nan)
///   both variances 0, means differ -> t = +-inf, p = 0
/// and df NaN in each: Welch-Satterthwaite's is 0/0 there (SciPy puts 1 in its place).
/// Throws std::invalid_argument when a value is not finite.
TTest welch_t_test(const std::vector<double>& a, const std::vector<double>& b);

/// The paper's markers: "**" p < 0.01, "*" p < 0.05, "\u2020" (dagger, UTF-8) p < 0.1, else "".
const char* significance_marker(double p);
/// The same markers for LaTeX: "**", "*", "$\dagger$", "".
const char* significance_marker_latex(double p);
/// The markers' legend for a caption: "\*\* p < 0.01, \* p < 0.05, \u2020 p < 0.1" in Markdown (the
/// stars escaped), "** p $<$ 0.01, * p $<$ 0.05, $\dagger$ p $<$ 0.1" in LaTeX (a bare < prints as
/// an inverted ! in LaTeX's default font encoding).
std::string significance_legend(bool latex);

}  // namespace genemask::stats
