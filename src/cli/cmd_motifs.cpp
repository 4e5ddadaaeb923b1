// genemask motifs: the ranks of IUPAC consensus motifs in an NPMI ranking (paper Table 5).
#include <fmt/format.h>
#include <iostream>
#include <map>

#include "common.hpp"
#include "genemask/kmer/kmer.hpp"
#include "genemask/kmer/motif.hpp"
#include "io/rank_tables.hpp"

namespace genemask::cli {
namespace {

struct MotifArgs {
  std::string npmi;
  std::vector<std::string> motifs;
  size_t top = 5;
  std::string format = "tsv";
};

void run_motifs(const MotifArgs& a, const Context& ctx) {
  if (ctx.rank != 0) return;
  auto rows = io::read_npmi_tsv(a.npmi);
  std::unordered_map<std::string, uint64_t> rank_of;
  for (const auto& r : rows) rank_of.emplace(r.kmer, r.rank);
  // The row of a hit: the reader checks that the ranks are 1, 2, ... in order.
  const auto row_of = [&](const MotifHit& h) -> const io::NpmiRow& { return rows.at(h.rank - 1); };
  // A k-mer below npmi's --min-count sits after the ranked ones, ordered by an NPMI of too few
  // occurrences (a k-mer seen once has NPMI 0, above k-mers seen 2 to 4 times); one never seen
  // sits last, in code order. Its "rank" says nothing of the motif: marked as such.
  const auto unranked = [&](const MotifHit& h) -> std::string {
    const io::NpmiRow& row = row_of(h);
    if (!row.below_min_count) return "";
    return row.count == 0 ? "never seen" : "below min count";
  };
  uint64_t unranked_hits = 0;
  const int k = static_cast<int>(rows.front().kmer.size());
  const bool md = a.format == "markdown";
  // Every motif matched before the table starts: a bad one leaves no partial table.
  std::vector<MotifResult> results;
  for (const auto& m : a.motifs) {
    try {
      results.push_back(match_motif(m, rank_of, k, a.top));
    } catch (const std::invalid_argument& e) {
      throw std::runtime_error(e.what());
    }
  }
  std::cout << (md ? fmt::format("| Motif | Core | NPMI rank (out of {}) |\n|---|---|---|\n", rows.size())
                   : "motif\tcore\tranks\tkmers\n");
  nlohmann::json out = nlohmann::json::array();
  for (const auto& r : results) {
    std::string ranks, kmers;
    for (size_t i = 0; i < r.hits.size(); ++i) {
      const auto& h = r.hits[i];
      if (i) {
        ranks += ", ";
        kmers += ",";
      }
      const std::string why = unranked(h);
      unranked_hits += !why.empty();
      const std::string rank = why.empty() ? std::to_string(h.rank) : fmt::format("{}: {}", h.rank, why);
      ranks += r.core.size() > static_cast<size_t>(k) ? fmt::format("{} (rank {})", h.kmer, rank)
                                                      : why.empty() ? rank : "(" + rank + ")";
      kmers += h.kmer;
    }
    if (md)
      std::cout << fmt::format("| {} | {} | {} |\n", r.motif, r.core, ranks);
    else
      std::cout << fmt::format("{}\t{}\t{}\t{}\n", r.motif, r.core, ranks, kmers);
    nlohmann::json hits = nlohmann::json::array();
    for (const auto& h : r.hits) {
      const io::NpmiRow& row = row_of(h);
      hits.push_back({{"kmer", h.kmer}, {"rank", h.rank}, {"count", row.count}, {"below_min_count", row.below_min_count}});
    }
    out.push_back({{"motif", r.motif}, {"core", r.core}, {"matched", r.matched}, {"hits", hits}});
  }
  if (unranked_hits > 0)
    std::cerr << fmt::format("genemask: motifs: note: {} of the ranks shown are of k-mers below npmi's --min-count or "
                             "never seen (marked): such k-mers follow the ranked ones, ordered by an NPMI of too few "
                             "occurrences (or, never seen, by code order), so their ranks say nothing of the motif\n",
                             unranked_hits);
  print_summary(ctx, {{"command", "motifs"}, {"npmi", a.npmi}, {"motifs", out}, {"unranked_hits", unranked_hits}});
}

}  // namespace

void register_motifs(CLI::App& app, Context& ctx) {
  auto a = std::make_shared<MotifArgs>();
  auto* sub = app.add_subcommand("motifs", "GRANK ranks of the k-mers matching IUPAC consensus motifs (paper Table 5)");
  sub->add_option("--npmi", a->npmi, "npmi.tsv from `genemask npmi`")->required()->check(existing_file());
  // The motifs are the arguments that are not options, each taken as typed: a positional
  // option would go through CLI11's container syntax, which reads "[A,B]" as two motifs and
  // "[AC[GT]]" as "AC[GT]", so a typo ran other motifs than the ones asked for.
  sub->allow_extras();
  sub->add_option("--top", a->top, "ranks listed per motif (0 = all)")->capture_default_str();
  sub->add_option("--format", a->format, "table format")->check(CLI::IsMember({"tsv", "markdown"}))->capture_default_str();
  sub->footer("Arguments: MOTIF... one or more IUPAC motifs, e.g. nTATAAAr 'nCyy[CCTCC]n', each as typed.\n"
              "The core of a motif is the part in [brackets] (the paper's bold: nCyy[CCTCC]n), else the span from "
              "its first to its last upper-case letter. A core shorter than k "
              "matches every k-mer containing it; a longer core is split into its k-long windows.");
  sub->callback([a, sub, &ctx] {
    a->motifs = sub->remaining();
    for (const auto& m : a->motifs)
      if (m.size() > 1 && m[0] == '-') throw CLI::ExtrasError({m});  // an unknown option, not a motif
    if (a->motifs.empty()) throw CLI::RequiredError("MOTIF (one or more)");
    ctx.run = [a, &ctx] { run_motifs(*a, ctx); };
  });
}

}  // namespace genemask::cli
