// genemask shards: the sharded HDF5 pretraining corpus (MPI: ranks split the genome).
#include <algorithm>
#include <filesystem>
#include <cmath>
#include <limits>
#include <fmt/format.h>
#include <iostream>
#include <new>
#include <optional>

#include "common.hpp"
#include "io/text_source.hpp"
#include "hpc/shards.hpp"
#include "io/atomic_file.hpp"
#include "io/error.hpp"
#include "io/genome_list.hpp"

namespace genemask::cli {
namespace {

struct ShardsArgs {
  hpc::ShardsRequest req;
  std::string genomes;
  uint64_t seed = 42;
  bool force = false;
  ProgressOptions progress;  // every 10 s by default
};

/// What ran out of memory, how much it takes, and which option lowers it.
std::string shards_out_of_memory(const ShardBuildOptions& o) {
  auto mib = [](uint64_t b) { return fmt::format("{:.0f} MiB", static_cast<double>(b) / (1 << 20)); };
  ShardBuildOptions smaller = o;  // a quarter, and no more than the default
  smaller.shard_tokens = std::max<uint64_t>(1, std::min(o.shard_tokens / 4, ShardBuildOptions{}.shard_tokens));
  return fmt::format("out of memory{}: each rank buffers a train and a valid shard file of up to --shard-tokens {} "
                     "tokens before writing them, up to {} with the copies made while they grow and are written; "
                     "lower --shard-tokens (--shard-tokens {} needs about {}) or give the job more memory",
                     io::memory_limit_note(), o.shard_tokens, mib(shard_buffer_bytes(o)), smaller.shard_tokens,
                     mib(shard_buffer_bytes(smaller)));
}

void run_shards(ShardsArgs a, Context& ctx) {
  a.req.options.recipe.seed = a.seed;
  a.req.command_line = ctx.command_line;
  // Rank 0 owns --out: every rank writes its shard files into the staging directory, and
  // rank 0 moves the whole set into place once every rank is done, the manifest last.
  std::optional<io::OutputSet> out_dir;
  if (ctx.rank == 0) out_dir.emplace(a.req.out_dir, io::OutputSet::Options{"shards", "--out", a.force, "manifest.json", false, /*readers_lock=*/true});
  const std::string final_dir = a.req.out_dir;
  a.req.out_dir = io::OutputSet::staging_for(final_dir);
  Progress progress("shards", a.progress.interval_s, ctx.rank == 0 && !a.progress.quiet);
  const auto r = [&] {
    try {
      try {
        return hpc::build_shards(a.req, MPI_COMM_WORLD, [&](double f) { progress.update(f); });
      } catch (const std::bad_alloc&) {
        throw std::runtime_error(shards_out_of_memory(a.req.options));
      }
    } catch (const std::exception& e) {
      // Rank 0's error goes out before out_dir removes the staging directory the other ranks
      // still write into (their "No such file or directory" would come first, or alone).
      if (out_dir && ctx.size > 1) report_error_now(ctx, e);
      throw;
    }
  }();
  if (out_dir) out_dir->publish();
  progress.done();
  a.req.out_dir = final_dir;
  const auto& t = r.totals;
  const double mb = static_cast<double>(r.file_bytes) / 1e6;
  nlohmann::json j = {{"command", "shards"},
                      {"genome", a.req.genome},
                      {"out", a.req.out_dir},
                      {"genes", a.req.genes.empty() ? nlohmann::json(nullptr) : nlohmann::json(a.req.genes)},
                      {"gene_source", r.gene_source.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.gene_source)},
                      {"gene_transcripts", r.gene_transcripts},
                      {"genes_read", r.genes.genes},
                      {"genes_on_unknown_sequences", r.genes.unknown_sequence_genes},
                      {"unknown_sequences", r.genes.unknown_sequences},
                      {"ranks", r.ranks},
                      {"seed", a.seed},
                      {"chromosomes", r.manifest.chromosomes.size()},
                      {"segments_candidate", t.candidates},
                      {"segments_kept", t.kept},
                      {"segments_dropped", {{"non_acgt", t.dropped_non_acgt}}},
                      {"samples", {{"train", t.samples_train}, {"valid", t.samples_valid}}},
                      {"tokens", {{"train", t.tokens_train}, {"valid", t.tokens_valid}}},
                      {"shard_files", t.files.size()},
                      {"shard_bytes", r.shard_bytes},
                      {"scan_s", r.scan_s},
                      {"build_s", r.build_s},
                      {"seconds", r.seconds},
                      {"fasta_mb_per_s_per_rank", r.seconds > 0 ? mb / r.seconds / r.ranks : 0.0}};
  if (!a.genomes.empty()) {
    j.erase("genome");
    j.erase("genes");  // the list's genes column, per genome below
    j["genomes_list"] = a.genomes;
    nlohmann::json gs = nlohmann::json::array();
    for (size_t i = 0; i < r.manifest.genomes.size(); ++i) {
      const auto& g = r.manifest.genomes[i];
      const std::string genes = i < a.req.list.genomes.size() ? a.req.list.genomes[i].genes : std::string();
      gs.push_back({{"name", g.name},
                    {"genes", genes.empty() ? nlohmann::json(nullptr) : nlohmann::json(genes)},
                    {"records", g.records},
                    {"bases", g.bases},
                    {"samples", {{"train", g.samples_train}, {"valid", g.samples_valid}}},
                    {"tokens", {{"train", g.tokens_train}, {"valid", g.tokens_valid}}}});
    }
    j["genomes"] = gs;
    std::vector<std::vector<std::pair<std::string, uint64_t>>> records(a.req.list.genomes.size());
    for (const auto& c : r.manifest.chromosomes)
      if (c.genome < records.size()) records[c.genome].emplace_back(c.name, c.length);
    if (ctx.rank == 0)
      for (const auto& w : io::same_genome_warnings(a.req.list, records)) std::cerr << "warning: " << w << std::endl;
  }
  std::vector<std::string> paths;
  for (const auto& g : a.req.list.genomes) paths.push_back(g.path);
  note_genome_ends(a.genomes.empty() ? std::vector<std::string>{a.req.genome} : paths, ctx);
  print_summary(ctx, j);
}

}  // namespace

