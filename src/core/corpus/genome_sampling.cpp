#include "genemask/corpus/genome_sampling.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <fmt/format.h>
#include <numeric>
#include <stdexcept>

#include "genemask/rng.hpp"
#include "io/parse_number.hpp"

namespace genemask {

std::string GenomeWeighting::text() const {
  switch (kind) {
    case Kind::none: return "none";
    case Kind::bases: return "bases";
    case Kind::uniform: return "uniform";
    case Kind::list: return "list";
    case Kind::temperature: return fmt::format("temperature:{}", temperature);
  }
  return "none";
}

GenomeWeighting parse_genome_weighting(const std::string& text) {
  GenomeWeighting w;
  if (text == "bases") w.kind = GenomeWeighting::Kind::bases;
  else if (text == "uniform") w.kind = GenomeWeighting::Kind::uniform;
  else if (text == "list") w.kind = GenomeWeighting::Kind::list;
  else if (text.rfind("temperature:", 0) == 0) {
    const std::string t = text.substr(12);
    const auto v = io::parse_decimal_double(t);
    if (!v || !(*v > 0))
      throw std::invalid_argument(fmt::format("--genome-weights {}: the temperature '{}' is not a positive finite "
                                              "number (temperature:T draws genome g with p ~ bases^(1/T))",
                                              text, t));
    w.kind = GenomeWeighting::Kind::temperature;
    w.temperature = *v;
  } else {
    throw std::invalid_argument(fmt::format("--genome-weights '{}': expected bases, uniform, list or temperature:T",
                                            text));
  }
  return w;
}

std::vector<double> genome_probabilities(const GenomeWeighting& w, const GenomeTable& t) {
  const size_t n = t.names.size();
  std::vector<double> p(n, 0.0);
  for (size_t g = 0; g < n; ++g) {
    switch (w.kind) {
      case GenomeWeighting::Kind::none:
      case GenomeWeighting::Kind::bases: p[g] = static_cast<double>(t.bases[g]); break;
      case GenomeWeighting::Kind::uniform: p[g] = 1.0; break;
      case GenomeWeighting::Kind::list:
        if (!(t.list_weights[g] > 0))
          throw std::invalid_argument(fmt::format("--genome-weights list: genome {} has no weight in the genome list "
                                                  "(its third column); give every genome a weight, or use bases, "
                                                  "uniform or temperature:T",
                                                  t.names[g]));
        p[g] = t.list_weights[g];
        break;
      case GenomeWeighting::Kind::temperature:
        p[g] = std::pow(static_cast<double>(t.bases[g]), 1.0 / w.temperature);
        break;
    }
    if (p[g] > 0 && t.samples[g] == 0)
      throw std::invalid_argument(fmt::format("--genome-weights {}: genome {} has weight {:.6g} but no sample in this "
                                              "split: nothing to draw for it; leave it out of the genome list (or "
                                              "build the shards with a smaller --min-tokens)",
                                              w.text(), t.names[g], p[g]));
  }
  double total = 0;
  for (double v : p) total += v;
  if (total > 0 && !std::isfinite(total)) {
    // Weights each finite but too large to add up (list weights near 1e308), or bases^(1/T)
    // past the largest double (a small T): the same proportions, scaled to the largest 1.
    if (w.kind == GenomeWeighting::Kind::temperature) {
      for (size_t g = 0; g < n; ++g) p[g] = std::log(static_cast<double>(t.bases[g])) / w.temperature;
      const double top = *std::max_element(p.begin(), p.end());
      for (double& v : p) v = std::exp(v - top);
    } else {
      const double top = *std::max_element(p.begin(), p.end());
      for (double& v : p) v /= top;
    }
    total = 0;
    for (double v : p) total += v;
  }
  if (!(total > 0) || !std::isfinite(total))
    throw std::invalid_argument(fmt::format("--genome-weights {}: the weights sum to {}: nothing to draw", w.text(), total));
  for (double& v : p) v /= total;
  return p;
}

std::vector<uint32_t> epoch_permutation(uint64_t n, uint64_t seed, uint64_t epoch, bool shuffle) {
  std::vector<uint32_t> perm(n);
  std::iota(perm.begin(), perm.end(), 0u);
  if (shuffle) {
    Rng rng(seed, Stream::shuffle, epoch);
    for (size_t i = perm.size(); i > 1; --i) std::swap(perm[i - 1], perm[rng.below(i)]);
  }
  return perm;
}

std::vector<uint32_t> weighted_epoch_order(const std::vector<uint32_t>& sample_genome,
                                           const std::vector<double>& probabilities, uint64_t seed, uint64_t epoch) {
  const size_t ng = probabilities.size();
  std::vector<std::vector<uint32_t>> members(ng);
  for (size_t i = 0; i < sample_genome.size(); ++i) {
    if (sample_genome[i] >= ng)
      throw std::invalid_argument(fmt::format("sample {} has genome {}, but there are {} genomes", i, sample_genome[i], ng));
    members[sample_genome[i]].push_back(static_cast<uint32_t>(i));
  }
  // The cumulative distribution; the last genome with a positive weight ends it at exactly 1.
  std::vector<double> cdf(ng);
  double acc = 0;
  size_t last = 0;
  for (size_t g = 0; g < ng; ++g) {
    acc += probabilities[g];
    cdf[g] = acc;
    if (probabilities[g] > 0) last = g;
  }
  for (size_t g = last; g < ng; ++g) cdf[g] = 2.0;
  std::vector<uint64_t> drawn(ng, 0);
  std::vector<std::vector<uint32_t>> order(ng);  // g's current lap
  Rng draws(seed, Stream::genome, epoch);
  std::vector<uint32_t> out(sample_genome.size());
  for (size_t t = 0; t < out.size(); ++t) {
    const double u = draws.uniform();
    const size_t g = static_cast<size_t>(std::upper_bound(cdf.begin(), cdf.end(), u) - cdf.begin());
    auto& m = members[g];
    if (m.empty()) throw std::logic_error("a genome without samples was drawn");  // refused by genome_probabilities
    const uint64_t k = drawn[g]++;
    const uint64_t lap = k / m.size(), j = k % m.size();
    if (j == 0) {  // a new lap of g: its own permutation
      order[g] = m;
      Rng rng(seed, Stream::genome, epoch, ((static_cast<uint64_t>(g) + 1) << 32) | lap);
      for (size_t i = order[g].size(); i > 1; --i) std::swap(order[g][i - 1], order[g][rng.below(i)]);
    }
    out[t] = order[g][j];
  }
  return out;
}

}  // namespace genemask
