// genemask dataset promoter|splice|enhancer: few-shot task tables built from a genome.
// The builders (src/core/{promoter,enhancer,splice}.cpp) return labelled windows; the
// common writer (task_dataset.cpp) de-duplicates, splits and writes both layouts.
#include <filesystem>
#include <fmt/format.h>
#include <iostream>

#include "dataset_cli.hpp"
#include "genemask/tasks/enhancer.hpp"
#include "genemask/tasks/promoter.hpp"
#include "genemask/tasks/task_dataset.hpp"

namespace genemask::cli {

// Single-process, like finetune: several ranks would race on the same output files.
bool dataset_single_process(const Context& ctx, const char* builder) {
  if (ctx.size <= 1) return true;
  refuse_multi_rank(
      ctx, fmt::format("dataset {} is a single-process command and was started on {} MPI ranks: run it without mpirun",
                  builder, ctx.size));
}

std::unique_ptr<io::OutputSet> prepare_dataset_output(dataset::OutputOptions& o) {
  auto set = std::make_unique<io::OutputSet>(o.out, io::OutputSet::Options{"dataset " + o.builder, "--out", o.force,
                                                                          "summary.json", /*digests=*/true});
  o.write_dir = set->staging();
  return set;
}

void finish_dataset(const Context& ctx, const dataset::DatasetStats& st, const dataset::OutputOptions& o,
                    const std::string& details, const nlohmann::json& extra) {
  std::cerr << fmt::format("[dataset {}] wrote {}\n", o.builder, o.out) << details << dataset::describe_counts(st)
            << std::flush;
  nlohmann::json s = dataset::dataset_summary(st, o);
  s["command"] = "dataset " + o.builder;
  s.update(extra);
  print_summary(ctx, s);
}

void add_dataset_output_options(CLI::App* sub, dataset::OutputOptions& o, bool with_fraction) {
  sub->add_option("--out", o.out,
                  "output directory: train.tsv, test.tsv (sequence, label, id), fewshot/ (released 6-mer layout, "
                  "a `genemask sweep` task dir), summary.json")
      ->required();
  sub->add_option("--seed", o.seed, "seed: the split, the negatives and the few-shot samples")->capture_default_str();
  if (with_fraction)
    sub->add_option("--train-fraction", o.train_fraction, "fraction of the examples in the training split")
        ->check(CLI::Range(0.0, 1.0).description("in (0, 1)"))
        ->capture_default_str();
  sub->add_option("--shots", o.shots, "also write fewshot/<n>/train.tsv with n training examples per class (e.g. 10,50)")
      ->delimiter(',')
      ->check(CLI::Range(int64_t{1}, int64_t{1000000000}).description("positive"));
  add_force_flag(sub, o.force);
}

namespace {

void register_promoter(CLI::App& ds, Context& ctx) {
  auto p = std::make_shared<dataset::PromoterOptions>();
  auto out = std::make_shared<dataset::OutputOptions>();
  auto window = std::make_shared<std::string>("prom-core");
  auto negatives = std::make_shared<std::string>("deepromoter");
  auto sub = ds.add_subcommand("promoter", "TSS-centred promoter windows (label 1) and DeePromoter negatives (label 0)");
  sub->add_option("--genome", p->genome, "genome FASTA (.fa, .fa.gz, bgzip)")->required()->check(existing_file());
  sub->add_option("--tss", p->tss, "TSS positions: EPDnew BED, or SGA when the name ends in .sga / .sga.gz")
      ->required()
      ->check(existing_file());
  auto* w = sub->add_option("--window", *window,
                            "FIRST:LAST offsets from the TSS, inclusive, on its strand (0 = the TSS base), e.g. "
                            "--window=-34:35; or a preset name")
                ->capture_default_str();
  sub->add_option("--preset", *window, "prom-core (-34:35, 70 bp) or prom-300 (-249:50, 300 bp)")
      ->check(CLI::IsMember({"prom-core", "prom-300"}))
      ->excludes(w);
  sub->add_option("--negatives", *negatives,
                  "deepromoter: 12 of 20 parts replaced by random bases; shuffle: those parts' bases permuted")
      ->check(CLI::IsMember({"deepromoter", "shuffle"}))
      ->capture_default_str();
  auto* t1 = sub->add_flag("--tata-only", "keep only promoters with a TATA box");
  auto* t2 = sub->add_flag("--non-tata-only", "keep only promoters without a TATA box")->excludes(t1);
  sub->add_option("--tata-list", p->tata_list,
                  "promoter names (one per line) that have a TATA box, e.g. EPDnew's TATA subset; default: the "
                  "motif TATAWAWR starting at -31..-25")
      ->check(existing_file());
  sub->add_option("--bed-tss-offset", p->bed_tss_offset,
                  "BED without thickStart/thickEnd: the TSS lies this many bases downstream of the interval's 5' end")
      ->capture_default_str();
  sub->add_option("--chrom-map", p->chrom_map, "\"input<TAB>genome\" sequence-name aliases")->check(existing_file());
  add_dataset_output_options(sub, *out, true);
  sub->footer(
      "Windows: on '+' bases tss+FIRST..tss+LAST, on '-' the reverse complement of tss-LAST..tss-FIRST (0-based TSS). "
      "Windows running off a chromosome or holding a non-ACGT base are dropped and counted; a TSS beyond its "
      "chromosome is an error. Exact duplicates are dropped; the split is a hash of (seed, sequence). "
      "See docs/datasets.md.");
  sub->callback([p, out, window, negatives, t1, t2, &ctx] {
    ctx.inputs = {{"--genome", p->genome}, {"--tss", p->tss}, {"--tata-list", p->tata_list}, {"--chrom-map", p->chrom_map}};
    ctx.outputs = {{"--out", out->out, io::OutputKind::directory}};
    ctx.run = [p, out, window, negatives, t1, t2, &ctx] {
      if (!dataset_single_process(ctx, "promoter")) return;
      dataset::PromoterOptions o = *p;
      o.window = dataset::parse_tss_window(*window);
      o.shuffle_negatives = *negatives == "shuffle";
      o.seed = out->seed;
      o.tata = t1->count() ? dataset::PromoterOptions::Tata::tata_only
               : t2->count() ? dataset::PromoterOptions::Tata::non_tata_only
                             : dataset::PromoterOptions::Tata::all;
      dataset::OutputOptions oo = *out;
      oo.builder = "promoter";
      oo.inputs = {{"genome", o.genome}, {"tss", o.tss}};
      if (!o.tata_list.empty()) oo.inputs["tata_list"] = o.tata_list;
      if (!o.chrom_map.empty()) oo.inputs["chrom_map"] = o.chrom_map;
      oo.settings = {{"window", fmt::format("{}:{}", o.window.first, o.window.last)},
                     {"window_bp", std::to_string(o.window.length())},
                     {"negatives", *negatives},
                     {"tata", t1->count() ? "tata-only" : t2->count() ? "non-tata-only" : "all"},
                     {"tata_rule", o.tata_list.empty() ? "motif TATAWAWR at -31..-25" : "--tata-list"},
                     {"bed_tss_offset", std::to_string(o.bed_tss_offset)}};
      const auto out_dir = prepare_dataset_output(oo);  // published once complete
      dataset::DatasetStats st;
      auto ex = dataset::build_promoter(o, st);
      st = dataset::write_task_dataset(std::move(ex), oo, st);
      out_dir->publish();
      finish_dataset(ctx, st, oo);
    };
  });
}

void register_enhancer(CLI::App& ds, Context& ctx) {
  auto e = std::make_shared<dataset::EnhancerOptions>();
  auto out = std::make_shared<dataset::OutputOptions>();
  auto sub = ds.add_subcommand("enhancer",
                               "Windows from genomic-benchmarks interval CSVs (e.g. human_enhancers_cohn), split kept");
  sub->add_option("--genome", e->genome, "genome FASTA (.fa, .fa.gz, bgzip)")->required()->check(existing_file());
  sub->add_option("--intervals", e->intervals,
                  "directory with train/<class>.csv[.gz] and test/<class>.csv[.gz] (id,region,start,end,strand; "
                  "0-based, half-open)")
      ->required()
      ->check(existing_directory());
  sub->add_option("--chrom-map", e->chrom_map, "\"input<TAB>genome\" sequence-name aliases")->check(existing_file());
  add_dataset_output_options(sub, *out, false);
  sub->footer(
      "Labels: 1/0 when the classes (file stems) are exactly positive/negative, else the class names. '-' strand "
      "intervals are reverse complemented. The input's train/test split is kept. See docs/datasets.md.");
  sub->callback([e, out, &ctx] {
    ctx.inputs = {{"--genome", e->genome}, {"--intervals", e->intervals}, {"--chrom-map", e->chrom_map}};
    ctx.outputs = {{"--out", out->out, io::OutputKind::directory}};
    ctx.run = [e, out, &ctx] {
      if (!dataset_single_process(ctx, "enhancer")) return;
      dataset::OutputOptions oo = *out;
      oo.builder = "enhancer";
      oo.inputs = {{"genome", e->genome}, {"intervals", e->intervals}};
      if (!e->chrom_map.empty()) oo.inputs["chrom_map"] = e->chrom_map;
      const auto out_dir = prepare_dataset_output(oo);  // published once complete
      dataset::DatasetStats st;
      std::vector<char> split;
      auto ex = dataset::build_enhancer(*e, st, split);
      st = dataset::write_task_dataset(std::move(ex), oo, st, split);
      out_dir->publish();
      finish_dataset(ctx, st, oo);
    };
  });
}

}  // namespace

void register_dataset(CLI::App& app, Context& ctx) {
  auto* ds = app.add_subcommand("dataset", "Build a few-shot task from a genome: promoter, splice or enhancer");
  ds->require_subcommand(1);
  register_promoter(*ds, ctx);
  register_dataset_splice(*ds, ctx);
  register_enhancer(*ds, ctx);
}
}  // namespace genemask::cli
