// genemask npmi: the NPMI ranking of all k-mers of one length (GRANK) from counts.h5.
#include <fmt/format.h>
#include <iostream>

#include "common.hpp"
#include "genemask/kmer/kmer.hpp"
#include "genemask/kmer/pmi.hpp"
#include "io/counts_file.hpp"
#include "io/error.hpp"
#include "io/rank_tables.hpp"

namespace genemask::cli {
namespace {

struct NpmiArgs {
  std::string counts, out, genome;
  int k = 6;
  uint64_t min_count = 101;
  bool force = false;
};

void run_npmi(const NpmiArgs& a, const Context& ctx) {
  if (ctx.rank != 0) return;  // cheap: rank 0 does it
  check_writable(a.out);
  io::CountsFile cf = io::read_counts_file(a.counts, a.k, false, a.genome);
  // No k-mer of this length counted: every PMI is undefined, and a "ranking" would be the
  // k-mers in code order.
  uint64_t kmers = 0;
  for (const uint64_t c : cf.counts.at(static_cast<size_t>(a.k))) kmers += c;
  if (kmers == 0)
    throw io::InputError(a.counts, fmt::format("holds no {}-mer{}: no stretch of {} A/C/G/T bases was counted, so there "
                                               "is nothing to rank; count a longer genome, or rank a shorter --k",
                                               a.k, a.genome.empty() ? "" : " of genome " + a.genome, a.k));
  PmiCalculator calc(cf.counts, a.k);
  auto ranking = npmi_ranking(calc, a.k, a.min_count);
  std::vector<io::NpmiRow> rows;
  rows.reserve(ranking.size());
  uint64_t below = 0;
  for (const auto& e : ranking) {
    rows.push_back(io::NpmiRow{e.rank, decode_kmer(e.code, a.k), e.count, e.pmi, e.npmi, e.below_min_count});
    below += e.below_min_count;
  }
  io::write_npmi_tsv(a.out, rows);
  // GeneMask masks by the ranks of the k-mers at or above --min-count: with none, or few, the
  // "ranking" is of counts too small to say anything (a genome much shorter than the
  // threshold assumes).
  if (below * 2 > rows.size())
    std::cerr << fmt::format("genemask: npmi: warning: {} of the {} {}-mers are below --min-count {} (flagged, ranked "
                             "after the others by an NPMI of too few occurrences): the ranking says little; count a "
                             "longer genome, or lower --min-count\n",
                             below, rows.size(), a.k, a.min_count);
  nlohmann::json top = nlohmann::json::array();
  for (size_t i = 0; i < std::min<size_t>(10, rows.size()); ++i) top.push_back(rows[i].kmer);
  nlohmann::json j = {{"command", "npmi"}, {"counts", a.counts}, {"out", a.out}, {"k", a.k},
                      {"min_count", a.min_count}, {"kmers", rows.size()}, {"below_min_count", below}, {"top10", top}};
  if (!a.genome.empty()) j["genome"] = a.genome;
  print_summary(ctx, j);
}

}  // namespace

void register_npmi(CLI::App& app, Context& ctx) {
  auto a = std::make_shared<NpmiArgs>();
  auto* sub = app.add_subcommand("npmi", "Rank all k-mers by NPMI_k (the GRANK list used by GeneMask masking)");
  sub->add_option("--counts", a->counts, "counts.h5 from `genemask count`")->required()->check(existing_file());
  sub->add_option("--out", a->out, "output npmi.tsv")->required();
  sub->add_option("--k", a->k, "k-mer length to rank")->check(CLI::Range(2, kMaxDenseK))->capture_default_str();
  sub->add_option("--min-count", a->min_count, "c: minimum count; rarer k-mers are ranked last and flagged")
      ->check(CLI::Range(uint64_t{2}, UINT64_MAX))
      ->capture_default_str();
  add_counts_genome_option(sub, a->genome);
  add_file_force_flag(sub, a->force);
  sub->callback([a, &ctx] {
    ctx.inputs = {{"--counts", a->counts}};
    ctx.outputs = {file_output("--out", a->out, {io::OwnFile::Kind::first_line, io::kNpmiHeader, "an npmi.tsv"}, a->force)};
    ctx.run = [a, &ctx] { run_npmi(*a, ctx); };
  });
}

}  // namespace genemask::cli
