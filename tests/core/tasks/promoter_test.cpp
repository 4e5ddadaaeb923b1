// `dataset promoter`: windows checked against sequences worked out by hand from a genome
// written here, DeePromoter negatives checked part by part, and the input errors.
#include "genemask/tasks/promoter.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>

#include "test_util.hpp"

using namespace genemask;
using dataset::TssWindow;

namespace {

// 0-based:  0         10        20        30        40        50
const std::string kChr1 = "ACGTTGCAAC" "GGATCCTTAG" "CATGCATGCA" "TTTAAACCCG" "GGGTTTAAAC" "CCAGTGACTG";
// An N at 30.
const std::string kChr2 = "ACGTACGTAC" "GTACGTACGT" "ACGTACGTAC" "NACGTACGTA" "CGTACGTACG" "TACGTACGTA";

std::string fasta(int width) {
  std::string s;
  for (auto [n, seq] : {std::pair<std::string, std::string>{"chr1", kChr1}, {"chr2", kChr2}}) {
    s += ">" + n + " test record\n";
    for (size_t i = 0; i < seq.size(); i += static_cast<size_t>(width)) s += seq.substr(i, static_cast<size_t>(width)) + "\n";
  }
  return s;
}

std::map<std::string, std::string> positives(const std::vector<dataset::Example>& ex) {
  std::map<std::string, std::string> m;  // name -> window
  for (const auto& e : ex)
    if (e.label == "1") m[e.id.substr(e.id.find('|') + 1)] = e.sequence;
  return m;
}

}  // namespace

TEST(Promoter, WindowParsing) {
  auto w = dataset::parse_tss_window("-34:35");
  EXPECT_EQ(w.first, -34);
  EXPECT_EQ(w.last, 35);
  EXPECT_EQ(w.length(), 70u);
  EXPECT_EQ(dataset::parse_tss_window("prom-300").length(), 300u);
  EXPECT_EQ(dataset::parse_tss_window("prom-300").first, -249);
  EXPECT_EQ(dataset::parse_tss_window("prom-core").length(), 70u);
  EXPECT_EQ(dataset::parse_tss_window("-10:+9").length(), 20u);
  EXPECT_THROW(dataset::parse_tss_window("35:-34"), std::invalid_argument);
  EXPECT_THROW(dataset::parse_tss_window("-34"), std::invalid_argument);
  EXPECT_THROW(dataset::parse_tss_window("a:b"), std::invalid_argument);
}

TEST(Promoter, WindowsByHandPlusMinusEdgesAndN) {
  test::TempDir d;
  test::write_file(d.file("g.fa"), fasta(7));
  test::write_file(d.file("t.bed"),
                   "track name=test\n"
                   "chr1\t25\t26\tPLUS\t900\t+\n"      // window 15..34
                   "chr1\t40\t41\tMINUS\t900\t-\n"     // window 31..50, reverse complemented
                   "chr1\t55\t56\tEND\t900\t+\n"       // runs off the end: dropped
                   "chr1\t5\t6\tSTART\t900\t+\n"       // runs off the start: dropped
                   "chr2\t25\t26\tWITHN\t900\t+\n"     // holds the N at 30: dropped
                   "chr2\t45\t46\tCLEAN\t900\t-\n");   // chr2 36..55, reverse complemented
  dataset::PromoterOptions o;
  o.genome = d.file("g.fa");
  o.tss = d.file("t.bed");
  o.window = TssWindow{-10, 9};
  dataset::DatasetStats st;
  auto ex = dataset::build_promoter(o, st);
  auto pos = positives(ex);
  ASSERT_EQ(pos.size(), 3u);
  EXPECT_EQ(pos["PLUS"], "CTTAGCATGCATGCATTTAA");
  EXPECT_EQ(pos["MINUS"], "GGTTTAAACCCCGGGTTTAA");
  // chr2 36..55 = "CGTACGTACGTACGTACGTA" -> reverse complement by hand:
  EXPECT_EQ(pos["CLEAN"], "TACGTACGTACGTACGTACG");
  EXPECT_EQ(st.dropped["off_chromosome"], 2u);
  EXPECT_EQ(st.dropped["contains_n"], 1u);
  // Each positive is followed by its negative, with an id that says so.
  ASSERT_EQ(ex.size(), 6u);
  for (size_t i = 0; i < ex.size(); i += 2) {
    EXPECT_EQ(ex[i].label, "1");
    EXPECT_EQ(ex[i + 1].label, "0");
    EXPECT_EQ(ex[i + 1].id, ex[i].id + "|negative");
    EXPECT_EQ(ex[i + 1].sequence.size(), 20u);
  }
  EXPECT_EQ(ex[0].id, "chr1:25(+)|PLUS");
}

