#include "genemask/kmer/motif.hpp"

#include <gtest/gtest.h>

#include "genemask/kmer/kmer.hpp"

using namespace genemask;

namespace {
// Rank = 1 + code: AAAAAA is rank 1, TTTTTT rank 4096.
std::unordered_map<std::string, uint64_t> code_ranks() {
  std::unordered_map<std::string, uint64_t> m;
  for (uint64_t c = 0; c < num_kmers(6); ++c) m[decode_kmer(c, 6)] = c + 1;
  return m;
}
uint64_t rank_of(const std::string& k) {
  uint64_t c;
  encode_kmer(k, c);
  return c + 1;
}
}  // namespace

TEST(Motif, SixLetterCoreWithFlanks) {
  auto r = match_motif("nTATAAAr", code_ranks(), 6, 5);
  EXPECT_EQ(r.core, "TATAAA");
  ASSERT_EQ(r.hits.size(), 1u);
  EXPECT_EQ(r.hits[0].rank, rank_of("TATAAA"));
}

TEST(Motif, FiveLetterCoreMatchesAllContainingSixMersTopFive) {
  auto r = match_motif("ksCTGGGm", code_ranks(), 6, 5);
  EXPECT_EQ(r.core, "CTGGG");
  EXPECT_EQ(r.matched, 8u);  // xCTGGG and CTGGGx
  ASSERT_EQ(r.hits.size(), 5u);
  EXPECT_EQ(r.hits[0].kmer, "ACTGGG");
  EXPECT_EQ(r.hits[1].kmer, "CCTGGG");
  for (size_t i = 1; i < r.hits.size(); ++i) EXPECT_LT(r.hits[i - 1].rank, r.hits[i].rank);
}

TEST(Motif, DegenerateCoreAndLongCore) {
  auto r = match_motif("yyCCAGrGn", code_ranks(), 6, 0);
  EXPECT_EQ(r.core, "CCAGRG");
  ASSERT_EQ(r.hits.size(), 2u);
  EXPECT_EQ(r.hits[0].kmer, "CCAGAG");
  EXPECT_EQ(r.hits[1].kmer, "CCAGGG");
  auto l = match_motif("nGAGGAGGv", code_ranks(), 6, 0);
  EXPECT_EQ(l.core, "GAGGAGG");
  ASSERT_EQ(l.hits.size(), 2u);
  EXPECT_EQ(l.hits[0].kmer, "AGGAGG");
  EXPECT_EQ(l.hits[1].kmer, "GAGGAG");
  auto star = match_motif("nCyyCCTCCn*", code_ranks(), 6, 5);
  EXPECT_EQ(star.core, "CYYCCTCC");
}

TEST(Motif, BracketsMarkTheCore) {
  auto r = match_motif("nCyy[CCTCC]n*", code_ranks(), 6, 5);
  EXPECT_EQ(r.core, "CCTCC");
  EXPECT_EQ(r.matched, 8u);
  auto w = match_motif("sCw[GCAGC]n", code_ranks(), 6, 0);
  EXPECT_EQ(w.core, "GCAGC");
  EXPECT_THROW(match_motif("[TATA", code_ranks(), 6, 5), std::invalid_argument);
  EXPECT_THROW(match_motif("TA[]TA", code_ranks(), 6, 5), std::invalid_argument);
  EXPECT_THROW(match_motif("[TA][TA]", code_ranks(), 6, 5), std::invalid_argument);
}

TEST(Motif, RejectsNonIupac) {
  EXPECT_THROW(match_motif("TATAXA", code_ranks(), 6, 5), std::invalid_argument);
  EXPECT_THROW(match_motif("**", code_ranks(), 6, 5), std::invalid_argument);
}