void register_shards(CLI::App& app, Context& ctx) {
  auto a = std::make_shared<ShardsArgs>();
  auto& o = a->req.options;
  auto* sub = app.add_subcommand("shards", "Build the sharded HDF5 pretraining corpus (MPI: ranks split the genome)");
  auto* one = sub->add_option("--genome", a->req.genome, "FASTA file: .fa, .fa.gz (gzip or bgzip)")->check(existing_file());
  auto* many = sub->add_option("--genomes", a->genomes,
                               "genome list (TSV: name, path[, weight[, genes]]; docs/formats.md): one corpus of all "
                               "of them, every sample labelled with its genome; the genes column gives the "
                               "gene-boundary variant per genome")
                   ->check(existing_file());
  one->excludes(many);
  sub->add_option("--out", a->req.out_dir, "output directory (shard files + manifest.json)")->required();
  sub->add_option("--genes", a->req.genes,
                  "GTF/GFF3 annotation: segments never cross a gene boundary (GB variant); a file without gene lines "
                  "gives its mRNA/transcript spans instead, overlapping ones of a strand merged into one locus")
      ->check(existing_file())
      ->excludes(many);
  sub->add_option("--seed", a->seed, "seed of the offsets, lengths and split")->capture_default_str();
  sub->add_option("--valid-fraction", o.valid_fraction, "fraction of samples for validation, in [0, 1) (1 would leave "
                  "no sample to train on)")
      ->check(CLI::Validator(
          [](std::string& text) -> std::string {
            const double v = std::strtod(text.c_str(), nullptr);
            if (!std::isfinite(v)) return text + " is not a finite number";
            return v >= 0 && v < 1 ? std::string() : "must be >= 0 and < 1 (1 leaves no training sample)";
          },
          "[0, 1)"))
      ->capture_default_str();
  sub->add_option("--shard-tokens", o.shard_tokens, "tokens per shard file (at least 512, one whole sample)")
      ->check(CLI::Range(uint64_t{512}, uint64_t{1} << 40))
      ->capture_default_str();
  sub->add_option("--max-offset", o.recipe.max_offset, "start offset per chromosome is uniform in [1, this]")
      ->check(CLI::Range(uint32_t{1}, std::numeric_limits<uint32_t>::max()))
      ->capture_default_str();
  sub->add_option("--full-prob", o.recipe.full_prob, "probability of a full-length (510-token) segment")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  sub->add_option("--min-tokens", o.recipe.min_tokens, "shortest segment in tokens")->check(CLI::Range(1, 510))->capture_default_str();
  sub->add_option("--max-tokens", o.recipe.max_tokens, "longest segment in tokens")->check(CLI::Range(1, 510))->capture_default_str();
  sub->footer("Per chromosome: skip a uniform [1, max-offset] bases, then cut consecutive segments of max-tokens "
              "6-mers with probability full-prob, else a uniform length; segments with N or other non-ACGT bases "
              "are dropped. Each rank writes its own shard files; manifest.json is written last.");
  add_force_flag(sub, a->force);
  add_progress_options(sub, a->progress);
  sub->callback([a, &ctx] {
    if (a->req.options.recipe.min_tokens > a->req.options.recipe.max_tokens)
      throw CLI::ValidationError("--min-tokens", "must not exceed --max-tokens");
    if (a->req.genome.empty() && a->genomes.empty())
      throw CLI::RequiredError("--genome FASTA or --genomes LIST (one of them)");
    if (!a->genomes.empty()) {
      a->req.list = io::read_genome_list(a->genomes);  // every refusal before the ranks start
      ctx.inputs = {{"--genomes", a->genomes}};
      for (const auto& g : a->req.list.genomes) {
        ctx.inputs.push_back({"--genomes (" + g.name + ")", g.path});
        if (!g.genes.empty()) ctx.inputs.push_back({"--genomes (" + g.name + " genes)", g.genes});
      }
      ctx.check = [a] {
        for (const auto& g : a->req.list.genomes) io::probe_file(g.path);
      };
    } else {
      ctx.inputs = {{"--genome", a->req.genome}, {"--genes", a->req.genes}};
      ctx.check = [a] { io::probe_file(a->req.genome); };  // a truncated BGZF, before any rank starts
    }
    ctx.outputs = {{"--out", a->req.out_dir, io::OutputKind::directory}};
    ctx.run = [a, &ctx] { run_shards(*a, ctx); };
  });
}

}  // namespace genemask::cli
