#include "genemask/kmer/kmer_count.hpp"

#include <gtest/gtest.h>

#include "io/error.hpp"
#include "test_util.hpp"

using namespace genemask;
using genemask::test::TempDir;

namespace {

/// Counts the file as `nranks` ranks would (in one process) and sums their results.
KmerCounts count_as_ranks(const std::string& path, int nranks, const CountOptions& opts, uint64_t gzip_chunk,
                          std::vector<RecordInfo>* records = nullptr) {
  const io::FileInfo info = io::probe_file(path);
  RankCounts sum;
  for (int r = 0; r < nranks; ++r) sum.add(count_owned(info, io::partition(info, r, nranks, gzip_chunk), opts));
  if (records) *records = stitch_records(info, sum.segments);
  return finalize_counts(sum);
}

void expect_same_counts(const KmerCounts& got, const KmerCounts& want) {
  ASSERT_EQ(got.kmax, want.kmax);
  for (int k = 1; k <= want.kmax; ++k) {
    const auto& g = got.counts[static_cast<size_t>(k)];
    const auto& w = want.counts[static_cast<size_t>(k)];
    ASSERT_EQ(g.size(), w.size());
    size_t bad = 0;
    for (size_t i = 0; i < w.size(); ++i) bad += g[i] != w[i];
    EXPECT_EQ(bad, 0u) << "k=" << k << ": " << bad << " k-mers differ";
  }
  EXPECT_EQ(got.presence15, want.presence15);
}

}  // namespace

TEST(KmerCode, EncodeDecodeRoundTrip) {
  uint64_t code = 0;
  ASSERT_TRUE(encode_kmer("ACGT", code));
  EXPECT_EQ(code, 0b00011011u);  // A=0 C=1 G=2 T=3, first base most significant
  EXPECT_EQ(decode_kmer(code, 4), "ACGT");
  ASSERT_TRUE(encode_kmer("tttttttttt", code));
  EXPECT_EQ(code, num_kmers(10) - 1);
  EXPECT_FALSE(encode_kmer("ACNT", code));
}

TEST(KmerCount, TinyHandCheckedExample) {
  TempDir tmp;
  test::write_file(tmp.file("g.fa"), ">a\nACGTN\nac\n>b\nAC\n");
  CountOptions opts;
  opts.kmax = 3;
  auto c = count_as_ranks(tmp.file("g.fa"), 1, opts, 1 << 20);
  uint64_t code;
  encode_kmer("AC", code);
  EXPECT_EQ(c.counts[2][code], 3u);  // ACgt, ac, AC (the N breaks GT|N|AC)
  encode_kmer("A", code);
  EXPECT_EQ(c.counts[1][code], 3u);
  EXPECT_EQ(c.total(1), 8u);
  EXPECT_EQ(c.total(2), 5u);  // AC CG GT | AC | AC
  EXPECT_EQ(c.total(3), 2u);  // ACG CGT
}

// The core invariant: any number of ranks, any compression, any layout gives the
// brute-force counts, k = 1..kmax, and the 15-mer presence set.
TEST(KmerCount, MatchesBruteForceForAnyRankCountAndFormat) {
  TempDir tmp;
  std::mt19937_64 rng(42);
  for (int trial = 0; trial < 6; ++trial) {
    test::GenomeSpec spec;
    spec.records = 1 + static_cast<int>(rng() % 5);
    spec.max_len = 4000;
    spec.line_width = trial % 3 == 0 ? 60 : trial % 3 == 1 ? 0 : 7;
    spec.crlf = trial == 4;
    spec.blank_lines = trial == 5;
    auto g = test::random_genome(rng, spec);
    test::write_file(tmp.file("g.fa"), g.fasta);
    test::write_gzip(tmp.file("g.fa.gz"), g.fasta, 2);
    test::write_bgzf(tmp.file("g.bgz"), g.fasta, 97);
    for (int kmax : {10, 4}) {
      CountOptions opts;
      opts.kmax = kmax;
      opts.presence15 = kmax == 10 && trial < 2;  // the 128 MiB set per simulated rank is slow to clear
      const auto want = brute_force_counts(g.upper(), kmax, opts.presence15);
      for (const char* f : {"g.fa", "g.fa.gz", "g.bgz"}) {
        for (int ranks : {1, 2, 3, 7, 16}) {
          if (opts.presence15 && ranks > 3) continue;
          SCOPED_TRACE(::testing::Message() << "trial " << trial << " " << f << " kmax " << kmax << " ranks " << ranks);
          std::vector<RecordInfo> records;
          // Tiny gzip chunks force ownership to change every few lines.
          expect_same_counts(count_as_ranks(tmp.file(f), ranks, opts, 29, &records), want);
          ASSERT_EQ(records.size(), g.records.size());
          for (size_t i = 0; i < records.size(); ++i) {
            EXPECT_EQ(records[i].name, g.records[i].first);
            EXPECT_EQ(records[i].length, g.records[i].second.size());
          }
        }
      }
    }
  }
}

