// The report's input side: results.jsonl and plan.json parsing, ordering, aggregation over
// seeds, ranks within (group, shots) blocks, paired t-tests and improvements (report.hpp).
#include "genemask/eval/report.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <stdexcept>
#include <tuple>

#include "genemask/eval/results.hpp"
#include "io/error.hpp"
#include "io/table_text.hpp"

namespace genemask::report {
namespace {

using nlohmann::json;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "'" : ", '") + x + "'";
  return s.empty() ? "(none)" : s;
}

/// The rounded value a reader sees; ranks compare these so that equal-looking cells tie.
double shown(double v, int decimals) { return std::stod(fmt::format("{:.{}f}", v, decimals)); }

std::string precision_counts(const std::map<std::string, uint64_t>& counts) {
  std::string s;
  for (const auto& [p, n] : counts)
    s += fmt::format("{}{} ({} record{})", s.empty() ? "" : ", ", p.empty() ? "unrecorded" : p, n, n == 1 ? "" : "s");
  return s;
}

/// Warns of a model fine-tuned in more than one precision, and of a group whose models were
/// fine-tuned in different ones (records without a precision, from before, are not counted
/// against the others within a group).
void precision_warnings(Table& t) {
  constexpr const char* kRemedy = "set finetune.precision in the plan and rerun those jobs to compare like with like";
  for (size_t m = 0; m < t.models.size(); ++m)
    if (t.precisions[m].size() > 1)
      t.warnings.push_back(fmt::format("model '{}' was fine-tuned in more than one precision: {}; {}",
                                       t.models[m].name, precision_counts(t.precisions[m]), kRemedy));
  for (const auto& g : t.groups) {
    std::map<std::string, std::vector<std::string>> models_of;  // single known precision -> models
    for (size_t m = 0; m < t.models.size(); ++m)
      if (t.models[m].group == g && t.precisions[m].size() == 1 && !t.precisions[m].begin()->first.empty())
        models_of[t.precisions[m].begin()->first].push_back(t.models[m].name);
    if (models_of.size() < 2) continue;
    std::string what;
    for (const auto& [p, ms] : models_of) what += fmt::format("{}{} for {}", what.empty() ? "" : "; ", p, join(ms));
    t.warnings.push_back(fmt::format("the models of {} were fine-tuned in different precisions ({}); {}",
                                     g.empty() ? std::string("the report") : "group '" + g + "'", what, kRemedy));
  }
}

}  // namespace

std::string Table::precision_sentence() const {
  std::map<std::string, std::vector<std::string>> models_of;  // the model's precisions -> models
  for (size_t m = 0; m < models.size(); ++m) {
    std::string key;
    for (const auto& [p, n] : precisions[m]) key += (key.empty() ? "" : ", ") + (p.empty() ? "unrecorded" : p);
    if (precisions[m].size() > 1) key = "mixed (" + key + ")";
    models_of[key].push_back(models[m].name);
  }
  if (models_of.empty() || (models_of.size() == 1 && models_of.begin()->first == "unrecorded")) return "";
  if (models_of.size() == 1) return models_of.begin()->first;
  std::string s;
  for (const auto& [key, ms] : models_of) s += fmt::format("{}{} for {}", s.empty() ? "" : "; ", key, join(ms));
  return s;
}

std::string Table::expected_source(bool footnote) const {
  const char* plan = footnote ? "the plan has m" : "planned";
  const char* others = footnote ? "other models have m" : "other models have there";
  if (short_of_plan > 0 && short_of_others > 0)
    return fmt::format("{} (outside the plan's models, tasks and shots: {})", plan, others);
  return short_of_plan > 0 ? plan : others;
}

const std::vector<std::string>& known_metrics() {
  static const std::vector<std::string> m = [] {
    std::vector<std::string> names;
    for (const auto& f : metrics::kMetricFields) names.push_back(f.name);
    return names;
  }();
  return m;
}

std::string metric_title(const std::string& metric) {
  for (const auto& f : metrics::kMetricFields)
    if (metric == f.name) return f.title;
  return metric;
}

