// genemask pmi-vocab: the Gene-PMI-VOC masking vocabulary (k-mers of several lengths by PMI).
#include <algorithm>
#include <fmt/format.h>
#include <iostream>

#include "common.hpp"
#include "genemask/kmer/kmer.hpp"
#include "genemask/kmer/pmi.hpp"
#include "io/counts_file.hpp"
#include "io/rank_tables.hpp"

namespace genemask::cli {
namespace {

struct VocabArgs {
  std::string counts, out, genome;
  uint64_t min_count = 10000, size = 40000;
  int kmin = 2, kmax = 10;
  bool force = false;
};

void run_pmi_vocab(const VocabArgs& a, const Context& ctx) {
  if (ctx.rank != 0) return;
  check_writable(a.out);
  io::CountsFile cf = io::read_counts_file(a.counts, a.kmax, false, a.genome);
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
    std::cerr << fmt::format("note: only {} k-mers have count >= {}{}; the vocabulary is smaller than --size {}\n",
                             rows.size(), std::max<uint64_t>(a.min_count, 1),
                             a.min_count < 1 ? " (k-mers never seen are not ranked)" : "", a.size);
  nlohmann::json j = {{"command", "pmi-vocab"}, {"counts", a.counts}, {"out", a.out}, {"min_count", a.min_count},
                      {"size", rows.size()}, {"length_histogram", h}};
  if (!a.genome.empty()) j["genome"] = a.genome;
  print_summary(ctx, j);
}

}  // namespace

void register_pmi_vocab(CLI::App& app, Context& ctx) {
  auto a = std::make_shared<VocabArgs>();
  auto* sub = app.add_subcommand("pmi-vocab", "Build the Gene-PMI-VOC masking vocabulary (top k-mers by PMI_k)");
  sub->add_option("--counts", a->counts, "counts.h5 from `genemask count`")->required()->check(existing_file());
  sub->add_option("--out", a->out, "output pmi_vocab.tsv")->required();
  sub->add_option("--min-count", a->min_count, "only k-mers seen at least this often")->capture_default_str();
  sub->add_option("--size", a->size, "vocabulary size (top N by PMI)")->check(positive())->capture_default_str();
  // The vocabulary's readers (the masker) take 2- to 10-mers: a longer k wrote a file every
  // reader refused.
  sub->add_option("--kmin", a->kmin, "shortest k")
      ->check(CLI::Range(io::kPmiVocabMinK, io::kPmiVocabMaxK))
      ->capture_default_str();
  sub->add_option("--kmax", a->kmax, "longest k")
      ->check(CLI::Range(io::kPmiVocabMinK, io::kPmiVocabMaxK))
      ->capture_default_str();
  add_counts_genome_option(sub, a->genome);
  add_file_force_flag(sub, a->force);
  sub->callback([a, &ctx] {
    ctx.inputs = {{"--counts", a->counts}};
    ctx.outputs = {file_output("--out", a->out, {io::OwnFile::Kind::first_line, io::kPmiVocabHeader,
                                                  "a pmi_vocab.tsv"}, a->force)};
    ctx.run = [a, &ctx] { run_pmi_vocab(*a, ctx); };
  });
}

}  // namespace genemask::cli
