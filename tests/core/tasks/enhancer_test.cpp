// `dataset enhancer`: genomic-benchmarks interval CSVs cut from a genome written here,
// checked against windows worked out by hand.
#include "genemask/tasks/enhancer.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <map>

#include "test_util.hpp"

using namespace genemask;

namespace {
// 0-based:  0         10        20        30        40        50
const std::string kChr1 = "ACGTTGCAAC" "GGATCCTTAG" "CATGCATGCA" "TTTAAACCCG" "GGGTTTAAAC" "CCAGTGACTG";
const std::string kHeader = "id,region,start,end,strand\n";

/// The genome `fasta` as d/g.fa and empty d/gb/train and d/gb/test: the options of a build.
dataset::EnhancerOptions layout(const test::TempDir& d, const std::string& fasta) {
  test::write_file(d.file("g.fa"), fasta);
  std::filesystem::create_directories(d.file("gb/train"));
  std::filesystem::create_directories(d.file("gb/test"));
  dataset::EnhancerOptions o;
  o.genome = d.file("g.fa");
  o.intervals = d.file("gb");
  return o;
}
}  // namespace

TEST(Enhancer, WindowsLabelsAndGivenSplit) {
  test::TempDir d;
  test::write_file(d.file("g.fa"), ">chr1\n" + kChr1.substr(0, 33) + "\n" + kChr1.substr(33) + "\n>chr2\nACGTNACGTACGTACGTACG\n");
  std::filesystem::create_directories(d.file("gb/train"));
  std::filesystem::create_directories(d.file("gb/test"));
  test::write_file(d.file("gb/train/positive.csv"),
                   kHeader + "0,chr1,20,30,+\n"   // CATGCATGCA
                             "1,chr1,30,40,-\n"   // TTTAAACCCG reversed and complemented
                             "2,chr1,55,65,+\n"   // runs off the end: dropped
                             "3,chr2,0,10,+\n");  // holds an N: dropped
  test::write_gzip(d.file("gb/train/negative.csv.gz"), kHeader + "0,chr1,0,10,+\n");  // ACGTTGCAAC
  test::write_file(d.file("gb/test/positive.csv"), kHeader + "0,1,40,50,.\n");      // GGGTTTAAAC, '.' = '+'
  test::write_file(d.file("gb/test/negative.csv"), kHeader + "0,chr1,10,20,-\n");   // GGATCCTTAG -> CTAAGGATCC
  test::write_file(d.file("gb/README.txt"), "not a class file\n");
  dataset::EnhancerOptions o;
  o.genome = d.file("g.fa");
  o.intervals = d.file("gb");
  dataset::DatasetStats st;
  std::vector<char> split;
  auto ex = dataset::build_enhancer(o, st, split);
  ASSERT_EQ(ex.size(), 5u);
  ASSERT_EQ(split.size(), 5u);
  std::map<std::string, std::pair<std::string, char>> got;  // sequence -> label, split
  for (size_t i = 0; i < ex.size(); ++i) got[ex[i].sequence] = {ex[i].label, split[i]};
  EXPECT_EQ(got["CATGCATGCA"], std::make_pair(std::string("1"), 't'));
  EXPECT_EQ(got["CGGGTTTAAA"], std::make_pair(std::string("1"), 't'));
  EXPECT_EQ(got["ACGTTGCAAC"], std::make_pair(std::string("0"), 't'));
  EXPECT_EQ(got["GGGTTTAAAC"], std::make_pair(std::string("1"), 'e'));
  EXPECT_EQ(got["CTAAGGATCC"], std::make_pair(std::string("0"), 'e'));
  EXPECT_EQ(st.dropped["off_chromosome"], 1u);
  EXPECT_EQ(st.dropped["contains_n"], 1u);

  // Through the writer: the given split is kept.
  dataset::OutputOptions out;
  out.out = d.file("out");
  auto st2 = dataset::write_task_dataset(ex, out, st, split);
  EXPECT_EQ(st2.train, 3u);
  EXPECT_EQ(st2.test, 2u);
  EXPECT_TRUE(st2.given_split);
  EXPECT_EQ(test::read_file(d.file("out/test.tsv")).find("CATGCATGCA"), std::string::npos);
}

TEST(Enhancer, ClassNamesOtherThanPositiveNegativeAreKept) {
  EXPECT_EQ(dataset::class_label("positive", {"negative", "positive"}), "1");
  EXPECT_EQ(dataset::class_label("negative", {"positive", "negative", "positive", "negative"}), "0");
  EXPECT_EQ(dataset::class_label("human", {"human", "worm"}), "human");
  EXPECT_EQ(dataset::class_label("enhancer", {"enhancer", "ocr", "promoter"}), "enhancer");
}

