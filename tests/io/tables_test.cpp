#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "io/counts_file.hpp"
#include "io/error.hpp"
#include "io/rank_tables.hpp"
#include "test_util.hpp"

using namespace genemask;
using genemask::test::TempDir;
using genemask::test::error_of;

TEST(NpmiTsv, RoundTripIsExact) {
  TempDir tmp;
  std::vector<io::NpmiRow> rows;
  for (uint64_t i = 0; i < 16; ++i) {
    std::string k = {"ACGT"[i / 4], "ACGT"[i % 4]};
    rows.push_back(io::NpmiRow{i + 1, k, i * 7, 0.1 / static_cast<double>(i + 1), std::nan(""), i > 13});
  }
  io::write_npmi_tsv(tmp.file("n.tsv"), rows);
  auto back = io::read_npmi_tsv(tmp.file("n.tsv"));
  ASSERT_EQ(back.size(), rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(back[i].kmer, rows[i].kmer);
    EXPECT_EQ(back[i].pmi, rows[i].pmi);  // shortest round-trip text is exact
    EXPECT_TRUE(std::isnan(back[i].npmi));
    EXPECT_EQ(back[i].below_min_count, rows[i].below_min_count);
  }
}

TEST(NpmiTsv, BadFilesGiveLineAndValue) {
  TempDir tmp;
  test::write_file(tmp.file("h.tsv"), "rank\tkmer\n");
  EXPECT_NE(error_of([&] { io::read_npmi_tsv(tmp.file("h.tsv")); }).find(":1: unexpected header"), std::string::npos);
  test::write_file(tmp.file("v.tsv"), "rank\tkmer\tcount\tpmi\tnpmi\tbelow_min_count\n1\tAC\t5\t0.1\tx\t0\n");
  EXPECT_EQ(error_of([&] { io::read_npmi_tsv(tmp.file("v.tsv")); }), tmp.file("v.tsv") + ":2: column npmi: not a number: 'x'");
  test::write_file(tmp.file("k.tsv"), "rank\tkmer\tcount\tpmi\tnpmi\tbelow_min_count\n1\tANC\t5\t0.1\t0.1\t0\n");
  EXPECT_EQ(error_of([&] { io::read_npmi_tsv(tmp.file("k.tsv")); }),
            tmp.file("k.tsv") + ":2: column kmer: 'ANC' is not an upper-case ACGT k-mer");
}

TEST(CountsFile, RoundTripAndFormatChecks) {
  TempDir tmp;
  std::vector<std::vector<uint64_t>> counts(3);
  counts[1] = {1, 2, 3, 4};
  counts[2].assign(16, 0);
  counts[2][5] = 99;
  io::CountsMeta meta;
  meta.command_line = "genemask count";
  meta.record_names = {"chr1", "chr2"};
  meta.record_lengths = {10, 20};
  io::write_counts_file(tmp.file("c.h5"), 2, counts, {}, meta);
  auto cf = io::read_counts_file(tmp.file("c.h5"));
  EXPECT_EQ(cf.kmax, 2);
  EXPECT_EQ(cf.counts[1], counts[1]);
  EXPECT_EQ(cf.counts[2], counts[2]);
  EXPECT_EQ(cf.totals[1], 10u);
  EXPECT_EQ(cf.totals[2], 99u);
  EXPECT_EQ(cf.meta.record_names, meta.record_names);
  EXPECT_FALSE(cf.has_presence15);
  EXPECT_NE(error_of([&] { io::read_counts_file(tmp.file("c.h5"), 6); }).find("has k-mer counts up to k=2, but k=6 is needed"),
            std::string::npos);
  EXPECT_NE(error_of([&] { io::read_counts_file(tmp.file("c.h5"), 0, true); }).find("no 15-mer presence set"),
            std::string::npos);
  test::write_file(tmp.file("not.h5"), "hello");
  EXPECT_NE(error_of([&] { io::read_counts_file(tmp.file("not.h5")); }).find("cannot open as an HDF5 file"),
            std::string::npos);
}
