// genemask npmi / pmi-vocab / motifs: rankings derived from counts.h5.
#include <fmt/format.h>
#include <iostream>
#include <map>

#include "common.hpp"
#include "genemask/kmer.hpp"
#include "genemask/motif.hpp"
#include "genemask/pmi.hpp"
#include "io/counts_file.hpp"
#include "io/rank_tables.hpp"

namespace genemask::cli {
namespace {

struct NpmiArgs {
  std::string counts, out;
  int k = 6;
  uint64_t min_count = 101;
};

void run_npmi(const NpmiArgs& a, const Context& ctx) {
  if (ctx.rank != 0) return;  // cheap: rank 0 does it
  check_writable(a.out);
  io::CountsFile cf = io::read_counts_file(a.counts, a.k);
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
  nlohmann::json top = nlohmann::json::array();
  for (size_t i = 0; i < std::min<size_t>(10, rows.size()); ++i) top.push_back(rows[i].kmer);
  print_summary(ctx, {{"command", "npmi"}, {"counts", a.counts}, {"out", a.out}, {"k", a.k},
                      {"min_count", a.min_count}, {"kmers", rows.size()}, {"below_min_count", below}, {"top10", top}});
}

struct VocabArgs {
  std::string counts, out;
  uint64_t min_count = 10000, size = 40000;
  int kmin = 2, kmax = 10;
};

void run_pmi_vocab(const VocabArgs& a, const Context& ctx) {
  if (ctx.rank != 0) return;
  check_writable(a.out);
  io::CountsFile cf = io::read_counts_file(a.counts, a.kmax);
  PmiCalculator calc(cf.counts, a.kmax);
  auto vocab = pmi_vocabulary(calc, a.kmin, a.kmax, a.min_count, a.size);
  std::vector<io::PmiVocabRow> rows;
  std::map<int, uint64_t> hist;
  for (const auto& e : vocab) {
    rows.push_back(io::PmiVocabRow{e.rank, decode_kmer(e.code, e.k), e.count, e.pmi});
    ++hist[e.k];
  }
  io::write_pmi_vocab_tsv(a.out, rows);
  std::cerr << "length\tk-mers in vocabulary\n";
  nlohmann::json h = nlohmann::json::object();
  for (int k = a.kmin; k <= a.kmax; ++k) {
    std::cerr << k << '\t' << hist[k] << '\n';
    h[std::to_string(k)] = hist[k];
  }
  if (rows.size() < a.size)
    std::cerr << fmt::format("note: only {} k-mers have count >= {}; the vocabulary is smaller than --size {}\n",
                             rows.size(), a.min_count, a.size);
  print_summary(ctx, {{"command", "pmi-vocab"}, {"counts", a.counts}, {"out", a.out}, {"min_count", a.min_count},
                      {"size", rows.size()}, {"length_histogram", h}});
}

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
  const int k = static_cast<int>(rows.front().kmer.size());
  const bool md = a.format == "markdown";
  std::cout << (md ? fmt::format("| Motif | Core | NPMI rank (out of {}) |\n|---|---|---|\n", rows.size())
                   : "motif\tcore\tranks\tkmers\n");
  nlohmann::json out = nlohmann::json::array();
  for (const auto& m : a.motifs) {
    MotifResult r;
    try {
      r = match_motif(m, rank_of, k, a.top);
    } catch (const std::invalid_argument& e) {
      throw std::runtime_error(e.what());
    }
    std::string ranks, kmers;
    for (size_t i = 0; i < r.hits.size(); ++i) {
      const auto& h = r.hits[i];
      if (i) {
        ranks += ", ";
        kmers += ",";
      }
      ranks += r.core.size() > static_cast<size_t>(k) ? fmt::format("{} (rank {})", h.kmer, h.rank)
                                                      : std::to_string(h.rank);
      kmers += h.kmer;
    }
    if (md)
      std::cout << fmt::format("| {} | {} | {} |\n", r.motif, r.core, ranks);
    else
      std::cout << fmt::format("{}\t{}\t{}\t{}\n", r.motif, r.core, ranks, kmers);
    nlohmann::json hits = nlohmann::json::array();
    for (const auto& h : r.hits) hits.push_back({{"kmer", h.kmer}, {"rank", h.rank}});
    out.push_back({{"motif", r.motif}, {"core", r.core}, {"matched", r.matched}, {"hits", hits}});
  }
  print_summary(ctx, {{"command", "motifs"}, {"npmi", a.npmi}, {"motifs", out}});
}

}  // namespace

