#include "genemask/corpus/segments.hpp"

#include <gtest/gtest.h>

using namespace genemask;

TEST(Segments, RecipeShape) {
  SegmentRecipe r;
  uint64_t full = 0, n = 0;
  for (uint64_t chrom = 0; chrom < 40; ++chrom) {
    const uint64_t len = 200000;
    auto c = candidates(len, chrom, r);
    ASSERT_FALSE(c.empty());
    EXPECT_GE(c.front().start, 1u);
    EXPECT_LE(c.front().start, 1000u);
    for (size_t i = 0; i < c.size(); ++i) {
      EXPECT_GE(c[i].bases, 10u);   // 5 tokens
      EXPECT_LE(c[i].bases, 515u);  // 510 tokens
      EXPECT_LE(c[i].start + c[i].bases, len);
      if (i) EXPECT_EQ(c[i].start, c[i - 1].start + c[i - 1].bases);  // consecutive, no overlap
      full += c[i].bases == 515;
      ++n;
    }
    // The next draw would have run past the end: at most one max-length segment is left.
    EXPECT_GT(c.back().start + c.back().bases + 515, len);
  }
  // P(full) = 0.5 + 0.5/506 (the uniform draw can also give 510).
  EXPECT_NEAR(static_cast<double>(full) / static_cast<double>(n), 0.5 + 0.5 / 506, 0.015);
  EXPECT_EQ(candidates(100000, 3, r).size(), count_candidates(100000, 3, r));
  SegmentRecipe other = r;
  other.seed = 43;
  EXPECT_NE(candidates(100000, 3, r).front().start + candidates(100000, 3, r)[1].bases,
            candidates(100000, 3, other).front().start + candidates(100000, 3, other)[1].bases);
}

TEST(Segments, GeneBoundariesAreNeverCrossed) {
  SegmentRecipe r;
  std::vector<uint64_t> b = {5000, 5003, 12345, 20000, 50000};
  auto c = candidates(60000, 0, r, b);
  for (const auto& s : c) {
    for (uint64_t x : b) EXPECT_FALSE(s.start < x && x < s.start + s.bases) << s.start << "+" << s.bases << " crosses " << x;
    EXPECT_GE(s.bases, 10u);
  }
  // A segment starts exactly at each boundary the walk reaches (the cut restarts there),
  // except where the piece before it was too short to keep.
  bool starts_at_12345 = false;
  for (const auto& s : c) starts_at_12345 |= s.start == 12345;
  EXPECT_TRUE(starts_at_12345);
}