TEST(Promoter, SgaAndBedGiveTheSameWindows) {
  test::TempDir d;
  test::write_file(d.file("g.fa"), fasta(60));
  // BED 1-bp sites; EPDnew-style 60 bp BED with a thick part (TSS-49..TSS+10, thick TSS..TSS+10);
  // SGA with 1-based positions and RefSeq-free names. All name the same TSSs.
  test::write_file(d.file("a.bed"), "chr1\t25\t26\tP\t900\t+\nchr1\t40\t41\tM\t900\t-\n");
  test::write_file(d.file("b.sga"), "chr1\tTSS\t26\t+\t1\tP\nchr1\tTSS\t41\t-\t1\tM\n");
  test::write_file(d.file("c.bed"), "chr1\t0\t36\tP\t900\t+\t25\t36\nchr1\t30\t90\tM\t900\t-\t30\t41\n");
  test::write_file(d.file("e.bed"), "1\t15\t35\tP\t900\t+\n1\t31\t51\tM\t900\t-\n");  // 5' end + 10, chr prefix added
  std::vector<std::map<std::string, std::string>> got;
  for (const char* f : {"a.bed", "b.sga", "c.bed", "e.bed"}) {
    dataset::PromoterOptions o;
    o.genome = d.file("g.fa");
    o.tss = d.file(f);
    o.window = TssWindow{-10, 9};
    o.bed_tss_offset = std::string(f) == "e.bed" ? 10 : 0;
    dataset::DatasetStats st;
    got.push_back(positives(dataset::build_promoter(o, st)));
  }
  EXPECT_EQ(got[0]["P"], "CTTAGCATGCATGCATTTAA");
  EXPECT_EQ(got[0]["M"], "GGTTTAAACCCCGGGTTTAA");
  for (size_t i = 1; i < got.size(); ++i) EXPECT_EQ(got[i], got[0]) << i;
}

TEST(Promoter, InputErrorsNameFileLineAndValue) {
  test::TempDir d;
  test::write_file(d.file("g.fa"), fasta(60));
  dataset::PromoterOptions o;
  o.genome = d.file("g.fa");
  o.window = TssWindow{-10, 9};
  dataset::DatasetStats st;
  o.tss = d.file("beyond.bed");
  test::write_file(o.tss, "chr1\t25\t26\tP\t900\t+\nchr1\t60\t61\tX\t900\t+\n");
  std::string m = test::error_of([&] { dataset::build_promoter(o, st); });
  EXPECT_NE(m.find("beyond.bed:2:"), std::string::npos) << m;
  EXPECT_NE(m.find("beyond the end of 'chr1' (60 bp)"), std::string::npos) << m;
  o.tss = d.file("unknown.bed");
  test::write_file(o.tss, "chr1\t25\t26\tP\t900\t+\nchrZ\t10\t11\tX\t900\t+\n");
  m = test::error_of([&] { dataset::build_promoter(o, st); });
  EXPECT_NE(m.find("unknown.bed:2:"), std::string::npos) << m;
  EXPECT_NE(m.find("'chrZ'"), std::string::npos) << m;
  EXPECT_NE(m.find("chr1, chr2"), std::string::npos) << m;
  o.tss = d.file("strand.bed");
  test::write_file(o.tss, "chr1\t25\t26\tP\t900\t.\n");
  m = test::error_of([&] { dataset::build_promoter(o, st); });
  EXPECT_NE(m.find("strand.bed:1:"), std::string::npos) << m;
  EXPECT_NE(m.find("'.'"), std::string::npos) << m;
}