namespace {

/// The one difference (or the first few) between two fine-tuning settings, for a message.
std::string finetune_difference(const nlohmann::json& a, const nlohmann::json& b) {
  // A key not written: "precision" is left out for fp32 (sweep::finetune_to_json).
  const auto absent = [](const std::string& k) { return k == "precision" ? std::string("\"fp32\"") : std::string("unset"); };
  std::vector<std::string> d;
  for (const auto& [k, v] : a.items())
    if (!b.contains(k) || b[k] != v)
      d.push_back(fmt::format("{} {} vs {}", k, v.dump(), b.contains(k) ? b[k].dump() : absent(k)));
  for (const auto& [k, v] : b.items())
    if (!a.contains(k)) d.push_back(fmt::format("{} {} vs {}", k, absent(k), v.dump()));
  return fmt::format("{}", fmt::join(d, ", "));
}

/// Records shown in one table were fine-tuned with one recipe: the plan's when --plan is a
/// sweep's plan.json. Records of before (no settings) beside others are named in a warning.
void check_same_finetune(const std::string& path, const std::vector<const Record*>& used, const Plan& plan,
                         std::vector<std::string>& warnings) {
  const Record* first = nullptr;
  uint64_t unrecorded = 0;
  for (const Record* r : used) {
    if (r->finetune.is_null()) {
      ++unrecorded;
      continue;
    }
    if (!plan.recorded_finetune.is_null() && r->finetune != plan.recorded_finetune)
      throw io::InputError(path, r->line, fmt::format(
          "job {} was fine-tuned with other settings than the plan {} gives ({}): the records are of another sweep; "
          "report them with their own plan.json, or from separate results files",
          r->job, plan.source, finetune_difference(r->finetune, plan.recorded_finetune)));
    if (!first) {
      first = r;
    } else if (r->finetune != first->finetune) {
      throw io::InputError(path, r->line, fmt::format(
          "job {} was fine-tuned with other settings than job {} on line {} ({}): a table would mix two recipes; "
          "report them from separate results files",
          r->job, first->job, first->line, finetune_difference(r->finetune, first->finetune)));
    }
  }
  if (unrecorded > 0 && unrecorded < used.size())
    warnings.push_back(fmt::format("{} of the {} records shown carry no fine-tuning settings (written by an earlier "
                                   "genemask): the report cannot check that they were fine-tuned as the others",
                                   unrecorded, used.size()));
}

/// A sweep's own plan.json records the SHA-256 of each task's tables and each model's weights
/// (or a random model's config): a record whose inputs are other ones is of another sweep
/// (a results file appended to, or beside a plan of a rerun with changed inputs), and is
/// refused, as records of other fine-tuning settings are. Records or plans without digests
/// are not compared.
void check_plan_inputs(const std::string& path, const std::vector<const Record*>& used, const Plan& plan) {
  std::map<std::string, const sweep::PlanModel*> model_of;
  std::map<std::string, const sweep::PlanTask*> task_of;
  for (const auto& m : plan.models) model_of.emplace(m.name, &m);
  for (const auto& t : plan.tasks) task_of.emplace(t.name, &t);
  const auto check = [&](const Record* r, const std::string& recorded, const std::string& planned,
                         const std::string& what) {
    if (recorded.empty() || planned.empty() || recorded == planned) return;
    throw io::InputError(path, r->line, fmt::format(
        "{} of job {} is not the one the plan {} records (SHA-256 {}... vs {}...): the record is of another sweep; "
        "report it with its own plan.json, or from a separate results file",
        what, r->job, plan.source, recorded.substr(0, 12), planned.substr(0, 12)));
  };
  for (const Record* r : used) {
    if (const auto t = task_of.find(r->task); t != task_of.end()) {
      const sweep::PlanTask& pt = *t->second;
      check(r, r->test_sha256, pt.test_sha256, fmt::format("the test table of task '{}'", r->task));
      const auto shot = pt.shot_train_sha256.find(r->shots);
      check(r, r->train_sha256,
            !pt.train_sha256.empty() ? pt.train_sha256 : shot != pt.shot_train_sha256.end() ? shot->second : "",
            fmt::format("the training table of task '{}' at {} shots", r->task, r->shots));
    }
    if (const auto m = model_of.find(r->model); m != model_of.end())
      check(r, r->model_sha256, !m->second->weights_sha256.empty() ? m->second->weights_sha256 : m->second->config_sha256,
            fmt::format("the model '{}'", r->model));
  }
}

/// The records a table shows must come from the same inputs where they are compared: one
/// test table per task (every model and shot count is scored on it), one training table per
/// task and shot count, one set of weights per model. A sweep continued after an input
/// changed would otherwise average (and pair in t-tests) results of two test sets.
void check_same_inputs(const std::string& path, const std::vector<const Record*>& used,
                       std::vector<std::string>& warnings) {
  struct Seen {
    std::string sha256;
    const Record* first = nullptr;
  };
  std::map<std::string, Seen> test_of, train_of, model_of;
  uint64_t undigested = 0;
  const auto same = [&](std::map<std::string, Seen>& seen, const std::string& key, const std::string& sha,
                        const Record* r, const std::string& what) {
    if (sha.empty()) return;
    auto [it, fresh] = seen.emplace(key, Seen{sha, r});
    if (fresh || it->second.sha256 == sha) return;
    throw io::InputError(path, r->line, fmt::format(
        "{} of job {} is not the one of job {} on line {} (SHA-256 {}... vs {}...): the records were made from "
        "different inputs, and a table would mix them; rerun the stale jobs (genemask sweep --force moves their "
        "records aside) or report them from separate results files",
        what, r->job, it->second.first->job, it->second.first->line, sha.substr(0, 12), it->second.sha256.substr(0, 12)));
  };
  // What the records say of their inputs, digests or not (records of an earlier genemask
  // carry none, and two test sets averaged into one mean would otherwise pass without a
  // word): a task's records were scored on one test table (its size and classes), its
  // records at one shot count trained on as many sequences, and a model's records were
  // fine-tuned from one checkpoint (its step). Counts a record does not give (0) are not
  // compared; each record is compared with the first that gives the same count (a first
  // record without it must not hide a difference among the later ones).
  std::map<std::string, const Record*> test_n_of_task, classes_of_task, model_first;
  std::map<std::pair<std::string, int64_t>, const Record*> train_of_cell;
  // The record `r` is compared with for a count: the first of `key` that gave one, or `r`
  // itself (nothing to compare) when it gives none.
  const auto reference = [](auto& seen, const auto& key, bool given, const Record* r) {
    return given ? seen.emplace(key, r).first->second : r;
  };
  for (const Record* r : used) {
    const Record* fn = reference(test_n_of_task, r->task, r->metrics.test.n > 0, r);
    const Record* fc = reference(classes_of_task, r->task, r->metrics.test.classes > 0, r);
    if (fn->metrics.test.n != r->metrics.test.n || fc->metrics.test.classes != r->metrics.test.classes) {
      const Record* f = fn->metrics.test.n != r->metrics.test.n ? fn : fc;
      throw io::InputError(path, r->line, fmt::format(
          "job {} scored {} test sequences of {} classes, job {} on line {} {} of {}: the records of task '{}' were "
          "made from different test tables, and a table would average them; report them from separate results files",
          r->job, r->metrics.test.n, r->metrics.test.classes, f->job, f->line, f->metrics.test.n,
          f->metrics.test.classes, r->task));
    }
    // An N-shot record trained on N sequences of each class (a sweep checks its shot files so,
    // and draws N of each): one of fewer or more is not N-shot, and Table 1's N-shot rows would
    // publish it as such (records of a sweep of before that check, or merged by hand).
    if (const uint64_t shown = static_cast<uint64_t>(r->shots) * static_cast<uint64_t>(r->metrics.test.classes);
        shown > 0 && r->metrics.n_train > 0 && shown != r->metrics.n_train)
      throw io::InputError(path, r->line, fmt::format(
          "job {} trained on {} sequences, but as {}-shot of {} classes it trains on {} ({} of each class): the record "
          "is not {}-shot, and Table 1 would publish it as such; rerun the job (genemask sweep --force), or leave it "
          "out of the results file",
          r->job, r->metrics.n_train, r->shots, r->metrics.test.classes, shown, r->shots, r->shots));
    const Record* f = reference(train_of_cell, std::pair{r->task, r->shots}, r->metrics.n_train > 0, r);
    if (f->metrics.n_train != r->metrics.n_train)
      throw io::InputError(path, r->line, fmt::format(
          "job {} trained on {} sequences, job {} on line {} on {}: the records of task '{}' at {} shots were made "
          "from different training tables, and a table would average them; report them from separate results files",
          r->job, r->metrics.n_train, f->job, f->line, f->metrics.n_train, r->task, r->shots));
    f = reference(model_first, r->model, !r->checkpoint.empty(), r);
    const auto from = [](const Record* x) {
      if (x->checkpoint == "random")
        return x->checkpoint_step >= 0 ? fmt::format("no checkpoint (random), yet with step {}", x->checkpoint_step)
                                       : std::string("no checkpoint (random)");
      return x->checkpoint_step >= 0 ? fmt::format("step {} ({})", x->checkpoint_step, x->checkpoint) : x->checkpoint;
    };
    const bool known = f != r;  // both name their checkpoint
    if (known && ((f->checkpoint == "random") != (r->checkpoint == "random") ||
                  f->checkpoint_step != r->checkpoint_step))
      throw io::InputError(path, r->line, fmt::format(
          "job {} fine-tuned model '{}' from {}, job {} on line {} from {}: the records are of two models under one "
          "name, and a table would average them; report them from separate results files, or rename one",
          r->job, r->model, from(r), f->job, f->line, from(f)));
    // Two checkpoint directories at one step (two pretraining runs, both at step 1000), or
    // two model directories without a step: two models, unless their weights' digests say
    // they are one (a model directory moved between two parts of a sweep).
    if (known && f->checkpoint != r->checkpoint && (f->model_sha256.empty() || r->model_sha256.empty()))
      throw io::InputError(path, r->line, fmt::format(
          "job {} fine-tuned model '{}' from {}, job {} on line {} from {}, and the records carry no SHA-256 of the "
          "weights to show they are one model: a table would average two models under one name; report them from "
          "separate results files, or rename one",
          r->job, r->model, r->checkpoint, f->job, f->line, f->checkpoint));
  }
  uint64_t uncounted = 0;
  const Record* first_uncounted = nullptr;
  for (const Record* r : used) {
    if (r->test_sha256.empty() && r->train_sha256.empty()) ++undigested;
    if (r->metrics.n_train == 0 || r->metrics.test.n == 0 || r->metrics.test.classes == 0) {
      if (!uncounted++) first_uncounted = r;
    }
    same(test_of, r->task, r->test_sha256, r, fmt::format("the test table of task '{}'", r->task));
    same(train_of, fmt::format("{}\t{}", r->task, r->shots), r->train_sha256, r,
         fmt::format("the training table of task '{}' at {} shots", r->task, r->shots));
    same(model_of, r->model, r->model_sha256, r, fmt::format("the model '{}'", r->model));
  }
  // Records of an earlier genemask carry no digests: beside records that do, the report
  // cannot check that they share their inputs, and says so. (A results file written wholly
  // before digests existed reads as it did.)
  const auto simulated = std::count_if(used.begin(), used.end(), [](const Record* r) { return r->simulated; });
  if (simulated > 0)
    warnings.push_back(fmt::format("{} of the {} records shown are pseudo-metrics of a simulated sweep (sweep "
                                   "--simulate, for testing), not fine-tuning results",
                                   simulated, used.size()));
  // A sweep writes n_train, n_test and classes in every ok record: without them the checks
  // above (one test table per task, N sequences per class at N shots) pass by default. A
  // record without them beside records with them was edited or written by another tool.
  if (uncounted > 0 && uncounted < used.size())
    warnings.push_back(fmt::format("{} of the {} records shown give no n_train, n_test or classes, which the others "
                                   "give (first: job {} on line {}; not as `genemask sweep` writes them): the report "
                                   "cannot check that they were scored on the others' test table and trained on N "
                                   "sequences per class at N shots",
                                   uncounted, used.size(), first_uncounted->job, first_uncounted->line));
  if (undigested > 0 && undigested < used.size())
    warnings.push_back(fmt::format("{} of the {} records shown carry no SHA-256 of their inputs (written by an earlier "
                                   "genemask): the report cannot check that they share their test tables and weights "
                                   "with the others",
                                   undigested, used.size()));
}

}  // namespace

