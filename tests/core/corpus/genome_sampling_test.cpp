#include "genemask/corpus/genome_sampling.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>

using namespace genemask;

namespace {

GenomeTable table() {
  GenomeTable t;
  t.names = {"human", "mouse", "fly", "yeast"};
  t.bases = {3000000, 2500000, 140000, 12000};
  t.list_weights = {1.0, 0.5, 2.0, 0.25};
  t.samples = {600, 500, 30, 4};
  return t;
}

std::vector<uint32_t> genomes_of(const GenomeTable& t) {  // samples grouped by genome, like the shards
  std::vector<uint32_t> g;
  for (size_t i = 0; i < t.samples.size(); ++i) g.insert(g.end(), t.samples[i], static_cast<uint32_t>(i));
  return g;
}

}  // namespace

TEST(GenomeSampling, ParsesTheFormsAndRefusesOthers) {
  EXPECT_EQ(parse_genome_weighting("bases").kind, GenomeWeighting::Kind::bases);
  EXPECT_EQ(parse_genome_weighting("uniform").kind, GenomeWeighting::Kind::uniform);
  EXPECT_EQ(parse_genome_weighting("list").kind, GenomeWeighting::Kind::list);
  const auto t = parse_genome_weighting("temperature:2.5");
  EXPECT_EQ(t.kind, GenomeWeighting::Kind::temperature);
  EXPECT_DOUBLE_EQ(t.temperature, 2.5);
  for (const char* bad : {"", "base", "temperature", "temperature:", "temperature:0", "temperature:-1",
                          "temperature:nan", "temperature:inf", "temperature:2x", "Uniform", "temperature:0x1p1",
                          "temperature: 2", "temperature:2 "})
    EXPECT_THROW(parse_genome_weighting(bad), std::invalid_argument) << bad;
}

TEST(GenomeSampling, ProbabilitiesAreTheClosedForms) {
  const GenomeTable t = table();
  auto check = [&](const std::string& w, const std::vector<double>& raw) {
    double total = 0;
    for (double v : raw) total += v;
    const auto p = genome_probabilities(parse_genome_weighting(w), t);
    ASSERT_EQ(p.size(), raw.size());
    for (size_t g = 0; g < p.size(); ++g) EXPECT_NEAR(p[g], raw[g] / total, 1e-15) << w << " " << g;
  };
  check("bases", {3000000, 2500000, 140000, 12000});
  check("uniform", {1, 1, 1, 1});
  check("list", {1.0, 0.5, 2.0, 0.25});
  check("temperature:2", {std::sqrt(3e6), std::sqrt(2.5e6), std::sqrt(1.4e5), std::sqrt(1.2e4)});
  check("temperature:1", {3000000, 2500000, 140000, 12000});
}

// Weights that are each finite but do not add up in a double (list weights near 1e308;
// bases^(1/T) past the largest double at a small T) give their proportions, where they were
// refused as "the weights sum to inf".
TEST(GenomeSampling, WeightsTooLargeToAddUpGiveTheirProportions) {
  GenomeTable t = table();
  t.list_weights = {1e308, 1e308, 1e307, 0.5};
  auto p = genome_probabilities(parse_genome_weighting("list"), t);
  const double s = 1 + 1 + 0.1 + 0.5e-308;
  EXPECT_NEAR(p[0], 1 / s, 1e-15);
  EXPECT_NEAR(p[1], 1 / s, 1e-15);
  EXPECT_NEAR(p[2], 0.1 / s, 1e-15);
  EXPECT_LT(p[3], 1e-300);  // 0.5 against 1e308
  // temperature:0.01: bases^100, by logs: (b_g / b_max)^100.
  p = genome_probabilities(parse_genome_weighting("temperature:0.01"), t);
  const std::vector<double> b = {3000000, 2500000, 140000, 12000};
  double total = 0;
  for (double v : b) total += std::pow(v / b[0], 100);
  for (size_t g = 0; g < b.size(); ++g) EXPECT_NEAR(p[g], std::pow(b[g] / b[0], 100) / total, 1e-12) << g;
  EXPECT_GT(p[1], 1e-9);  // (2.5/3)^100 ~ 1.2e-8: the second genome is still drawn, rarely
}

