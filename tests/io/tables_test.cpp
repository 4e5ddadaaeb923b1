#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cmath>
#include <functional>
#include <tuple>

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
  // In rank order: NPMI descending, the last three below the minimum count, the last of all
  // never seen (count 0, NaN).
  for (uint64_t i = 0; i < 16; ++i) {
    std::string k = {"ACGT"[i / 4], "ACGT"[i % 4]};
    rows.push_back(io::NpmiRow{i + 1, k, i == 15 ? 0 : (16 - i) * 7, i == 15 ? std::nan("") : 0.1 / static_cast<double>(i + 1),
                               i == 15 ? std::nan("") : 0.5 / static_cast<double>(i + 1), i > 12});
  }
  io::write_npmi_tsv(tmp.file("n.tsv"), rows);
  auto back = io::read_npmi_tsv(tmp.file("n.tsv"));
  ASSERT_EQ(back.size(), rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(back[i].kmer, rows[i].kmer);
    EXPECT_EQ(std::isnan(back[i].npmi), i == 15);
    if (i < 15) EXPECT_EQ(back[i].pmi, rows[i].pmi);  // shortest round-trip text is exact
    if (i < 15) EXPECT_EQ(back[i].npmi, rows[i].npmi);
    EXPECT_EQ(back[i].below_min_count, rows[i].below_min_count);
  }
}

// A table re-saved by a spreadsheet with a byte-order mark reads as written.
TEST(NpmiTsv, AByteOrderMarkBeforeTheHeaderIsSkipped) {
  TempDir tmp;
  std::vector<io::NpmiRow> rows;
  for (uint64_t i = 0; i < 16; ++i)
    rows.push_back(io::NpmiRow{i + 1, {"ACGT"[i / 4], "ACGT"[i % 4]}, 100 - i, 0.1, 1.0 - 0.05 * static_cast<double>(i), false});
  io::write_npmi_tsv(tmp.file("n.tsv"), rows);
  test::write_file(tmp.file("b.tsv"), "\xEF\xBB\xBF" + test::read_file(tmp.file("n.tsv")));
  const auto back = io::read_npmi_tsv(tmp.file("b.tsv"));
  ASSERT_EQ(back.size(), 16u);
  EXPECT_EQ(back[0].kmer, "AA");
  test::write_file(tmp.file("v.tsv"), "\xEF\xBB\xBFrank\tkmer\tk\tcount\tpmi\n1\tAC\t2\t9\t1.5\n# end: 1 rows\n");
  EXPECT_EQ(io::read_pmi_vocab_tsv(tmp.file("v.tsv")).size(), 1u);
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
  auto table = [&](const std::string& last_kmer, const std::string& npmi_last, const std::string& count_last) {
    std::string s = header;
    const char* kmers[] = {"AA", "AC", "AG", "AT", "CA", "CC", "CG", "CT",
                           "GA", "GC", "GG", "GT", "TA", "TC", "TG", "TT"};
    for (int i = 0; i < 16; ++i) {
      const std::string k = i == 15 ? last_kmer : kmers[i];
      s += fmt::format("{}\t{}\t{}\t0.1\t{}\t0\n", i + 1, k, i == 15 ? count_last : "5", i == 15 ? npmi_last : "0.2");
    }
    return s;
  };
  test::write_file(tmp.file("ok.tsv"), table("TT", "nan", "0"));
  EXPECT_EQ(io::read_npmi_tsv(tmp.file("ok.tsv")).size(), 16u);
  test::write_file(tmp.file("dup.tsv"), table("AA", "0.2", "5"));
  EXPECT_EQ(error_of([&] { io::read_npmi_tsv(tmp.file("dup.tsv")); }),
            tmp.file("dup.tsv") + ":17: k-mer AA is listed twice (first at line 2): a ranking lists each k-mer once");
  test::write_file(tmp.file("nan.tsv"), table("TT", "nan", "5"));
  EXPECT_NE(error_of([&] { io::read_npmi_tsv(tmp.file("nan.tsv")); }).find(":17: pmi/npmi is NaN for k-mer TT with count 5"),
            std::string::npos);
}