Results read_results(const std::string& path) {
  results::ResultsFile file = results::read_results(path, /*repair=*/false, /*missing_ok=*/false);
  Results r;
  r.path = path;
  r.warnings = std::move(file.warnings);
  std::map<std::string, size_t> ok_index;                            // job key -> index in r.ok
  std::map<std::string, std::pair<std::string, uint64_t>> group_of;  // model -> (group, first line)
  std::vector<std::string> failed_order;
  uint64_t unsealed = 0;
  uint64_t first_unsealed = 0;
  for (const auto& rec : file.records)
    if (!rec.sealed && !unsealed++) first_unsealed = rec.line;
  // Records without their record_sha256 beside records with it: written or rewritten by
  // hand (or by a genemask of before): whether they were changed cannot be told.
  if (unsealed > 0 && unsealed < file.records.size())
    r.warnings.push_back(fmt::format("{}:{}: {} of the {} records carry no record_sha256 (written by hand, merged from "
                                     "another file, or by a genemask of before), beside records that do: whether they "
                                     "are as `genemask sweep` wrote them cannot be checked",
                                     path, first_unsealed, unsealed, file.records.size()));
  for (auto& rec : file.records) {
    auto [g, inserted] = group_of.emplace(rec.model, std::make_pair(rec.group, rec.line));
    if (!inserted && g->second.first != rec.group)
      throw io::InputError(path, rec.line, fmt::format("model '{}' is in group '{}' here but in group '{}' on line {}; "
                                                       "a model belongs to one group",
                                                       rec.model, rec.group, g->second.first, g->second.second));
    ++r.records;
    auto& sweep = r.sweeps[rec.sweep_id];
    sweep.jobs.insert(rec.job);
    sweep.total = std::max(sweep.total, rec.jobs_total);
    if (!rec.ok) {
      ++r.failed_records;
      failed_order.push_back(rec.job);
      continue;
    }
    auto [it, fresh] = ok_index.emplace(rec.job, r.ok.size());
    if (fresh) {
      r.ok.push_back(std::move(rec));
    } else {
      r.ok[it->second] = std::move(rec);  // a rerun: the last ok record wins
    }
  }
  std::set<std::string> listed;
  for (const auto& key : failed_order)
    if (!ok_index.count(key) && listed.insert(key).second) r.failed_jobs.push_back(key);
  return r;
}

