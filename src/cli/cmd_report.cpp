// genemask report: paper-style tables, improvement tables and plots from a sweep's
// results.jsonl (the work is in genemask/report.hpp; docs/report.md describes the outputs).
#include <iostream>

#include "common.hpp"
#include "genemask/eval/report.hpp"

namespace genemask::cli {
namespace {

constexpr const char* kHelp = R"(Paper-style report of a few-shot sweep.

Reads RESULTS (results.jsonl from `genemask sweep`: one JSON object per job; the last ok
record per model|task|shots|seed wins, failed records are counted and listed, a torn last
line is ignored with a warning). Models and tasks are shown in the order of --models and
--tasks, else of the plan (--plan, or plan.json next to RESULTS), else sorted by name;
a model's group comes from the plan when it names one, else from its records ("group");
the models of a group are kept together.

Writes under OUT:
  table1.md/.tex/.csv       rows: group header, then shots blocks of that group's models;
                            columns: per task the chosen metrics (default Accuracy, AUC) as
                            "mean ± std" over seeds (std with ddof=1). Within each shots block
                            of a group: best in bold, second best in italic (Markdown) or
                            \cellcolor{yellow} (LaTeX; needs \usepackage[table]{xcolor}), the
                            latter only among 3+ models; ranks compare the shown digits.
                            Markers: paired two-sided t-test (scipy.stats.ttest_rel) against
                            the baseline of the model's group over the fine-tuning seeds
                            both have (only those: it does not count pretraining noise),
                            shown on improvements only: ** p<0.01, * p<0.05, † p<0.1.
                            Under the table: the records' fine-tuning precision (fp32, bf16);
                            a warning when a model's records mix precisions or the models
                            of a group differ (set finetune.precision in the plan).
  improvement.md/.tex/.csv  (with --baseline) per model and shots: 100 (A - A_base) / A_base,
                            A = mean over the tasks both have of the per-task mean of the
                            first --metric (paper Tables 2 and 3).
  plots/<task>.svg (.png)   first metric vs shots, ±std error bars, one series per model;
                            PNGs when rsvg-convert is on PATH (unless --no-png).
  replicates.md/.tex/.csv   when models are pretraining replicates of arms (a plan's "arm"
                            and "replicate"): per arm, task and shots, the mean over its
                            replicates of each replicate's mean over its fine-tuning seeds,
                            ± the spread between replicates (std, ddof 1), and k replicates.
                            With --baseline ARM: a t-test whose unit is the replicate, paired
                            by replicate id where both arms have the same ids (2+), else
                            Welch's on the replicate means (scipy.stats.ttest_ind,
                            equal_var=False; 2+ a side), else none. One replicate per arm
                            is a warning: the effect cannot be told from pretraining noise.
)";

void run_report(report::Options o, bool force, const Context& ctx) {
  if (ctx.rank != 0) return;  // a few thousand numbers: rank 0 alone
  io::OutputSet out(o.out, {"report", "--out", force, "table1.md"});
  o.out = out.staging();
  const report::Summary s = report::write_report(o);
  out.publish();
  o.out = out.dir();
  for (const auto& w : s.warnings) std::cerr << "warning: " << w << "\n";
  if (!s.failed_jobs.empty()) {
    std::cerr << "note: " << s.failed_jobs.size() << " job(s) failed and have no ok result:";
    for (const auto& j : s.failed_jobs) std::cerr << "\n  " << j;
    std::cerr << "\n";
  }
  print_summary(ctx, {{"command", "report"}, {"results", o.results}, {"records", s.records}, {"ok", s.ok},
                      {"failed", s.failed}, {"failed_jobs", s.failed_jobs}, {"models", s.models},
                      {"tasks", s.tasks}, {"shots", s.shots}, {"baselines", s.baselines}, {"arms", s.arms}, {"out", o.out},
                      {"files", s.files}, {"png", s.png}, {"warnings", s.warnings.size()}});
}

}  // namespace

void register_report(CLI::App& app, Context& ctx) {
  auto opts = std::make_shared<report::Options>();
  auto* sub = app.add_subcommand("report", "Paper-style tables (Markdown, LaTeX, CSV) and plots from results.jsonl");
  sub->footer(kHelp);
  sub->add_option("--results", opts->results, "results.jsonl written by `genemask sweep`")
      ->required()
      ->check(existing_file());
  sub->add_option("--out", opts->out, "output directory: new, empty, or an earlier report (--force)")->required();
  sub->add_option("--baseline", opts->baselines,
                  "model to compare against (t-test markers, improvement tables); repeat for one per group. An arm "
                  "of pretraining replicates (a plan's \"arm\") compares the arms over their replicates "
                  "(replicates.md), and each replicate with the baseline arm's replicate of its id in Table 1")
      ->take_all();
  sub->add_option("--metric", opts->metrics, "table columns per task, from accuracy auc f1 mcc")
      ->capture_default_str()
      ->delimiter(',')
      ->take_all();
  sub->add_option("--models", opts->models, "models to show, in this order (default: plan order, else by name)")
      ->take_all();
  sub->add_option("--tasks", opts->tasks, "tasks to show, in this order")->take_all();
  sub->add_option("--plan", opts->plan, "plan.json with model groups and order (default: next to --results)")
      ->check(existing_file());
  sub->add_option("--decimals", opts->decimals, "decimals shown in the tables (0..10)")
      ->check(CLI::Range(0, 10))
      ->capture_default_str();
  sub->add_flag("!--no-png", opts->png, "do not convert the SVG plots to PNG");
  auto force = std::make_shared<bool>(false);
  add_force_flag(sub, *force);
  sub->callback([opts, force, &ctx] {
    ctx.inputs = {{"--results", opts->results}, {"--plan", opts->plan}};
    ctx.outputs = {{"--out", opts->out, io::OutputKind::directory}};
    ctx.run = [opts, force, &ctx] { run_report(*opts, *force, ctx); };
  });
}

}  // namespace genemask::cli