void register_npmi(CLI::App& app, Context& ctx) {
  auto a = std::make_shared<NpmiArgs>();
  auto* sub = app.add_subcommand("npmi", "Rank all k-mers by NPMI_k (the GRANK list used by GeneMask masking)");
  sub->add_option("--counts", a->counts, "counts.h5 from `genemask count`")->required()->check(CLI::ExistingFile);
  sub->add_option("--out", a->out, "output npmi.tsv")->required();
  sub->add_option("--k", a->k, "k-mer length to rank")->check(CLI::Range(2, kMaxDenseK))->capture_default_str();
  sub->add_option("--min-count", a->min_count, "c: minimum count; rarer k-mers are ranked last and flagged")
      ->check(CLI::Range(uint64_t{2}, UINT64_MAX))
      ->capture_default_str();
  sub->callback([a, &ctx] { ctx.run = [a, &ctx] { run_npmi(*a, ctx); }; });
}

void register_pmi_vocab(CLI::App& app, Context& ctx) {
  auto a = std::make_shared<VocabArgs>();
  auto* sub = app.add_subcommand("pmi-vocab", "Build the Gene-PMI-VOC masking vocabulary (top k-mers by PMI_k)");
  sub->add_option("--counts", a->counts, "counts.h5 from `genemask count`")->required()->check(CLI::ExistingFile);
  sub->add_option("--out", a->out, "output pmi_vocab.tsv")->required();
  sub->add_option("--min-count", a->min_count, "only k-mers seen at least this often")->capture_default_str();
  sub->add_option("--size", a->size, "vocabulary size (top N by PMI)")->capture_default_str();
  sub->add_option("--kmin", a->kmin, "shortest k")->check(CLI::Range(2, kMaxDenseK))->capture_default_str();
  sub->add_option("--kmax", a->kmax, "longest k")->check(CLI::Range(2, kMaxDenseK))->capture_default_str();
  sub->callback([a, &ctx] { ctx.run = [a, &ctx] { run_pmi_vocab(*a, ctx); }; });
}

void register_motifs(CLI::App& app, Context& ctx) {
  auto a = std::make_shared<MotifArgs>();
  auto* sub = app.add_subcommand("motifs", "GRANK ranks of the k-mers matching IUPAC consensus motifs (paper Table 5)");
  sub->add_option("--npmi", a->npmi, "npmi.tsv from `genemask npmi`")->required()->check(CLI::ExistingFile);
  sub->add_option("motifs", a->motifs, "motifs, e.g. nTATAAAr 'nCyy[CCTCC]n' ([brackets] or upper case mark the core)")->required();
  sub->add_option("--top", a->top, "ranks listed per motif (0 = all)")->capture_default_str();
  sub->add_option("--format", a->format, "table format")->check(CLI::IsMember({"tsv", "markdown"}))->capture_default_str();
  sub->footer("The core of a motif is the part in [brackets] (the paper's bold: nCyy[CCTCC]n), else the span from "
              "its first to its last upper-case letter. A core shorter than k "
              "matches every k-mer containing it; a longer core is split into its k-long windows.");
  sub->callback([a, &ctx] { ctx.run = [a, &ctx] { run_motifs(*a, ctx); }; });
}

}  // namespace genemask::cli