// A ranking in another order (TATAAA moved to rank 1 and renumbered: `motifs` printed it at
// rank 1), with an infinite value, or with below_min_count flags that no one minimum gives,
// was accepted: GeneMask and `motifs` then used ranks that are not GRANK's.
TEST(NpmiTsv, RowsOutOfRankOrderAreRefused) {
  TempDir tmp;
  const std::string header = "rank\tkmer\tcount\tpmi\tnpmi\tbelow_min_count\n";
  // kmer, count, npmi, below: in rank order.
  std::vector<std::tuple<std::string, std::string, std::string, std::string>> rows = {
      {"GA", "9", "0.5", "0"}, {"AC", "9", "0.25", "0"}, {"CA", "9", "0.25", "0"}, {"TT", "8", "-0.5", "0"},
      {"AA", "2", "0.75", "1"}, {"AG", "1", "0", "1"},   {"AT", "0", "nan", "1"},  {"CC", "0", "nan", "1"}};
  const char* rest[] = {"CG", "CT", "GC", "GG", "GT", "TA", "TC", "TG"};
  for (const char* k : rest) rows.emplace_back(k, "0", "nan", "1");
  auto write = [&](const std::string& name, const decltype(rows)& r) {
    std::string s = header;
    for (size_t i = 0; i < r.size(); ++i)
      s += fmt::format("{}\t{}\t{}\t{}\t{}\t{}\n", i + 1, std::get<0>(r[i]), std::get<1>(r[i]),
                       std::get<2>(r[i]) == "nan" ? "nan" : "0.1", std::get<2>(r[i]), std::get<3>(r[i]));
    test::write_file(tmp.file(name), s);
    return tmp.file(name);
  };
  EXPECT_EQ(io::read_npmi_tsv(write("ok.tsv", rows)).size(), 16u);
  auto moved = rows;
  std::swap(moved[0], moved[3]);  // TT (-0.5) to rank 1
  EXPECT_EQ(error_of([&] { io::read_npmi_tsv(write("moved.tsv", moved)); }),
            tmp.file("moved.tsv") + ":3: k-mer AC (npmi 0.25, below_min_count 0) is ranked after TT (npmi -0.5, "
                                    "below_min_count 0): the rows are not in rank order (k-mers below the minimum count "
                                    "last, then NPMI descending, nan last, ties by k-mer); use the table `genemask npmi` "
                                    "wrote");
  auto ties = rows;
  std::swap(ties[1], ties[2]);  // equal NPMI: CA before AC
  EXPECT_NE(error_of([&] { io::read_npmi_tsv(write("ties.tsv", ties)); }).find(":4: k-mer AC (npmi 0.25"),
            std::string::npos);
  auto below = rows;
  std::swap(below[3], below[4]);  // a k-mer below the minimum before one above it
  EXPECT_NE(error_of([&] { io::read_npmi_tsv(write("below.tsv", below)); }).find(":6: k-mer TT (npmi -0.5, "
                                                                                  "below_min_count 0) is ranked after AA"),
            std::string::npos);
  auto inf = rows;
  std::get<2>(inf[0]) = "inf";
  EXPECT_EQ(error_of([&] { io::read_npmi_tsv(write("inf.tsv", inf)); }),
            tmp.file("inf.tsv") + ":2: pmi/npmi is infinite for k-mer GA: a k-mer seen has a finite PMI, one never "
                                  "seen has nan");
  auto flags = rows;
  std::get<1>(flags[4]) = "8";  // AA below the minimum at count 8, TT above it at 8
  EXPECT_EQ(error_of([&] { io::read_npmi_tsv(write("flags.tsv", flags)); }),
            tmp.file("flags.tsv") + ": k-mer AA (count 8) is marked below_min_count, but TT (count 8) is not: the flag "
                                    "must split the counts at one minimum; use the table `genemask npmi` wrote");
}

