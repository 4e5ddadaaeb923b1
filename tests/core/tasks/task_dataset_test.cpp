// write_task_dataset: de-duplication, the split, and the two output layouts, checked
// against hand-written expectations and io::read_task_table (an independent reader).
#include "genemask/tasks/task_dataset.hpp"

#include <gtest/gtest.h>

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <set>

#include "genemask/rng.hpp"
#include "io/task_table.hpp"
#include "test_util.hpp"

using namespace genemask;
using dataset::Example;

namespace {

std::vector<Example> random_examples(size_t n, uint64_t seed, size_t len = 20) {
  std::mt19937_64 rng(seed);
  std::vector<Example> v;
  for (size_t i = 0; i < n; ++i) {
    std::string s;
    for (size_t j = 0; j < len; ++j) s.push_back("ACGT"[rng() % 4]);
    v.push_back({s, i % 3 == 0 ? "1" : "0", "ex" + std::to_string(i)});
  }
  return v;
}

std::map<std::string, std::string> table(const std::string& path) {
  std::map<std::string, std::string> m;
  for (const auto& r : io::read_task_table(path)) m[r.sequence] = r.label;
  return m;
}

}  // namespace

TEST(TaskDataset, HelpersByHand) {
  EXPECT_EQ(dataset::reverse_complement("AACGTTTG"), "CAAACGTT");
  EXPECT_EQ(dataset::kmer_text("ACGTACGT"), "ACGTAC CGTACG GTACGT");
  EXPECT_EQ(dataset::kmer_text("ACGTAC"), "ACGTAC");
  EXPECT_THROW(dataset::kmer_text("ACGTA"), std::invalid_argument);
  EXPECT_TRUE(dataset::is_acgt("ACGT"));
  EXPECT_FALSE(dataset::is_acgt("ACNT"));
  EXPECT_FALSE(dataset::is_acgt("acgt"));
}

TEST(TaskDataset, ExactReleasedFormat) {
  test::TempDir d;
  std::vector<Example> ex = {
      {"ACGTACGT", "1", "a"}, {"TTTTGGGG", "0", "b"}, {"CCCCAAAA", "0", "c"}, {"GGGGTTTT", "1", "d"}};
  dataset::OutputOptions o;
  o.out = d.file("out");
  // A given split, so the expected files do not depend on the hash.
  dataset::write_task_dataset(ex, o, {}, {'t', 'e', 't', 'e'});
  EXPECT_EQ(test::read_file(d.file("out/fewshot/train.tsv")),
            "\"sequence\"\t\"label\"\n\"ACGTAC CGTACG GTACGT\"\t1\n\"CCCCAA CCCAAA CCAAAA\"\t0\n");
  EXPECT_EQ(test::read_file(d.file("out/fewshot/test.tsv")),
            "\"sequence\"\t\"label\"\n\"TTTTGG TTTGGG TTGGGG\"\t0\n\"GGGGTT GGGTTT GGTTTT\"\t1\n");
  EXPECT_EQ(test::read_file(d.file("out/train.tsv")), "sequence\tlabel\tid\nACGTACGT\t1\ta\nCCCCAAAA\t0\tc\n");
  EXPECT_EQ(test::read_file(d.file("out/test.tsv")), "sequence\tlabel\tid\nTTTTGGGG\t0\tb\nGGGGTTTT\t1\td\n");
}

TEST(TaskDataset, DuplicatesDroppedAndCounted) {
  test::TempDir d;
  auto ex = random_examples(60, 1);
  ex.push_back({ex[5].sequence, ex[5].label, "dup-same"});
  ex.push_back({ex[7].sequence, ex[7].label, "dup-same2"});
  ex.push_back({ex[9].sequence, ex[9].label == "1" ? "0" : "1", "dup-other"});
  dataset::OutputOptions o;
  o.out = d.file("out");
  dataset::DatasetStats pre;
  pre.dropped["contains_n"] = 4;  // what a builder passes in is kept
  auto st = dataset::write_task_dataset(ex, o, pre);
  EXPECT_EQ(st.dropped["duplicate"], 2u);
  EXPECT_EQ(st.dropped["duplicate_other_label"], 1u);
  EXPECT_EQ(st.dropped["contains_n"], 4u);
  EXPECT_EQ(st.train + st.test, 60u);
  auto tr = table(d.file("out/train.tsv")), te = table(d.file("out/test.tsv"));
  EXPECT_EQ(tr.size() + te.size(), 60u);
  // Every original sequence appears once, with its first label.
  for (size_t i = 0; i < 60; ++i) {
    const auto& s = ex[i].sequence;
    ASSERT_EQ(tr.count(s) + te.count(s), 1u);
    EXPECT_EQ(tr.count(s) ? tr[s] : te[s], ex[i].label);
  }
  uint64_t c0 = 0, c1 = 0;
  for (size_t i = 0; i < 60; ++i) (ex[i].label == "0" ? c0 : c1)++;
  EXPECT_EQ(st.per_class["0"], c0);
  EXPECT_EQ(st.per_class["1"], c1);
  EXPECT_EQ(st.train_per_class["0"] + st.test_per_class["0"], c0);
}

