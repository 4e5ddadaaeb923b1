#include "genemask/kmer/pmi.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <limits>
#include <stdexcept>

#include "genemask/kmer/kmer.hpp"

namespace genemask {

PmiCalculator::PmiCalculator(const std::vector<std::vector<uint64_t>>& counts, int kmax)
    : counts_(&counts), kmax_(kmax), logp_(static_cast<size_t>(kmax) + 1) {
  for (int k = 1; k <= kmax; ++k) {
    const auto& c = counts.at(static_cast<size_t>(k));
    if (c.size() != num_kmers(k)) throw std::invalid_argument(fmt::format("counts for k={} have the wrong size", k));
    uint64_t total = 0;
    for (uint64_t v : c) total += v;
    auto& lp = logp_[static_cast<size_t>(k)];
    lp.resize(c.size());
    const double log_total = total ? std::log(static_cast<double>(total)) : 0.0;
    for (size_t i = 0; i < c.size(); ++i)
      lp[i] = c[i] ? std::log(static_cast<double>(c[i])) - log_total : -std::numeric_limits<double>::infinity();
  }
}

double PmiCalculator::pmi(uint64_t code, int k) const {
  if (k < 2 || k > kmax_) throw std::invalid_argument(fmt::format("PMI needs 2 <= k <= {}, got {}", kmax_, k));
  if (count(code, k) == 0) return std::numeric_limits<double>::quiet_NaN();
  // piece(i, j): log p of bases [i, j) of the k-mer.
  auto piece = [&](int i, int j) {
    const int len = j - i;
    return logp_[static_cast<size_t>(len)][(code >> (2 * (k - j))) & kmer_mask(len)];
  };
  // best[j]: max over all segmentations (identity allowed) of bases [0, j) of sum log p.
  double best[kMaxDenseK + 1];
  best[0] = 0.0;
  for (int j = 1; j < k; ++j) {
    double b = -std::numeric_limits<double>::infinity();
    for (int i = 0; i < j; ++i) b = std::max(b, best[i] + piece(i, j));
    best[j] = b;
  }
  // The last piece must be shorter than the whole k-mer: at least two pieces.
  double b = -std::numeric_limits<double>::infinity();
  for (int i = 1; i < k; ++i) b = std::max(b, best[i] + piece(i, k));
  return piece(0, k) - b;
}

double npmi_from_pmi(double pmi, uint64_t f, uint64_t c) {
  if (f == 0) return std::numeric_limits<double>::quiet_NaN();
  const double lf = std::log(static_cast<double>(f));
  return pmi * lf / (std::log(static_cast<double>(c)) + lf);
}

std::vector<NpmiEntry> npmi_ranking(const PmiCalculator& calc, int k, uint64_t min_count) {
  if (min_count < 2) throw std::invalid_argument("min count c must be >= 2 (ln c is the NPMI discount)");
  std::vector<NpmiEntry> rows(num_kmers(k));
  for (uint64_t code = 0; code < rows.size(); ++code) {
    auto& r = rows[code];
    r.code = code;
    r.count = calc.count(code, k);
    r.pmi = calc.pmi(code, k);
    r.npmi = npmi_from_pmi(r.pmi, r.count, min_count);
    r.below_min_count = r.count < min_count;
  }
  std::sort(rows.begin(), rows.end(), [](const NpmiEntry& a, const NpmiEntry& b) {
    if (a.below_min_count != b.below_min_count) return !a.below_min_count;
    const bool an = std::isnan(a.npmi), bn = std::isnan(b.npmi);
    if (an != bn) return !an;
    if (!an && a.npmi != b.npmi) return a.npmi > b.npmi;
    return a.code < b.code;
  });
  for (size_t i = 0; i < rows.size(); ++i) rows[i].rank = i + 1;
  return rows;
}

std::vector<PmiVocabEntry> pmi_vocabulary(const PmiCalculator& calc, int kmin, int kmax, uint64_t min_count,
                                          uint64_t size) {
  if (kmin > kmax) throw std::invalid_argument(fmt::format("kmin {} is greater than kmax {}", kmin, kmax));
  if (kmin < 2) throw std::invalid_argument(fmt::format("kmin {} is below 2 (PMI needs a k-mer of two parts)", kmin));
  if (kmax > calc.kmax())
    throw std::invalid_argument(
        fmt::format("kmax {} is above {}, the largest k in the counts (count with a larger --kmax)", kmax, calc.kmax()));
  std::vector<PmiVocabEntry> all;
  for (int k = kmin; k <= kmax; ++k) {
    for (uint64_t code = 0; code < num_kmers(k); ++code) {
      const uint64_t f = calc.count(code, k);
      if (f < min_count || f == 0) continue;
      all.push_back(PmiVocabEntry{0, code, k, f, calc.pmi(code, k)});
    }
  }
  auto better = [](const PmiVocabEntry& a, const PmiVocabEntry& b) {
    if (a.pmi != b.pmi) return a.pmi > b.pmi;
    if (a.k != b.k) return a.k < b.k;
    return a.code < b.code;
  };
  const size_t keep = std::min<size_t>(all.size(), size);
  std::partial_sort(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(keep), all.end(), better);
  all.resize(keep);
  for (size_t i = 0; i < all.size(); ++i) all[i].rank = i + 1;
  return all;
}

double pmi_brute_force(const PmiCalculator& calc, uint64_t code, int k) {
  if (calc.count(code, k) == 0) return std::numeric_limits<double>::quiet_NaN();
  const double whole = calc.log_p(code, k);
  double best = std::numeric_limits<double>::infinity();
  // Bit c of `cuts` set = a cut after base c+1; cuts == 0 is the identity (excluded).
  for (uint32_t cuts = 1; cuts < (1u << (k - 1)); ++cuts) {
    double sum = 0;
    int start = 0;
    for (int pos = 1; pos <= k; ++pos) {
      if (pos == k || ((cuts >> (pos - 1)) & 1u)) {
        const int len = pos - start;
        sum += calc.log_p((code >> (2 * (k - pos))) & kmer_mask(len), len);
        start = pos;
      }
    }
    best = std::min(best, whole - sum);
  }
  return best;
}

}  // namespace genemask
