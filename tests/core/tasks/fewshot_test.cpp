#include "genemask/tasks/fewshot.hpp"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

using namespace genemask;

namespace {

struct Table {
  std::vector<int> cls;
  std::vector<std::string> seqs;
};

/// 3 classes of 32 distinct sequences each; class 1 has 10 more rows repeating SEQ1, and
/// SEQ0 (class 0) is listed under class 2 too.
Table table() {
  Table t;
  auto add = [&](int c, const std::string& s) {
    t.cls.push_back(c);
    t.seqs.push_back(s);
  };
  for (int i = 0; i < 95; ++i) {
    const int c = i % 3 == 0 ? 0 : i % 3 == 1 ? 1 : 2;
    add(c, "SEQ" + std::to_string(i));
  }
  for (int i = 0; i < 10; ++i) add(1, "SEQ1");  // duplicates of row 1 (class 1)
  add(2, "SEQ0");                              // row 0's sequence, but labelled 2
  return t;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST(Fewshot, ClassNamesNumericOrLexicographic) {
  EXPECT_EQ(fewshot::class_names({"1", "0", "10", "2", "1"}), (std::vector<std::string>{"0", "1", "2", "10"}));
  EXPECT_EQ(fewshot::class_names({"-1", "3", "-20"}), (std::vector<std::string>{"-20", "-1", "3"}));
  EXPECT_EQ(fewshot::class_names({"promoter", "b", "10", "2"}), (std::vector<std::string>{"10", "2", "b", "promoter"}));
  EXPECT_EQ(fewshot::class_names({"x"}), (std::vector<std::string>{"x"}));
  // Integers as every other reader takes them: "+1", " 2" and "0x3" are text, so the set is
  // ordered as text.
  EXPECT_EQ(fewshot::class_names({"+1", "10", "2"}), (std::vector<std::string>{"+1", "10", "2"}));
  EXPECT_EQ(fewshot::class_names({" 2", "10"}), (std::vector<std::string>{" 2", "10"}));
  EXPECT_EQ(fewshot::class_names({"0x3", "10"}), (std::vector<std::string>{"0x3", "10"}));
}

TEST(Fewshot, CountsPerClassNoDuplicatesFileOrder) {
  const Table t = table();
  for (size_t n : {1u, 5u, 25u}) {
    const auto idx = fewshot::sample_per_class(t.cls, t.seqs, 3, n, 7);
    ASSERT_EQ(idx.size(), 3 * n);
    std::map<int, size_t> per;
    std::set<std::string> seqs;
    for (size_t i = 0; i < idx.size(); ++i) {
      ++per[t.cls[idx[i]]];
      seqs.insert(t.seqs[idx[i]]);
      if (i) EXPECT_LT(idx[i - 1], idx[i]);  // strictly increasing: file order, no row twice
    }
    EXPECT_EQ(per[0], n);
    EXPECT_EQ(per[1], n);
    EXPECT_EQ(per[2], n);
    EXPECT_EQ(seqs.size(), idx.size()) << "two rows with the same sequence";
  }
}

TEST(Fewshot, SequenceUnderTwoLabelsGoesToOneClass) {
  // n = 32 takes all of class 0, SEQ0 included; class 2's 32 distinct sequences then
  // leave 31 that class 0 did not take.
  const Table t = table();
  EXPECT_EQ(error_of([&] { fewshot::sample_per_class(t.cls, t.seqs, 3, 32, 5); }),
            "class '2' has 31 sequences not also listed under another class, fewer than the 32 shots asked for");
  const auto idx = fewshot::sample_per_class(t.cls, t.seqs, 3, 31, 5);
  std::set<std::string> seqs;
  for (size_t i : idx) seqs.insert(t.seqs[i]);
  EXPECT_EQ(seqs.size(), 93u);
}

TEST(Fewshot, DeterministicBySeedAndSeedsDiffer) {
  const Table t = table();
  const auto a = fewshot::sample_per_class(t.cls, t.seqs, 3, 10, 3);
  EXPECT_EQ(a, fewshot::sample_per_class(t.cls, t.seqs, 3, 10, 3));
  std::set<std::vector<size_t>> distinct;
  for (uint64_t s = 0; s < 10; ++s) distinct.insert(fewshot::sample_per_class(t.cls, t.seqs, 3, 10, s));
  EXPECT_GE(distinct.size(), 9u);
}

TEST(Fewshot, ClassSampleDoesNotDependOnOtherClasses) {
  // Class 0's sample is the same when class 1's rows change (its own stream).
  Table t = table();
  const auto a = fewshot::sample_per_class(t.cls, t.seqs, 3, 10, 11);
  for (size_t i = 0; i < t.seqs.size(); ++i)
    if (t.cls[i] == 1) t.seqs[i] += "x";
  const auto b = fewshot::sample_per_class(t.cls, t.seqs, 3, 10, 11);
  std::vector<size_t> a0, b0;
  for (size_t i : a)
    if (t.cls[i] == 0) a0.push_back(i);
  for (size_t i : b)
    if (t.cls[i] == 0) b0.push_back(i);
  EXPECT_EQ(a0, b0);
}

TEST(Fewshot, RoughlyUniform) {
  // Each of class 0's 32 rows is drawn with probability 8/32 (binomial, 400 seeds).
  const Table t = table();
  std::map<size_t, int> hits;
  const int seeds = 400;
  for (int s = 0; s < seeds; ++s)
    for (size_t i : fewshot::sample_per_class(t.cls, t.seqs, 3, 8, static_cast<uint64_t>(s)))
      if (t.cls[i] == 0) ++hits[i];
  int rows = 0;
  for (size_t i = 0; i < t.cls.size(); ++i) {
    if (t.cls[i] != 0) continue;
    ++rows;
    // mean 100, sd ~8.7: 5 sd either side
    EXPECT_GT(hits[i], 56) << i;
    EXPECT_LT(hits[i], 144) << i;
  }
  EXPECT_EQ(rows, 32);
}

TEST(Fewshot, ErrorNamesTheClassAndItsSize) {
  const Table t = table();
  EXPECT_EQ(error_of([&] { fewshot::sample_per_class(t.cls, t.seqs, 3, 33, 1, {"neg", "pos", "other"}); }),
            "class 'neg' has 32 distinct sequences, fewer than the 33 shots asked for");
  EXPECT_EQ(error_of([&] { fewshot::sample_per_class(t.cls, t.seqs, 3, 33, 1); }),
            "class '0' has 32 distinct sequences, fewer than the 33 shots asked for");
  // Duplicates count once.
  std::vector<int> cls = {0, 0, 0, 1, 1, 1};
  std::vector<std::string> seqs = {"A", "B", "C", "D", "D", "D"};
  EXPECT_EQ(error_of([&] { fewshot::sample_per_class(cls, seqs, 2, 2, 1, {"x", "y"}); }),
            "class 'y' has 1 distinct sequences, fewer than the 2 shots asked for");
}
