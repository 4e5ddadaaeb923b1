// genemask mask-stats: what a masking strategy does to a shard set.
#include <fmt/format.h>
#include <limits>
#include <iostream>
#include <array>
#include <map>

#include "common.hpp"
#include "io/output_guard.hpp"
#include "genemask/corpus/loader.hpp"
#include "genemask/corpus/mask_audit.hpp"
#include "genemask/kmer/kmer.hpp"
#include "io/atomic_file.hpp"
#include "genemask/corpus/tokenizer.hpp"

namespace genemask::cli {
namespace {

struct MaskStatsArgs {
  std::string shards, npmi, pmi_vocab, split = "train", by_kmer;
  MaskingKind masking = MaskingKind::genemask;
  uint64_t samples = 10000, seed = 42, epoch = 0, min_occurrences = 50;
  double flag_factor = 2.0;
  bool force = false;
};

/// The TSV of --by-kmer: one row per 6-mer (vocabulary order).
constexpr const char* kByKmerHeader =
    "kmer\ttoken\tgrank\toccurrences\tmasked\trate\trelative\tflag\tsplice_motif";

/// a / b, or 0 when b is 0 (nothing to share).
double share(uint64_t a, uint64_t b) { return b ? static_cast<double>(a) / static_cast<double>(b) : 0.0; }
/// a / b for a table cell, empty when b is 0.
std::string ratio(uint64_t a, uint64_t b) { return b ? fmt::format("{}", share(a, b)) : ""; }

void run_mask_stats(const MaskStatsArgs& a, const Context& ctx) {
  if (ctx.rank != 0) return;
  if (!(a.flag_factor > 1)) throw std::invalid_argument(fmt::format("--flag-factor {} must be above 1", a.flag_factor));
  MaskingConfig cfg = load_masking(a.masking, a.npmi, a.pmi_vocab);
  std::vector<uint32_t> grank = cfg.grank;
  if (grank.empty() && !a.npmi.empty()) grank = load_masking(MaskingKind::genemask, a.npmi, "").grank;
  Masker masker(std::move(cfg));
  // SHA-256 and every token id of the shards first: cheap next to training, which is what a
  // mask-stats run usually comes before.
  const auto hold = io::hold_output_for_reading(a.shards, "--shards " + a.shards);  // not swapped while read
  ShardSet set(a.shards, a.split, ShardChecks{true});
  const uint64_t n = std::min<uint64_t>(a.samples, set.size());
  uint64_t as_mask = 0, as_random = 0, kept = 0;
  uint64_t decile_all[10] = {}, decile_masked[10] = {};
  MaskAudit audit;
  std::vector<uint16_t> t;
  std::vector<uint8_t> is_masked;
  MaskedSample m;
  // Samples spread evenly over the split (sample k of n: k x size / n), not its first ones:
  // the split is in sample order, so chromosome after chromosome and, for a genome list,
  // genome after genome. A genome list's set also gets the figures per genome.
  const size_t ngenomes = set.genomes().size();
  std::vector<uint64_t> g_samples(ngenomes, 0), g_tokens(ngenomes, 0), g_masked(ngenomes, 0);
  for (uint64_t k = 0; k < n; ++k) {
    const auto i = static_cast<size_t>(static_cast<unsigned __int128>(k) * set.size() / n);
    set.read(i, t);
    masker.mask(t.data(), t.size(), a.seed, a.epoch, set.sample_index(i), m);
    if (ngenomes > 0) {
      const uint32_t g = set.genome(i);
      ++g_samples[g];
      g_tokens[g] += t.size();
      for (size_t j = 0; j < t.size(); ++j) g_masked[g] += m.labels[j + 1] != kIgnoreLabel;
    }
    is_masked.assign(t.size(), 0);
    for (size_t j = 0; j < t.size(); ++j) {
      const bool is = m.labels[j + 1] != kIgnoreLabel;
      is_masked[j] = is;
      if (!grank.empty() && t[j] >= kFirstKmerToken) {
        const uint64_t d = (grank[token_to_kmer(t[j])] - 1) * 10 / 4096;
        ++decile_all[d];
        if (is) ++decile_masked[d];
      }
      if (is) {
        const uint16_t in = m.input_ids[j + 1];
        if (in == kMask) ++as_mask;
        else if (in == t[j]) ++kept;
        else ++as_random;
      }
    }
    audit.add(t.data(), t.size(), is_masked);
  }
  const uint64_t tokens = audit.tokens(), masked = audit.masked();
  const double frac = audit.masked_fraction();
  std::cerr << fmt::format("masking {}: {} of {} {} samples (spread over the split; seed {}, epoch {}), {} tokens, "
                           "masked fraction {:.4f}\n",
                           to_string(a.masking), n, set.size(), a.split, a.seed, a.epoch, tokens, frac);
  std::cerr << "span length\tspans\n";
  nlohmann::json hist = nlohmann::json::object();
  for (auto [len, cnt] : audit.spans()) {
    std::cerr << len << '\t' << cnt << '\n';
    hist[std::to_string(len)] = cnt;
  }
  nlohmann::json genomes = nlohmann::json::array();
  if (ngenomes > 0) {
    std::cerr << "genome\tsamples\ttokens\tmasked fraction\n";
    for (size_t g = 0; g < ngenomes; ++g) {
      std::cerr << fmt::format("{}\t{}\t{}\t{:.4f}\n", set.genomes()[g].name, g_samples[g], g_tokens[g],
                               share(g_masked[g], g_tokens[g]));
      genomes.push_back({{"name", set.genomes()[g].name},
                         {"samples", g_samples[g]},
                         {"tokens", g_tokens[g]},
                         {"masked_tokens", g_masked[g]},
                         {"masked_fraction", share(g_masked[g], g_tokens[g])}});
    }
  }
  nlohmann::json deciles = nlohmann::json::array();
  if (!grank.empty()) {
    std::cerr << "GRANK decile\tmasked\tof all tokens\tlift\n";
    for (int d = 0; d < 10; ++d) {
      const double pm = share(decile_masked[d], masked);
      const double pa = share(decile_all[d], tokens);
      std::cerr << fmt::format("{}\t{:.4f}\t{:.4f}\t{:.2f}\n", d + 1, pm, pa, pa > 0 ? pm / pa : 0.0);
      deciles.push_back({{"decile", d + 1}, {"masked_share", pm}, {"token_share", pa}, {"lift", pa > 0 ? pm / pa : 0.0}});
    }
  }
  // The audit: by position, leakage, and (--by-kmer) per 6-mer with the ones far from the mean.
  nlohmann::json by_position = nlohmann::json::array();
  for (int d = 0; d < MaskAudit::kDeciles; ++d)
    by_position.push_back({{"decile", d + 1}, {"tokens", audit.decile_tokens()[d]}, {"masked", audit.decile_masked()[d]},
                           {"masked_fraction", share(audit.decile_masked()[d], audit.decile_tokens()[d])}});
  const uint64_t middle_tokens = tokens - audit.edge_tokens(), middle_masked = masked - audit.edge_masked();
  nlohmann::json leakage = {
      {"spans", audit.span_count()},
      {"leaking_spans", audit.leaking_spans()},
      {"leaking_span_share", share(audit.leaking_spans(), audit.span_count())},
      {"leaking_tokens", audit.leaking_tokens()},
      {"hidden_bases_per_masked_token", [&] {
         uint64_t sum = 0;
         for (size_t h = 0; h < 7; ++h) sum += h * audit.hidden_per_token()[h];
         return share(sum, masked);
       }()},
      {"masked_tokens_by_hidden_bases", audit.hidden_per_token()},
      {"hidden_bases_per_span", share(audit.hidden_bases(), audit.span_count())}};
  nlohmann::json summary = {{"command", "mask-stats"},
                            {"shards", a.shards},
                            {"masking", to_string(a.masking)},
                            {"split", a.split},
                            {"split_samples", set.size()},
                            {"seed", a.seed},
                            {"epoch", a.epoch},
                            {"samples", n},
                            {"tokens", tokens},
                            {"masked_tokens", masked},
                            {"masked_fraction", frac},
                            {"replacement", {{"mask", share(as_mask, masked)},
                                             {"random", share(as_random, masked)},
                                             {"kept", share(kept, masked)}}},
                            {"span_histogram", hist},
                            {"grank_deciles", deciles},
                            {"by_position", by_position},
                            {"edges", {{"tokens", MaskAudit::kEdge},
                                       {"masked_fraction_edges", share(audit.edge_masked(), audit.edge_tokens())},
                                       {"masked_fraction_middle", share(middle_masked, middle_tokens)}}},
                            {"leakage", leakage}};
  if (ngenomes > 0) summary["genomes"] = genomes;
  std::cerr << fmt::format("spans {}, of which {} leak (a masked 6-mer readable off unmasked neighbours); {:.2f} bases "
                           "hidden per span, {:.2f} of the 6 bases of a masked 6-mer hidden on average\n",
                           audit.span_count(), audit.leaking_spans(), leakage["hidden_bases_per_span"].get<double>(),
                           leakage["hidden_bases_per_masked_token"].get<double>());
  if (!a.by_kmer.empty()) {
    // A 6-mer is flagged when it occurs at least --min-occurrences times and its masking
    // rate is more than --flag-factor times the strategy's masked fraction, or less than
    // that fraction divided by it.
    io::AtomicFile f(a.by_kmer);
    f.stream() << kByKmerHeader << '\n';
    uint64_t high = 0, low = 0;
    std::vector<std::pair<double, std::string>> flagged_high, flagged_low;
    std::map<std::string, std::array<uint64_t, 3>> motifs;  // GT, AG: k-mers, occurrences, masked
    for (uint16_t tok = kFirstKmerToken; tok < kVocabSize; ++tok) {
      const uint32_t code = token_to_kmer(tok);
      const std::string kmer = decode_kmer(code, 6);
      const uint64_t occ = audit.kmer_tokens()[code], mk = audit.kmer_masked()[code];
      const double rate = share(mk, occ);
      const double rel = frac > 0 && occ ? rate / frac : 0.0;
      std::string flag;
      if (occ >= a.min_occurrences && frac > 0) {
        if (rel > a.flag_factor) flag = "high", ++high, flagged_high.push_back({rel, kmer});
        else if (rel < 1 / a.flag_factor) flag = "low", ++low, flagged_low.push_back({rel, kmer});
      }
      const std::string motif = splice_motif(kmer);
      for (const char* which : {"GT", "AG"})
        if (motif.find(which) != std::string::npos) {
          auto& g = motifs[which];
          ++g[0];
          g[1] += occ;
          g[2] += mk;
        }
      f.stream() << kmer << '\t' << tok << '\t' << (grank.empty() ? std::string() : std::to_string(grank[code])) << '\t'
                 << occ << '\t' << mk << '\t' << ratio(mk, occ) << '\t' << (occ && frac > 0 ? fmt::format("{}", rel) : "")
                 << '\t' << flag << '\t' << motif << '\n';
    }
    f.commit();
    std::sort(flagged_high.rbegin(), flagged_high.rend());
    std::sort(flagged_low.begin(), flagged_low.end());
    const auto top = [](const std::vector<std::pair<double, std::string>>& v) {
      nlohmann::json j = nlohmann::json::array();
      for (size_t i = 0; i < v.size() && i < 10; ++i) j.push_back({{"kmer", v[i].second}, {"relative", v[i].first}});
      return j;
    };
    nlohmann::json splice = nlohmann::json::object();
    for (const auto& [which, g] : motifs) {
      const double rate = share(g[2], g[1]);
      splice[which] = {{"kmers", g[0]}, {"occurrences", g[1]}, {"masked", g[2]}, {"rate", rate},
                       {"relative", frac > 0 ? rate / frac : 0.0}};
      std::cerr << fmt::format("6-mers {} {} ({}): masked {:.4f} of their occurrences, {:.2f}x the mean\n",
                               which == std::string("GT") ? "starting with" : "ending with", which,
                               which == std::string("GT") ? "splice donors' intron start" : "splice acceptors' intron end",
                               rate, frac > 0 ? rate / frac : 0.0);
    }
    std::cerr << fmt::format("6-mers masked more than {}x the mean: {}; less than 1/{}: {} (of those seen {} times or "
                             "more): {}\n",
                             a.flag_factor, high, a.flag_factor, low, a.min_occurrences, a.by_kmer);
    summary["by_kmer"] = {{"out", a.by_kmer},
                          {"flag_factor", a.flag_factor},
                          {"min_occurrences", a.min_occurrences},
                          {"flagged_high", high},
                          {"flagged_low", low},
                          {"top_high", top(flagged_high)},
                          {"top_low", top(flagged_low)},
                          {"splice_motifs", splice}};
  }
  print_summary(ctx, summary);
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
  sub->add_option("--samples", a->samples, "samples to mask, spread evenly over the split (all of it when it has fewer)")
      ->capture_default_str()
      ->check(CLI::Range(uint64_t{1}, std::numeric_limits<uint64_t>::max()));  // 0: every figure undefined
  sub->add_option("--seed", a->seed, "masking seed")->capture_default_str();
  sub->add_option("--epoch", a->epoch, "epoch (masks change per epoch)")->capture_default_str();
  sub->add_option("--split", a->split, "train or valid")->check(CLI::IsMember({"train", "valid"}))->capture_default_str();
  sub->add_option("--by-kmer", a->by_kmer,
                  "the masking audit per 6-mer, as TSV: occurrences, masked, rate, rate relative to the masked "
                  "fraction, a flag when that is beyond --flag-factor, and the splice dinucleotide (GT... donor, "
                  "...AG acceptor); the summary adds the flagged 6-mers and the splice motifs' rates");
  sub->add_option("--flag-factor", a->flag_factor, "flag a 6-mer masked more than this many times the mean rate, or "
                                                   "less than the mean divided by it")
      ->capture_default_str();
  sub->add_option("--min-occurrences", a->min_occurrences, "flag only 6-mers seen at least this often")
      ->capture_default_str();
  add_file_force_flag(sub, a->force, "--by-kmer");
  sub->footer("Besides the masked fraction, the replacement shares and the span lengths, the summary audits the "
              "masking: the masked fraction by position decile in the sample and at its ends, and leakage: the masked "
              "spans in which some masked 6-mer's six bases can all be read off unmasked neighbouring tokens (fewer "
              "than 6 masked tokens in a row between unmasked ones hide no base), with the bases hidden per span.");
  sub->callback([a, &ctx] {
    ctx.inputs = {{"--shards", a->shards}, {"--npmi", a->npmi}, {"--pmi-vocab", a->pmi_vocab}};
    ctx.outputs = {file_output("--by-kmer", a->by_kmer, {io::OwnFile::Kind::first_line, kByKmerHeader,
                                                         "a mask-stats --by-kmer table"}, a->force)};
    ctx.run = [a, &ctx] { run_mask_stats(*a, ctx); };
  });
}

}  // namespace genemask::cli
