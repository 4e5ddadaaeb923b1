// genemask mask-stats: what a masking strategy does to a shard set.
#include <fmt/format.h>
#include <iostream>
#include <map>

#include "common.hpp"
#include "genemask/corpus/loader.hpp"
#include "genemask/corpus/tokenizer.hpp"

namespace genemask::cli {
namespace {

struct MaskStatsArgs {
  std::string shards, npmi, pmi_vocab, split = "train";
  MaskingKind masking = MaskingKind::genemask;
  uint64_t samples = 10000, seed = 42, epoch = 0;
};

void run_mask_stats(const MaskStatsArgs& a, const Context& ctx) {
  if (ctx.rank != 0) return;
  MaskingConfig cfg = load_masking(a.masking, a.npmi, a.pmi_vocab);
  std::vector<uint32_t> grank = cfg.grank;
  if (grank.empty() && !a.npmi.empty()) grank = load_masking(MaskingKind::genemask, a.npmi, "").grank;
  Masker masker(std::move(cfg));
  // SHA-256 and every token id of the shards first: cheap next to training, which is what a
  // mask-stats run usually comes before.
  ShardSet set(a.shards, a.split, ShardChecks{true});
  const uint64_t n = std::min<uint64_t>(a.samples, set.size());
  uint64_t tokens = 0, masked = 0, as_mask = 0, as_random = 0, kept = 0;
  std::map<uint64_t, uint64_t> spans;
  uint64_t decile_all[10] = {}, decile_masked[10] = {};
  std::vector<uint16_t> t;
  MaskedSample m;
  for (uint64_t i = 0; i < n; ++i) {
    set.read(i, t);
    masker.mask(t.data(), t.size(), a.seed, a.epoch, set.sample_index(i), m);
    uint64_t run = 0;
    for (size_t j = 0; j < t.size(); ++j) {
      const bool is = m.labels[j + 1] != kIgnoreLabel;
      ++tokens;
      if (!grank.empty() && t[j] >= kFirstKmerToken) {
        const uint64_t d = (grank[token_to_kmer(t[j])] - 1) * 10 / 4096;
        ++decile_all[d];
        if (is) ++decile_masked[d];
      }
      if (is) {
        ++masked;
        ++run;
        const uint16_t in = m.input_ids[j + 1];
        if (in == kMask) ++as_mask;
        else if (in == t[j]) ++kept;
        else ++as_random;
      } else if (run) {
        ++spans[run];
        run = 0;
      }
    }
    if (run) ++spans[run];
  }
  const double frac = tokens ? static_cast<double>(masked) / static_cast<double>(tokens) : 0.0;
  std::cerr << fmt::format("masking {}: {} samples, {} tokens, masked fraction {:.4f}\n", to_string(a.masking), n, tokens, frac);
  std::cerr << "span length\tspans\n";
  nlohmann::json hist = nlohmann::json::object();
  for (auto [len, cnt] : spans) {
    std::cerr << len << '\t' << cnt << '\n';
    hist[std::to_string(len)] = cnt;
  }
  nlohmann::json deciles = nlohmann::json::array();
  if (!grank.empty()) {
    std::cerr << "GRANK decile\tmasked\tof all tokens\tlift\n";
    for (int d = 0; d < 10; ++d) {
      const double pm = masked ? static_cast<double>(decile_masked[d]) / static_cast<double>(masked) : 0.0;
      const double pa = tokens ? static_cast<double>(decile_all[d]) / static_cast<double>(tokens) : 0.0;
      std::cerr << fmt::format("{}\t{:.4f}\t{:.4f}\t{:.2f}\n", d + 1, pm, pa, pa > 0 ? pm / pa : 0.0);
      deciles.push_back({{"decile", d + 1}, {"masked_share", pm}, {"token_share", pa}, {"lift", pa > 0 ? pm / pa : 0.0}});
    }
  }
  const double mk = masked ? static_cast<double>(masked) : 1.0;
  print_summary(ctx, {{"command", "mask-stats"},
                      {"shards", a.shards},
                      {"masking", to_string(a.masking)},
                      {"samples", n},
                      {"tokens", tokens},
                      {"masked_tokens", masked},
                      {"masked_fraction", frac},
                      {"replacement", {{"mask", static_cast<double>(as_mask) / mk},
                                       {"random", static_cast<double>(as_random) / mk},
                                       {"kept", static_cast<double>(kept) / mk}}},
                      {"span_histogram", hist},
                      {"grank_deciles", deciles}});
}

}  // namespace

void register_mask_stats(CLI::App& app, Context& ctx) {
  auto a = std::make_shared<MaskStatsArgs>();
  auto* sub = app.add_subcommand("mask-stats", "Show what a masking strategy does on a shard set");
  sub->add_option("--shards", a->shards, "shard directory from `genemask shards`")->required()->check(existing_directory());
  add_masking_option(sub, a->masking)->required();
  sub->add_option("--npmi", a->npmi, "npmi.tsv (needed by genemask; gives GRANK deciles for any strategy)")
      ->check(existing_file());
  sub->add_option("--pmi-vocab", a->pmi_vocab, "pmi_vocab.tsv (needed by pmi-vocab)")->check(existing_file());
  sub->add_option("--samples", a->samples, "samples to mask (in sample order)")->capture_default_str();
  sub->add_option("--seed", a->seed, "masking seed")->capture_default_str();
  sub->add_option("--epoch", a->epoch, "epoch (masks change per epoch)")->capture_default_str();
  sub->add_option("--split", a->split, "train or valid")->check(CLI::IsMember({"train", "valid"}))->capture_default_str();
  sub->callback([a, &ctx] { ctx.run = [a, &ctx] { run_mask_stats(*a, ctx); }; });
}

}  // namespace genemask::cli