const char* MetricStat::marker(bool latex) const {
  if (!compared || pairs < 2 || !(test.t > 0)) return "";
  return latex ? stats::significance_marker_latex(test.p) : stats::significance_marker(test.p);
}

bool Table::has_groups() const {
  return std::any_of(groups.begin(), groups.end(), [](const std::string& g) { return !g.empty(); });
}


Table aggregate(const Results& results, const Plan& plan, const Options& opt) {
  Table t;
  t.results_path = results.path;
  t.failed_jobs = results.failed_jobs;
  if (opt.metrics.empty()) throw std::invalid_argument("report: no metric chosen");
  for (const auto& m : opt.metrics)
    if (std::find(known_metrics().begin(), known_metrics().end(), m) == known_metrics().end())
      throw std::invalid_argument(fmt::format("report: unknown metric '{}'; choose from {}", m, join(known_metrics())));
  for (size_t i = 0; i < opt.metrics.size(); ++i)  // a second copy of every column, under one header
    if (std::find(opt.metrics.begin(), opt.metrics.begin() + static_cast<std::ptrdiff_t>(i), opt.metrics[i]) !=
        opt.metrics.begin() + static_cast<std::ptrdiff_t>(i))
      throw std::invalid_argument(fmt::format("report: --metric names '{}' twice; name each metric once",
                                              opt.metrics[i]));
  t.metrics = opt.metrics;
  if (results.ok.empty())
    throw io::InputError(results.path, fmt::format("no ok records ({} records, {} failed): nothing to report",
                                                   results.records, results.failed_records));

  // Names present, their groups, and the order: explicit selection, then the plan, then by name.
  std::map<std::string, std::string> group_of;
  std::set<std::string> task_set;
  std::set<int64_t> shot_set;
  for (const auto& r : results.ok) {
    group_of.emplace(r.model, r.group);
    task_set.insert(r.task);
  }
  std::vector<std::string> present_models;
  for (const auto& [m, g] : group_of) present_models.push_back(m);
  const std::vector<std::string> present_tasks(task_set.begin(), task_set.end());
  auto order = [](const std::vector<std::string>& chosen, const std::vector<std::string>& planned,
                  const std::vector<std::string>& present, const char* what) {
    std::vector<std::string> out;
    std::set<std::string> seen;
    if (!chosen.empty()) {
      for (const auto& c : chosen) {
        if (std::find(present.begin(), present.end(), c) == present.end())
          throw std::invalid_argument(fmt::format("report: {} '{}' has no ok results; present: {}", what, c, join(present)));
        if (!seen.insert(c).second)  // as --metric: "A A" is more likely a slip for "A B" than meant
          throw std::invalid_argument(fmt::format("report: --{}s names '{}' twice; name each {} once", what, c, what));
        out.push_back(c);
      }
      return out;
    }
    for (const auto& p : planned)
      if (std::find(present.begin(), present.end(), p) != present.end() && seen.insert(p).second) out.push_back(p);
    for (const auto& p : present)  // sorted; those the plan does not name come last
      if (seen.insert(p).second) out.push_back(p);
    return out;
  };
  std::vector<std::string> planned_models;
  for (const auto& pm : plan.models) {
    planned_models.push_back(pm.name);
    auto it = group_of.find(pm.name);
    if (!pm.group_given || it == group_of.end() || it->second == pm.group) continue;
    if (!it->second.empty())
      t.warnings.push_back(fmt::format("model '{}' is in group '{}' in the plan but '{}' in {}; using the plan's",
                                       pm.name, pm.group, it->second, results.path));
    it->second = pm.group;
  }
  const auto models = order(opt.models, planned_models, present_models, "model");
  std::vector<std::string> planned_tasks;
  for (const auto& pt : plan.tasks) planned_tasks.push_back(pt.name);
  t.tasks = order(opt.tasks, planned_tasks, present_tasks, "task");
  for (const auto& name : t.tasks)
    for (const auto& pt : plan.tasks)
      if (pt.name == name && !pt.dir.empty()) {
        t.fixed_shot_tasks.push_back(name);
        break;
      }
  // Groups in order of first appearance; a stable sort keeps the models of a group together.
  for (const auto& m : models)
    if (std::find(t.groups.begin(), t.groups.end(), group_of[m]) == t.groups.end()) t.groups.push_back(group_of[m]);
  for (const auto& g : t.groups)
    for (const auto& m : models)
      if (group_of[m] == g) t.models.push_back(Model{m, g, "", "", -1});
  // Names that differ in spaces or invisible characters only ("GM", "GM ", "GM" + a no-break
  // space, "GM" + a zero-width space) are shown alike: rows, columns or group headings a
  // reader cannot tell apart, each with its own ranks. Said.
  for (const auto& [names, what, option] :
       {std::tuple<const std::vector<std::string>*, const char*, const char*>{&models, "models", "one with --models"},
        {&t.tasks, "tasks", "one with --tasks"},
        {&t.groups, "groups", "the models of one with --models"}}) {
    std::map<std::string, std::string> first;
    for (const auto& n : *names)
      if (auto [it, fresh] = first.emplace(io::shown_alike_key(n), n); !fresh)
        t.warnings.push_back(fmt::format("{} {} and {} are shown alike in the tables (they differ in spaces or invisible "
                                         "characters only): rename one in the plan, or choose {}",
                                         what, nlohmann::json(it->second).dump(-1, ' ', /*ensure_ascii=*/true),
                                         nlohmann::json(n).dump(-1, ' ', /*ensure_ascii=*/true), option));
  }

  // Pretraining replicates: a model's arm and replicate id, from its records (one per model)
  // or, for records of before, from the plan.
  std::map<std::string, std::pair<std::string, int64_t>> arm_of;
  for (const auto& r : results.ok) {
    if (r.arm.empty()) continue;
    auto [it, fresh] = arm_of.emplace(r.model, std::make_pair(r.arm, r.replicate));
    if (!fresh && it->second != std::make_pair(r.arm, r.replicate))
      throw io::InputError(results.path, r.line,
                           fmt::format("model '{}' is replicate {} of arm '{}' here but replicate {} of arm '{}' on an "
                                       "earlier line; a model is one replicate of one arm",
                                       r.model, r.replicate, r.arm, it->second.second, it->second.first));
  }
  for (const auto& pm : plan.models)
    if (!pm.arm.empty() && group_of.count(pm.name)) arm_of.emplace(pm.name, std::make_pair(pm.arm, pm.replicate));
  // One model per replicate of an arm: two would be pooled as one replicate (results of two
  // sweeps that both number their replicates from 0, or a model moved to another arm).
  {
    std::map<std::pair<std::string, int64_t>, std::string> model_of;
    for (const auto& [model, ar] : arm_of)
      if (auto [it, fresh] = model_of.emplace(ar, model); !fresh)
        throw io::InputError(results.path, fmt::format("models '{}' and '{}' are both replicate {} of arm '{}': their "
                                                       "results would be pooled as one pretraining run; give each "
                                                       "replicate of an arm its own id (the plan's \"replicate\"), or "
                                                       "report the sweeps separately",
                                                       it->second, model, ar.second, ar.first));
  }
  std::set<std::string> arms_present;
  for (auto& m : t.models) {
    if (auto it = arm_of.find(m.name); it != arm_of.end()) {
      std::tie(m.arm, m.replicate) = it->second;
      arms_present.insert(m.arm);
    }
  }
  // --baseline may name an arm: each replicate of another arm is then compared (over its
  // fine-tuning seeds) with the baseline arm's replicate of the same id.
  std::vector<std::string> model_baselines;
  for (const auto& b : opt.baselines) {
    if (group_of.count(b) || !arms_present.count(b)) {
      model_baselines.push_back(b);
      continue;
    }
    if (!t.baseline_arm.empty() && t.baseline_arm != b)
      throw std::invalid_argument(fmt::format("report: baselines '{}' and '{}' are both arms; give at most one baseline "
                                              "arm", t.baseline_arm, b));
    t.baseline_arm = b;
  }
  if (!t.baseline_arm.empty()) {
    std::map<int64_t, std::string> partner;  // replicate id -> the baseline arm's model
    for (const auto& m : t.models)
      if (m.arm == t.baseline_arm) partner[m.replicate] = m.name, t.baselines.push_back(m.name);
    for (auto& m : t.models)
      if (!m.arm.empty() && m.arm != t.baseline_arm)
        if (auto it = partner.find(m.replicate); it != partner.end()) m.baseline = it->second;
  }

  // Baselines: one per group; a model without one in its group uses the first baseline.
  std::map<std::string, std::string> group_baseline;
  for (const auto& b : model_baselines) {
    if (!group_of.count(b))
      throw std::invalid_argument(fmt::format("report: baseline '{}' has no ok results; models present: {}", b,
                                              join(present_models)));
    if (std::none_of(t.models.begin(), t.models.end(), [&](const Model& m) { return m.name == b; }))
      throw std::invalid_argument(fmt::format("report: baseline '{}' is not among the selected --models", b));
    auto [it, fresh] = group_baseline.emplace(group_of[b], b);
    if (!fresh && it->second != b)
      throw std::invalid_argument(fmt::format("report: baselines '{}' and '{}' are both in group '{}'; give at most "
                                              "one baseline per group", it->second, b, group_of[b]));
    if (fresh) t.baselines.push_back(b);
  }
  for (auto& m : t.models) {
    if (group_baseline.empty() || std::find(t.baselines.begin(), t.baselines.end(), m.name) != t.baselines.end() ||
        !m.baseline.empty())
      continue;
    auto it = group_baseline.find(m.group);
    m.baseline = it != group_baseline.end() ? it->second : model_baselines.front();
  }

  // values[model][task][shots] = seed -> record; only selected models and tasks.
  std::map<std::string, size_t> model_idx, task_idx;
  for (size_t i = 0; i < t.models.size(); ++i) model_idx[t.models[i].name] = i;
  for (size_t i = 0; i < t.tasks.size(); ++i) task_idx[t.tasks[i]] = i;
  std::vector<const Record*> used;
  // A record of the plan's models, tasks and shots whose seed the plan does not list is of
  // another sweep (a results file appended to, or concatenated from two): averaged in, it
  // would change the means and the ranks without a word. Left out, and said.
  for (const auto& r : results.ok)
    if (model_idx.count(r.model) && task_idx.count(r.task)) {
      for (const auto& m : t.metrics)
        if (!r.values.count(m))
          throw io::InputError(results.path, r.line, fmt::format("the ok record of {} has no \"{}\"; choose other "
                                                                 "--metric values or fix the sweep",
                                                                 r.job, m));
      used.push_back(&r);
    }
  // Over every record chosen: records of another recipe or test set are refused, not left out.
  check_same_inputs(results.path, used, t.warnings);
  check_same_finetune(results.path, used, plan, t.warnings);
  check_plan_inputs(results.path, used, plan);
  uint64_t off_plan = 0;
  std::string off_plan_example;
  used.erase(std::remove_if(used.begin(), used.end(),
                            [&](const Record* r) {
                              const bool off = plan.in_grid(r->model, r->task, r->shots) &&
                                               std::count(plan.seeds.begin(), plan.seeds.end(), r->seed) == 0;
                              if (off && off_plan++ == 0)
                                off_plan_example = fmt::format("job {}, line {}", r->job, r->line);
                              return off;
                            }),
             used.end());
  if (off_plan > 0)
    t.warnings.push_back(fmt::format("{} record(s) of the plan's models, tasks and shots have a seed the plan {} does "
                                     "not list (e.g. {}; the plan's seeds: {}): left out of the tables; they are of "
                                     "another sweep or an earlier plan; report them with their own plan.json",
                                     off_plan, plan.source, off_plan_example, fmt::join(plan.seeds, ", ")));
  // Records outside the plan's grid (a model, task or shot count it does not list: another
  // sweep's in the same file) stay in the tables, each cell over the seeds it has, which the
  // plan cannot check: said, with the cells they fill.
  if (plan.grid_given) {
    std::set<std::string> cells;
    uint64_t off_grid = 0;
    for (const Record* r : used)
      if (!plan.in_grid(r->model, r->task, r->shots)) {
        ++off_grid;
        cells.insert(fmt::format("model '{}', task '{}', {} shots", r->model, r->task, r->shots));
      }
    if (off_grid > 0) {
      std::vector<std::string> shown_cells(cells.begin(), cells.end());
      if (shown_cells.size() > 3) shown_cells.resize(3), shown_cells.push_back("...");
      t.warnings.push_back(fmt::format("{} record(s) in {} cell(s) are of a model, task or shot count the plan {} does "
                                       "not list ({}): shown in the tables, each cell over the seeds it has, which the "
                                       "plan cannot check; report them with the plan that ran them, or leave them out "
                                       "with --models/--tasks",
                                       off_grid, cells.size(), plan.source, fmt::join(shown_cells, "; ")));
    }
  }
  if (used.empty() && off_plan > 0)
    throw io::InputError(results.path, fmt::format("none of its ok records of the models and tasks chosen has a seed "
                                                   "the plan {} lists ({}): nothing to report; report them with their "
                                                   "own plan.json",
                                                   plan.source, fmt::join(plan.seeds, ", ")));
  for (const Record* r : used) shot_set.insert(r->shots), t.used_jobs.insert(r->job);
  t.shots.assign(shot_set.begin(), shot_set.end());
  t.precisions.assign(t.models.size(), {});
  for (const Record* r : used) ++t.precisions[model_idx[r->model]][r->metrics.precision];
  precision_warnings(t);
  // Records that scored test sequences also trained on (test_in_train: their metrics measure
  // memory), named per model and task; and records of a test table that repeats sequences
  // (test_duplicates: each repeat weighs once more), named per task.
  const auto flagged = [&](int64_t results::RunMetrics::*count, bool by_model) {
    std::map<std::pair<std::string, std::string>, std::pair<uint64_t, uint64_t>> n;  // key -> records, most in one
    for (const Record* r : used)
      if (r->metrics.*count > 0) {
        auto& [records, most] = n[{by_model ? r->model : "", r->task}];
        ++records;
        most = std::max(most, static_cast<uint64_t>(r->metrics.*count));
      }
    return n;
  };
  for (const auto& [key, n] : flagged(&results::RunMetrics::test_in_train, true))
    t.warnings.push_back(fmt::format("model '{}' on task '{}': {} record(s) scored test sequences that are also "
                                     "training sequences (up to {} per job, test_in_train): those metrics count "
                                     "learnt sequences as unseen; use a test table apart from the training table",
                                     key.first, key.second, n.first, n.second));
  for (const auto& [key, n] : flagged(&results::RunMetrics::unknown_only, true))
    t.warnings.push_back(fmt::format("model '{}' on task '{}': {} record(s) trained on or scored sequences whose 6-mers "
                                     "are all [UNK] (up to {} per job, unknown_only: a run of N): the model sees "
                                     "nothing of their bases; remove such rows from the tables",
                                     key.first, key.second, n.first, n.second));
  for (const auto& [key, n] : flagged(&results::RunMetrics::truncated, true))
    t.warnings.push_back(fmt::format("model '{}' on task '{}': {} record(s) cut sequences longer than the model's "
                                     "positions (up to {} per job, truncated): fine-tuning and the test read their "
                                     "first 6-mers only",
                                     key.first, key.second, n.first, n.second));
  for (const auto& [key, n] : flagged(&results::RunMetrics::unterminated_tables, false))
    t.warnings.push_back(fmt::format("task '{}': {} record(s) read a training or test table whose last line has no "
                                     "line end (unterminated_tables): a table cut short (a download or copy stopped) "
                                     "loses its rows after the cut, and such metrics are of part of it; check the "
                                     "task's tables (each job's log names the file and line)",
                                     key.second, n.first));
  for (const auto& [key, n] : flagged(&results::RunMetrics::test_duplicates, false))
    t.warnings.push_back(fmt::format("task '{}': {} record(s) scored a test table that repeats sequences (up to {} "
                                     "repeats, test_duplicates): each repeat counts once more in the metrics; "
                                     "remove the repeated rows for metrics over distinct sequences",
                                     key.second, n.first, n.second));
  std::map<int64_t, size_t> shot_idx;
  for (size_t i = 0; i < t.shots.size(); ++i) shot_idx[t.shots[i]] = i;
  const size_t nm = t.metrics.size();
  std::vector<std::map<uint64_t, const Record*>> by_seed(t.models.size() * t.tasks.size() * t.shots.size());
  auto at = [&](size_t m, size_t k, size_t s) { return (m * t.tasks.size() + k) * t.shots.size() + s; };
  for (const Record* r : used) by_seed[at(model_idx[r->model], task_idx[r->task], shot_idx[r->shots])][r->seed] = r;

  t.cells.assign(by_seed.size(), std::vector<MetricStat>(nm));
  for (size_t m = 0; m < t.models.size(); ++m)
    for (size_t k = 0; k < t.tasks.size(); ++k)
      for (size_t s = 0; s < t.shots.size(); ++s) {
        const auto& seeds = by_seed[at(m, k, s)];
        const std::map<uint64_t, const Record*>* base =
            t.models[m].baseline.empty() ? nullptr : &by_seed[at(model_idx[t.models[m].baseline], k, s)];
        for (size_t q = 0; q < nm; ++q) {
          MetricStat& st = t.cells[at(m, k, s)][q];
          std::vector<double> v;
          for (const auto& [seed, r] : seeds) v.push_back(r->values.at(t.metrics[q]));
          st.n = v.size();
          st.mean = v.empty() ? kNaN : stats::mean(v);
          st.std = v.size() < 2 ? kNaN : stats::stddev(v);
          if (!base || v.empty()) continue;
          st.compared = true;
          std::vector<double> a, b;  // pairs by seed: only seeds present for both
          for (const auto& [seed, r] : seeds) {
            auto it = base->find(seed);
            if (it == base->end()) continue;
            a.push_back(r->values.at(t.metrics[q]));
            b.push_back(it->second->values.at(t.metrics[q]));
          }
          st.pairs = a.size();
          st.test = stats::paired_t_test(a, b);
        }
      }

  // Seeds each cell should have, and the plan's jobs that left no record (a sweep stopped
  // before them): a mean over fewer seeds than the others is marked, not ranked, and said.
  {
    std::vector<std::set<uint64_t>> seen(t.tasks.size() * t.shots.size());
    for (const Record* r : used) seen[task_idx[r->task] * t.shots.size() + shot_idx[r->shots]].insert(r->seed);
    std::set<std::string> done(results.failed_jobs.begin(), results.failed_jobs.end());
    for (const Record& r : results.ok) done.insert(r.job);
    std::string example;
    for (size_t m = 0; m < t.models.size(); ++m)
      for (size_t k = 0; k < t.tasks.size(); ++k)
        for (size_t s = 0; s < t.shots.size(); ++s) {
          const bool in_grid = plan.in_grid(t.models[m].name, t.tasks[k], t.shots[s]);
          const uint64_t expected = in_grid ? plan.seeds.size() : seen[k * t.shots.size() + s].size();
          for (auto& st : t.cells[at(m, k, s)]) st.expected = expected;
          const MetricStat& st = t.cells[at(m, k, s)][0];
          if (st.incomplete()) {
            if (t.short_of_plan + t.short_of_others == 0)
              example = fmt::format("model '{}', task '{}', {} shots: {} of {}", t.models[m].name, t.tasks[k],
                                    t.shots[s], st.n, st.expected);
            ++(in_grid ? t.short_of_plan : t.short_of_others);
          }
        }
    // The plan's jobs with no record, over its whole grid (the models and tasks asked for):
    // a planned shot count, model or task without any record is as unfinished as a short cell
    // (a sweep stopped after its largest shot counts, which it runs first).
    if (plan.grid_given) {
      const auto asked = [](const std::vector<std::string>& only, const std::string& n) {
        return only.empty() || std::find(only.begin(), only.end(), n) != only.end();
      };
      for (const auto& pm : plan.models) {
        if (!asked(opt.models, pm.name)) continue;
        for (const auto& pt : plan.tasks) {
          if (!asked(opt.tasks, pt.name)) continue;
          for (int64_t shots : plan.shots)
            for (uint64_t seed : plan.seeds)
              if (const std::string key = results::job_key(pm.name, pt.name, shots, seed); !done.count(key))
                t.missing_jobs.push_back(key);
        }
      }
      for (int64_t shots : plan.shots)
        if (std::find(t.shots.begin(), t.shots.end(), shots) == t.shots.end())
          t.warnings.push_back(fmt::format("{} shots of the plan have no ok record: not in the tables", shots));
    }
    if (const uint64_t short_cells = t.short_of_plan + t.short_of_others; short_cells > 0)
      t.warnings.push_back(fmt::format("{} cell(s) of Table 1 are means over fewer seeds than {} (e.g. {}): marked "
                                       "n=k/m and not ranked; finish the sweep (genemask sweep continues where it "
                                       "stopped) or report the complete part with --models/--tasks",
                                       short_cells, t.expected_source(false), example));
    if (!t.missing_jobs.empty())
      t.warnings.push_back(fmt::format("{} job(s) of the plan have no record (e.g. {}): the sweep stopped before "
                                       "them; they are listed under Table 1",
                                       t.missing_jobs.size(), t.missing_jobs.front()));
    // A model or task of the plan with no ok record at all is not in the tables: said.
    if (opt.models.empty())
      for (const auto& pm : plan.models)
        if (!group_of.count(pm.name))
          t.warnings.push_back(fmt::format("model '{}' of the plan has no ok record: it is not in the tables",
                                           pm.name));
    if (opt.tasks.empty())
      for (const auto& pt : plan.tasks)
        if (!task_set.count(pt.name))
          t.warnings.push_back(fmt::format("task '{}' of the plan has no ok record: it is not in the tables",
                                           pt.name));
  }

  // Ranks per (group, shots) block and (task, metric) column, on the shown (rounded) means,
  // among the complete cells.
  for (const auto& g : t.groups)
    for (size_t k = 0; k < t.tasks.size(); ++k)
      for (size_t s = 0; s < t.shots.size(); ++s)
        for (size_t q = 0; q < nm; ++q) {
          std::vector<std::pair<size_t, double>> cand;
          for (size_t m = 0; m < t.models.size(); ++m)
            if (t.models[m].group == g && t.cells[at(m, k, s)][q].n > 0 && !t.cells[at(m, k, s)][q].incomplete())
              cand.emplace_back(m, shown(t.cells[at(m, k, s)][q].mean, opt.decimals));
          std::vector<double> distinct;
          for (const auto& c : cand) distinct.push_back(c.second);
          std::sort(distinct.begin(), distinct.end(), std::greater<>());
          distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
          for (const auto& [m, v] : cand) {
            int& rank = t.cells[at(m, k, s)][q].rank;
            if (v == distinct[0]) rank = 1;
            // Of two models, "second" is merely "the other": highlighted only among 3 or more.
            else if (cand.size() >= 3 && v == distinct[1]) rank = 2;
          }
        }
  return t;
}