TEST(PmiVocabTsv, OnlyWhatPmiVocabWritesIsRead) {
  TempDir tmp;
  const std::string header = "rank\tkmer\tk\tcount\tpmi\n";
  auto write = [&](const std::string& name, const std::string& body) {
    test::write_file(tmp.file(name), header + body);
    return tmp.file(name);
  };
  EXPECT_EQ(io::read_pmi_vocab_tsv(
                write("ok.tsv", "1\tACG\t3\t9\t2.5\n2\tAC\t2\t9\t1.5\n3\tGT\t2\t9\t1.5\n4\tAAC\t3\t9\t1.5\n# end: 4 rows\n"))
                .size(),
            4u);
  EXPECT_EQ(error_of([&] { io::read_pmi_vocab_tsv(write("one.tsv", "1\tA\t1\t9\t2.5\n")); }),
            tmp.file("one.tsv") + ":2: k-mer A has 1 bases: the vocabulary holds 2- to 10-mers");
  EXPECT_EQ(error_of([&] { io::read_pmi_vocab_tsv(write("dup.tsv", "1\tAC\t2\t9\t2.5\n2\tAC\t2\t9\t1.5\n")); }),
            tmp.file("dup.tsv") + ":3: k-mer AC is listed twice (first at line 2)");
  EXPECT_EQ(error_of([&] { io::read_pmi_vocab_tsv(write("nan.tsv", "1\tAC\t2\t9\tnan\n")); }),
            tmp.file("nan.tsv") + ":2: k-mer AC has count 9 and pmi nan: a vocabulary k-mer is seen and has a finite PMI");
  EXPECT_EQ(error_of([&] { io::read_pmi_vocab_tsv(write("order.tsv", "1\tAC\t2\t9\t1.5\n2\tACG\t3\t9\t2.5\n")); }),
            tmp.file("order.tsv") + ":3: k-mer ACG (pmi 2.5) is ranked after AC (pmi 1.5): the rows are not in rank "
                                    "order (PMI descending, ties by k, then k-mer); use the table `genemask pmi-vocab` "
                                    "wrote");
  EXPECT_NE(error_of([&] { io::read_pmi_vocab_tsv(write("k.tsv", "1\tAAC\t3\t9\t1.5\n2\tAC\t2\t9\t1.5\n")); })
                .find(":3: k-mer AC (pmi 1.5) is ranked after AAC"),
            std::string::npos);
}

// Regression: a pmi_vocab.tsv cut mid-line (half the rows, the last PMI cut to fewer digits)
// trained a run with half its masking vocabulary, silently. genemask ends every line it
// writes: a last line without its end is refused, for the NPMI ranking too.
TEST(RankTables, ATableCutShortIsRefused) {
  TempDir tmp;
  const std::string table = "rank\tkmer\tk\tcount\tpmi\n1\tACG\t3\t9\t2.5\n2\tAC\t2\t9\t1.5\n";
  const std::string whole = table + "# end: 2 rows\n";
  for (const size_t cut : {table.size() - 1, table.size() - 3, table.size() - 12}) {
    test::write_file(tmp.file("cut.tsv"), whole.substr(0, cut));
    const std::string e = error_of([&] { io::read_pmi_vocab_tsv(tmp.file("cut.tsv")); });
    EXPECT_NE(e.find(":3: the last line has no line end: the file was cut short"), std::string::npos) << cut << e;
  }
  test::write_file(tmp.file("whole.tsv"), whole);
  EXPECT_EQ(io::read_pmi_vocab_tsv(tmp.file("whole.tsv")).size(), 2u);
  // Cut at a line end, every line left whole: a shorter vocabulary, read as one before.
  for (const size_t keep : {table.size(), table.size() - 13}) {
    test::write_file(tmp.file("cut.tsv"), whole.substr(0, keep));
    EXPECT_EQ(error_of([&] { io::read_pmi_vocab_tsv(tmp.file("cut.tsv")); }),
              fmt::format("{}: ends after {} rows without its last line '# end: N rows': the file was cut short at a "
                          "line end (genemask writes that line last), or it was written before pmi_vocab.tsv had it; "
                          "use the whole file, or write it again with `genemask pmi-vocab`",
                          tmp.file("cut.tsv"), keep == table.size() ? 2 : 1));
  }
  test::write_file(tmp.file("cut.tsv"), whole.substr(0, whole.size() - 1));  // the end line's own end cut off
  EXPECT_NE(error_of([&] { io::read_pmi_vocab_tsv(tmp.file("cut.tsv")); }).find(":4: the last line has no line end"),
            std::string::npos);
  // The end line counts the rows above it; nothing comes after it.
  test::write_file(tmp.file("count.tsv"), table + "# end: 3 rows\n");
  EXPECT_EQ(error_of([&] { io::read_pmi_vocab_tsv(tmp.file("count.tsv")); }),
            tmp.file("count.tsv") + ":4: '# end: 3 rows' after 2 rows: the table ends with the line '# end: 2 rows' "
                                    "(the number of rows above it); use the table `genemask pmi-vocab` wrote");
  test::write_file(tmp.file("after.tsv"), whole + "3\tGT\t2\t9\t1.5\n");
  EXPECT_EQ(error_of([&] { io::read_pmi_vocab_tsv(tmp.file("after.tsv")); }),
            tmp.file("after.tsv") + ":5: a line after the table's end line (line 4): the table ends with it; use the "
                                    "table `genemask pmi-vocab` wrote");
  // What the writer writes reads back, the empty vocabulary too.
  const std::vector<io::PmiVocabRow> vocab{{1, "ACG", 9, 2.5}, {2, "AC", 9, 1.5}};
  io::write_pmi_vocab_tsv(tmp.file("w.tsv"), vocab);
  EXPECT_EQ(test::read_file(tmp.file("w.tsv")), whole);
  io::write_pmi_vocab_tsv(tmp.file("w0.tsv"), {});
  EXPECT_TRUE(io::read_pmi_vocab_tsv(tmp.file("w0.tsv")).empty());
  std::vector<io::NpmiRow> rows;
  for (uint64_t i = 0; i < 16; ++i)
    rows.push_back(io::NpmiRow{i + 1, {"ACGT"[i / 4], "ACGT"[i % 4]}, (16 - i) * 7, 0.1 / static_cast<double>(i + 1),
                               0.5 / static_cast<double>(i + 1), false});
  io::write_npmi_tsv(tmp.file("n.tsv"), rows);
  EXPECT_EQ(io::read_npmi_tsv(tmp.file("n.tsv")).size(), 16u);
  const std::string text = test::read_file(tmp.file("n.tsv"));
  test::write_file(tmp.file("n-cut.tsv"), text.substr(0, text.size() - 1));
  EXPECT_NE(error_of([&] { io::read_npmi_tsv(tmp.file("n-cut.tsv")); }).find("the last line has no line end"),
            std::string::npos);
}

