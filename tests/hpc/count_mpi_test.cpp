// Runs under mpiexec at 1, 2 and 4 ranks (see tests/CMakeLists.txt).
#include <gtest/gtest.h>
#include <mpi.h>

#include <boost/serialization/string.hpp>
#include <boost/serialization/vector.hpp>

#include "hpc/count.hpp"
#include "hpc/mpi.hpp"
#include "test_util.hpp"

using namespace genemask;

namespace {

// Every rank builds the same genome (same seed); rank 0 writes the files.
class DistributedCount : public ::testing::Test {
 protected:
  void SetUp() override {
    rank_ = hpc::comm_rank(MPI_COMM_WORLD);
    std::mt19937_64 rng(2024);
    test::GenomeSpec spec;
    spec.records = 6;
    spec.max_len = 30000;
    spec.line_width = 0;
    genome_ = test::random_genome(rng, spec);
    dir_ = rank_ == 0 ? tmp_.path() : std::string();
    hpc::bcast_bytes(dir_, 0, MPI_COMM_WORLD);
    if (rank_ == 0) {
      test::write_file(dir_ + "/g.fa", genome_.fasta);
      test::write_gzip(dir_ + "/g.fa.gz", genome_.fasta);
      test::write_bgzf(dir_ + "/g.bgz", genome_.fasta, 1000);
    }
    hpc::barrier(MPI_COMM_WORLD);
  }
  void TearDown() override {
    hpc::barrier(MPI_COMM_WORLD);
  }

  int rank_ = 0;
  test::TempDir tmp_;
  std::string dir_;
  test::Genome genome_;
};

}  // namespace

TEST_F(DistributedCount, EqualsBruteForceOnEveryFormat) {
  CountOptions opts;
  opts.presence15 = true;
  const auto want = brute_force_counts(genome_.upper(), 10, true);
  for (const char* f : {"/g.fa", "/g.fa.gz", "/g.bgz"}) {
    std::vector<double> seen;  // rank 0's progress: rises to 1 within [0, 1]
    auto res = hpc::count_distributed(dir_ + f, opts, MPI_COMM_WORLD, [&](double x) { seen.push_back(x); });
    EXPECT_EQ(res.summary.ranks, hpc::comm_size(MPI_COMM_WORLD));
    if (rank_ != 0) {
      EXPECT_TRUE(seen.empty()) << f;
      continue;
    }
    EXPECT_EQ(test::progress_problem(seen), "") << f;
    for (int k = 1; k <= 10; ++k) EXPECT_EQ(res.counts.counts[static_cast<size_t>(k)], want.counts[static_cast<size_t>(k)]) << f << " k=" << k;
    EXPECT_EQ(res.counts.presence15, want.presence15) << f;
    ASSERT_EQ(res.records.size(), genome_.records.size());
    for (size_t i = 0; i < res.records.size(); ++i) EXPECT_EQ(res.records[i].length, genome_.records[i].second.size());
  }
}

