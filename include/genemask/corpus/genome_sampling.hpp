#pragma once
// Which samples an epoch visits, and in which order (HDF5- and Torch-free: the data loader,
// `pretrain` and the Python ShardDataset share it).
//
// Without genome weights an epoch is a permutation of the split's samples drawn from
// (seed, epoch): every sample once, each genome in proportion to its samples.
//
// With genome weights (`--genome-weights`, shard sets of a genome list) an epoch has as many
// positions as the split has samples, N. Position t draws its genome g from the weights
// with the t-th uniform of the stream (seed, genome, epoch); it takes the next sample of g's
// own order, a permutation of g's samples drawn from (seed, genome, epoch, g, lap), where
// lap counts how often g has been gone through in this epoch (a genome drawn more often
// than it has samples starts a new permutation; one drawn less leaves samples unseen). The
// order is a pure function of (seed, epoch): rank r of R takes positions r, r+R, ..., as
// without weights, so it does not depend on the rank count, the accumulation split or a
// resume.
#include <cstdint>
#include <string>
#include <vector>

namespace genemask {

struct GenomeWeighting {
  enum class Kind { none, bases, uniform, list, temperature };
  Kind kind = Kind::none;
  double temperature = 1;
  std::string text() const;  // as --genome-weights takes it
};

/// Parses --genome-weights: bases | uniform | list | temperature:T (T a positive finite
/// number). Throws std::invalid_argument with the accepted forms.
GenomeWeighting parse_genome_weighting(const std::string& text);

/// What the weights are computed from, per genome (a shard manifest's genome list).
struct GenomeTable {
  std::vector<std::string> names;
  std::vector<uint64_t> bases;       // sequence length of the genome
  std::vector<double> list_weights;  // the list's weights (0: none given)
  std::vector<uint64_t> samples;     // samples of the split being read
};

/// Probabilities per genome (summing to 1): bases ~ bases, uniform ~ 1, list ~ the list's
/// weight, temperature:T ~ bases^(1/T). Throws std::invalid_argument naming the genome when
/// a genome with a positive weight has no sample in the split, when `list` meets a genome
/// without a weight, or when nothing is left to draw.
std::vector<double> genome_probabilities(const GenomeWeighting& w, const GenomeTable& t);

/// The permutation of n samples for an epoch without weights (shuffle false: 0..n-1).
std::vector<uint32_t> epoch_permutation(uint64_t n, uint64_t seed, uint64_t epoch, bool shuffle = true);

/// The epoch's order with weights: sample_genome[i] is the genome of sample i (samples in
/// sample_index order); returns N = sample_genome.size() sample positions.
std::vector<uint32_t> weighted_epoch_order(const std::vector<uint32_t>& sample_genome,
                                           const std::vector<double>& probabilities, uint64_t seed, uint64_t epoch);

}  // namespace genemask