TEST(GenomeSampling, RefusesAWeightForAGenomeWithoutSamplesAndAMissingListWeight) {
  GenomeTable t = table();
  t.samples[2] = 0;
  try {
    genome_probabilities(parse_genome_weighting("uniform"), t);
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("genome fly has weight"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("no sample"), std::string::npos) << e.what();
  }
  t = table();
  t.list_weights[1] = 0;
  try {
    genome_probabilities(parse_genome_weighting("list"), t);
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("genome mouse has no weight"), std::string::npos) << e.what();
  }
}

// Over many draws, each genome's share is within 5 sigma of its probability (binomial).
TEST(GenomeSampling, FrequenciesFollowTheWeights) {
  const GenomeTable t = table();
  const auto sample_genome = genomes_of(t);
  for (const char* w : {"uniform", "list", "temperature:3", "bases"}) {
    const auto p = genome_probabilities(parse_genome_weighting(w), t);
    std::vector<uint64_t> seen(p.size(), 0);
    uint64_t draws = 0;
    for (uint64_t epoch = 0; epoch < 60; ++epoch)
      for (uint32_t i : weighted_epoch_order(sample_genome, p, 7, epoch)) ++seen[sample_genome[i]], ++draws;
    for (size_t g = 0; g < p.size(); ++g) {
      const double mean = static_cast<double>(draws) * p[g];
      const double sigma = std::sqrt(static_cast<double>(draws) * p[g] * (1 - p[g]));
      EXPECT_LT(std::abs(static_cast<double>(seen[g]) - mean), 5 * sigma + 1e-9) << w << " genome " << g;
    }
  }
}

// A genome's samples come in laps: within an epoch no sample repeats until all of its
// genome's samples were drawn, and the order is a pure function of (seed, epoch).
TEST(GenomeSampling, LapsWithoutRepeatsAndDeterminism) {
  const GenomeTable t = table();
  const auto sample_genome = genomes_of(t);
  const auto p = genome_probabilities(parse_genome_weighting("uniform"), t);
  const auto order = weighted_epoch_order(sample_genome, p, 11, 3);
  EXPECT_EQ(order.size(), sample_genome.size());
  EXPECT_EQ(order, weighted_epoch_order(sample_genome, p, 11, 3));
  EXPECT_NE(order, weighted_epoch_order(sample_genome, p, 11, 4));
  EXPECT_NE(order, weighted_epoch_order(sample_genome, p, 12, 3));
  std::map<uint32_t, std::vector<uint32_t>> per_genome;
  for (uint32_t i : order) per_genome[sample_genome[i]].push_back(i);
  for (const auto& [g, picks] : per_genome) {
    const size_t n = t.samples[g];
    for (size_t lap = 0; lap * n < picks.size(); ++lap) {
      std::set<uint32_t> distinct(picks.begin() + static_cast<long>(lap * n),
                                  picks.begin() + static_cast<long>(std::min(picks.size(), (lap + 1) * n)));
      EXPECT_EQ(distinct.size(), std::min(picks.size(), (lap + 1) * n) - lap * n) << "genome " << g << " lap " << lap;
      for (uint32_t i : distinct) EXPECT_EQ(sample_genome[i], g);
    }
  }
  // uniform over 4 genomes draws the 4-sample yeast genome many times: it went round in laps
  EXPECT_GT(per_genome[3].size(), 8u);
}

TEST(GenomeSampling, PermutationWithoutWeights) {
  const auto p = epoch_permutation(1000, 42, 0);
  std::set<uint32_t> all(p.begin(), p.end());
  EXPECT_EQ(all.size(), 1000u);
  EXPECT_EQ(epoch_permutation(5, 42, 0, false), (std::vector<uint32_t>{0, 1, 2, 3, 4}));
  EXPECT_NE(p, epoch_permutation(1000, 42, 1));
}