TEST(CountsFile, RoundTripAndFormatChecks) {
  TempDir tmp;
  std::vector<std::vector<uint64_t>> counts(3);
  counts[1] = {1, 2, 3, 4};
  counts[2].assign(16, 0);
  counts[2][5] = 2;  // CC twice: no more than C occurs
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
  EXPECT_EQ(cf.totals[2], 2u);
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

// Counts that keep each table's total but no longer agree with the shorter k-mers' counts (a
// hand edit, or tables mixed from two genomes) are refused, naming the (k-1)-mer; the counts
// of a real sequence, counted here by brute force, are read.
TEST(CountsFile, CountsThatDisagreeWithTheShorterKmersAreRefused) {
  TempDir tmp;
  const std::string seq = "ACGTTGCAAGGCTTACGATCGATCCGGTAAT";  // one record, A/C/G/T only
  std::vector<std::vector<uint64_t>> counts(4);
  for (int k = 1; k <= 3; ++k) {
    counts[static_cast<size_t>(k)].assign(uint64_t{1} << (2 * k), 0);
    for (size_t i = 0; i + static_cast<size_t>(k) <= seq.size(); ++i) {
      uint64_t code = 0;
      for (int j = 0; j < k; ++j) code = code * 4 + static_cast<uint64_t>(std::string("ACGT").find(seq[i + j]));
      ++counts[static_cast<size_t>(k)][code];
    }
  }
  io::CountsMeta meta;
  meta.acgt_bases = seq.size();
  io::write_counts_file(tmp.file("real.h5"), 3, counts, {}, meta);
  EXPECT_EQ(io::read_counts_file(tmp.file("real.h5")).counts[3], counts[3]);
  // One ACG moved to TTT: both tables keep their totals; TT occurs twice (GTTG, CTTA), so
  // three 3-mers cannot begin with TT.
  auto edited = counts;
  ASSERT_EQ(edited[3][0 * 16 + 1 * 4 + 2], 2u);  // ACG twice
  ASSERT_EQ(edited[2][3 * 4 + 3], 2u);           // TT twice
  ASSERT_EQ(edited[3][63], 0u);                  // TTT never
  --edited[3][0 * 16 + 1 * 4 + 2];
  ++edited[3][63];
  io::write_counts_file(tmp.file("edited.h5"), 3, edited, {}, meta);
  EXPECT_EQ(error_of([&] { io::read_counts_file(tmp.file("edited.h5")); }),
            tmp.file("edited.h5") + ": /counts/k3: the 3-mers that begin with TT number 3, more than the 2 times TT "
                                    "occurs (its 2-mer count): the counts are not of one genome; the file is damaged "
                                    "or was edited");
  // Only the tables asked for are checked against each other.
  EXPECT_EQ(io::read_counts_file(tmp.file("edited.h5"), 2).counts[2], counts[2]);
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