TEST(Enhancer, InputErrors) {
  test::TempDir d;
  test::write_file(d.file("g.fa"), ">chr1\n" + kChr1 + "\n");
  dataset::EnhancerOptions o;
  o.genome = d.file("g.fa");
  o.intervals = d.file("gb");
  dataset::DatasetStats st;
  std::vector<char> split;
  std::filesystem::create_directories(d.file("gb/train"));
  std::string m = test::error_of([&] { dataset::build_enhancer(o, st, split); });
  EXPECT_NE(m.find("no 'test' folder"), std::string::npos) << m;
  std::filesystem::create_directories(d.file("gb/test"));
  test::write_file(d.file("gb/test/positive.csv"), kHeader + "0,chr1,0,10,+\n");
  m = test::error_of([&] { dataset::build_enhancer(o, st, split); });
  EXPECT_NE(m.find("train: no <class>.csv"), std::string::npos) << m;
  test::write_file(d.file("gb/train/negative.csv"), kHeader + "0,chr1,30,40,+\n");
  test::write_file(d.file("gb/test/negative.csv"), kHeader + "0,chr1,40,50,+\n");
  test::write_file(d.file("gb/train/positive.csv"), kHeader + "0,chr1,0,10,+\n1,chrUn,0,10,+\n");
  m = test::error_of([&] { dataset::build_enhancer(o, st, split); });
  EXPECT_NE(m.find("positive.csv:3:"), std::string::npos) << m;
  EXPECT_NE(m.find("'chrUn'"), std::string::npos) << m;
  EXPECT_NE(m.find("chr1"), std::string::npos) << m;
  test::write_file(d.file("gb/train/positive.csv"), kHeader + "0,chr1,60,70,+\n");
  m = test::error_of([&] { dataset::build_enhancer(o, st, split); });
  EXPECT_NE(m.find("positive.csv:2:"), std::string::npos) << m;
  EXPECT_NE(m.find("beyond the end of 'chr1' (60 bp)"), std::string::npos) << m;
}

// Issue 21: a test folder without one class built a task whose test split lacked it, and an
// empty stray file was one more class (so positive/negative were no longer labelled 1/0).
TEST(Enhancer, BothSplitsNeedTheSameNonEmptyClasses) {
  test::TempDir d;
  const auto o = layout(d, ">chr1\n" + kChr1 + "\n>chr2\nNNNNNNNNNNNNNNNNNNNN\n");
  dataset::DatasetStats st;
  std::vector<char> split;
  test::write_file(d.file("gb/train/positive.csv"), kHeader + "0,chr1,20,30,+\n");
  test::write_file(d.file("gb/train/negative.csv"), kHeader + "0,chr1,0,10,+\n");
  test::write_file(d.file("gb/test/positive.csv"), kHeader + "0,chr1,40,50,+\n");
  EXPECT_EQ(test::error_of([&] { dataset::build_enhancer(o, st, split); }),
            d.file("gb/test") + ": has no file for class 'negative' (" + d.file("gb/train/negative.csv") +
                " has one): every class needs negative.csv[.gz] in both train/ and test/");
  test::write_file(d.file("gb/test/negative.csv"), kHeader + "0,chr1,10,20,-\n");
  test::write_file(d.file("gb/test/enhancer.csv"), kHeader + "0,chr1,10,20,-\n");
  EXPECT_EQ(test::error_of([&] { dataset::build_enhancer(o, st, split); }),
            d.file("gb/train") + ": has no file for class 'enhancer' (" + d.file("gb/test/enhancer.csv") +
                " has one): every class needs enhancer.csv[.gz] in both train/ and test/");
  std::filesystem::remove(d.file("gb/test/enhancer.csv"));
  test::write_file(d.file("gb/test/notes.csv"), "");
  EXPECT_EQ(test::error_of([&] { dataset::build_enhancer(o, st, split); }),
            d.file("gb/test/notes.csv") + ": empty file (0 bytes) among the class files of " + d.file("gb/test") +
                ": it would be a class 'notes' of no intervals; remove it");
  std::filesystem::remove(d.file("gb/test/notes.csv"));
  EXPECT_EQ(dataset::build_enhancer(o, st, split).size(), 4u);
  // A class file whose every interval is dropped (here: all N) leaves its split without it.
  test::write_file(d.file("gb/test/negative.csv"), kHeader + "0,chr2,0,10,+\n1,chr2,5,15,+\n");
  EXPECT_EQ(test::error_of([&] { dataset::build_enhancer(o, st, split); }),
            d.file("gb/test/negative.csv") + ": none of its 2 intervals gave a sequence (each ran past its chromosome "
                                             "or held N): the class would have no test examples; is " +
                d.file("g.fa") + " the genome they were made for?");
  test::write_file(d.file("gb/test/negative.csv"), kHeader);
  EXPECT_EQ(test::error_of([&] { dataset::build_enhancer(o, st, split); }),
            d.file("gb/test/negative.csv") + ": no intervals after the header: the class would have no examples");
}

