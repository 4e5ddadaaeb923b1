#include "genemask/loader.hpp"

#include <gtest/gtest.h>

#include <set>

#include "genemask/tokenizer.hpp"
#include "io/shard_manifest.hpp"
#include "test_util.hpp"

using namespace genemask;
using genemask::test::TempDir;

namespace {

/// A shard set of n samples with lengths 5..40 tokens, split over 3 files out of order.
std::vector<std::vector<uint16_t>> make_shards(const std::string& dir, size_t n) {
  std::mt19937_64 rng(3);
  std::vector<std::vector<uint16_t>> all(n);
  for (auto& s : all) {
    s.resize(5 + rng() % 36);
    for (auto& t : s) t = static_cast<uint16_t>(kFirstKmerToken + rng() % 4096);
  }
  io::ShardManifest m;
  m.source_genome = "test";
  m.vocab_sha256 = vocab_sha256();
  for (int f = 0; f < 3; ++f) {
    io::ShardData d;
    for (size_t i = static_cast<size_t>(f); i < n; i += 3) {  // interleaved, like gzip ranks
      d.tokens.insert(d.tokens.end(), all[i].begin(), all[i].end());
      d.offsets.push_back(d.tokens.size());
      d.sample_index.push_back(i * 7);  // sparse global indices
      d.chrom.push_back(0);
      d.start.push_back(i * 100);
    }
    const std::string file = "train-r0000" + std::to_string(f) + "-00000.h5";
    io::write_shard(dir + "/" + file, d, "train", 1, vocab_sha256());
    m.shards.push_back(io::ManifestShard{file, "train", "x", d.samples(), d.tokens.size(), 0, 0});
  }
  io::write_manifest(dir, m);
  return all;
}

LoaderOptions opts(const std::string& dir, int rank, int world) {
  LoaderOptions o;
  o.shard_dir = dir;
  o.rank = rank;
  o.world = world;
  o.batch_size = 4;
  o.seed = 11;
  return o;
}

}  // namespace

TEST(ShardSet, SamplesInGlobalOrder) {
  TempDir tmp;
  auto all = make_shards(tmp.path(), 50);
  ShardSet set(tmp.path(), "train");
  ASSERT_EQ(set.size(), 50u);
  std::vector<uint16_t> t;
  for (size_t i = 0; i < 50; ++i) {
    EXPECT_EQ(set.sample_index(i), i * 7);
    set.read(i, t);
    EXPECT_EQ(t, all[i]);
  }
}

TEST(DataLoader, EpochsCoverEverySampleOnceAcrossRanks) {
  TempDir tmp;
  make_shards(tmp.path(), 50);
  for (int world : {1, 2, 3}) {
    std::set<uint64_t> seen;
    for (int r = 0; r < world; ++r) {
      DataLoader dl(opts(tmp.path(), r, world), Masker(MaskingConfig{}));
      EXPECT_EQ(dl.samples_per_epoch(), 50u / static_cast<unsigned>(world));
      uint64_t got = 0;
      while (got < dl.samples_per_epoch()) {
        Batch b = dl.next();
        EXPECT_EQ(b.next.epoch, 0u);
        for (uint64_t s : b.sample_index) EXPECT_TRUE(seen.insert(s).second) << "sample seen twice: " << s;
        got += static_cast<uint64_t>(b.rows);
      }
      EXPECT_EQ(dl.next().next.epoch, 1u);  // then the next epoch starts
    }
    EXPECT_EQ(seen.size(), (50u / static_cast<unsigned>(world)) * static_cast<unsigned>(world));
  }
}

TEST(DataLoader, BatchesArePaddedMaskedAndFramed) {
  TempDir tmp;
  auto all = make_shards(tmp.path(), 20);
  DataLoader dl(opts(tmp.path(), 0, 1), Masker(MaskingConfig{}));
  Batch b = dl.next();
  ASSERT_EQ(b.rows, 4);
  int64_t longest = 0;
  for (uint64_t s : b.sample_index) longest = std::max<int64_t>(longest, static_cast<int64_t>(all[s / 7].size()));
  EXPECT_EQ(b.cols, longest + 2);
  for (int64_t r = 0; r < b.rows; ++r) {
    const auto& t = all[b.sample_index[static_cast<size_t>(r)] / 7];
    const size_t base = static_cast<size_t>(r * b.cols);
    EXPECT_EQ(b.input_ids[base], kCls);
    EXPECT_EQ(b.input_ids[base + t.size() + 1], kSep);
    for (int64_t c = 0; c < b.cols; ++c) {
      const bool real = static_cast<size_t>(c) < t.size() + 2;
      EXPECT_EQ(b.attention_mask[base + static_cast<size_t>(c)], real ? 1 : 0);
      if (!real) {
        EXPECT_EQ(b.input_ids[base + static_cast<size_t>(c)], kPad);
        EXPECT_EQ(b.labels[base + static_cast<size_t>(c)], kIgnoreLabel);
      }
    }
  }
}

TEST(DataLoader, ResumeFromCursorGivesTheSameBatches) {
  TempDir tmp;
  make_shards(tmp.path(), 37);
  std::vector<Batch> straight;
  {
    DataLoader dl(opts(tmp.path(), 1, 2), Masker(MaskingConfig{}));
    for (int i = 0; i < 12; ++i) straight.push_back(dl.next());  // crosses into epoch 2
  }
  DataLoader resumed(opts(tmp.path(), 1, 2), Masker(MaskingConfig{}), straight[6].next);
  for (int i = 7; i < 12; ++i) {
    Batch b = resumed.next();
    EXPECT_EQ(b.sample_index, straight[static_cast<size_t>(i)].sample_index) << i;
    EXPECT_EQ(b.input_ids, straight[static_cast<size_t>(i)].input_ids) << i;
    EXPECT_EQ(b.labels, straight[static_cast<size_t>(i)].labels) << i;
    EXPECT_EQ(b.next, straight[static_cast<size_t>(i)].next);
  }
}

TEST(DataLoader, MaskOfASampleDoesNotDependOnRankCount) {
  TempDir tmp;
  make_shards(tmp.path(), 24);
  std::map<uint64_t, std::vector<int64_t>> labels_by_sample;
  for (int world : {1, 2, 4}) {
    for (int r = 0; r < world; ++r) {
      DataLoader dl(opts(tmp.path(), r, world), Masker(MaskingConfig{}));
      for (uint64_t got = 0; got < dl.samples_per_epoch();) {
        Batch b = dl.next();
        for (int64_t row = 0; row < b.rows; ++row) {
          std::vector<int64_t> lab;
          for (int64_t c = 0; c < b.cols; ++c)
            if (b.attention_mask[static_cast<size_t>(row * b.cols + c)]) lab.push_back(b.labels[static_cast<size_t>(row * b.cols + c)]);
          auto [it, fresh] = labels_by_sample.emplace(b.sample_index[static_cast<size_t>(row)], lab);
          if (!fresh) EXPECT_EQ(it->second, lab) << "world " << world;
        }
        got += static_cast<uint64_t>(b.rows);
      }
    }
  }
}
