// The report over pretraining replicates (report.hpp, "Pretraining replicates"): an arm is a
// strategy pretrained several times; the unit of its statistics is the replicate, so that a
// difference between arms is weighed against the spread between pretraining runs, not only
// against the fine-tuning seeds of one run.
#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <limits>
#include <map>
#include <set>

#include "genemask/eval/report.hpp"
#include "io/table_text.hpp"

namespace genemask::report {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::string num(double v, int d) { return std::isnan(v) ? "nan" : fmt::format("{:.{}f}", v, d); }
/// Full precision for the CSV: Python's float() reads back the same double.
std::string full(double v) { return std::isnan(v) ? "" : fmt::format("{}", v); }

using io::md_text;
using io::tex_text;

}  // namespace

const char* ArmStat::marker(bool latex) const {
  if (!compared || test.empty() || !(t.t > 0)) return "";
  return latex ? stats::significance_marker_latex(t.p) : stats::significance_marker(t.p);
}

ReplicateTable aggregate_replicates(const Results& results, const Table& table) {
  ReplicateTable r;
  r.metrics = table.metrics;
  r.tasks = table.tasks;
  r.shots = table.shots;
  r.baseline = table.baseline_arm;
  std::map<std::string, size_t> arm_idx;
  std::map<std::string, const Model*> model_of;
  std::map<std::pair<std::string, int64_t>, size_t> table_model;  // (arm, replicate) -> Table 1's model
  for (const auto& m : table.models) {
    model_of[m.name] = &m;
    table_model[{m.arm, m.replicate}] = static_cast<size_t>(&m - table.models.data());
    if (m.arm.empty()) continue;
    auto [it, fresh] = arm_idx.emplace(m.arm, r.arms.size());
    if (fresh) r.arms.push_back(Arm{m.arm, m.group, {}});
    r.arms[it->second].models.push_back(m.name);
    if (r.arms[it->second].group != m.group)
      r.warnings.push_back(fmt::format("the replicates of arm '{}' are in different groups ('{}', '{}'); the arm is "
                                       "shown in the first",
                                       m.arm, r.arms[it->second].group, m.group));
  }
  if (r.arms.empty()) return r;
  std::map<std::string, size_t> task_idx;
  std::map<int64_t, size_t> shot_idx;
  for (size_t i = 0; i < r.tasks.size(); ++i) task_idx[r.tasks[i]] = i;
  for (size_t i = 0; i < r.shots.size(); ++i) shot_idx[r.shots[i]] = i;
  const size_t nm = r.metrics.size();
  // values[cell][metric][replicate] = the metric over its fine-tuning seeds
  std::vector<std::vector<std::map<int64_t, std::vector<double>>>> values(
      r.arms.size() * r.tasks.size() * r.shots.size(), std::vector<std::map<int64_t, std::vector<double>>>(nm));
  for (const auto& rec : results.ok) {
    if (!table.used_jobs.count(rec.job)) continue;  // e.g. a seed the plan does not list: as in Table 1
    auto m = model_of.find(rec.model);
    if (m == model_of.end() || m->second->arm.empty() || !task_idx.count(rec.task) || !shot_idx.count(rec.shots))
      continue;
    const size_t at = (arm_idx[m->second->arm] * r.tasks.size() + task_idx[rec.task]) * r.shots.size() + shot_idx[rec.shots];
    for (size_t q = 0; q < nm; ++q) values[at][q][m->second->replicate].push_back(rec.values.at(r.metrics[q]));
  }
  r.cells.assign(values.size(), std::vector<ArmStat>(nm));
  uint64_t short_cells = 0;
  std::string short_example;
  for (size_t c = 0; c < values.size(); ++c)
    for (size_t q = 0; q < nm; ++q) {
      ArmStat& st = r.cells[c][q];
      const size_t a = c / (r.tasks.size() * r.shots.size()), k = c / r.shots.size() % r.tasks.size(),
                   s = c % r.shots.size();
      for (const auto& [rep, v] : values[c][q]) {  // ascending ids
        st.replicates.push_back(rep);
        st.replicate_means.push_back(stats::mean(v));
        st.seeds.push_back(v.size());
        const size_t m = table_model.at({r.arms[a].name, rep});
        if (const MetricStat& cell = table.cell(m, k, s)[q]; cell.incomplete()) {
          ++st.short_replicates;
          if (q == 0 && short_cells++ == 0)
            short_example = fmt::format("arm '{}', task '{}', {} shots: replicate {} ('{}') has {} of {} seeds",
                                        r.arms[a].name, r.tasks[k], r.shots[s], rep, table.models[m].name, cell.n,
                                        cell.expected);
        }
      }
      st.mean = st.replicate_means.empty() ? kNaN : stats::mean(st.replicate_means);
      st.spread = st.replicate_means.size() >= 2 ? stats::stddev(st.replicate_means) : kNaN;
    }
  // The test against the baseline arm, cell by cell.
  if (!r.baseline.empty() && arm_idx.count(r.baseline)) {
    const size_t b = arm_idx[r.baseline];
    for (size_t a = 0; a < r.arms.size(); ++a) {
      if (a == b) continue;
      for (size_t k = 0; k < r.tasks.size(); ++k)
        for (size_t s = 0; s < r.shots.size(); ++s)
          for (size_t q = 0; q < nm; ++q) {
            ArmStat& st = r.cells[(a * r.tasks.size() + k) * r.shots.size() + s][q];
            const ArmStat& base = r.cells[(b * r.tasks.size() + k) * r.shots.size() + s][q];
            if (st.replicates.empty() || base.replicates.empty()) continue;
            st.compared = true;
            if (st.replicates == base.replicates && st.replicates.size() >= 2) {
              st.test = "paired";  // the same pretraining seeds: pairs remove what the seed does to both
              st.n = st.baseline_n = st.replicates.size();
              st.t = stats::paired_t_test(st.replicate_means, base.replicate_means);
            } else if (st.replicates.size() >= 2 && base.replicates.size() >= 2) {
              st.test = "welch";
              st.n = st.replicates.size();
              st.baseline_n = base.replicates.size();
              st.t = stats::welch_t_test(st.replicate_means, base.replicate_means);
            }
          }
    }
  }
  if (short_cells > 0)
    r.warnings.push_back(fmt::format("{} cell(s) of replicates.md have a replicate whose mean is over fewer seeds than "
                                     "{} (e.g. {}): marked (short: c), c the replicates short of seeds; finish the "
                                     "sweep (genemask sweep continues where it stopped)",
                                     short_cells, table.expected_source(false), short_example));
  // With one replicate per arm nothing can tell the strategy from the luck of its one run.
  size_t fewest = SIZE_MAX;
  for (const auto& cell : r.cells)
    for (const auto& st : cell)
      if (!st.replicates.empty()) fewest = std::min(fewest, st.replicates.size());
  if (fewest == 1)
    r.warnings.push_back("some arm has one pretraining replicate in a cell: there the strategy's effect cannot be "
                         "separated from the luck of one pretraining run, and no test over replicates is made; "
                         "pretrain each strategy with several seeds (PRETRAIN_SEEDS)");
  return r;
}