TEST(Promoter, DeePromoterPartsByHand) {
  auto p = dataset::deepromoter_parts(70);
  ASSERT_EQ(p.size(), 20u);
  const size_t starts[] = {0, 3, 7, 10, 14, 17, 21, 24, 28, 31, 35, 38, 42, 45, 49, 52, 56, 59, 63, 66};
  for (size_t i = 0; i < 20; ++i) {
    EXPECT_EQ(p[i].first, starts[i]);
    EXPECT_EQ(p[i].second, i + 1 < 20 ? starts[i + 1] : 70u);
  }
  auto q = dataset::deepromoter_parts(300);
  for (size_t i = 0; i < 20; ++i) EXPECT_EQ(q[i].second - q[i].first, 15u);
}

TEST(Promoter, DeePromoterNegatives) {
  std::mt19937_64 rng(11);
  const size_t trials = 2000;
  std::vector<int> kept_count(20, 0);
  uint64_t replaced_bases = 0, replaced_same = 0;
  for (size_t t = 0; t < trials; ++t) {
    std::string pos;
    for (int i = 0; i < 70; ++i) pos.push_back("ACGT"[rng() % 4]);
    auto parts = dataset::deepromoter_parts(70);
    for (bool shuffle : {false, true}) {
      auto n = dataset::deepromoter_negative(pos, 5, shuffle);
      ASSERT_EQ(n.sequence.size(), 70u);
      ASSERT_EQ(n.kept.size(), 8u);
      for (size_t i = 1; i < n.kept.size(); ++i) ASSERT_LT(n.kept[i - 1], n.kept[i]);
      for (size_t i = 0; i < 20; ++i) {
        auto [b, e] = parts[i];
        const std::string a = pos.substr(b, e - b), z = n.sequence.substr(b, e - b);
        const bool kept = std::find(n.kept.begin(), n.kept.end(), static_cast<int>(i)) != n.kept.end();
        if (kept) {
          ASSERT_EQ(a, z);
          if (!shuffle) ++kept_count[i];
        } else if (shuffle) {
          std::string sa = a, sz = z;
          std::sort(sa.begin(), sa.end());
          std::sort(sz.begin(), sz.end());
          ASSERT_EQ(sa, sz) << "shuffle changed the composition of part " << i;
        } else {
          for (size_t j = 0; j < a.size(); ++j) replaced_same += a[j] == z[j];
          replaced_bases += a.size();
        }
      }
      // Deterministic: a pure function of (seed, positive).
      EXPECT_EQ(dataset::deepromoter_negative(pos, 5, shuffle).sequence, n.sequence);
    }
    if (t < 50) EXPECT_NE(dataset::deepromoter_negative(pos, 6, false).sequence, dataset::deepromoter_negative(pos, 5, false).sequence);
  }
  // Random replacement: a base equals the original with probability 1/4.
  const double f = static_cast<double>(replaced_same) / static_cast<double>(replaced_bases);
  EXPECT_NEAR(f, 0.25, 5 * std::sqrt(0.25 * 0.75 / static_cast<double>(replaced_bases)));
  // Each part is kept with probability 8/20 (binomial, 5 sd).
  for (int c : kept_count) EXPECT_NEAR(c, 0.4 * trials, 5 * std::sqrt(0.24 * trials));
}

