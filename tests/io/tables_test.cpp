#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cmath>
#include <functional>

#include "io/counts_file.hpp"
#include "io/error.hpp"
#include "io/h5.hpp"
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
    // NaN NPMI: a k-mer never seen (count 0).
    rows.push_back(io::NpmiRow{i + 1, k, i * 7, 0.1 / static_cast<double>(i + 1),
                               i == 0 ? std::nan("") : 0.5 / static_cast<double>(i), i > 13});
  }
  io::write_npmi_tsv(tmp.file("n.tsv"), rows);
  auto back = io::read_npmi_tsv(tmp.file("n.tsv"));
  ASSERT_EQ(back.size(), rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(back[i].kmer, rows[i].kmer);
    EXPECT_EQ(back[i].pmi, rows[i].pmi);  // shortest round-trip text is exact
    EXPECT_EQ(std::isnan(back[i].npmi), i == 0);
    if (i > 0) EXPECT_EQ(back[i].npmi, rows[i].npmi);
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

// A ranking lists each k-mer once, and NaN only for k-mers never seen (mask-stats crashed
// on a file that listed one k-mer twice).
TEST(NpmiTsv, DuplicatesAndNanAreRefused) {
  TempDir tmp;
  const std::string header = "rank\tkmer\tcount\tpmi\tnpmi\tbelow_min_count\n";
  auto table = [&](const std::string& second_kmer, const std::string& npmi2, const std::string& count2) {
    std::string s = header;
    const char* kmers[] = {"AA", "AC", "AG", "AT", "CA", "CC", "CG", "CT",
                           "GA", "GC", "GG", "GT", "TA", "TC", "TG", "TT"};
    for (int i = 0; i < 16; ++i) {
      const std::string k = i == 4 ? second_kmer : kmers[i];
      s += fmt::format("{}\t{}\t{}\t0.1\t{}\t0\n", i + 1, k, i == 4 ? count2 : "5", i == 4 ? npmi2 : "0.2");
    }
    return s;
  };
  test::write_file(tmp.file("ok.tsv"), table("CA", "nan", "0"));
  EXPECT_EQ(io::read_npmi_tsv(tmp.file("ok.tsv")).size(), 16u);
  test::write_file(tmp.file("dup.tsv"), table("AA", "0.2", "5"));
  EXPECT_EQ(error_of([&] { io::read_npmi_tsv(tmp.file("dup.tsv")); }),
            tmp.file("dup.tsv") + ":6: k-mer AA is listed twice (first at line 2): a ranking lists each k-mer once");
  test::write_file(tmp.file("nan.tsv"), table("CA", "nan", "5"));
  EXPECT_NE(error_of([&] { io::read_npmi_tsv(tmp.file("nan.tsv")); }).find(":6: pmi/npmi is NaN for k-mer CA with count 5"),
            std::string::npos);
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
  meta.acgt_bases = 100;
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

// Regression: counts of 2^63 overflowed the totals (pmi -218 followed); a missing /counts/k3
// said "HDF5: open dataset /counts/k3 failed" without naming the file.
TEST(CountsFile, DamagedCountsAreRefused) {
  TempDir tmp;
  std::vector<std::vector<uint64_t>> counts(3);
  counts[1] = {uint64_t{1} << 63, uint64_t{1} << 63, 0, 1};  // the writer's total wraps to 1
  counts[2].assign(16, 0);
  io::CountsMeta meta;
  meta.acgt_bases = 100;
  io::write_counts_file(tmp.file("big.h5"), 2, counts, {}, meta);
  EXPECT_EQ(error_of([&] { io::read_counts_file(tmp.file("big.h5")); }),
            tmp.file("big.h5") + ": /counts/k1: the counts overflow 64 bits at entry 1 (count 9223372036854775808): the "
                                 "file is damaged");
  counts[1] = {40, 30, 20, 20};  // 110 k-mers in 100 bases
  io::write_counts_file(tmp.file("more.h5"), 2, counts, {}, meta);
  EXPECT_EQ(error_of([&] { io::read_counts_file(tmp.file("more.h5")); }),
            tmp.file("more.h5") + ": /counts/k1 counts 110 k-mers in 100 A/C/G/T bases (attribute acgt_bases): the file "
                                  "is damaged");
  // A count changed after writing no longer adds up to the recorded total.
  counts[1] = {40, 30, 20, 10};
  io::write_counts_file(tmp.file("c.h5"), 2, counts, {}, meta);
  {
    io::h5::quiet_errors();
    hid_t f = H5Fopen(tmp.file("c.h5").c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    ASSERT_GE(f, 0);
    hid_t ds = H5Dopen2(f, "/counts/k1", H5P_DEFAULT);
    const uint64_t changed[4] = {40, 30, 20, 11};
    ASSERT_GE(H5Dwrite(ds, H5T_NATIVE_UINT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, changed), 0);
    H5Dclose(ds);
    ASSERT_GE(H5Ldelete(f, "/counts/k2", H5P_DEFAULT), 0);
    H5Fclose(f);
  }
  EXPECT_EQ(error_of([&] { io::read_counts_file(tmp.file("c.h5"), 1); }),
            tmp.file("c.h5") + ": /counts/k1 sums to 101, but attribute totals says 100: the file is damaged");
  {
    hid_t f = H5Fopen(tmp.file("c.h5").c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    hid_t ds = H5Dopen2(f, "/counts/k1", H5P_DEFAULT);
    const uint64_t back[4] = {40, 30, 20, 10};
    ASSERT_GE(H5Dwrite(ds, H5T_NATIVE_UINT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, back), 0);
    H5Dclose(ds);
    H5Fclose(f);
  }
  EXPECT_EQ(error_of([&] { io::read_counts_file(tmp.file("c.h5")); }),
            tmp.file("c.h5") + ": has no dataset /counts/k2: is it the file you meant, written by this version of "
                               "genemask?");
}