namespace {

std::string cell_text(const ArmStat& st, int d, bool latex) {
  if (st.replicates.empty()) return latex ? "--" : "\u2013";
  const std::string pm = latex ? " $\\pm$ " : " \u00b1 ";
  std::string v = num(st.mean, d) + (std::isnan(st.spread) ? "" : pm + num(st.spread, d)) +
                  fmt::format(latex ? " ($k={}$)" : " (k={})", st.replicates.size());
  if (st.short_replicates > 0) v += fmt::format(" (short: {})", st.short_replicates);
  return v + st.marker(latex);
}

std::string note(const ReplicateTable& r, bool latex) {
  std::string names;
  std::string o = fmt::format(
      "Each cell: the mean over an arm's pretraining replicates of each replicate's mean over its fine-tuning seeds, "
      "{} the spread between replicates (std, ddof 1), and k, the number of replicates. ",
      latex ? "$\\pm$" : "\u00b1");
  if (r.baseline.empty())
    return o + "No baseline arm was given (--baseline ARM), so there is no test between arms.";
  const std::string base = latex ? tex_text(r.baseline) : md_text(r.baseline);
  return o + fmt::format(
                 "Markers: a two-sided t-test whose unit is the pretraining replicate, against arm {}: paired by "
                 "replicate id where both arms have the same replicates (2 or more), else Welch's test on the "
                 "replicate means (2 or more on each side), else none; shown on improvements only: {}. The test used and its replicate counts are in replicates.csv. Table 1's "
                 "markers count the fine-tuning seeds only.",
                 base, stats::significance_legend(latex));
}

}  // namespace