// A hostile-input campaign's cases, each once exit 0 with a wrong task: a strand column
// spelled otherwise read every interval as '+'; a byte-order mark replaced the ids; a class
// table as x.CSV or x.tsv was left out; one class made a one-class task; a file name that is
// not a label made a task finetune refuses.
TEST(Enhancer, HeadersFileNamesAndClassesAreReadAsWrittenOrRefused) {
  test::TempDir d;
  const auto o = layout(d, ">chr1\n" + kChr1 + "\n");
  dataset::DatasetStats st;
  std::vector<char> split;
  test::write_file(d.file("gb/train/negative.csv"), kHeader + "0,chr1,0,10,+\n");
  test::write_file(d.file("gb/test/negative.csv"), kHeader + "0,chr1,10,20,+\n");
  // The strand column by name whatever its case, spaces or quotes; a BOM before the header.
  for (const std::string header : {"id,region,start,end,Strand", "id,region,start,end, STRAND", "id,region,start,end,\"strand\"",
                                   "\xEF\xBB\xBFid,region,start,end,strand"}) {
    test::write_file(d.file("gb/train/positive.csv"), header + "\nP7,chr1,20,30,-\n");
    test::write_file(d.file("gb/test/positive.csv"), header + "\nP8,chr1,30,40,-\n");
    const auto ex = dataset::build_enhancer(o, st, split);
    ASSERT_EQ(ex.size(), 4u) << header;
    EXPECT_EQ(ex[1].sequence, "TGCATGCATG") << header;  // CATGCATGCA reversed and complemented
    EXPECT_EQ(ex[1].id, "chr1:20-30(-)|positive/P7") << header;
  }
  test::write_file(d.file("gb/train/positive.csv"), "id,region,start,end\nP7,chr1,20,30\n");
  EXPECT_EQ(test::error_of([&] { dataset::build_enhancer(o, st, split); }),
            d.file("gb/train/positive.csv") + ":1: header 'id,region,start,end' lacks the column strand (expected "
                                              "'id,region,start,end,strand'; strand '+', '-' or '.')");
  test::write_file(d.file("gb/train/positive.csv"), "id,start,end,strand,start\nP7,20,30,+,20\n");
  EXPECT_EQ(test::error_of([&] { dataset::build_enhancer(o, st, split); }),
            d.file("gb/train/positive.csv") + ":1: header 'id,start,end,strand,start' names the column start twice "
                                              "(fields 2 and 5)");
  test::write_file(d.file("gb/train/positive.csv"), kHeader + "0,chr1,20,30,+\n");
  // Class tables under another spelling are named, not left out.
  for (const char* name : {"positive.CSV", "positive.tsv", "extra.csv.GZ"}) {
    std::filesystem::rename(d.file("gb/test/positive.csv"), d.file(std::string("gb/test/") + name));
    EXPECT_EQ(test::error_of([&] { dataset::build_enhancer(o, st, split); }),
              d.file(std::string("gb/test/") + name) + ": looks like a class table, but class files are named "
                                                        "<class>.csv or <class>.csv.gz (lower case, comma-separated): "
                                                        "rename it, or move it out of " + d.file("gb/test"));
    std::filesystem::rename(d.file(std::string("gb/test/") + name), d.file("gb/test/positive.csv"));
  }
  test::write_file(d.file("gb/test/README"), "notes\n");  // not a table: ignored
  EXPECT_EQ(dataset::build_enhancer(o, st, split).size(), 4u);
  // One class.
  std::filesystem::remove(d.file("gb/train/negative.csv"));
  std::filesystem::remove(d.file("gb/test/negative.csv"));
  EXPECT_EQ(test::error_of([&] { dataset::build_enhancer(o, st, split); }),
            d.file("gb") + ": has one class ('positive') in train/ and test/: a classifier needs two or more (one "
                           "<class>.csv[.gz] file per class)");
  // A class name that is no label as written.
  for (const std::string cls : {" human", "01"}) {
    test::write_file(d.file("gb/train/" + cls + ".csv"), kHeader + "0,chr1,0,10,+\n");
    test::write_file(d.file("gb/test/" + cls + ".csv"), kHeader + "0,chr1,10,20,+\n");
    const std::string m = test::error_of([&] { dataset::build_enhancer(o, st, split); });
    EXPECT_EQ(m.rfind(d.file("gb/train/" + cls + ".csv") + ": its class (the file's name) cannot be a label: label '" + cls +
                          "'",
                      0),
              0u)
        << m;
    std::filesystem::remove(d.file("gb/train/" + cls + ".csv"));
    std::filesystem::remove(d.file("gb/test/" + cls + ".csv"));
  }
}