TEST(Promoter, TataBoxRuleAndFilters) {
  // 100 bp of C; TATAAAAG placed so that it starts at -28 of a '+' TSS at 50 (bases 22..29),
  // and its reverse complement CTTTTATA so that it starts at -28 of a '-' TSS at 50
  // (on '-', offset k is base 50-k: the motif occupies 71..78 as CTTTTATA).
  std::string plus(100, 'C'), minus(100, 'C'), far(100, 'C');
  plus.replace(22, 8, "TATAAAAG");
  minus.replace(71, 8, "CTTTTATA");
  far.replace(14, 8, "TATAAAAG");  // starts at -36: outside -31..-25
  EXPECT_TRUE(dataset::has_tata_box(plus, 50, '+'));
  EXPECT_FALSE(dataset::has_tata_box(plus, 50, '-'));
  EXPECT_TRUE(dataset::has_tata_box(minus, 50, '-'));
  EXPECT_FALSE(dataset::has_tata_box(minus, 50, '+'));
  EXPECT_FALSE(dataset::has_tata_box(far, 50, '+'));
  EXPECT_TRUE(dataset::has_tata_box(plus, 53, '+'));   // starts at -31
  EXPECT_FALSE(dataset::has_tata_box(plus, 54, '+'));  // starts at -32
  EXPECT_TRUE(dataset::has_tata_box(plus, 47, '+'));   // starts at -25
  EXPECT_FALSE(dataset::has_tata_box(plus, 46, '+'));  // starts at -24

  test::TempDir d;
  test::write_file(d.file("g.fa"), ">p\n" + plus + "\n>m\n" + minus + "\n");
  test::write_file(d.file("t.bed"), "p\t50\t51\tTP\t900\t+\nm\t50\t51\tTM\t900\t-\np\t80\t81\tNT\t900\t+\n");
  dataset::PromoterOptions o;
  o.genome = d.file("g.fa");
  o.tss = d.file("t.bed");
  o.window = TssWindow{-10, 9};
  o.tata = dataset::PromoterOptions::Tata::tata_only;
  dataset::DatasetStats st;
  auto a = positives(dataset::build_promoter(o, st));
  EXPECT_EQ(a.size(), 2u);
  EXPECT_TRUE(a.count("TP") && a.count("TM"));
  EXPECT_EQ(st.dropped["not_tata"], 1u);
  o.tata = dataset::PromoterOptions::Tata::non_tata_only;
  dataset::DatasetStats st2;
  auto b = positives(dataset::build_promoter(o, st2));
  EXPECT_EQ(b.size(), 1u);
  EXPECT_TRUE(b.count("NT"));
  EXPECT_EQ(st2.dropped["tata"], 2u);
  // A list overrides the motif.
  test::write_file(d.file("list.txt"), "# TATA promoters\nNT\n");
  o.tata_list = d.file("list.txt");
  o.tata = dataset::PromoterOptions::Tata::tata_only;
  dataset::DatasetStats st3;
  auto c = positives(dataset::build_promoter(o, st3));
  EXPECT_EQ(c.size(), 1u);
  EXPECT_TRUE(c.count("NT"));
  // A list as people save it (gzip, a byte-order mark, CRLF, spaces around a name) is the
  // same list: each once turned the filter off or lost its first name without a word.
  test::write_gzip(d.file("list.txt.gz"), "\xEF\xBB\xBFTP  \r\n\n  NT\r\n");
  o.tata_list = d.file("list.txt.gz");
  o.tata = dataset::PromoterOptions::Tata::non_tata_only;
  dataset::DatasetStats st4;
  auto e = positives(dataset::build_promoter(o, st4));
  EXPECT_EQ(e.size(), 1u);
  EXPECT_TRUE(e.count("TM"));
  EXPECT_EQ(st4.dropped["tata"], 2u);
  // A list that names none of the promoters, or that is a BED, is refused.
  test::write_file(d.file("other.txt"), "EP1_1\nEP2_1\n");
  o.tata_list = d.file("other.txt");
  EXPECT_EQ(test::error_of([&] { dataset::build_promoter(o, st4); }),
            d.file("other.txt") + ": none of its 2 names is the name of a promoter of " + d.file("t.bed") +
                " (which names them like 'TP'): the TATA filter would keep every promoter or none; give the list of "
                "the same promoter set");
  o.tata_list = d.file("t.bed");
  EXPECT_EQ(test::error_of([&] { dataset::build_promoter(o, st4); }),
            d.file("t.bed") + ":1: 'p\\x0950\\x0951\\x09TP\\x09900\\x09+' is not one promoter name: --tata-list takes one name per line "
                              "(the names of --tss's BED name or SGA annotation field), not a BED or table");
}
