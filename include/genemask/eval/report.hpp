#pragma once
// The paper-style report of a few-shot sweep (docs/report.md): reads results.jsonl (one JSON
// object per job), aggregates each (model, task, shots) cell over seeds, and writes
//   table1.{md,tex,csv}       mean ± std per cell; best in bold and second best highlighted
//                             per (group, shots) block and column; paired t-test markers
//                             against the baseline (paper Table 1)
//   improvement.{md,tex,csv}  % improvement of the mean accuracy over tasks vs the baseline,
//                             per shots (paper Tables 2 and 3)
//   plots/<task>.svg (+ .png) metric vs shots with ±std error bars, one series per model
// Torch-free and serial: the whole report is a few thousand numbers.
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "genemask/eval/plan.hpp"
#include "genemask/eval/results.hpp"
#include "genemask/eval/stats.hpp"

namespace genemask::report {

/// The metrics a record may carry, in the order the report knows them.
const std::vector<std::string>& known_metrics();
/// "Accuracy", "AUC", "F1", "MCC".
std::string metric_title(const std::string& metric);

/// One record of results.jsonl (genemask/eval/results.hpp): `values` holds the metrics.
using Record = results::Record;

struct Results {
  std::string path;
  uint64_t records = 0;                  // parsed lines, ok and failed
  uint64_t failed_records = 0;
  std::vector<Record> ok;                // the LAST ok record per job key, in order of first appearance
  std::vector<std::string> failed_jobs;  // keys with failed records and no ok record, in file order
  std::vector<std::string> warnings;     // e.g. an ignored truncated last line
  /// Per sweep (its records' sweep_id; "" for records without one): the distinct jobs its
  /// records hold, and the most jobs a record says the sweep planned (-1: none says).
  struct SweepJobs {
    std::set<std::string> jobs;
    int64_t total = -1;
  };
  std::map<std::string, SweepJobs> sweeps;
};

/// Reads results.jsonl (results::read_results: a torn last line is left out with a warning,
/// any other bad line throws io::InputError "<path>:<line>: <what>; <remedy>"). A model must
/// keep one group throughout the file.
Results read_results(const std::string& path);

/// Model and task order (and model groups): sweep::read_plan_order of the sweep's plan.json.
using Plan = sweep::Plan;

struct Options {
  std::string results, out;
  std::string plan;                        // "" : plan.json next to results when it exists
  std::vector<std::string> baselines;      // at most one per group
  std::vector<std::string> metrics{"accuracy", "auc"};  // table columns; the first one also
                                           // drives the improvement tables and the plots
  std::vector<std::string> models, tasks;  // selection and order; empty: all present
  int decimals = 3;
  bool png = true;  // also PNGs when rsvg-convert is on PATH
};

/// One metric of one (model, task, shots) cell over its seeds.
struct MetricStat {
  uint64_t n = 0;
  // Seeds the cell should have: the plan's (a sweep's plan.json), else every seed any model
  // has at the cell's task and shots. n below it: a mean over fewer seeds than the others,
  // marked "n=k/m" and not ranked.
  uint64_t expected = 0;
  bool incomplete() const { return n > 0 && n < expected; }
  double mean = 0, std = 0;  // std with ddof = 1; NaN when n < 2
  bool compared = false;     // there is a baseline to compare with (and this is not it)
  uint64_t pairs = 0;        // seeds present for both this model and the baseline
  stats::TTest test;         // paired over those seeds (p = 1 when fewer than 2 pairs)
  int rank = 0;              // 1 best, 2 second best in its (group, shots) block, else 0
  /// The significance marker shown in the tables: only for improvements (t > 0), as the
  /// paper marks "whether the improvement over the baseline is significant".
  const char* marker(bool latex) const;
};

struct Model {
  std::string name, group;
  std::string baseline;  // "" when not compared (no baseline, or it is a baseline)
  std::string arm;       // its arm when it is a pretraining replicate (records or plan), else ""
  int64_t replicate = -1;
};

struct Table {
  std::string results_path;
  std::vector<std::string> metrics;
  std::vector<Model> models;        // the models of a group are contiguous
  std::vector<std::string> groups;  // distinct groups in model order
  std::vector<std::string> tasks;
  // The shown tasks whose plan entry is the released few-shot layout (`dir`): every seed
  // fine-tunes on the same N-shot file, so their std over seeds is of fine-tuning alone, where
  // a task with a full training table draws N of each class per seed. Said under Table 1.
  std::vector<std::string> fixed_shot_tasks;
  std::vector<int64_t> shots;       // ascending
  std::vector<std::string> baselines;
  std::string baseline_arm;   // --baseline named an arm: each replicate is compared with the
                              // baseline arm's replicate of the same id (over fine-tuning seeds)
  std::vector<std::string> failed_jobs;  // from Results, noted under the tables
  // Jobs of the plan's whole grid (within --models/--tasks, over all its shot counts and
  // seeds) with no record at all (a sweep stopped before them), noted under the tables like
  // the failed ones.
  std::vector<std::string> missing_jobs;
  // Cells marked n=k/m, by where their m came from: the plan's seeds (a cell of the plan's
  // grid), or the seeds other models have at that task and shots (no plan grid, or a model or
  // task outside it). The warning and the footnote under Table 1 word m from these.
  uint64_t short_of_plan = 0, short_of_others = 0;
  /// Where the m of n=k/m came from, for the warning ("planned", "other models have there")
  /// or the footnote ("the plan has m", "other models have m"); both when both kinds of cell
  /// are shown.
  std::string expected_source(bool footnote) const;
  std::vector<std::string> warnings;     // e.g. a plan group that disagrees with the records
  // The job keys of the records the tables are of (after --models/--tasks and the plan's
  // seeds): the replicates table reads these and no others.
  std::set<std::string> used_jobs;
  std::vector<std::vector<MetricStat>> cells;  // [(m * tasks + t) * shots + s][metric]
  /// Per model (in `models` order): the fine-tuning precision of its shown records -> how many
  /// ("" for records written before the precision was recorded). More than one entry, or
  /// models of one group in different precisions, is a warning: the comparison is not like
  /// with like (a sweep whose `auto` resolved differently on different nodes, or continued
  /// after the default changed).
  std::vector<std::map<std::string, uint64_t>> precisions;
  /// "bf16", "bf16 for 'a'; fp32 for 'b'", "mixed (bf16, fp32) for 'a'; ..."; "" when no
  /// shown record names its precision. Under the tables.
  std::string precision_sentence() const;
  const std::vector<MetricStat>& cell(size_t m, size_t t, size_t s) const {
    return cells[(m * tasks.size() + t) * shots.size() + s];
  }
  bool has_groups() const;  // some group is not ""
};

/// Orders, selects and aggregates. Throws std::invalid_argument (names what is present) for
/// unknown --models/--tasks/--baseline names or metrics, and io::InputError when an ok record
/// lacks a requested metric.
Table aggregate(const Results& results, const Plan& plan, const Options& opt);

/// ---- Pretraining replicates (docs/report.md, "Replicates") --------------------------------
/// One arm (a pretraining strategy pretrained several times: its replicates) in one (task,
/// shots) cell, on one metric. The unit is the replicate: each replicate's mean over its
/// fine-tuning seeds, then the arm's mean and spread over those.
struct ArmStat {
  std::vector<int64_t> replicates;      // ids, ascending
  std::vector<double> replicate_means;  // the mean over each replicate's fine-tuning seeds
  std::vector<uint64_t> seeds;          // how many fine-tuning seeds each replicate had
  // Replicates whose Table 1 cell has fewer seeds than it should (MetricStat::incomplete):
  // their means are over part of their seeds; the cell is marked "(short: c)" and said.
  uint64_t short_replicates = 0;
  double mean = 0, spread = 0;          // over the replicate means; spread: std (ddof 1), NaN below 2
  bool compared = false;                // there is a baseline arm (and this is not it)
  std::string test;                     // "paired" (replicates paired by id), "welch", or "" (none)
  uint64_t n = 0, baseline_n = 0;       // replicates in the test: pairs (paired), or each side (welch)
  stats::TTest t;
  /// Markers as Table 1's (improvements only).
  const char* marker(bool latex) const;
};

struct Arm {
  std::string name, group;
  std::vector<std::string> models;  // its replicates' model names, by replicate id
};

struct ReplicateTable {
  std::vector<std::string> metrics, tasks;
  std::vector<int64_t> shots;
  std::vector<Arm> arms;
  std::string baseline;                        // the baseline arm, "" when none
  std::vector<std::vector<ArmStat>> cells;     // [(a * tasks + k) * shots + s][metric]
  std::vector<std::string> warnings;           // e.g. one replicate per arm
  const std::vector<ArmStat>& cell(size_t a, size_t k, size_t s) const {
    return cells[(a * tasks.size() + k) * shots.size() + s];
  }
};

/// The arms of the table's models (Model::arm) and their statistics over replicates; no
/// arms when no shown model is a replicate. The test against the baseline arm: paired by
/// replicate id when both arms have the same ids (2 or more), else Welch's test on the
/// replicate means (2 or more on each side), else none.
ReplicateTable aggregate_replicates(const Results& results, const Table& table);
std::string replicates_markdown(const ReplicateTable& r, int decimals);
std::string replicates_latex(const ReplicateTable& r, int decimals);
std::string replicates_csv(const ReplicateTable& r);

/// Percentage improvement of a model over its baseline at one shots value, on the first
/// metric: 100 (A_model - A_base) / A_base with A = mean over the tasks where both have
/// results of the per-task mean over seeds.
struct Improvement {
  std::string model, group, baseline;
  int64_t shots = 0;
  uint64_t tasks = 0;                                   // 0: nothing to compare (NaN values)
  double model_mean = 0, baseline_mean = 0, percent = 0;
  // Of the cells it is over (the model's and the baseline's, per task), those with fewer
  // seeds than they should have (MetricStat::incomplete): Table 1 marks them n=k/m and does
  // not rank them, and the percentage then sets a mean over fewer seeds against a full one.
  uint64_t short_cells = 0;
};
std::vector<Improvement> improvements(const Table& table);

/// The output texts (exposed for tests); decimals as Options::decimals.
std::string table1_markdown(const Table& t, int decimals);
std::string table1_latex(const Table& t, int decimals);
std::string table1_csv(const Table& t);
std::string improvement_markdown(const Table& t, const std::vector<Improvement>& imp);
std::string improvement_latex(const Table& t, const std::vector<Improvement>& imp);
std::string improvement_csv(const std::vector<Improvement>& imp);

/// One series of an error-bar plot: (x, mean, std) points; std NaN draws no bar.
struct ErrorSeries {
  std::string label;
  std::vector<std::pair<double, std::pair<double, double>>> points;
};
/// SVG plot with axes (log x when asked), ±std error bars, one <g class="series"> per series
/// and a legend. Written atomically.
void write_errorbar_plot(const std::string& path, const std::string& title, const std::string& x_label,
                         const std::string& y_label, const std::vector<ErrorSeries>& series, bool log_x);
/// rsvg-convert's full path when it is on PATH, else "".
std::string find_rsvg_convert();
/// Converts an SVG to PNG with rsvg-convert (atomically); throws std::runtime_error on failure.
void svg_to_png(const std::string& rsvg, const std::string& svg, const std::string& png);

struct Summary {
  uint64_t records = 0, ok = 0, failed = 0;
  std::vector<std::string> failed_jobs, models, tasks, baselines, files, warnings;
  std::vector<std::string> arms;  // arms of pretraining replicates (replicates.md), in order
  std::vector<int64_t> shots;
  bool png = false;
};

/// Reads, aggregates and writes every output under opt.out (created when missing).
Summary write_report(const Options& opt);

}  // namespace genemask::report
