#include "genemask/corpus/loader.hpp"

#include <gtest/gtest.h>

#include <fmt/format.h>
#include <unistd.h>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <fstream>
#include <functional>
#include <hdf5.h>

#include <algorithm>
#include <map>
#include <set>
#include <stdexcept>

#include "genemask/corpus/tokenizer.hpp"
#include "io/sha256.hpp"
#include "io/shard_manifest.hpp"
#include "test_util.hpp"

using namespace genemask;
namespace fs = std::filesystem;
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
  m.chromosomes = {{"chr1", 1000000}};
  m.candidates = n;  // every segment cut kept: the shards hold all n
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
    m.shards.push_back(io::ManifestShard{file, "train", io::sha256_file(dir + "/" + file), d.samples(),
                                         d.tokens.size(), d.sample_index.front(), d.sample_index.back()});
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

// The epochs are one stream: micro-batch k of R ranks x M samples covers stream positions
// [kMR, (k+1)MR), rank r every R-th from r. Every micro-batch is whole, every sample is
// trained once an epoch (none of the last N mod R left out), and the samples of each step are
// the same for any layout of one size (ranks x micro-batch x accumulation): 50 samples, steps
// of 12, at 1 x 12, 1 x 4 x 3, 2 x 6, 2 x 2 x 3, 3 x 4, 4 x 3, 6 x 2, 12 x 1.
TEST(DataLoader, EpochsAreOneStreamWholeAndTheSameForEveryLayout) {
  TempDir tmp;
  make_shards(tmp.path(), 50);
  const uint64_t steps = 13, step_size = 12;  // 156 samples: 3 epochs and 6 of a fourth
  std::vector<std::vector<std::pair<uint64_t, uint64_t>>> reference;  // per step: sorted (epoch, sample)
  for (const auto& [world, micro] : std::vector<std::pair<int, size_t>>{
           {1, 12}, {1, 4}, {2, 6}, {2, 2}, {3, 4}, {4, 3}, {6, 2}, {12, 1}}) {
    const uint64_t accum = step_size / (static_cast<uint64_t>(world) * micro);
    std::vector<std::vector<std::pair<uint64_t, uint64_t>>> per_step(steps);
    for (int r = 0; r < world; ++r) {
      LoaderOptions o = opts(tmp.path(), r, world);
      o.batch_size = micro;
      DataLoader dl(o, Masker(MaskingConfig{}));
      for (uint64_t s = 0; s < steps; ++s)
        for (uint64_t a = 0; a < accum; ++a) {
          const Batch b = dl.next();
          ASSERT_EQ(b.rows, static_cast<int64_t>(micro)) << "a short micro-batch";
          ASSERT_EQ(b.epoch.size(), micro);
          for (size_t i = 0; i < micro; ++i) per_step[s].emplace_back(b.epoch[i], b.sample_index[i]);
          // The cursor after it: the stream position of the next micro-batch, on every rank.
          const uint64_t end = (s * accum + a + 1) * micro * static_cast<uint64_t>(world);
          EXPECT_EQ(b.next, (LoaderCursor{end / 50, end % 50}));
        }
    }
    for (auto& st : per_step) std::sort(st.begin(), st.end());
    if (reference.empty()) {
      reference = per_step;
      // Each epoch holds every sample once: the stream of 1 x 12 is epochs 0, 1, 2 whole.
      std::map<uint64_t, std::multiset<uint64_t>> by_epoch;
      for (const auto& st : per_step)
        for (const auto& [e, i] : st) by_epoch[e].insert(i);
      for (uint64_t e = 0; e < 3; ++e) {
        ASSERT_EQ(by_epoch[e].size(), 50u) << e;
        EXPECT_EQ(std::set<uint64_t>(by_epoch[e].begin(), by_epoch[e].end()).size(), 50u) << e;
      }
      EXPECT_EQ(by_epoch[3].size(), 6u);
    } else {
      EXPECT_EQ(per_step, reference) << world << " ranks x " << micro;
    }
  }
}