TEST(TaskDataset, SplitFractionDeterminismAndStability) {
  test::TempDir d;
  const size_t n = 4000;
  auto ex = random_examples(n, 2);
  dataset::OutputOptions o;
  o.out = d.file("a");
  o.seed = 7;
  auto st = dataset::write_task_dataset(ex, o, {});
  // Binomial(4000, 0.7): sd = 29; allow 5 sd.
  EXPECT_NEAR(static_cast<double>(st.train), 0.7 * n, 5 * 29.0);
  o.train_fraction = 0.5;
  o.out = d.file("half");
  auto st2 = dataset::write_task_dataset(ex, o, {});
  EXPECT_NEAR(static_cast<double>(st2.train), 0.5 * n, 5 * 31.7);

  // Same seed: identical files. Different seed: a different split.
  o.train_fraction = 0.7;
  o.out = d.file("b");
  dataset::write_task_dataset(ex, o, {});
  EXPECT_EQ(test::read_file(d.file("a/train.tsv")), test::read_file(d.file("b/train.tsv")));
  EXPECT_EQ(test::read_file(d.file("a/fewshot/test.tsv")), test::read_file(d.file("b/fewshot/test.tsv")));
  o.seed = 8;
  o.out = d.file("c");
  dataset::write_task_dataset(ex, o, {});
  EXPECT_NE(test::read_file(d.file("a/train.tsv")), test::read_file(d.file("c/train.tsv")));

  // Adding examples moves none of the old ones between splits.
  o.seed = 7;
  o.out = d.file("more");
  auto more = ex;
  for (auto& e : random_examples(500, 99, 21)) more.push_back(e);
  dataset::write_task_dataset(more, o, {});
  auto a_tr = table(d.file("a/train.tsv")), m_tr = table(d.file("more/train.tsv"));
  for (const auto& [s, l] : a_tr) EXPECT_TRUE(m_tr.count(s)) << s;
  auto a_te = table(d.file("a/test.tsv")), m_te = table(d.file("more/test.tsv"));
  for (const auto& [s, l] : a_te) EXPECT_TRUE(m_te.count(s)) << s;
}

TEST(TaskDataset, ReleasedLayoutRoundTripsAndFewshotCounts) {
  test::TempDir d;
  auto ex = random_examples(300, 3, 70);
  dataset::OutputOptions o;
  o.out = d.file("out");
  o.shots = {10, 50};
  dataset::write_task_dataset(ex, o, {});
  for (std::string split : {"train", "test"}) {
    auto plain = io::read_task_table(d.file("out/" + split + ".tsv"));
    auto released = io::read_task_table(d.file("out/fewshot/" + split + ".tsv"));
    ASSERT_EQ(plain.size(), released.size());
    for (size_t i = 0; i < plain.size(); ++i) {
      EXPECT_EQ(plain[i].sequence, released[i].sequence);
      EXPECT_EQ(plain[i].label, released[i].label);
      EXPECT_EQ(plain[i].sequence.size(), 70u);
    }
  }
  auto train = table(d.file("out/train.tsv"));
  for (int n : {10, 50}) {
    auto rows = io::read_task_table(d.file("out/fewshot/" + std::to_string(n) + "/train.tsv"));
    std::map<std::string, int> per;
    std::set<std::string> seqs;
    for (const auto& r : rows) {
      per[r.label]++;
      seqs.insert(r.sequence);
      ASSERT_TRUE(train.count(r.sequence)) << "few-shot row not from the train split";
      EXPECT_EQ(train[r.sequence], r.label);
    }
    EXPECT_EQ(per["0"], n);
    EXPECT_EQ(per["1"], n);
    EXPECT_EQ(seqs.size(), rows.size());
  }
  // summary.json
  std::ifstream js(d.file("out/summary.json"));
  auto j = nlohmann::json::parse(js);
  EXPECT_EQ(j["examples"].get<uint64_t>(), 300u);
  EXPECT_EQ(j["train"].get<uint64_t>() + j["test"].get<uint64_t>(), 300u);
  EXPECT_EQ(j["classes"]["1"]["total"].get<uint64_t>(), 100u);
  EXPECT_EQ(j["options"]["shots"], nlohmann::json({10, 50}));
  EXPECT_EQ(j["options"]["split"], "hash");
  // No temporary files left behind.
  for (auto& p : std::filesystem::recursive_directory_iterator(d.file("out")))
    EXPECT_EQ(p.path().string().find(".tmp."), std::string::npos) << p.path();
}

