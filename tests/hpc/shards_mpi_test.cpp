// Runs under mpiexec at 1, 2 and 4 ranks, with the count tests.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <map>

#include "genemask/corpus/segments.hpp"
#include "genemask/corpus/tokenizer.hpp"
#include "hpc/mpi.hpp"
#include "hpc/shards.hpp"
#include "io/shard_file.hpp"
#include "io/shard_manifest.hpp"
#include "test_util.hpp"

using namespace genemask;

namespace {

struct Sample {
  uint64_t index;
  uint32_t chrom;
  uint64_t start;
  std::vector<uint16_t> tokens;
  bool valid;
  bool operator==(const Sample& o) const {
    return index == o.index && chrom == o.chrom && start == o.start && tokens == o.tokens && valid == o.valid;
  }
};

/// Reference: cut the candidates straight out of the sequences.
std::vector<Sample> expected_samples(const test::Genome& g, const SegmentRecipe& r, double valid_fraction) {
  std::vector<Sample> out;
  uint64_t first = 0;
  const auto up = g.upper();
  for (size_t c = 0; c < up.size(); ++c) {
    auto cands = candidates(up[c].size(), c, r);
    for (size_t j = 0; j < cands.size(); ++j) {
      const std::string s = up[c].substr(cands[j].start, cands[j].bases);
      if (s.find_first_not_of("ACGT") != std::string::npos) continue;
      out.push_back(Sample{first + j, static_cast<uint32_t>(c), cands[j].start, tokenize(s),
                           is_validation(r.seed, first + j, valid_fraction)});
    }
    first += cands.size();
  }
  return out;
}

std::vector<Sample> read_samples(const std::string& dir) {
  auto m = io::read_manifest(dir, true);
  std::vector<Sample> out;
  for (const auto& sh : m.shards) {
    io::ShardReader r(dir + "/" + sh.file);
    std::vector<uint16_t> t;
    for (size_t i = 0; i < r.samples(); ++i) {
      r.read(i, t);
      out.push_back(Sample{r.sample_index()[i], r.chrom()[i], r.start()[i], t, r.split() == "valid"});
    }
  }
  std::sort(out.begin(), out.end(), [](const Sample& a, const Sample& b) { return a.index < b.index; });
  return out;
}

}  // namespace

TEST(DistributedShards, EqualTheReferenceOnEveryFormat) {
  const int rank = hpc::comm_rank(MPI_COMM_WORLD);
  test::TempDir tmp;
  std::string dir = tmp.path();
  hpc::bcast_bytes(dir, 0, MPI_COMM_WORLD);  // rank 0's directory for all
  std::mt19937_64 rng(77);
  test::GenomeSpec spec;
  spec.records = 5;
  spec.min_len = 3000;
  spec.max_len = 20000;
  spec.line_width = 0;
  spec.gap_rate = 0.0004;
  spec.iupac_rate = 0.0002;
  auto g = test::random_genome(rng, spec);
  if (rank == 0) {
    test::write_file(dir + "/g.fa", g.fasta);
    test::write_gzip(dir + "/g.fa.gz", g.fasta);
    test::write_bgzf(dir + "/g.bgz", g.fasta, 777);
  }
  hpc::barrier(MPI_COMM_WORLD);  // the files exist before anyone reads
  hpc::ShardsRequest req;
  req.options.recipe.seed = 9;
  req.options.recipe.max_offset = 50;
  req.options.shard_tokens = 3000;  // several shard files per rank
  req.options.valid_fraction = 0.2;
  const auto want = expected_samples(g, req.options.recipe, 0.2);
  ASSERT_GT(want.size(), 20u);
  for (const char* f : {"/g.fa", "/g.fa.gz", "/g.bgz"}) {
    req.genome = dir + f;
    req.out_dir = dir + f + ".shards";
    std::vector<double> seen;  // rank 0's progress over both passes: rises to 1 within [0, 1]
    auto res = hpc::build_shards(req, MPI_COMM_WORLD, [&](double x) { seen.push_back(x); });
    if (rank != 0) {
      EXPECT_TRUE(seen.empty()) << f;
      continue;
    }
    EXPECT_EQ(test::progress_problem(seen), "") << f;
    auto got = read_samples(req.out_dir);
    ASSERT_EQ(got.size(), want.size()) << f;
    EXPECT_TRUE(got == want) << f;
    EXPECT_EQ(res.totals.kept, want.size());
    EXPECT_EQ(res.manifest.chromosomes.size(), g.records.size());
  }
  hpc::barrier(MPI_COMM_WORLD);
}