std::string replicates_markdown(const ReplicateTable& r, int d) {
  std::string o = "# Pretraining replicates: arms over their replicates (mean \u00b1 spread, k)\n\n| Shots | Arm |";
  const size_t cols = 2 + r.tasks.size() * r.metrics.size();
  for (const auto& task : r.tasks)
    for (const auto& m : r.metrics) o += " " + md_text(task) + " " + metric_title(m) + " |";
  o += "\n|";
  for (size_t c = 0; c < cols; ++c) o += c < 2 ? "---|" : "---:|";
  o += "\n";
  for (size_t s = 0; s < r.shots.size(); ++s)
    for (size_t a = 0; a < r.arms.size(); ++a) {
      o += "| " + (a == 0 ? std::to_string(r.shots[s]) : std::string()) + " | " + md_text(r.arms[a].name) + " |";
      for (size_t k = 0; k < r.tasks.size(); ++k)
        for (const auto& st : r.cell(a, k, s)) o += " " + cell_text(st, d, false) + " |";
      o += "\n";
    }
  o += "\n" + note(r, false) + "\n";
  for (const auto& w : r.warnings) o += "\nWarning: " + w + ".\n";
  return o;
}

std::string replicates_latex(const ReplicateTable& r, int d) {
  const size_t cols = 2 + r.tasks.size() * r.metrics.size();
  std::string o = "% Pretraining replicates of `genemask report` (replicates.md has the same table).\n"
                  "\\begin{table*}[t]\n\\footnotesize\n\\centering\n\\begin{tabular}{" +
                  std::string(cols, 'c') + "}\n\\hline\n\\textbf{Shots} & \\textbf{Arm}";
  for (const auto& task : r.tasks)
    for (const auto& m : r.metrics) o += " & \\textbf{" + tex_text(task) + " " + metric_title(m) + "}";
  o += " \\\\\n\\hline\n";
  for (size_t s = 0; s < r.shots.size(); ++s) {
    for (size_t a = 0; a < r.arms.size(); ++a) {
      o += (a == 0 ? std::to_string(r.shots[s]) : std::string()) + " & " + tex_text(r.arms[a].name);
      for (size_t k = 0; k < r.tasks.size(); ++k)
        for (const auto& st : r.cell(a, k, s)) o += " & " + cell_text(st, d, true);
      o += " \\\\\n";
    }
    o += "\\hline\n";
  }
  o += "\\end{tabular}\n\\caption{" + note(r, true) + "}\n\\label{tab:replicates}\n\\end{table*}\n";
  return o;
}

std::string replicates_csv(const ReplicateTable& r) {
  std::string o = "arm,group,task,shots,metric,replicates,mean,spread,replicate_ids,replicate_means,seeds,"
                  "short_replicates,baseline,test,n,baseline_n,t,df,p\n";
  for (size_t a = 0; a < r.arms.size(); ++a)
    for (size_t k = 0; k < r.tasks.size(); ++k)
      for (size_t s = 0; s < r.shots.size(); ++s)
        for (size_t q = 0; q < r.metrics.size(); ++q) {
          const ArmStat& st = r.cell(a, k, s)[q];
          if (st.replicates.empty()) continue;
          std::string ids, means, seeds;
          for (size_t i = 0; i < st.replicates.size(); ++i) {
            ids += (i ? " " : "") + std::to_string(st.replicates[i]);
            means += (i ? " " : "") + full(st.replicate_means[i]);
            seeds += (i ? " " : "") + std::to_string(st.seeds[i]);
          }
          const bool tested = !st.test.empty();
          o += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n", io::csv_field(r.arms[a].name),
                           io::csv_field(r.arms[a].group), io::csv_field(r.tasks[k]), r.shots[s], r.metrics[q],
                           st.replicates.size(), full(st.mean), full(st.spread), ids, means, seeds, st.short_replicates,
                           st.compared ? io::csv_field(r.baseline) : "", st.test, tested ? std::to_string(st.n) : "",
                           tested ? std::to_string(st.baseline_n) : "",
                           tested ? (std::isinf(st.t.t) ? (st.t.t > 0 ? "inf" : "-inf") : full(st.t.t)) : "",
                           tested && std::isfinite(st.t.df) ? full(st.t.df) : "", tested ? full(st.t.p) : "");
        }
  return o;
}

}  // namespace genemask::report
