#include "genemask/corpus/tokenizer.hpp"

#include <gtest/gtest.h>

#include <random>

#include "genemask/kmer/kmer.hpp"

using namespace genemask;

TEST(Vocab, DnabertOrder) {
  auto v = vocab_tokens();
  ASSERT_EQ(v.size(), 4101u);
  EXPECT_EQ(v[0], "[PAD]");
  EXPECT_EQ(v[1], "[UNK]");
  EXPECT_EQ(v[2], "[CLS]");
  EXPECT_EQ(v[3], "[SEP]");
  EXPECT_EQ(v[4], "[MASK]");
  // itertools.product('ATCG', repeat=6), written out independently.
  const char* alpha = "ATCG";
  size_t id = 5;
  for (int a = 0; a < 4; ++a)
    for (int b = 0; b < 4; ++b)
      for (int c = 0; c < 4; ++c)
        for (int d = 0; d < 4; ++d)
          for (int e = 0; e < 4; ++e)
            for (int f = 0; f < 4; ++f, ++id)
              ASSERT_EQ(v[id], (std::string{alpha[a], alpha[b], alpha[c], alpha[d], alpha[e], alpha[f]}));
  EXPECT_EQ(v[5], "AAAAAA");
  EXPECT_EQ(v[6], "AAAAAT");
  EXPECT_EQ(v[4100], "GGGGGG");
}

TEST(Vocab, CodeAndTokenMapsAreInverse) {
  for (uint32_t code = 0; code < 4096; ++code) {
    const uint16_t id = kmer_to_token(code);
    EXPECT_EQ(token_to_kmer(id), code);
    EXPECT_EQ(token_text(id), decode_kmer(code, 6));
  }
}

TEST(Tokenize, OverlappingSixMersUnkAndCase) {
  auto ids = tokenize("acgtACGT");
  ASSERT_EQ(ids.size(), 3u);
  EXPECT_EQ(token_text(ids[0]), "ACGTAC");
  EXPECT_EQ(token_text(ids[2]), "GTACGT");
  auto u = tokenize("AAAAAANAAAAAA");
  ASSERT_EQ(u.size(), 8u);
  EXPECT_NE(u[0], kUnk);
  for (size_t i = 1; i <= 6; ++i) EXPECT_EQ(u[i], kUnk) << i;
  EXPECT_NE(u[7], kUnk);
  EXPECT_TRUE(tokenize("ACGTA").empty());
  auto f = frame(tokenize("ACGTAC"));
  EXPECT_EQ(f, (std::vector<uint16_t>{kCls, tokenize("ACGTAC")[0], kSep}));
}

TEST(Tokenize, DecodeRoundTrip) {
  std::mt19937_64 rng(1);
  for (int t = 0; t < 100; ++t) {
    std::string s(6 + rng() % 600, 'A');
    for (auto& c : s) c = "ACGT"[rng() % 4];
    EXPECT_EQ(decode(frame(tokenize(s))), s);
  }
}

TEST(Tokenize, ReleasedKmerText) {
  auto ids = tokenize_kmer_text("AAACGG AACGGA ACGGAA");
  EXPECT_EQ(decode(ids), "AAACGGAA");
  try {
    tokenize_kmer_text("AAACGG AACGGT CGGAAA");
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()), "tokens 2 'AACGGT' and 3 'CGGAAA' do not overlap by 5 bases");
  }
  EXPECT_THROW(tokenize_kmer_text("AAACG AACGGA"), std::invalid_argument);
}
