// Summary statistics and the paired t-test (see stats.hpp). Sums are accumulated in long
// double so that the result agrees with numpy's pairwise float64 sums to a few ulps.
#include "genemask/eval/stats.hpp"

#include <boost/math/distributions/students_t.hpp>
#include <fmt/format.h>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace genemask::stats {

double mean(const std::vector<double>& x) {
  if (x.empty()) throw std::invalid_argument("stats: mean of no values");
  long double s = 0;
  for (double v : x) s += v;
  return static_cast<double>(s / static_cast<long double>(x.size()));
}

double stddev(const std::vector<double>& x) {
  if (x.size() < 2) return 0.0;
  const double m = mean(x);  // two passes, as numpy.var: no cancellation of large squares
  long double ss = 0;
  for (double v : x) ss += static_cast<long double>(v - m) * static_cast<long double>(v - m);
  return static_cast<double>(std::sqrt(ss / static_cast<long double>(x.size() - 1)));
}

TTest paired_t_test(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size())
    throw std::invalid_argument("stats: paired t-test needs pairs, got " + std::to_string(a.size()) + " and " +
                                std::to_string(b.size()) + " values");
  std::vector<double> d(a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i]) || !std::isfinite(b[i]))
      throw std::invalid_argument("stats: paired t-test: pair " + std::to_string(i) + " is not finite");
    d[i] = a[i] - b[i];
  }
  TTest r;
  if (d.size() < 2) return r;  // t = 0, p = 1, undefined
  r.df = static_cast<double>(d.size() - 1);
  const double m = mean(d), s = stddev(d);
  if (s == 0) {
    if (m != 0) {  // a constant non-zero shift: infinitely significant, as SciPy says
      r.t = m > 0 ? std::numeric_limits<double>::infinity() : -std::numeric_limits<double>::infinity();
      r.p = 0;
    }
    return r;
  }
  r.t = m / (s / std::sqrt(static_cast<double>(d.size())));
  r.defined = true;
  const boost::math::students_t dist(r.df);
  r.p = 2 * boost::math::cdf(boost::math::complement(dist, std::fabs(r.t)));
  if (r.p > 1) r.p = 1;
  return r;
}

TTest welch_t_test(const std::vector<double>& a, const std::vector<double>& b) {
  for (const auto* x : {&a, &b})
    for (size_t i = 0; i < x->size(); ++i)
      if (!std::isfinite((*x)[i]))
        throw std::invalid_argument("stats: Welch's t-test: value " + std::to_string(i) + " is not finite");
  TTest r;
  if (a.size() < 2 || b.size() < 2) return r;  // t = 0, p = 1, undefined
  const double na = static_cast<double>(a.size()), nb = static_cast<double>(b.size());
  const double sa = stddev(a), sb = stddev(b);
  const double qa = sa * sa / na, qb = sb * sb / nb;  // the squared standard errors
  const double diff = mean(a) - mean(b);
  if (qa + qb == 0) {
    if (diff != 0) {
      r.t = diff > 0 ? std::numeric_limits<double>::infinity() : -std::numeric_limits<double>::infinity();
      r.p = 0;
    }
    return r;
  }
  r.t = diff / std::sqrt(qa + qb);
  r.df = (qa + qb) * (qa + qb) / (qa * qa / (na - 1) + qb * qb / (nb - 1));
  r.defined = true;
  const boost::math::students_t dist(r.df);
  r.p = 2 * boost::math::cdf(boost::math::complement(dist, std::fabs(r.t)));
  if (r.p > 1) r.p = 1;
  return r;
}

const char* significance_marker(double p) {
  if (p < 0.01) return "**";
  if (p < 0.05) return "*";
  if (p < 0.1) return "\u2020";
  return "";
}

std::string significance_legend(bool latex) {
  std::string o;
  for (const double p : {0.01, 0.05, 0.1}) {
    const double below = std::nextafter(p, 0.0);
    std::string marker = latex ? significance_marker_latex(below) : significance_marker(below);
    if (!latex)
      for (size_t i = marker.find('*'); i != std::string::npos; i = marker.find('*', i + 2)) marker.insert(i, "\\");
    o += fmt::format("{}{} p {} {}", o.empty() ? "" : ", ", marker, latex ? "$<$" : "<", p);
  }
  return o;
}

const char* significance_marker_latex(double p) {
  if (p < 0.01) return "**";
  if (p < 0.05) return "*";
  if (p < 0.1) return "$\\dagger$";
  return "";
}

}  // namespace genemask::stats