TEST(TaskDataset, GivenSplitKept) {
  test::TempDir d;
  auto ex = random_examples(40, 4);
  std::vector<char> split;
  for (size_t i = 0; i < ex.size(); ++i) split.push_back(i < 30 ? 't' : 'e');
  dataset::OutputOptions o;
  o.out = d.file("out");
  auto st = dataset::write_task_dataset(ex, o, {}, split);
  EXPECT_EQ(st.train, 30u);
  EXPECT_EQ(st.test, 10u);
  auto te = io::read_task_table(d.file("out/test.tsv"));
  for (size_t i = 0; i < te.size(); ++i) EXPECT_EQ(te[i].sequence, ex[30 + i].sequence);
}

TEST(TaskDataset, TooFewForShotsNamesClassAndCount) {
  test::TempDir d;
  std::vector<Example> ex;
  auto r = random_examples(200, 5);
  for (size_t i = 0; i < r.size(); ++i) {
    r[i].label = i < 190 ? "0" : "1";  // ten of class 1 in total
    ex.push_back(r[i]);
  }
  dataset::OutputOptions o;
  o.out = d.file("out");
  o.shots = {50};
  try {
    dataset::write_task_dataset(ex, o, {});
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("class '1'"), std::string::npos) << m;
    EXPECT_NE(m.find("--shots 50"), std::string::npos) << m;
    EXPECT_NE(m.find("only"), std::string::npos) << m;
  }
  EXPECT_FALSE(std::filesystem::exists(d.file("out/train.tsv")));
}

// --shots 5,5 made the 5-shot files twice (the second over the first) without a word.
TEST(TaskDataset, ShotCountsListedTwiceAreRefused) {
  test::TempDir d;
  dataset::OutputOptions o;
  o.out = d.file("out");
  o.shots = {5, 10, 5};
  try {
    dataset::write_task_dataset(random_examples(200, 5), o, {});
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("--shots lists 5 twice"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(d.file("out")));
}

// A class with no example in one split (its test rows all repeats of training sequences, or
// too few rows for the hashed split) was written without a word: a test set without a class
// has no ROC AUC, a class never trained on cannot be predicted. Refused, nothing written.
TEST(TaskDataset, EveryClassInBothSplitsOrRefused) {
  test::TempDir d;
  auto what_of = [](const std::function<void()>& f) -> std::string {
    try {
      f();
    } catch (const std::runtime_error& e) {
      return e.what();
    }
    return "no error";
  };
  auto ex = random_examples(40, 6);
  std::vector<char> split(ex.size(), 't');
  for (size_t i = 0; i < ex.size(); ++i)
    if (ex[i].label == "0" && i >= 30) split[i] = 'e';
  // Class 1's only test rows repeat training rows of class 1.
  for (size_t i = 0; i < 3; ++i) {
    ex.push_back({ex[3 * i].sequence, "1", "again" + std::to_string(i)});
    split.push_back('e');
  }
  ASSERT_EQ(ex[0].label, "1");
  dataset::OutputOptions o;
  o.out = d.file("out");
  uint64_t ones = 0;
  for (size_t i = 0; i < 40; ++i) ones += ex[i].label == "1";
  EXPECT_EQ(what_of([&] { dataset::write_task_dataset(ex, o, {}, split); }),
            fmt::format("class '1' would have no test examples: none of its {} distinct example(s) fell in that split "
                        "(3 more were dropped as repeats of an earlier sequence); give the class distinct sequences in "
                        "both train/ and test/",
                        ones));
  EXPECT_FALSE(std::filesystem::exists(d.file("out")));
  // A hashed split of a class of one example.
  auto few = random_examples(60, 7);
  for (auto& e : few) e.label = "0";
  few[0].label = "rare";
  const bool in_train = hash_uniform(o.seed, Stream::split, fnv1a(few[0].sequence)) < o.train_fraction;
  EXPECT_EQ(what_of([&] { dataset::write_task_dataset(few, o, {}); }),
            fmt::format("class 'rare' would have no {} examples: none of its 1 distinct example(s) fell in that split; "
                        "give more input or change --train-fraction",
                        in_train ? "test" : "training"));
  EXPECT_FALSE(std::filesystem::exists(d.file("out")));
  // No example left at all: what was dropped, by reason (every window off its chromosome is
  // the window's or preset's doing, not too little input).
  dataset::DatasetStats dropped;
  dropped.dropped["off_chromosome"] = 60;
  dropped.dropped["contains_n"] = 0;
  EXPECT_EQ(what_of([&] { dataset::write_task_dataset({}, o, dropped); }),
            "the dataset would have 0 training and 0 test examples: both must be non-empty (0 example(s) made; "
            "dropped: off_chromosome 60; give more input, change the window or preset, or change --train-fraction)");
  EXPECT_FALSE(std::filesystem::exists(d.file("out")));
}