// Two parts (300 and 100 bytes of a 1000-byte plain file and a whole 400-byte BGZF file), two
// passes weighted 1 and 3: each position maps to the fraction of the weighted bytes before it.
TEST(PartsProgress, MapsPositionsToTheWeightedShareOfBothPasses) {
  io::FileInfo plain, bgzf;
  plain.size_bytes = 1000;
  bgzf.size_bytes = 400;
  bgzf.compression = io::Compression::bgzf;
  hpc::FilePart a, b;
  a.file = 0;
  a.own.begin = 700;
  a.own.end = 1000;  // contiguous, ending at a cut
  a.bytes = 300;
  b.file = 1;
  b.own.begin = 0;
  b.own.end = UINT64_MAX;  // to the end of the file
  b.bytes = 100;
  double last = -1;
  const hpc::PartsProgress p({plain, bgzf}, {a, b}, [&](double x) { last = x; }, {1.0, 3.0});
  const auto at = [&](size_t part, size_t pass, uint64_t pos) {
    p.at(part, pass)(pos);
    return last;
  };
  EXPECT_DOUBLE_EQ(at(0, 0, 0), 0.0);  // before its text: nothing done yet
  EXPECT_DOUBLE_EQ(at(0, 0, 700), 0.0);
  EXPECT_DOUBLE_EQ(at(0, 0, 850), 0.25 * 0.75 * 0.5);
  EXPECT_DOUBLE_EQ(at(0, 0, 5000), 0.25 * 0.75);  // read past the end: capped at the part
  EXPECT_DOUBLE_EQ(at(1, 0, 200), 0.25 * (0.75 + 0.25 * 0.5));
  EXPECT_DOUBLE_EQ(at(1, 0, 400), 0.25);
  EXPECT_DOUBLE_EQ(at(0, 1, 700), 0.25);
  EXPECT_DOUBLE_EQ(at(1, 1, 100), 0.25 + 0.75 * (0.75 + 0.25 * 0.25));
  EXPECT_DOUBLE_EQ(at(1, 1, 400), 1.0);
  EXPECT_FALSE(p.at(2, 0));  // no such part
  EXPECT_FALSE(p.at(0, 2));  // no such pass
  const hpc::PartsProgress none({plain}, {a}, {});
  EXPECT_FALSE(none.at(0));  // no callback: readers get none
}

TEST(MpiHelpers, GatherSerializedAndReductions) {
  const int rank = hpc::comm_rank(MPI_COMM_WORLD), size = hpc::comm_size(MPI_COMM_WORLD);
  std::vector<std::string> mine(static_cast<size_t>(rank) + 1, "r" + std::to_string(rank));
  auto all = hpc::gather_serialized(mine, 0, MPI_COMM_WORLD);
  std::vector<uint64_t> v = {static_cast<uint64_t>(rank), uint64_t{1} << rank};
  hpc::reduce_sum_u64(v, 0, MPI_COMM_WORLD);
  std::vector<uint64_t> b = {uint64_t{1} << rank};
  hpc::reduce_bor_u64(b, 0, MPI_COMM_WORLD);
  // Several doubles in one message, on every rank: sums and maxima element by element.
  double sums[3] = {1.0, static_cast<double>(rank), 0.5 * rank};
  double maxima[2] = {static_cast<double>(rank), -static_cast<double>(rank)};
  hpc::allreduce_sum_doubles(sums, 3, MPI_COMM_WORLD);
  hpc::allreduce_max_doubles(maxima, 2, MPI_COMM_WORLD);
  EXPECT_EQ(sums[0], size);
  EXPECT_EQ(sums[1], size * (size - 1) / 2);
  EXPECT_EQ(sums[2], 0.25 * size * (size - 1));
  EXPECT_EQ(maxima[0], size - 1);
  EXPECT_EQ(maxima[1], 0.0);
  EXPECT_EQ(hpc::allreduce_sum_double(2.0, MPI_COMM_WORLD), 2.0 * size);
  EXPECT_EQ(hpc::allreduce_max_double(-static_cast<double>(rank), MPI_COMM_WORLD), 0.0);
  if (rank == 0) {
    ASSERT_EQ(all.size(), static_cast<size_t>(size));
    for (int r = 0; r < size; ++r) EXPECT_EQ(all[static_cast<size_t>(r)].size(), static_cast<size_t>(r) + 1);
    EXPECT_EQ(v[0], static_cast<uint64_t>(size * (size - 1) / 2));
    EXPECT_EQ(b[0], (uint64_t{1} << size) - 1);
  }
  EXPECT_THROW(hpc::checked_int(uint64_t{1} << 31, "x"), std::overflow_error);
}

int main(int argc, char** argv) {
  hpc::MpiEnv mpi(argc, argv);
  ::testing::InitGoogleTest(&argc, argv);
  // Only rank 0 prints results; every rank still runs every test (they are collective).
  if (mpi.rank() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  int rc = RUN_ALL_TESTS();
  return static_cast<int>(hpc::allreduce_max_u64(static_cast<uint64_t>(rc), MPI_COMM_WORLD));
}