std::vector<Improvement> improvements(const Table& t) {
  std::vector<Improvement> out;
  std::map<std::string, size_t> idx;
  for (size_t i = 0; i < t.models.size(); ++i) idx[t.models[i].name] = i;
  for (size_t m = 0; m < t.models.size(); ++m) {
    if (t.models[m].baseline.empty()) continue;
    const size_t b = idx.at(t.models[m].baseline);
    for (size_t s = 0; s < t.shots.size(); ++s) {
      Improvement imp{t.models[m].name, t.models[m].group, t.models[m].baseline, t.shots[s], 0, 0, 0, 0};
      std::vector<double> ours, theirs;
      for (size_t k = 0; k < t.tasks.size(); ++k) {
        const MetricStat &x = t.cell(m, k, s)[0], &y = t.cell(b, k, s)[0];
        if (x.n == 0 || y.n == 0) continue;
        imp.short_cells += x.incomplete() + y.incomplete();
        ours.push_back(x.mean);
        theirs.push_back(y.mean);
      }
      imp.tasks = ours.size();
      if (ours.empty()) {
        imp.model_mean = imp.baseline_mean = imp.percent = kNaN;
      } else {
        imp.model_mean = stats::mean(ours);
        imp.baseline_mean = stats::mean(theirs);
        // A percentage of a baseline mean at or below 0 (MCC can be) has no meaning: its sign
        // flips, or it is infinite. NaN, shown as n/a, with both means in the CSV.
        imp.percent = imp.baseline_mean > 0 ? 100 * (imp.model_mean - imp.baseline_mean) / imp.baseline_mean : kNaN;
      }
      out.push_back(imp);
    }
  }
  return out;
}

}  // namespace genemask::report