TEST(KmerCount, SingleLineRecordsAndRunsShorterThanK) {
  TempDir tmp;
  // Runs of 1..12 bases between N's, one-line records, and a record of 3 bases.
  std::string s;
  for (int run = 1; run <= 12; ++run) s += std::string(static_cast<size_t>(run), "ACGT"[run % 4]) + "N";
  test::write_file(tmp.file("g.fa"), ">x\n" + s + "\n>y\nGAT\n>z\nnnnACGTACGTACGTACGTAC\n");
  std::vector<std::string> seqs = {s, "GAT", "NNNACGTACGTACGTACGTAC"};
  CountOptions opts;
  opts.presence15 = true;
  const auto want = brute_force_counts(seqs, 10, true);
  for (int ranks = 1; ranks <= 9; ++ranks) expect_same_counts(count_as_ranks(tmp.file("g.fa"), ranks, opts, 5), want);
}

TEST(KmerCount, ErrorsCarryFileAndLine) {
  TempDir tmp;
  test::write_file(tmp.file("g.fa"), ">a\nACGT\nAC?T\n");
  const io::FileInfo info = io::probe_file(tmp.file("g.fa"));
  try {
    count_owned(info, io::Ownership{}, CountOptions{});
    FAIL() << "no error";
  } catch (const io::InputError& e) {
    EXPECT_EQ(std::string(e.what()),
              tmp.file("g.fa") + ":3: invalid base '?' in sequence (allowed: ACGT, N and IUPAC codes, '-', '*')");
  }
  test::write_file(tmp.file("d.fa"), ">a\nACGT\n>a\nAC\n");
  const io::FileInfo dinfo = io::probe_file(tmp.file("d.fa"));
  RankCounts sum;
  for (int r = 0; r < 3; ++r) sum.add(count_owned(dinfo, io::partition(dinfo, r, 3), CountOptions{}));
  EXPECT_THROW(stitch_records(dinfo, sum.segments), io::InputError);
}

// Issue 21: ">chr1" without a newline, or a file of CR-only line ends, counted 0 records.
// Every rank count must see the last header exactly once.
TEST(KmerCount, AHeaderAtTheEndOfTheFileIsSeenByExactlyOneRank) {
  TempDir tmp;
  test::write_file(tmp.file("h.fa"), ">a\nACGTACGTAC\nGGTTAA\n>b");
  for (int ranks = 1; ranks <= 5; ++ranks) {
    const io::FileInfo info = io::probe_file(tmp.file("h.fa"));
    RankCounts sum;
    for (int r = 0; r < ranks; ++r) sum.add(count_owned(info, io::partition(info, r, ranks), CountOptions{4, false}));
    EXPECT_EQ(test::error_of([&] { stitch_records(info, sum.segments); }), tmp.file("h.fa") + ":4: record 'b' has no sequence")
        << ranks << " ranks";
  }
  test::write_file(tmp.file("mac.fa"), ">chr1\rACGTACGT\rACGT\r");
  const io::FileInfo mac = io::probe_file(tmp.file("mac.fa"));
  for (int ranks = 1; ranks <= 4; ++ranks) {
    std::string e;
    for (int r = 0; r < ranks; ++r) {
      const std::string got = test::error_of([&] { count_owned(mac, io::partition(mac, r, ranks), CountOptions{4, false}); });
      if (got != "no error") e = got;
    }
    EXPECT_NE(e.find(":1: a carriage return (CR, byte 0x0d) inside a header line"), std::string::npos) << ranks << ": " << e;
  }
  EXPECT_EQ(test::error_of([&] { stitch_records(mac, {}); }),
            tmp.file("mac.fa") + ": has no FASTA record (no '>' header line): nothing to read");
}