// Validation takes the split's first samples, every one of them, at any rank count: the
// 50 % world samples that training leaves out of an epoch are evaluated too, and a rank
// beyond the samples has no batch.
TEST(DataLoader, FirstSamplesAreTakenWholeAtEveryRankCount) {
  TempDir tmp;
  make_shards(tmp.path(), 50);
  for (uint64_t first : {uint64_t{23}, uint64_t{50}, uint64_t{1000}, uint64_t{2}}) {
    const uint64_t n = std::min<uint64_t>(first, 50);
    for (int world : {1, 2, 3, 4}) {
      std::set<uint64_t> seen;
      for (int r = 0; r < world; ++r) {
        LoaderOptions o = opts(tmp.path(), r, world);
        o.shuffle = false;
        o.first_samples = first;
        DataLoader dl(o, Masker(MaskingConfig{}));
        uint64_t got = 0;
        for (uint64_t b = 0; b < dl.batches_per_epoch(); ++b) {
          Batch batch = dl.next();
          EXPECT_EQ(batch.next.epoch, 0u);
          for (uint64_t s : batch.sample_index) EXPECT_TRUE(seen.insert(s).second) << "sample seen twice: " << s;
          got += static_cast<uint64_t>(batch.rows);
        }
        EXPECT_EQ(got, dl.samples_per_epoch());
        if (dl.samples_per_epoch() == 0) EXPECT_THROW(dl.next(), std::logic_error);
      }
      std::set<uint64_t> expected;
      for (uint64_t i = 0; i < n; ++i) expected.insert(i * 7);  // the first n in sample order
      EXPECT_EQ(seen, expected) << "first " << first << ", world " << world;
    }
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
  std::map<std::pair<uint64_t, uint64_t>, std::vector<int64_t>> labels_by_sample;  // (epoch, sample)
  for (int world : {1, 2, 4}) {
    for (int r = 0; r < world; ++r) {
      DataLoader dl(opts(tmp.path(), r, world), Masker(MaskingConfig{}));
      for (uint64_t got = 0; got < dl.samples_per_epoch();) {
        Batch b = dl.next();
        for (int64_t row = 0; row < b.rows; ++row) {
          std::vector<int64_t> lab;
          for (int64_t c = 0; c < b.cols; ++c)
            if (b.attention_mask[static_cast<size_t>(row * b.cols + c)]) lab.push_back(b.labels[static_cast<size_t>(row * b.cols + c)]);
          auto [it, fresh] = labels_by_sample.emplace(
              std::pair{b.epoch[static_cast<size_t>(row)], b.sample_index[static_cast<size_t>(row)]}, lab);
          if (!fresh) EXPECT_EQ(it->second, lab) << "world " << world;
        }
        got += static_cast<uint64_t>(b.rows);
      }
    }
  }
}

// A shard is untrusted input: the limits of what a sample may hold, exactly at the edges.
// Regression: token ids >= 4101 and decreasing offsets reached the masker ("vector::
// _M_default_append") and the model ("index out of range in self").
TEST(ShardReader, RefusesIdsAndOffsetsOutsideTheFormat) {
  TempDir tmp;
  auto shard = [&](const std::vector<std::vector<uint16_t>>& samples, std::vector<uint64_t> offsets = {}) {
    io::ShardData d;
    for (size_t i = 0; i < samples.size(); ++i) {
      d.tokens.insert(d.tokens.end(), samples[i].begin(), samples[i].end());
      d.offsets.push_back(d.tokens.size());
      d.sample_index.push_back(i);
      d.chrom.push_back(0);
      d.start.push_back(0);
    }
    if (!offsets.empty()) d.offsets = offsets;
    io::write_shard(tmp.file("s.h5"), d, "train", 1, vocab_sha256());
    return tmp.file("s.h5");
  };
  const std::vector<uint16_t> longest(510, 5), edges{5, 4100, 77};
  io::ShardReader ok(shard({longest, edges}));
  std::vector<uint16_t> got;
  ok.read(0, got);
  EXPECT_EQ(got, longest);
  ok.read(1, got);
  EXPECT_EQ(got, edges);
  ok.verify_tokens();
  const std::string f = tmp.file("s.h5");
  auto read_error = [&](const std::vector<std::vector<uint16_t>>& samples, size_t i) {
    return test::error_of([&] {
      io::ShardReader r(shard(samples));
      r.read(i, got);
    });
  };
  EXPECT_EQ(read_error({edges, {5, 6, 4101}}, 1),
            f + ": damaged shard: sample 1 has token id 4101 at position 2, outside the 6-mer ids 5..4100 of the "
                "DNABERT-6 vocabulary (build the shards again)");
  EXPECT_EQ(read_error({{4, 5}}, 0), f + ": damaged shard: sample 0 has token id 4 at position 0, outside the 6-mer ids "
                                         "5..4100 of the DNABERT-6 vocabulary (build the shards again)");
  EXPECT_EQ(test::error_of([&] { io::ShardReader(shard({edges, {9, 4200}})).verify_tokens(); }),
            f + ": damaged shard: sample 1 has token id 4200 at position 1, outside the 6-mer ids 5..4100 of the "
                "DNABERT-6 vocabulary (build the shards again)");
  EXPECT_EQ(test::error_of([&] { io::ShardReader r(shard({std::vector<uint16_t>(511, 5)})); }),
            f + ": damaged shard: sample 0 spans offsets 0..511, expected 1 to 510 tokens in increasing order");
  EXPECT_EQ(test::error_of([&] { io::ShardReader r(shard({edges, edges}, {0, 3, 2})); }),
            f + ": damaged shard: sample 1 spans offsets 3..2, expected 1 to 510 tokens in increasing order");
  EXPECT_EQ(test::error_of([&] { io::ShardReader r(shard({edges, edges}, {0, 3, 7})); }),
            f + ": damaged shard: the offsets end at token 7, but /tokens holds 6");
  EXPECT_EQ(test::error_of([&] { io::ShardReader r(shard({edges, edges}, {1, 3, 6})); }),
            f + ": damaged shard: offsets[0] is 1, expected 0");
}

// mask-stats and pretrain --verify check each file against the manifest's SHA-256 and
// every token id before anything is masked; the ranks' parts cover every file once.
TEST(ShardSet, VerifyFindsAlteredFilesInEveryPart) {
  TempDir tmp;
  make_shards(tmp.path(), 30);
  auto m = io::read_manifest(tmp.path());
  for (auto& sh : m.shards) sh.sha256 = io::sha256_file(tmp.path() + "/" + sh.file);
  io::write_manifest(tmp.path(), m);
  for (int part = 0; part < 3; ++part) EXPECT_NO_THROW(ShardSet(tmp.path(), "train", ShardChecks{true, true, part, 3}));
  // Change one token of the second file to another valid id (the shard still reads).
  const std::string victim = tmp.path() + "/" + m.shards[1].file;
  {
    hid_t f = H5Fopen(victim.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    ASSERT_GE(f, 0);
    hid_t ds = H5Dopen2(f, "tokens", H5P_DEFAULT);
    hid_t space = H5Dget_space(ds);
    const hsize_t at = 3, one = 1;
    H5Sselect_hyperslab(space, H5S_SELECT_SET, &at, nullptr, &one, nullptr);
    hid_t mem = H5Screate_simple(1, &one, nullptr);
    const uint16_t id = 4000;
    ASSERT_GE(H5Dwrite(ds, H5T_NATIVE_UINT16, mem, space, H5P_DEFAULT, &id), 0);
    H5Sclose(mem);
    H5Sclose(space);
    H5Dclose(ds);
    H5Fclose(f);
  }
  EXPECT_NO_THROW(ShardSet(tmp.path(), "train", ShardChecks{false, false, 0, 1}));  // no checks asked: not looked at
  // Every reader checks the SHA-256 of the shards it reads by default (issue 31).
  EXPECT_EQ(test::error_of([&] { ShardSet(tmp.path(), "train"); }),
            victim + ": SHA-256 differs from " + tmp.path() + "/manifest.json: the file was changed or damaged (build "
                     "the shards again)");
  int found = 0;
  for (int part = 0; part < 3; ++part) {
    const std::string e = test::error_of([&] { ShardSet(tmp.path(), "train", ShardChecks{true, true, part, 3}); });
    if (e == "no error") continue;
    ++found;
    EXPECT_EQ(e, victim + ": SHA-256 differs from " + tmp.path() + "/manifest.json: the file was changed or damaged "
                          "(build the shards again)");
  }
  EXPECT_EQ(found, 1);
}

// A manifest is checked wherever it is read (issue 31: one that listed a shard twice doubled
// mask-stats' samples and pretrain --verify trained on them twice).
TEST(ShardSet, AShardListedTwiceOrCopiedIsRefused) {
  TempDir tmp;
  make_shards(tmp.path(), 30);
  const auto m = io::read_manifest(tmp.path());
  const auto rewrite = [&](const std::function<void(nlohmann::json&)>& edit) {
    std::ifstream in(tmp.path() + "/manifest.json");
    nlohmann::json j = nlohmann::json::parse(in);
    edit(j);
    test::write_file(tmp.path() + "/manifest.json", j.dump(2));
  };
  const std::string path = tmp.path() + "/manifest.json";
  const std::string original = test::read_file(path);
  rewrite([](nlohmann::json& j) { j["shards"].push_back(j["shards"][0]); });
  EXPECT_EQ(test::error_of([&] { io::read_manifest(tmp.path()); }),
            path + ": shards[0] and shards[3] both list the shard " + m.shards[0].file +
                ": each shard is listed once (its samples would be counted twice); build the shards again");
  test::write_file(path, original);
  fs::copy_file(tmp.path() + "/" + m.shards[0].file, tmp.path() + "/copy.h5");
  rewrite([&](nlohmann::json& j) {
    auto c = j["shards"][0];
    c["file"] = "copy.h5";
    j["shards"].push_back(c);
    j["totals"]["train"]["samples"] = j["totals"]["train"]["samples"].get<uint64_t>() + c["samples"].get<uint64_t>();
    j["totals"]["train"]["tokens"] = j["totals"]["train"]["tokens"].get<uint64_t>() + c["tokens"].get<uint64_t>();
    j["candidates"] = j["candidates"].get<uint64_t>() + c["samples"].get<uint64_t>();
  });
  const std::string e = test::error_of([&] { ShardSet(tmp.path(), "train"); });
  EXPECT_NE(e.find("is in both"), std::string::npos) << e;
  test::write_file(path, original);
  // A shard left out of the list (its file still there), with the totals removed or made to
  // agree, was read as a smaller corpus: the totals are required, and the cut's own count of
  // samples must agree with them.
  rewrite([](nlohmann::json& j) {
    j["shards"].erase(j["shards"].size() - 1);
    j.erase("totals");
  });
  EXPECT_EQ(test::error_of([&] { io::read_manifest(tmp.path()); }),
            path + ": totals: missing; the manifest is damaged or was edited: build the shards again");
  test::write_file(path, original);
  uint64_t left_out = 0;
  rewrite([&](nlohmann::json& j) {
    const auto last = j["shards"][j["shards"].size() - 1];
    left_out = last["samples"].get<uint64_t>();
    j["shards"].erase(j["shards"].size() - 1);
    j["totals"]["train"]["samples"] = j["totals"]["train"]["samples"].get<uint64_t>() - left_out;
    j["totals"]["train"]["tokens"] = j["totals"]["train"]["tokens"].get<uint64_t>() - last["tokens"].get<uint64_t>();
  });
  EXPECT_EQ(test::error_of([&] { io::read_manifest(tmp.path()); }),
            path + fmt::format(": candidates: 30 segments cut, 0 dropped, but the shards listed hold {} samples; the "
                               "manifest is damaged or was edited: build the shards again",
                               30 - left_out));
  test::write_file(path, original);
  ASSERT_EQ(::link((tmp.path() + "/" + m.shards[1].file).c_str(), (tmp.path() + "/link.h5").c_str()), 0);
  rewrite([&](nlohmann::json& j) {
    auto c = j["shards"][1];
    c["file"] = "link.h5";
    j["shards"].push_back(c);
  });
  EXPECT_NE(test::error_of([&] { io::read_manifest(tmp.path()); }).find("which are the same file (a link)"),
            std::string::npos);
  test::write_file(path, original);
  rewrite([](nlohmann::json& j) { j["totals"]["train"]["tokens"] = 1; });
  EXPECT_NE(test::error_of([&] { io::read_manifest(tmp.path()); }).find("totals.train: 30 samples and 1 tokens"),
            std::string::npos);
  test::write_file(path, original);
  rewrite([](nlohmann::json& j) { j["recipe"]["full_prob"] = nullptr; });
  EXPECT_EQ(test::error_of([&] { io::read_manifest(tmp.path()); }),
            path + ": recipe.full_prob: null is not a number in [0, 1]; the manifest is damaged or was edited: build "
                   "the shards again");
  test::write_file(path, original);
  rewrite([](nlohmann::json& j) { j["shards"][2]["file"] = "../../etc/passwd"; });
  EXPECT_NE(test::error_of([&] { io::read_manifest(tmp.path()); }).find("shards[2].file: '../../etc/passwd' is not a "
                                                                        "file name in the shard directory"),
            std::string::npos);
  test::write_file(path, original);
  EXPECT_NO_THROW(ShardSet(tmp.path(), "train"));
  // A shard left out with the totals AND the cut's count made to agree (every count of the
  // manifest a record of the same, smaller corpus): the set's marker lists what `genemask
  // shards` wrote, and the manifest must list the same shards.
  nlohmann::json marker = {{"format", "genemask-output"}, {"format_version", 1}, {"command", "shards"},
                           {"complete", true}, {"entries", nlohmann::json::array({"manifest.json"})}};
  for (const auto& sh : m.shards) marker["entries"].push_back(sh.file);
  test::write_file(tmp.path() + "/.genemask.json", marker.dump());
  EXPECT_NO_THROW(io::read_manifest(tmp.path()));
  const std::string last = m.shards.back().file;
  rewrite([&](nlohmann::json& j) {
    const auto gone = j["shards"][j["shards"].size() - 1];
    j["shards"].erase(j["shards"].size() - 1);
    for (const char* k : {"samples", "tokens"})
      j["totals"]["train"][k] = j["totals"]["train"][k].get<uint64_t>() - gone[k].get<uint64_t>();
    j["candidates"] = j["candidates"].get<uint64_t>() - gone["samples"].get<uint64_t>();
  });
  EXPECT_EQ(test::error_of([&] { io::read_manifest(tmp.path()); }),
            path + ": does not list the shard " + last + ", which `genemask shards` wrote into the set (" + tmp.path() +
                "/.genemask.json lists it): the manifest was edited, and its samples would be left out; build the "
                "shards again");
  test::write_file(path, original);
  EXPECT_NO_THROW(ShardSet(tmp.path(), "train"));
}

// A shard set written with another vocabulary's ids (its manifest says so) was read as
// genemask's: pretrain and mask-stats would have trained on and masked other tokens.
TEST(ShardSet, ShardsOfAnotherVocabularyAreRefused) {
  TempDir tmp;
  make_shards(tmp.path(), 20);
  const std::string path = tmp.path() + "/manifest.json";
  nlohmann::json j = nlohmann::json::parse(test::read_file(path));
  j["vocab_sha256"] = std::string(64, '0');
  test::write_file(path, j.dump(2));
  EXPECT_EQ(test::error_of([&] { ShardSet(tmp.path(), "train"); }),
            path + ": vocab_sha256 is '" + std::string(64, '0') +
                "', but genemask's DNABERT-6 vocabulary (`genemask vocab`) has SHA-256 " + vocab_sha256() +
                ": the shards hold the ids of another vocabulary; build the shards again with this genemask");
}
