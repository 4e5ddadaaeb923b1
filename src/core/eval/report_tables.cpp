// The report's text outputs: Table 1 and the improvement tables as Markdown, LaTeX and CSV,
// and write_report, which puts everything under the output directory (report.hpp).
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fmt/format.h>
#include <set>

#include "io/table_text.hpp"
#include "genemask/eval/report.hpp"
#include "io/atomic_file.hpp"
#include "io/json.hpp"
#include "io/output_guard.hpp"

#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

namespace genemask::report {
namespace {

namespace fs = std::filesystem;

std::string num(double v, int decimals) { return fmt::format("{:.{}f}", v, decimals); }

/// Full precision for CSV: Python's float() reads back the same double.
std::string exact(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return fmt::format("{:.17g}", v);
}

std::string md_escape(const std::string& s) { return io::md_text(s); }

std::string md_marker(const char* m) {
  std::string o;
  for (const char* c = m; *c; ++c) o += *c == '*' ? std::string("\\*") : std::string(1, *c);
  return o;
}

std::string tex_escape(const std::string& s) { return io::tex_text(s); }

std::string csv_field(const std::string& s) { return io::csv_field(s); }

/// How many seeds a cell's mean is over, when that is worth saying: one, or fewer than planned.
std::string seeds_note(const MetricStat& st, bool latex) {
  std::string n;
  if (st.incomplete()) n = fmt::format("n={}/{}", st.n, st.expected);
  else if (st.n == 1) n = "n=1";
  if (n.empty()) return "";
  return latex ? " ($" + n + "$)" : " (" + n + ")";
}

std::string md_cell(const MetricStat& st, int d) {
  if (st.n == 0) return "\u2013";
  std::string v = (st.n >= 2 ? num(st.mean, d) + " \u00b1 " + num(st.std, d) : num(st.mean, d)) + seeds_note(st, false);
  if (st.rank == 1) v = "**" + v + "**";
  if (st.rank == 2) v = "_" + v + "_";
  return v + md_marker(st.marker(false));
}

std::string tex_cell(const MetricStat& st, int d) {
  if (st.n == 0) return "--";
  std::string v = (st.n >= 2 ? num(st.mean, d) + " $\\pm$ " + num(st.std, d) : num(st.mean, d)) + seeds_note(st, true);
  if (st.rank == 1) v = "\\textbf{" + v + "}";
  if (st.rank == 2) v = "\\cellcolor{yellow} " + v;
  return v + st.marker(true);
}

/// One improvement cell: the percentage; "(k/n tasks)" when over fewer tasks than the table
/// has; "(short: c)" when c of its cells are means over fewer seeds than planned; n/a when the
/// baseline's mean is at or below 0; a dash when nothing was compared.
std::string improvement_text(const Improvement& i, size_t table_tasks, bool latex) {
  if (i.tasks == 0) return latex ? "--" : "\u2013";
  std::string v = std::isnan(i.percent) ? "n/a" : latex ? fmt::format("${:.2f}\\%$", i.percent) : fmt::format("{:.2f}%", i.percent);
  if (i.tasks < table_tasks) v += fmt::format(" ({}/{} tasks)", i.tasks, table_tasks);
  if (i.short_cells > 0) v += fmt::format(" (short: {})", i.short_cells);
  return v;
}

/// Under Table 1 when some shown task has fixed N-shot files: what its std is over.
std::string fixed_shots_sentence(const Table& t, bool latex) {
  if (t.fixed_shot_tasks.empty()) return "";
  std::string names;
  for (const auto& n : t.fixed_shot_tasks) names += (names.empty() ? "" : ", ") + (latex ? tex_escape(n) : md_escape(n));
  const bool all = t.fixed_shot_tasks.size() == t.tasks.size();
  return fmt::format("{} every seed fine-tunes on the same N-shot file (the released few-shot layout), so the std is "
                     "that of fine-tuning alone (initialisation, dropout, batch order){}.",
                     all ? "In every task," : "In " + names + ",",
                     all ? "" : "; the other tasks draw N of each class per seed");
}

std::string baseline_sentence(const Table& t, bool latex) {
  if (t.baselines.empty()) return "No baseline was given, so there are no significance markers.";
  std::string names;
  for (const auto& b : t.baselines) names += (names.empty() ? "" : ", ") + (latex ? tex_escape(b) : md_escape(b));
  // A test over the fine-tuning seeds of one pretraining run says nothing about the noise
  // between pretraining runs: said, and where the test over replicates is.
  const std::string against =
      t.baseline_arm.empty()
          ? fmt::format("each model against the baseline of its group ({})", names)
          : fmt::format("each replicate against the replicate of the same id of arm {} ({})",
                        latex ? tex_escape(t.baseline_arm) : md_escape(t.baseline_arm), names);
  return fmt::format("Markers: paired t-test over the fine-tuning seeds only (two-sided, pairs by seed) of {}, shown "
                     "on improvements only: {}.{}",
                     against, stats::significance_legend(latex),
                     t.baseline_arm.empty() ? "" : " replicates.md compares the arms over their pretraining replicates.");
}

}  // namespace

std::string table1_markdown(const Table& t, int d) {
  const size_t cols = 2 + t.tasks.size() * t.metrics.size();
  std::string o = fmt::format("# Table 1: {} over seeds (mean \u00b1 std)\n\n", [&] {
    std::string s;
    for (const auto& m : t.metrics) s += (s.empty() ? "" : ", ") + metric_title(m);
    return s;
  }());
  o += "| Shots | Model |";
  for (const auto& task : t.tasks)
    for (const auto& m : t.metrics) o += " " + md_escape(task) + " " + metric_title(m) + " |";
  o += "\n|";
  for (size_t c = 0; c < cols; ++c) o += c < 2 ? "---|" : "---:|";
  o += "\n";
  for (const auto& g : t.groups) {
    if (t.has_groups()) {
      o += "| | **" + (g.empty() ? std::string("(no group)") : md_escape(g)) + "** |";
      for (size_t c = 2; c < cols; ++c) o += " |";
      o += "\n";
    }
    for (size_t s = 0; s < t.shots.size(); ++s) {
      bool first = true;
      for (size_t m = 0; m < t.models.size(); ++m) {
        if (t.models[m].group != g) continue;
        o += "| " + (first ? std::to_string(t.shots[s]) : std::string()) + " | " + md_escape(t.models[m].name) + " |";
        first = false;
        for (size_t k = 0; k < t.tasks.size(); ++k)
          for (const auto& st : t.cell(m, k, s)) o += " " + md_cell(st, d) + " |";
        o += "\n";
      }
    }
  }
  o += "\nBold: best value of its column within a shots block of a group (ties on the shown digits are all "
       "bold); italic: second best (only in blocks of 3 or more models). " +
       baseline_sentence(t, false) + "\n";
  if (const std::string f = fixed_shots_sentence(t, false); !f.empty()) o += "\n" + f + "\n";
  if (const std::string p = t.precision_sentence(); !p.empty()) o += "\nFine-tuning precision: " + p + ".\n";
  if (std::any_of(t.cells.begin(), t.cells.end(),
                  [](const std::vector<MetricStat>& c) { return !c.empty() && c[0].incomplete(); }))
    o += "\nn=k/m: the mean of k seeds where " + t.expected_source(true) +
         " (an unfinished sweep); such cells are not ranked.\n";
  if (!t.failed_jobs.empty()) {
    o += fmt::format("\nFailed jobs without a result ({}):", t.failed_jobs.size());
    for (const auto& j : t.failed_jobs) o += " " + io::md_code(j);
    o += "\n";
  }
  if (!t.missing_jobs.empty()) {
    o += fmt::format("\nJobs of the plan not run ({}):", t.missing_jobs.size());
    for (const auto& j : t.missing_jobs) o += " " + io::md_code(j);
    o += "\n";
  }
  return o;
}

std::string table1_latex(const Table& t, int d) {
  const size_t cols = 2 + t.tasks.size() * t.metrics.size();
  std::string o =
      "% Table 1 of `genemask report` (paper layout, tab:perf-compare-10K).\n"
      "% Needs \\usepackage[table]{xcolor} for \\cellcolor.\n"
      "\\begin{table*}[t]\n\\footnotesize\n\\centering\n\\begin{tabular}{" + std::string(cols, 'c') + "}\n\\hline\n";
  o += "\\textbf{Shots} & \\textbf{Model}";
  for (const auto& task : t.tasks)
    o += fmt::format(" & \\multicolumn{{{}}}{{c}}{{\\textbf{{{}}}}}", t.metrics.size(), tex_escape(task));
  o += " \\\\\n & ";
  for (const auto& task : t.tasks) {
    (void)task;
    for (const auto& m : t.metrics) o += " & \\textbf{" + metric_title(m) + "}";
  }
  o += " \\\\ \\hline\n";
  for (size_t gi = 0; gi < t.groups.size(); ++gi) {
    const auto& g = t.groups[gi];
    if (t.has_groups())
      o += fmt::format(" & \\multicolumn{{{}}}{{c}}{{\\textbf{{{}}}}} \\\\\n", cols - 1,
                       g.empty() ? std::string("(no group)") : tex_escape(g));
    for (size_t s = 0; s < t.shots.size(); ++s) {
      bool first = true;
      for (size_t m = 0; m < t.models.size(); ++m) {
        if (t.models[m].group != g) continue;
        o += (first ? std::to_string(t.shots[s]) : std::string()) + " & " + tex_escape(t.models[m].name);
        first = false;
        for (size_t k = 0; k < t.tasks.size(); ++k)
          for (const auto& st : t.cell(m, k, s)) o += " & " + tex_cell(st, d);
        o += " \\\\\n";
      }
      o += s + 1 < t.shots.size() ? fmt::format("\\cline{{2-{}}}\n", cols) : std::string("\\hline\n");
    }
  }
  for (const auto& j : t.failed_jobs) o += "% failed job without a result: " + j + "\n";
  for (const auto& j : t.missing_jobs) o += "% job of the plan not run: " + j + "\n";
  if (const std::string p = t.precision_sentence(); !p.empty()) o += "% fine-tuning precision: " + p + "\n";
  o += "\\end{tabular}\n\\caption{Mean $\\pm$ std over seeds, rounded to " + std::to_string(d) +
       " decimals. The best value is in \\textbf{bold}, the second best highlighted in yellow (within each "
       "shots block of a group). " + baseline_sentence(t, true) +
       (t.fixed_shot_tasks.empty() ? std::string() : " " + fixed_shots_sentence(t, true)) + "}\n\\label{tab:perf-compare}\n\\end{table*}\n";
  return o;
}

std::string table1_csv(const Table& t) {
  std::string o = "group,model,task,shots,baseline,n,pairs";
  for (const auto& m : t.metrics)
    for (const char* f : {"mean", "std", "t", "p", "marker", "rank"}) o += "," + m + "_" + f;
  o += ",n_expected\n";
  for (size_t m = 0; m < t.models.size(); ++m)
    for (size_t s = 0; s < t.shots.size(); ++s)
      for (size_t k = 0; k < t.tasks.size(); ++k) {
        const auto& c = t.cell(m, k, s);
        if (c[0].n == 0) continue;
        o += fmt::format("{},{},{},{},{},{},{}", csv_field(t.models[m].group), csv_field(t.models[m].name),
                         csv_field(t.tasks[k]), t.shots[s], csv_field(t.models[m].baseline), c[0].n, c[0].pairs);
        for (const auto& st : c) {
          const bool tested = st.compared && st.pairs >= 2;  // fewer pairs: no test (empty, not t 0, p 1)
          o += fmt::format(",{},{},{},{},{},{}", exact(st.mean), exact(st.std), tested ? exact(st.test.t) : "",
                           tested ? exact(st.test.p) : "", st.marker(false), st.rank);
        }
        o += fmt::format(",{}\n", c[0].expected);
      }
  return o;
}

std::string improvement_markdown(const Table& t, const std::vector<Improvement>& imp) {
  std::string o = fmt::format("# Improvement in average {} over tasks vs the baseline (%)\n\n", metric_title(t.metrics[0]));
  o += "| Model | Group | Baseline |";
  for (auto s : t.shots) o += " " + std::to_string(s) + " |";
  o += "\n|---|---|---|";
  for (size_t s = 0; s < t.shots.size(); ++s) o += "---:|";
  o += "\n";
  for (size_t i = 0; i < imp.size(); i += t.shots.size()) {
    o += "| " + md_escape(imp[i].model) + " | " + md_escape(imp[i].group) + " | " + md_escape(imp[i].baseline) + " |";
    for (size_t s = 0; s < t.shots.size(); ++s)
      o += " " + improvement_text(imp[i + s], t.tasks.size(), false) + " |";
    o += "\n";
  }
  o += fmt::format("\n100 (A_model - A_baseline) / A_baseline, where A is the mean over the tasks with results for both "
                   "of the per-task mean {} over seeds; (k/n tasks): over k of the table's n tasks only; (short: c): c "
                   "of the cells it is over (the model's and the baseline's) are means over fewer seeds than they "
                   "should have (n=k/m in Table 1), so it compares unlike means; n/a: the baseline's A is at or below "
                   "0, where a percentage has no meaning (improvement.csv has both A).\n",
                   t.metrics[0]);
  return o;
}

std::string improvement_latex(const Table& t, const std::vector<Improvement>& imp) {
  std::string o = "% Improvement tables of `genemask report` (paper tab:perf-percent-fewshot-*).\n"
                  "\\begin{table}\n\\centering\n\\begin{tabular}{ccc" + std::string(t.shots.size(), 'c') +
                  "}\n\\hline\nModel & Group & Baseline";
  for (auto s : t.shots) o += " & " + std::to_string(s);
  o += " \\\\ \\hline\n";
  for (size_t i = 0; i < imp.size(); i += t.shots.size()) {
    o += tex_escape(imp[i].model) + " & " + tex_escape(imp[i].group) + " & " + tex_escape(imp[i].baseline);
    for (size_t s = 0; s < t.shots.size(); ++s)
      o += " & " + improvement_text(imp[i + s], t.tasks.size(), true);
    o += " \\\\\n";
  }
  o += "\\hline\n\\end{tabular}\n\\caption{Percentage improvement in average " + metric_title(t.metrics[0]) +
       " over the tasks of each model over its baseline, per shots." +
       (std::any_of(imp.begin(), imp.end(), [](const Improvement& i) { return i.short_cells > 0; })
            ? " (short: c): c of the cells compared are means over fewer seeds than planned."
            : "") +
       "}\n\\label{tab:perf-percent}\n\\end{table}\n";
  return o;
}

std::string improvement_csv(const std::vector<Improvement>& imp) {
  std::string o = "group,model,baseline,shots,tasks,model_mean,baseline_mean,improvement_pct,short_cells\n";
  for (const auto& i : imp)
    o += fmt::format("{},{},{},{},{},{},{},{},{}\n", csv_field(i.group), csv_field(i.model), csv_field(i.baseline),
                     i.shots, i.tasks, exact(i.model_mean), exact(i.baseline_mean), exact(i.percent), i.short_cells);
  return o;
}

namespace {

void write_text(const fs::path& out, const std::string& name, const std::string& text, std::vector<std::string>& files) {
  io::AtomicFile f((out / name).string());
  f.stream() << text;
  f.commit();
  files.push_back(name);
}

/// A file name for a task: letters, digits, '.', '-', '_' kept; others become '_'.
std::string safe_name(const std::string& s) {
  std::string o;
  for (char c : s) o += (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_') ? c : '_';
  if (o.empty() || o[0] == '.') o = "_" + o;
  return o;
}

/// Models pretrained on a genome list: the tokens of each genome they were trained on, from
/// the genemask_pretraining.json that export-hf puts beside the weights, or the state.json
/// of a checkpoint the plan names (a run), in the plan's checkpoint or model directory. A
/// genemask_pretraining.json that is there but unreadable is a warning.
struct GenomeTokens {
  std::string model;
  std::vector<std::pair<std::string, uint64_t>> tokens;  // genome, tokens (in the file's order)
};
std::vector<GenomeTokens> genome_tokens(const Table& t, const Plan& plan, std::vector<std::string>& warnings) {
  std::vector<GenomeTokens> out;
  for (const auto& m : t.models)
    for (const auto& pm : plan.models) {
      if (pm.name != m.name) continue;
      // The file's text, or nullopt when it cannot be opened.
      const auto text = [](const std::string& f) -> std::optional<std::string> {
        std::ifstream in(f);
        if (!in) return std::nullopt;
        std::stringstream ss;
        ss << in.rdbuf();
        return ss.str();
      };
      for (const std::string& dir : {pm.checkpoint, pm.path}) {
        if (dir.empty()) continue;
        std::string f = dir + "/genemask_pretraining.json";
        auto body = text(f);
        if (body) {
          // An export's file is checked as its other readers check it (the marker's SHA-256),
          // and the export must be the one the sweep evaluated (the plan's weights digest).
          std::string why;
          try {
            const auto recorded = io::verify_output_files(dir, [](const std::string& n) {
              return n == "genemask_pretraining.json";
            });
            const bool same = pm.weights_sha256.empty() || recorded.empty() ||
                              std::any_of(recorded.begin(), recorded.end(),
                                          [&](const auto& e) { return e.second == pm.weights_sha256; });
            if (!same)
              why = fmt::format("{}: its weights are not the ones the sweep's plan records (SHA-256 {}): the model "
                                "directory was written again since the sweep",
                                dir, pm.weights_sha256.substr(0, 16));
          } catch (const io::InputError& e) {
            why = e.what();
          }
          if (!why.empty()) {
            warnings.push_back(fmt::format("{}; genomes.md leaves model '{}' out", why, m.name));
            break;
          }
        }
        if (!body) {  // a run's checkpoint: its state.json keeps the totals (when it was on a genome list)
          f = dir + "/state.json";
          body = text(f);
          if (!body || body->find("\"genome_tokens\"") == std::string::npos) continue;
        }
        const io::JsonParse parsed = io::try_parse_json(*body);
        const nlohmann::json& j = parsed.value;
        GenomeTokens g{m.name, {}};
        bool ok = parsed.ok() && j.is_object() && j.contains("genome_tokens") && j["genome_tokens"].is_object();
        if (ok)
          for (const auto& [name, v] : j["genome_tokens"].items()) {
            if (!v.is_number_unsigned()) ok = false;
            else g.tokens.emplace_back(name, v.get<uint64_t>());
          }
        if (!parsed.ok()) {
          warnings.push_back(fmt::format("{}:{}: {}; genomes.md leaves model '{}' out", f, parsed.line, parsed.error,
                                         m.name));
        } else if (!ok) {
          warnings.push_back(fmt::format("{}: genome_tokens is not an object of genome -> tokens (the file is "
                                         "damaged?); genomes.md leaves model '{}' out",
                                         f, m.name));
        } else {
          out.push_back(std::move(g));
        }
        break;  // the first directory that has the totals
      }
      break;
    }
  return out;
}

std::string genomes_markdown(const std::vector<GenomeTokens>& g) {
  std::string o = "Pretraining tokens per genome (6-mer tokens trained on, all ranks; from each model's "
                  "genemask_pretraining.json, or for a run its checkpoint's state.json)\n\n| Model | Genome | Tokens | "
                  "Share |\n|---|---|---:|---:|\n";
  for (const auto& m : g) {
    uint64_t total = 0;
    for (const auto& [name, n] : m.tokens) total += n;
    for (const auto& [name, n] : m.tokens)
      o += fmt::format("| {} | {} | {} | {:.4f} |\n", md_escape(m.model), md_escape(name), n,
                       total ? static_cast<double>(n) / static_cast<double>(total) : 0.0);
  }
  return o;
}

std::string genomes_csv(const std::vector<GenomeTokens>& g) {
  std::string o = "model,genome,tokens,share\n";
  for (const auto& m : g) {
    uint64_t total = 0;
    for (const auto& [name, n] : m.tokens) total += n;
    for (const auto& [name, n] : m.tokens)
      o += fmt::format("{},{},{},{}\n", io::csv_field(m.model), io::csv_field(name), n,
                       total ? static_cast<double>(n) / static_cast<double>(total) : 0.0);
  }
  return o;
}

}  // namespace

Summary write_report(const Options& opt) {
  if (opt.decimals < 0 || opt.decimals > 10)
    throw std::invalid_argument(fmt::format("report: --decimals {} is outside 0..10", opt.decimals));
  Results results = read_results(opt.results);
  Plan plan;
  std::string plan_path = opt.plan;
  if (plan_path.empty()) {
    const fs::path p = fs::path(opt.results).parent_path() / "plan.json";
    if (fs::exists(p)) plan_path = p.string();
  }
  if (!plan_path.empty()) plan = sweep::read_plan_order(plan_path);
  if (!plan.grid_given) {
    // Without the sweep's plan the cells' seeds are counted against the records themselves: a
    // results file cut at a line end (every record whole) read as a smaller sweep, its cells'
    // means over fewer seeds unmarked and ranked. The records say how many jobs there were.
    bool counted = false;
    for (const auto& [id, sw] : results.sweeps) {
      if (sw.total < 0) continue;
      counted = true;
      if (sw.jobs.size() < static_cast<uint64_t>(sw.total))
        throw io::InputError(
            opt.results,
            fmt::format("holds records of {} of the {} jobs of the sweep{} that wrote them (their \"jobs_total\"), "
                        "and {}: the file was cut short, or the sweep has not finished; report it with the sweep's "
                        "own plan.json (--plan DIR/plan.json: cells short of seeds are then marked and not ranked), "
                        "or finish the sweep",
                        sw.jobs.size(), sw.total, id.empty() ? "" : " " + id.substr(0, 12),
                        plan_path.empty() ? "no sweep plan.json is beside it or given with --plan"
                                          : "the plan given is not a sweep's own plan.json"));
    }
    if (!counted && plan_path.empty())
      results.warnings.push_back(fmt::format(
          "no plan.json beside {} and no --plan, and its records do not say how many jobs their sweep had (written "
          "by an earlier genemask): the cells' seeds are not counted against a plan, so a results file cut short "
          "reads as a smaller sweep; give the sweep's plan.json with --plan",
          opt.results));
  }
  const Table t = aggregate(results, plan, opt);
  // A plan that is not a sweep's own plan.json gives the order and groups only.
  if (!plan_path.empty() && !plan.grid_given)
    results.warnings.push_back(fmt::format(
        "the plan {} is not a sweep's own plan.json (\"format\": \"genemask-sweep-plan\" with its shots and seeds): "
        "its order and groups are used, but the cells' seeds are not counted against its grid and the records' inputs "
        "not checked against it; give the plan.json the sweep wrote in its --out",
        plan_path));

  Summary sum;
  sum.records = results.records;
  sum.failed = results.failed_records;
  sum.failed_jobs = results.failed_jobs;
  sum.warnings = results.warnings;
  sum.warnings.insert(sum.warnings.end(), t.warnings.begin(), t.warnings.end());
  for (const auto& m : t.models) sum.models.push_back(m.name);
  sum.tasks = t.tasks;
  sum.shots = t.shots;
  sum.baselines = t.baselines;
  sum.ok = results.ok.size();

  const fs::path out(opt.out);
  fs::create_directories(out / "plots");
  write_text(out, "table1.md", table1_markdown(t, opt.decimals), sum.files);
  write_text(out, "table1.tex", table1_latex(t, opt.decimals), sum.files);
  write_text(out, "table1.csv", table1_csv(t), sum.files);
  if (!t.baselines.empty()) {
    const auto imp = improvements(t);
    for (const auto& i : imp)
      if (i.tasks > 0 && std::isnan(i.percent))
        sum.warnings.push_back(fmt::format("improvement of '{}' over '{}' at {} shots: the baseline's mean {} is {:.4g}, "
                                           "at or below 0, where a percentage has no meaning (its sign flips): shown "
                                           "as n/a; improvement.csv has both means",
                                           i.model, i.baseline, i.shots, t.metrics[0], i.baseline_mean));
    const auto short_imp = std::count_if(imp.begin(), imp.end(), [](const Improvement& i) { return i.short_cells > 0; });
    if (short_imp > 0)
      sum.warnings.push_back(fmt::format("{} improvement(s) are over cells with fewer seeds than planned (marked "
                                         "\"short\" in improvement.md/.tex, short_cells in improvement.csv): they set "
                                         "means over fewer seeds against full ones; finish the sweep",
                                         short_imp));
    write_text(out, "improvement.md", improvement_markdown(t, imp), sum.files);
    write_text(out, "improvement.tex", improvement_latex(t, imp), sum.files);
    write_text(out, "improvement.csv", improvement_csv(imp), sum.files);
  }
  const ReplicateTable reps = aggregate_replicates(results, t);
  if (!reps.arms.empty()) {
    for (const auto& a : reps.arms) sum.arms.push_back(a.name);
    sum.warnings.insert(sum.warnings.end(), reps.warnings.begin(), reps.warnings.end());
    write_text(out, "replicates.md", replicates_markdown(reps, opt.decimals), sum.files);
    write_text(out, "replicates.tex", replicates_latex(reps, opt.decimals), sum.files);
    write_text(out, "replicates.csv", replicates_csv(reps), sum.files);
  }
  if (const auto g = genome_tokens(t, plan, sum.warnings); !g.empty()) {
    write_text(out, "genomes.md", genomes_markdown(g), sum.files);
    write_text(out, "genomes.csv", genomes_csv(g), sum.files);
  }

  const std::string rsvg = opt.png ? find_rsvg_convert() : std::string();
  sum.png = !rsvg.empty();
  std::set<std::string> used_names;
  const bool log_x = t.shots.front() > 0 && t.shots.back() >= 10 * t.shots.front();
  for (size_t k = 0; k < t.tasks.size(); ++k) {
    std::vector<ErrorSeries> series;
    for (size_t m = 0; m < t.models.size(); ++m) {
      ErrorSeries es{t.models[m].name, {}};
      for (size_t s = 0; s < t.shots.size(); ++s) {
        const MetricStat& st = t.cell(m, k, s)[0];
        if (st.n) es.points.push_back({static_cast<double>(t.shots[s]), {st.mean, st.std}});
      }
      if (!es.points.empty()) series.push_back(std::move(es));
    }
    std::string base = safe_name(t.tasks[k]);
    for (int i = 2; !used_names.insert(base).second; ++i) base = safe_name(t.tasks[k]) + "-" + std::to_string(i);
    const std::string svg = "plots/" + base + ".svg";
    write_errorbar_plot((out / svg).string(), t.tasks[k] + ": " + metric_title(t.metrics[0]) + " vs shots", "shots",
                        metric_title(t.metrics[0]) + " (mean \u00b1 std over seeds)", series, log_x);
    sum.files.push_back(svg);
    if (sum.png) {
      const std::string png = "plots/" + base + ".png";
      svg_to_png(rsvg, (out / svg).string(), (out / png).string());
      sum.files.push_back(png);
    }
  }
  return sum;
}

}  // namespace genemask::report
