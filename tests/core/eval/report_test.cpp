#include "genemask/eval/report.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <stdexcept>

#include "genemask/eval/plan.hpp"
#include "io/error.hpp"
#include "test_util.hpp"

using namespace genemask;
using namespace genemask::report;

namespace {

std::string line(const std::string& model, const std::string& group, const std::string& task, int shots, int seed,
                 double acc, double auc, const std::string& status = "ok") {
  if (status != "ok")
    return fmt::format(R"({{"model":"{}","group":"{}","task":"{}","shots":{},"seed":{},"status":"{}"}})", model, group,
                       task, shots, seed, status) + "\n";
  return fmt::format(R"({{"model":"{}","group":"{}","task":"{}","shots":{},"seed":{},"status":"ok","accuracy":{},"auc":{}}})",
                     model, group, task, shots, seed, acc, auc) + "\n";
}

Results parse(const test::TempDir& dir, const std::string& text) {
  test::write_file(dir.file("results.jsonl"), text);
  return read_results(dir.file("results.jsonl"));
}

}  // namespace

TEST(Report, LastOkRecordWinsFailedJobsAreListedTornLastLineIgnored) {
  test::TempDir dir;
  const std::string text = line("m", "", "t", 10, 0, 0.1, 0.1) + line("m", "", "t", 10, 1, 0, 0, "failed") +
                           line("m", "", "t", 10, 2, 0, 0, "failed") + line("m", "", "t", 10, 2, 0.7, 0.8) +
                           line("m", "", "t", 10, 0, 0.5, 0.6) + "\n" + R"({"model":"m","gr)";
  const Results r = parse(dir, text);
  EXPECT_EQ(r.records, 5u);
  EXPECT_EQ(r.failed_records, 2u);
  ASSERT_EQ(r.ok.size(), 2u);
  EXPECT_EQ(r.ok[0].seed, 0u);
  EXPECT_EQ(r.ok[0].values.at("accuracy"), 0.5);  // the rerun replaced 0.1
  EXPECT_EQ(r.ok[0].line, 5u);
  EXPECT_EQ(r.failed_jobs, std::vector<std::string>{"m|t|10|1"});
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_NE(r.warnings[0].find("results.jsonl:7: ignoring the last line"), std::string::npos) << r.warnings[0];
}

TEST(Report, MalformedLineBeforeTheLastIsAnErrorWithFileAndLine) {
  test::TempDir dir;
  try {
    parse(dir, line("m", "", "t", 10, 0, 0.5, 0.5) + "[1, 2]\n" + line("m", "", "t", 10, 1, 0.5, 0.5));
    FAIL();
  } catch (const io::InputError& e) {
    EXPECT_EQ(e.line(), 2u);
    EXPECT_NE(std::string(e.what()).find("every line must be one JSON object"), std::string::npos) << e.what();
  }
  EXPECT_THROW(parse(dir, "{oops\n" + line("m", "", "t", 10, 1, 0.5, 0.5)), io::InputError);
}

TEST(Report, RanksTiesOnShownDigitsAndSecondOnlyAmongThree) {
  test::TempDir dir;
  std::string text;
  // Means over 2 seeds: a 0.7004, b 0.6996 (both show 0.700: tie for best), c 0.650, d 0.600.
  for (int s = 0; s < 2; ++s) {
    text += line("a", "G", "t", 10, s, 0.7004, 0.5);
    text += line("b", "G", "t", 10, s, 0.6996, 0.5);
    text += line("c", "G", "t", 10, s, 0.65, 0.5);
    text += line("d", "G", "t", 10, s, 0.60, 0.5);
    text += line("x", "H", "t", 10, s, 0.60 + 0.1 * s, 0.5);
    text += line("y", "H", "t", 10, s, 0.50, 0.5);
  }
  Options o;
  const Table t = aggregate(parse(dir, text), Plan{}, o);
  ASSERT_EQ(t.models.size(), 6u);
  std::vector<int> ranks;
  for (size_t m = 0; m < t.models.size(); ++m) ranks.push_back(t.cell(m, 0, 0)[0].rank);
  EXPECT_EQ(ranks, (std::vector<int>{1, 1, 2, 0, 1, 0}));  // group H has 2 models: no "second"
  EXPECT_EQ(t.cell(0, 0, 0)[1].rank, 1);                    // equal AUCs: all best
  EXPECT_NEAR(t.cell(4, 0, 0)[0].std, std::sqrt(0.005), 1e-15);
}

TEST(Report, PairsBySharedSeedsAndMarksImprovementsOnly) {
  test::TempDir dir;
  std::string text;
  const double base[] = {0.60, 0.62, 0.61, 0.63, 0.59};
  const double up[] = {0.65, 0.66, 0.67, 0.66, 0.64};
  for (int s = 0; s < 5; ++s) {
    text += line("base", "", "t", 10, s, base[s], 0.5);
    text += line("up", "", "t", 10, s, up[s], 0.5);
    text += line("down", "", "t", 10, s, 2 * base[s] - up[s], 0.5);
  }
  text += line("up", "", "t", 10, 9, 0.99, 0.5);  // a seed the baseline lacks: not paired
  Options o;
  o.baselines = {"base"};
  const Table t = aggregate(parse(dir, text), Plan{}, o);
  ASSERT_EQ(t.models[2].name, "up");
  const MetricStat& up_acc = t.cell(2, 0, 0)[0];
  EXPECT_EQ(up_acc.n, 6u);
  EXPECT_EQ(up_acc.pairs, 5u);
  std::vector<double> a(up, up + 5), b(base, base + 5);
  const stats::TTest want = stats::paired_t_test(a, b);
  EXPECT_EQ(up_acc.test.t, want.t);
  EXPECT_LT(want.p, 0.01);
  EXPECT_STREQ(up_acc.marker(false), "**");
  const MetricStat& down_acc = t.cell(1, 0, 0)[0];  // equally significant, but worse
  EXPECT_NEAR(down_acc.test.p, want.p, 1e-12);
  EXPECT_STREQ(down_acc.marker(false), "");
  EXPECT_FALSE(t.cell(0, 0, 0)[0].compared);  // the baseline itself
  EXPECT_STREQ(t.cell(0, 0, 0)[0].marker(false), "");
}

TEST(Report, ImprovementUsesTasksBothHave) {
  test::TempDir dir;
  std::string text = line("base", "", "t1", 10, 0, 0.5, 0.5) + line("base", "", "t2", 10, 0, 0.7, 0.5) +
                     line("m", "", "t1", 10, 0, 0.6, 0.5) + line("m", "", "t2", 10, 0, 0.8, 0.5) +
                     line("m", "", "t3", 10, 0, 0.1, 0.5) +  // the baseline has no t3: left out
                     line("m", "", "t1", 50, 0, 0.6, 0.5);   // nor shots 50
  Options o;
  o.baselines = {"base"};
  const auto imp = improvements(aggregate(parse(dir, text), Plan{}, o));
  ASSERT_EQ(imp.size(), 2u);
  EXPECT_EQ(imp[0].tasks, 2u);
  EXPECT_NEAR(imp[0].percent, 100 * (0.7 - 0.6) / 0.6, 1e-12);
  EXPECT_EQ(imp[1].tasks, 0u);
  EXPECT_TRUE(std::isnan(imp[1].percent));
}

TEST(Report, PlanOrdersModelsAndTasksGroupsStayTogether) {
  test::TempDir dir;
  std::string text;
  for (const char* m : {"a", "b", "c"})
    for (const char* task : {"t1", "t2"}) text += line(m, m[0] == 'b' ? "G2" : "G1", task, 10, 0, 0.5, 0.5);
  test::write_file(dir.file("plan.json"),
                   R"({"models": [{"name": "b", "group": "G2"}, "c", {"name": "zz"}], "tasks": [{"name": "t2"}]})");
  const Plan plan = sweep::read_plan_order(dir.file("plan.json"));
  const Table t = aggregate(parse(dir, text), plan, Options{});
  std::vector<std::string> names;
  for (const auto& m : t.models) names.push_back(m.name);
  EXPECT_EQ(names, (std::vector<std::string>{"b", "c", "a"}));  // plan order, then by name; groups contiguous
  EXPECT_EQ(t.groups, (std::vector<std::string>{"G2", "G1"}));
  EXPECT_EQ(t.tasks, (std::vector<std::string>{"t2", "t1"}));
  // The plan's model without a record is said, not silently left out.
  EXPECT_EQ(t.warnings, (std::vector<std::string>{"model 'zz' of the plan has no ok record: it is not in the tables"}));
  // A plan group overrides the records' one, with a warning when they disagree.
  test::write_file(dir.file("plan2.json"), R"({"models": [{"name": "a", "group": "G2"}, {"name": "c", "group": ""}]})");
  const Table t2 = aggregate(parse(dir, text), sweep::read_plan_order(dir.file("plan2.json")), Options{});
  names.clear();
  for (const auto& m : t2.models) names.push_back(m.name + "/" + m.group);
  EXPECT_EQ(names, (std::vector<std::string>{"a/G2", "b/G2", "c/"}));
  ASSERT_EQ(t2.warnings.size(), 2u);
  EXPECT_NE(t2.warnings[0].find("model 'a' is in group 'G2' in the plan but 'G1'"), std::string::npos) << t2.warnings[0];
  Options sel;
  sel.models = {"a"};
  sel.baselines = {"b"};
  EXPECT_THROW(aggregate(parse(dir, text), plan, sel), std::invalid_argument);  // baseline not selected
}

TEST(Report, ErrorBarPlotIsWellFormed) {
  test::TempDir dir;
  write_errorbar_plot(dir.file("p.svg"), "a < b & c", "shots", "acc",
                      {{"m<1>", {{10, {0.5, 0.1}}, {100, {0.6, std::nan("")}}}}, {"m2", {{10, {0.4, 0.0}}}}}, true);
  const std::string svg = test::read_file(dir.file("p.svg"));
  EXPECT_NE(svg.find("a &lt; b &amp; c"), std::string::npos);
  EXPECT_NE(svg.find("data-label=\"m&lt;1&gt;\""), std::string::npos);
  size_t bars = 0;
  for (size_t p = svg.find("class=\"errorbar\""); p != std::string::npos; p = svg.find("class=\"errorbar\"", p + 1)) ++bars;
  EXPECT_EQ(bars, 1u);  // NaN and 0 std draw no bar
  EXPECT_NE(svg.find("(log scale)"), std::string::npos);
}

TEST(Report, PrecisionCountsOnlyTheShownRecords) {
  test::TempDir dir;
  auto with = [](std::string l, const std::string& p) { return l.insert(l.size() - 2, ",\"precision\":\"" + p + "\""); };
  // b's seed 0 ran in bf16, then was rerun in fp32: the last ok record wins, so b is fp32 only.
  // c mixes precisions but is not selected.
  const std::string text = with(line("a", "G", "t", 10, 0, 0.5, 0.6), "fp32") +
                           with(line("b", "G", "t", 10, 0, 0.5, 0.6), "bf16") +
                           with(line("b", "G", "t", 10, 0, 0.5, 0.6), "fp32") +
                           with(line("c", "G", "t", 10, 0, 0.5, 0.6), "fp32") +
                           with(line("c", "G", "t", 10, 1, 0.5, 0.6), "bf16");
  const Results r = parse(dir, text);
  Options o;
  o.models = {"a", "b"};
  Table t = aggregate(r, Plan{}, o);
  EXPECT_TRUE(t.warnings.empty()) << t.warnings[0];
  ASSERT_EQ(t.precisions.size(), 2u);
  EXPECT_EQ(t.precisions[1], (std::map<std::string, uint64_t>{{"fp32", 1}}));
  EXPECT_EQ(t.precision_sentence(), "fp32");
  o.models = {"a", "b", "c"};
  t = aggregate(r, Plan{}, o);
  ASSERT_EQ(t.warnings.size(), 2u);  // and a and b have 1 of the 2 seeds c has
  EXPECT_NE(t.warnings[0].find("model 'c' was fine-tuned in more than one precision: bf16 (1 record), fp32 (1 record)"),
            std::string::npos) << t.warnings[0];
  EXPECT_NE(t.warnings[1].find("2 cell(s) of Table 1 are means over fewer seeds than other models have there (e.g. "
                               "model 'a', task 't', 10 shots: 1 of 2)"),
            std::string::npos) << t.warnings[1];
  EXPECT_EQ(t.precision_sentence(), "fp32 for 'a', 'b'; mixed (bf16, fp32) for 'c'");
}

// Two sweeps' results concatenated, one fine-tuned 3 epochs and one 6 at another lr, were
// averaged into one mean per cell. Records carry their fine-tuning settings; a table never
// mixes two, nor takes records of other settings than its sweep's plan.json gives.
TEST(Report, RecordsOfOtherFineTuningSettingsAreNeverMixed) {
  test::TempDir dir;
  sweep::PlanFinetune three, six;
  three.epochs = 3;
  six.epochs = 6;
  six.lr = 0.001;
  auto with = [](std::string l, const sweep::PlanFinetune& f) {
    return l.insert(l.size() - 2, ",\"finetune\":" + sweep::finetune_to_json(f).dump());
  };
  const std::string same = with(line("m", "", "t", 10, 1, 0.5, 0.6), three) + with(line("m", "", "t", 10, 2, 0.6, 0.7), three);
  EXPECT_TRUE(aggregate(parse(dir, same), Plan{}, Options{}).warnings.empty());
  const std::string mixed = same + with(line("m", "", "t", 10, 3, 0.9, 0.9), six);
  EXPECT_EQ(test::error_of([&] { aggregate(parse(dir, mixed), Plan{}, Options{}); }),
            dir.file("results.jsonl") + ":3: job m|t|10|3 was fine-tuned with other settings than job m|t|10|1 on line "
                                        "1 (epochs 6 vs 3, lr 0.001 vs 0.0): a table would mix two recipes; report them "
                                        "from separate results files");
  // An fp32 recipe's records leave "precision" out: said as fp32, not as "unset".
  sweep::PlanFinetune fp32 = three;
  fp32.precision = "fp32";
  EXPECT_NE(test::error_of([&] { aggregate(parse(dir, same + with(line("m", "", "t", 10, 5, 0.5, 0.6), fp32)), Plan{},
                                           Options{}); })
                .find("(precision \"fp32\" vs \"auto\")"),
            std::string::npos);
  // Against a sweep's plan.json: records of another sweep's settings are refused.
  sweep::Plan p;
  p.finetune = six;
  test::write_file(dir.file("plan.json"), sweep::plan_to_json(p).dump());
  const Plan order = sweep::read_plan_order(dir.file("plan.json"));
  EXPECT_EQ(order.recorded_finetune, sweep::finetune_to_json(six));
  EXPECT_NE(test::error_of([&] { aggregate(parse(dir, same), order, Options{}); })
                .find(":1: job m|t|10|1 was fine-tuned with other settings than the plan " + dir.file("plan.json") +
                      " gives (epochs 3 vs 6, lr 0.0 vs 0.001): the records are of another sweep"),
            std::string::npos);
  // A plan that is not a sweep's own (a user's, partial settings) is not compared.
  test::write_file(dir.file("user.json"), R"({"models": ["m"], "finetune": {"epochs": 6}})");
  EXPECT_TRUE(sweep::read_plan_order(dir.file("user.json")).recorded_finetune.is_null());
  // Records of before (no settings) beside others: said, not refused.
  const Table t = aggregate(parse(dir, same + line("m", "", "t", 10, 4, 0.5, 0.6)), Plan{}, Options{});
  ASSERT_EQ(t.warnings.size(), 1u);
  EXPECT_NE(t.warnings[0].find("1 of the 3 records shown carry no fine-tuning settings"), std::string::npos)
      << t.warnings[0];
}

// Issue 31: a sweep continued after its test table changed averaged results of two test sets.
// Records carry the SHA-256 of what they read, and a table never mixes them.
TEST(Report, RecordsOfOtherInputsAreNeverMixed) {
  test::TempDir dir;
  const std::string a(64, 'a'), b(64, 'b'), c(64, 'c');
  auto with = [](std::string l, const std::string& train, const std::string& test, const std::string& model) {
    return l.insert(l.size() - 2, fmt::format(R"(,"train_sha256":"{}","test_sha256":"{}","model_sha256":"{}")", train,
                                              test, model));
  };
  const std::string same = with(line("m", "", "t", 10, 0, 0.5, 0.6), a, b, c) +
                           with(line("m", "", "t", 10, 1, 0.6, 0.7), a, b, c) +
                           with(line("n", "", "t", 10, 0, 0.5, 0.6), a, b, std::string(64, 'd'));
  Table t = aggregate(parse(dir, same), Plan{}, Options{});
  ASSERT_EQ(t.warnings.size(), 1u);  // n has 1 of m's 2 seeds
  EXPECT_NE(t.warnings[0].find("model 'n', task 't', 10 shots: 1 of 2"), std::string::npos) << t.warnings[0];
  const std::string other_test = same + with(line("m", "", "t", 50, 0, 0.5, 0.6), a, std::string(64, 'e'), c);
  const std::string e = test::error_of([&] { aggregate(parse(dir, other_test), Plan{}, Options{}); });
  EXPECT_EQ(e, dir.file("results.jsonl") + ":4: the test table of task 't' of job m|t|50|0 is not the one of job m|t|10|0 "
                                           "on line 1 (SHA-256 eeeeeeeeeeee... vs bbbbbbbbbbbb...): the records were made "
                                           "from different inputs, and a table would mix them; rerun the stale jobs "
                                           "(genemask sweep --force moves their records aside) or report them from "
                                           "separate results files");
  const std::string other_model = same + with(line("m", "", "t", 10, 2, 0.5, 0.6), a, b, std::string(64, 'f'));
  EXPECT_NE(test::error_of([&] { aggregate(parse(dir, other_model), Plan{}, Options{}); }).find("the model 'm' of job"),
            std::string::npos);
  const std::string other_train = same + with(line("n", "", "t", 10, 1, 0.5, 0.6), std::string(64, '0'), b,
                                              std::string(64, 'd'));
  EXPECT_NE(test::error_of([&] { aggregate(parse(dir, other_train), Plan{}, Options{}); })
                .find("the training table of task 't' at 10 shots"),
            std::string::npos);
  // A selection that leaves the other records out is not refused: only shown records count.
  Options only_n;
  only_n.models = {"n"};
  EXPECT_NO_THROW(aggregate(parse(dir, other_model), Plan{}, only_n));
  // Records of an earlier genemask beside digested ones: said, not refused.
  t = aggregate(parse(dir, same + line("m", "", "t", 10, 3, 0.5, 0.6)), Plan{}, Options{});
  ASSERT_EQ(t.warnings.size(), 2u);
  EXPECT_NE(t.warnings[0].find("1 of the 4 records shown carry no SHA-256"), std::string::npos) << t.warnings[0];
}

// A sweep stopped part-way: a mean over 4 of 5 seeds was bolded as the best beside means over
// 5, and a planned model with no record was simply absent. Cells are counted against the
// plan's seeds (its plan.json beside the results), marked n=k/m, not ranked; the jobs not run
// are listed, and a planned model without any record is said.
TEST(Report, CellsOverFewerSeedsThanPlannedAreMarkedNotRankedAndTheMissingJobsListed) {
  test::TempDir dir;
  std::string text;
  for (int seed = 1; seed <= 5; ++seed) {
    text += line("a", "", "t", 10, seed, 0.50, 0.5) + line("b", "", "t", 10, seed, 0.60, 0.5);
    if (seed <= 4) text += line("c", "", "t", 10, seed, 0.90, 0.5);  // the best mean, one seed short
  }
  test::write_file(dir.file("plan.json"), R"({"format": "genemask-sweep-plan", "models": ["a", "b", "c", "d"],
      "tasks": [{"name": "t"}], "shots": [10], "seeds": [1, 2, 3, 4, 5]})");
  const Plan plan = sweep::read_plan_order(dir.file("plan.json"));
  ASSERT_TRUE(plan.grid_given);
  Options o;
  o.metrics = {"accuracy"};
  const Table t = aggregate(parse(dir, text), plan, o);
  ASSERT_EQ(t.models.size(), 3u);
  EXPECT_EQ(t.cell(2, 0, 0)[0].n, 4u);
  EXPECT_EQ(t.cell(2, 0, 0)[0].expected, 5u);
  EXPECT_EQ(t.cell(2, 0, 0)[0].rank, 0);  // not ranked: 0.9 over 4 seeds is not comparable
  EXPECT_EQ(t.cell(1, 0, 0)[0].rank, 1);  // b is the best of the complete cells
  // c's last seed, and every job of d, which the plan names and has no record.
  EXPECT_EQ(t.missing_jobs, (std::vector<std::string>{"c|t|10|5", "d|t|10|1", "d|t|10|2", "d|t|10|3", "d|t|10|4",
                                                      "d|t|10|5"}));
  const std::string md = table1_markdown(t, 3);
  EXPECT_NE(md.find("| 0.900 \u00b1 0.000 (n=4/5) |"), std::string::npos) << md;
  EXPECT_NE(md.find("Jobs of the plan not run (6): `c|t|10|5` `d|t|10|1`"), std::string::npos) << md;
  EXPECT_NE(table1_latex(t, 3).find("0.900 $\\pm$ 0.000 ($n=4/5$)"), std::string::npos);
  EXPECT_NE(table1_csv(t).find(",n_expected\n"), std::string::npos);
  ASSERT_EQ(t.warnings.size(), 3u);
  EXPECT_EQ(t.warnings[0], "1 cell(s) of Table 1 are means over fewer seeds than planned (e.g. model 'c', task 't', 10 "
                           "shots: 4 of 5): marked n=k/m and not ranked; finish the sweep (genemask sweep continues "
                           "where it stopped) or report the complete part with --models/--tasks");
  EXPECT_NE(t.warnings[1].find("6 job(s) of the plan have no record (e.g. c|t|10|5)"), std::string::npos);
  EXPECT_EQ(t.warnings[2], "model 'd' of the plan has no ok record: it is not in the tables");
  // Without a plan, the seeds any model has at the cell count: the same marks.
  const Table u = aggregate(parse(dir, text), Plan{}, o);
  EXPECT_EQ(u.cell(2, 0, 0)[0].expected, 5u);
  EXPECT_EQ(u.cell(2, 0, 0)[0].rank, 0);
  EXPECT_TRUE(u.missing_jobs.empty());
}

// The footnote's m is the plan's seed count wherever the cell is in the plan's grid, also
// when nothing is missing because the short cell's job failed (it was worded from the list
// of jobs not run, and said "other models have m"); a model outside the plan is counted
// against the others and both are said.
TEST(Report, TheFootnoteSaysWhereEachShortCellsSeedCountCameFrom) {
  test::TempDir dir;
  std::string text;
  for (int seed = 1; seed <= 3; ++seed) {
    text += line("a", "", "t", 10, seed, 0.50, 0.5);
    text += seed == 3 ? line("b", "", "t", 10, seed, 0, 0, "failed") : line("b", "", "t", 10, seed, 0.60, 0.5);
  }
  test::write_file(dir.file("plan.json"), R"({"format": "genemask-sweep-plan", "models": ["a", "b"],
      "tasks": [{"name": "t"}], "shots": [10], "seeds": [1, 2, 3]})");
  const Plan plan = sweep::read_plan_order(dir.file("plan.json"));
  Options o;
  o.metrics = {"accuracy"};
  const Table t = aggregate(parse(dir, text), plan, o);
  EXPECT_TRUE(t.missing_jobs.empty());
  EXPECT_EQ(t.short_of_plan, 1u);
  EXPECT_EQ(t.short_of_others, 0u);
  std::string md = table1_markdown(t, 3);
  EXPECT_NE(md.find("n=k/m: the mean of k seeds where the plan has m (an unfinished sweep)"), std::string::npos) << md;
  EXPECT_NE(t.warnings.at(0).find("fewer seeds than planned (e.g. model 'b', task 't', 10 shots: 2 of 3)"),
            std::string::npos) << t.warnings[0];
  // A model the plan does not name, one seed short of the others at that cell.
  const Table u = aggregate(parse(dir, text + line("x", "", "t", 10, 1, 0.7, 0.5)), plan, o);
  EXPECT_EQ(u.short_of_plan, 1u);
  EXPECT_EQ(u.short_of_others, 1u);
  md = table1_markdown(u, 3);
  EXPECT_NE(md.find("where the plan has m (outside the plan's models, tasks and shots: other models have m)"),
            std::string::npos) << md;
  // Without a plan: the others' count only.
  const Table v = aggregate(parse(dir, text), Plan{}, o);
  EXPECT_EQ(v.short_of_others, 1u);
  EXPECT_NE(table1_markdown(v, 3).find("where other models have m (an unfinished sweep)"), std::string::npos);
}

// A sweep stopped after its 8-shot jobs (it runs the largest shot counts first): the 4-shot
// rows were simply absent, and the jobs not run were counted over the shown shots only.
TEST(Report, APlannedShotCountWithoutRecordsIsSaidAndItsJobsListed) {
  test::TempDir dir;
  std::string text;
  for (int seed = 1; seed <= 3; ++seed) text += line("m", "", "t", 8, seed, 0.5, 0.5);
  test::write_file(dir.file("plan.json"), R"({"format": "genemask-sweep-plan", "models": ["m"],
      "tasks": [{"name": "t"}], "shots": [4, 8], "seeds": [1, 2, 3]})");
  const Plan plan = sweep::read_plan_order(dir.file("plan.json"));
  Options o;
  o.metrics = {"accuracy"};
  const Table t = aggregate(parse(dir, text), plan, o);
  EXPECT_EQ(t.shots, (std::vector<int64_t>{8}));
  EXPECT_EQ(t.missing_jobs, (std::vector<std::string>{"m|t|4|1", "m|t|4|2", "m|t|4|3"}));
  ASSERT_EQ(t.warnings.size(), 2u);
  EXPECT_EQ(t.warnings[0], "4 shots of the plan have no ok record: not in the tables");
  EXPECT_NE(t.warnings[1].find("3 job(s) of the plan have no record (e.g. m|t|4|1)"), std::string::npos)
      << t.warnings[1];
  // A planned model with no record: its jobs count too (3 of them, beside the 4-shot ones).
  test::write_file(dir.file("plan.json"), R"({"format": "genemask-sweep-plan", "models": ["m", "n"],
      "tasks": [{"name": "t"}], "shots": [8], "seeds": [1, 2, 3]})");
  const Table u = aggregate(parse(dir, text), sweep::read_plan_order(dir.file("plan.json")), o);
  EXPECT_EQ(u.missing_jobs, (std::vector<std::string>{"n|t|8|1", "n|t|8|2", "n|t|8|3"}));
}

// Records of another sweep in the file (seeds 0 and 4 beside a plan of seeds 1-3) were
// averaged in: every cell a mean over 5 seeds beside n_expected 3, and the best model flipped.
// They are left out, and said; a model outside the plan's grid keeps its records.
TEST(Report, RecordsOfSeedsThePlanDoesNotListAreLeftOutAndSaid) {
  test::TempDir dir;
  std::string text;
  for (int seed = 0; seed <= 4; ++seed) {
    const bool planned = seed >= 1 && seed <= 3;
    text += line("a", "", "t", 10, seed, planned ? 0.60 : 0.95, 0.5) + line("b", "", "t", 10, seed, 0.70, 0.5);
    text += line("x", "", "t", 10, seed, 0.65, 0.5);  // not in the plan: counted against the others
  }
  test::write_file(dir.file("plan.json"), R"({"format": "genemask-sweep-plan", "models": ["a", "b"],
      "tasks": [{"name": "t"}], "shots": [10], "seeds": [1, 2, 3]})");
  const Plan plan = sweep::read_plan_order(dir.file("plan.json"));
  Options o;
  o.metrics = {"accuracy"};
  const Table t = aggregate(parse(dir, text), plan, o);
  ASSERT_EQ(t.models.size(), 3u);
  EXPECT_EQ(t.cell(0, 0, 0)[0].n, 3u);
  EXPECT_NEAR(t.cell(0, 0, 0)[0].mean, 0.60, 1e-12);  // seeds 0 and 4 (0.95) not averaged in
  EXPECT_EQ(t.cell(0, 0, 0)[0].rank, 0);
  EXPECT_EQ(t.cell(1, 0, 0)[0].rank, 1);
  EXPECT_EQ(t.cell(2, 0, 0)[0].n, 5u);  // x is outside the plan's grid: all its records
  ASSERT_FALSE(t.warnings.empty());
  EXPECT_NE(t.warnings[0].find("4 record(s) of the plan's models, tasks and shots have a seed the plan " +
                               dir.file("plan.json") + " does not list (e.g. job a|t|10|0, line 1; the plan's seeds: "
                                                       "1, 2, 3): left out of the tables"),
            std::string::npos) << t.warnings[0];
  // x's records are shown, over the seeds they have (5, where the plan's models have 3): said.
  ASSERT_GE(t.warnings.size(), 2u);
  EXPECT_EQ(t.warnings[1], "5 record(s) in 1 cell(s) are of a model, task or shot count the plan " + dir.file("plan.json") +
                               " does not list (model 'x', task 't', 10 shots): shown in the tables, each cell over "
                               "the seeds it has, which the plan cannot check; report them with the plan that ran "
                               "them, or leave them out with --models/--tasks");
  // Chosen away with --models: nothing said.
  Options ab = o;
  ab.models = {"a", "b"};
  for (const auto& w : aggregate(parse(dir, text), plan, ab).warnings)
    EXPECT_EQ(w.find("does not list (model"), std::string::npos) << w;
  // The replicates table reads the records Table 1 reads: another sweep's seeds of a replicate
  // were averaged into its mean there while the warning said they were left out.
  std::string arms;
  const auto arm_line = [](const std::string& model, const std::string& arm, int rep, int seed, double acc) {
    return fmt::format(R"({{"model":"{}","group":"","task":"t","shots":10,"seed":{},"status":"ok","accuracy":{},)"
                       R"("auc":0.5,"arm":"{}","replicate":{}}})",
                       model, seed, acc, arm, rep) + "\n";
  };
  for (int seed = 1; seed <= 4; ++seed)
    for (int rep = 0; rep < 2; ++rep) {
      const bool planned = seed <= 3;
      arms += arm_line(fmt::format("gm{}", rep), "gm", rep, seed, planned ? 0.6 + 0.01 * rep : 0.99);
      arms += arm_line(fmt::format("rnd{}", rep), "rnd", rep, seed, 0.5 + 0.01 * rep);
    }
  test::write_file(dir.file("plan.json"), R"({"format": "genemask-sweep-plan", "models": ["gm0", "gm1", "rnd0", "rnd1"],
      "tasks": [{"name": "t"}], "shots": [10], "seeds": [1, 2, 3]})");
  const Results ar = parse(dir, arms);
  const Table at = aggregate(ar, sweep::read_plan_order(dir.file("plan.json")), o);
  EXPECT_EQ(at.used_jobs.size(), 12u);
  const ReplicateTable rt = aggregate_replicates(ar, at);
  ASSERT_EQ(rt.arms.size(), 2u);
  const ArmStat& gm = rt.cells[0][0];
  EXPECT_EQ(gm.seeds, (std::vector<uint64_t>{3, 3}));
  EXPECT_NEAR(gm.mean, 0.605, 1e-12);
  EXPECT_EQ(gm.short_replicates, 0u);
  // A replicate short of seeds (gm1 without seed 3): its mean is over part of its seeds, which
  // replicates.md showed unmarked while Table 1 marked the cell n=2/3. Marked there too, and said.
  std::string partial;
  for (int seed = 1; seed <= 3; ++seed)
    for (int rep = 0; rep < 2; ++rep) {
      if (!(seed == 3 && rep == 1)) partial += arm_line(fmt::format("gm{}", rep), "gm", rep, seed, 0.6 + 0.01 * rep);
      partial += arm_line(fmt::format("rnd{}", rep), "rnd", rep, seed, 0.5 + 0.01 * rep);
    }
  const Results pr = parse(dir, partial);
  const Table pt = aggregate(pr, sweep::read_plan_order(dir.file("plan.json")), o);
  const ReplicateTable prt = aggregate_replicates(pr, pt);
  EXPECT_EQ(prt.cells[0][0].seeds, (std::vector<uint64_t>{3, 2}));
  EXPECT_EQ(prt.cells[0][0].short_replicates, 1u);
  EXPECT_EQ(prt.cells[1][0].short_replicates, 0u);
  EXPECT_NE(replicates_markdown(prt, 3).find("(k=2) (short: 1)"), std::string::npos) << replicates_markdown(prt, 3);
  EXPECT_NE(replicates_csv(prt).find(",3 2,1,"), std::string::npos) << replicates_csv(prt);
  ASSERT_FALSE(prt.warnings.empty());
  EXPECT_NE(prt.warnings[0].find("1 cell(s) of replicates.md have a replicate whose mean is over fewer seeds than "
                                 "planned (e.g. arm 'gm', task 't', 10 shots: replicate 1 ('gm1') has 2 of 3 seeds)"),
            std::string::npos)
      << prt.warnings[0];
  // Only such records, of the models chosen: nothing to report, said.
  o.models = {"a"};
  std::string other;
  for (int seed : {0, 4}) other += line("a", "", "t", 10, seed, 0.9, 0.5);
  EXPECT_THROW(aggregate(parse(dir, other), plan, o), io::InputError);
}

// Models "GM", "GM " and "GM" + a no-break space were three rows that all read "GM", each with
// its own ranks, without a word.
TEST(Report, NamesThatDifferInSpacesOnlyAreSaid) {
  test::TempDir dir;
  std::string text;
  for (int seed = 1; seed <= 2; ++seed)
    text += line("GM", "", "t", 10, seed, 0.5, 0.5) + line("GM ", "", "t", 10, seed, 0.6, 0.5) +
            line("GM\u00a0", "", "t", 10, seed, 0.7, 0.5) + line("G M", "", "t", 10, seed, 0.7, 0.5) +
            line("x", "", "t ", 10, seed, 0.7, 0.5) + line("x", "", "t", 10, seed, 0.7, 0.5) +
            line("GM\u200b", "", "t", 10, seed, 0.7, 0.5) + line("G\u2009M", "", "t", 10, seed, 0.7, 0.5) +
            line("\ufeffG\u00adM", "", "t", 10, seed, 0.7, 0.5);
  Options o;
  o.metrics = {"accuracy"};
  const Table t = aggregate(parse(dir, text), Plan{}, o);
  std::vector<std::string> alike;
  for (const auto& w : t.warnings)
    if (w.find("are shown alike") != std::string::npos) alike.push_back(w);
  ASSERT_EQ(alike.size(), 6u) << fmt::format("{}", fmt::join(t.warnings, "\n"));
  EXPECT_EQ(alike[0], "models \"GM\" and \"GM \" are shown alike in the tables (they differ in spaces or invisible "
                      "characters only): rename one in the plan, or choose one with --models");
  EXPECT_NE(alike[1].find("models \"GM\" and \"GM\\u00a0\""), std::string::npos) << alike[1];
  // A zero-width space, a thin space (as "G M"), a byte-order mark and a soft hyphen.
  EXPECT_NE(alike[2].find("models \"GM\" and \"GM\\u200b\""), std::string::npos) << alike[2];
  EXPECT_NE(alike[3].find("models \"G M\" and \"G\\u2009M\""), std::string::npos) << alike[3];
  EXPECT_NE(alike[4].find("models \"GM\" and \"\\ufeffG\\u00adM\""), std::string::npos) << alike[4];
  EXPECT_NE(alike[5].find("tasks \"t\" and \"t \""), std::string::npos) << alike[5];
  // Group headings too: two bold "G" headings, each group ranked on its own.
  std::string grouped;
  for (int seed = 1; seed <= 2; ++seed)
    grouped += line("m1", "G", "t", 10, seed, 0.5, 0.5) + line("m2", "G\u200b", "t", 10, seed, 0.6, 0.5);
  const Table g = aggregate(parse(dir, grouped), Plan{}, o);
  ASSERT_EQ(g.warnings.size(), 1u) << fmt::format("{}", fmt::join(g.warnings, "\n"));
  EXPECT_EQ(g.warnings[0], "groups \"G\" and \"G\\u200b\" are shown alike in the tables (they differ in spaces or "
                           "invisible characters only): rename one in the plan, or choose the models of one with "
                           "--models");
}

// A model named "<b>m</b> [x]" rendered as bold (and a link) in Markdown, and printed with an
// inverted ! and ? in LaTeX's default font encoding; the caption's bare "p < 0.01" too.
TEST(Report, AngleBracketsAndBracketsInNamesAreEscaped) {
  test::TempDir dir;
  std::string text;
  for (int seed = 1; seed <= 2; ++seed)
    text += line("<b>m</b> [x]", "", "t", 10, seed, 0.5 + 0.1 * seed, 0.5) + line("base", "", "t", 10, seed, 0.5, 0.5);
  Options o;
  o.metrics = {"accuracy"};
  o.baselines = {"base"};
  const Table t = aggregate(parse(dir, text), Plan{}, o);
  const std::string md = table1_markdown(t, 3), tex = table1_latex(t, 3);
  EXPECT_NE(md.find("| \\<b\\>m\\</b\\> \\[x\\] |"), std::string::npos) << md;
  EXPECT_EQ(md.find("<b>"), std::string::npos) << md;
  EXPECT_NE(tex.find("\\textless{}b\\textgreater{}m\\textless{}/b\\textgreater{} [x]"), std::string::npos) << tex;
  EXPECT_EQ(tex.find(" < "), std::string::npos) << tex;
  EXPECT_NE(tex.find("p $<$ 0.01"), std::string::npos) << tex;
  EXPECT_NE(md.find("p < 0.01"), std::string::npos) << md;
}

// Model "a|b" of task "c" and model "a" of task "b|c" make one job key: the later record
// replaced the other, and model "a|b" was gone from the tables without a word.
TEST(Report, ANameWithTheJobKeySeparatorIsRefused) {
  test::TempDir dir;
  try {
    parse(dir, line("a", "", "t", 10, 0, 0.5, 0.5) + line("a|b", "", "c", 10, 0, 0.9, 0.9));
    FAIL();
  } catch (const io::InputError& e) {
    EXPECT_EQ(e.line(), 2u);
    EXPECT_NE(std::string(e.what()).find("model name \"a|b\" holds '|', which separates the parts of a job key"),
              std::string::npos) << e.what();
  }
  EXPECT_THROW(parse(dir, line("a", "", "b|c", 10, 0, 0.5, 0.5)), io::InputError);
}

// Two models that claim one replicate of an arm (two sweeps concatenated, both numbering
// from 0) were pooled as one pretraining run.
TEST(Report, TwoModelsOfOneReplicateAreRefused) {
  test::TempDir dir;
  auto rep = [](std::string l, const std::string& arm, int r) {
    return l.insert(l.size() - 2, fmt::format(R"(,"arm":"{}","replicate":{})", arm, r));
  };
  const std::string text = rep(line("M1", "", "t", 10, 1, 0.5, 0.5), "A", 0) + rep(line("M2", "", "t", 10, 1, 0.6, 0.5), "A", 1) +
                           rep(line("M3", "", "t", 10, 1, 0.7, 0.5), "A", 1);
  EXPECT_EQ(test::error_of([&] { aggregate(parse(dir, text), Plan{}, Options{}); }),
            dir.file("results.jsonl") + ": models 'M2' and 'M3' are both replicate 1 of arm 'A': their results would "
                                        "be pooled as one pretraining run; give each replicate of an arm its own id "
                                        "(the plan's \"replicate\"), or report the sweeps separately");
}

// An improvement over a baseline whose mean is at or below 0 (MCC) flipped sign (-500% for
// a clear gain): no percentage then. One over fewer tasks than the table's says so.
TEST(Report, ImprovementOverABaselineAtOrBelowZeroIsNotAPercentage) {
  test::TempDir dir;
  auto mcc = [](const std::string& m, const std::string& task, int shots, int seed, double v) {
    std::string l = line(m, "", task, shots, seed, 0.5, 0.5);
    return l.insert(l.size() - 2, fmt::format(R"(,"mcc":{})", v));
  };
  std::string text;
  for (int seed = 1; seed <= 3; ++seed)
    text += mcc("base", "t1", 10, seed, -0.05 + 0.01 * seed) + mcc("m", "t1", 10, seed, 0.1) +
            mcc("base", "t2", 10, seed, 0.5) + mcc("m", "t2", 10, seed, 0.6) + mcc("base", "t1", 50, seed, 0.5) +
            mcc("m", "t1", 50, seed, 0.6);
  Options o;
  o.metrics = {"mcc"};
  o.baselines = {"base"};
  const Table t = aggregate(parse(dir, text), Plan{}, o);
  const auto imp = improvements(t);
  ASSERT_EQ(imp.size(), 2u);
  EXPECT_NEAR(imp[0].baseline_mean, (-0.03 + 0.5) / 2, 1e-12);
  EXPECT_NEAR(imp[0].percent, 100 * (0.35 - 0.235) / 0.235, 1e-9);
  EXPECT_EQ(imp[1].tasks, 1u);
  const std::string md = improvement_markdown(t, imp);
  EXPECT_NE(md.find(" 48.94% | 20.00% (1/2 tasks) |"), std::string::npos) << md;
  std::string neg;
  for (int seed = 1; seed <= 3; ++seed) neg += mcc("base", "t1", 10, seed, -0.05 + 0.01 * seed) + mcc("m", "t1", 10, seed, 0.1);
  const Table n = aggregate(parse(dir, neg), Plan{}, o);
  const auto nimp = improvements(n);
  ASSERT_EQ(nimp.size(), 1u);
  EXPECT_TRUE(std::isnan(nimp[0].percent));
  EXPECT_NE(improvement_markdown(n, nimp).find("| m |  | base | n/a |"), std::string::npos) << improvement_markdown(n, nimp);
}

// Records of one task scored on test tables of different sizes or classes (records without
// digests: an earlier genemask's, or two results files concatenated) were averaged into one
// mean with no warning: refused, naming both jobs.
TEST(Report, RecordsOfOneTaskFromTwoTestTablesAreRefused) {
  test::TempDir dir;
  const auto rec = [](const std::string& model, int seed, int n_test, int classes) {
    return fmt::format(R"({{"model":"{}","group":"","task":"t","shots":10,"seed":{},"status":"ok","accuracy":0.6,)"
                       R"("auc":0.6,"n_test":{},"classes":{}}})",
                       model, seed, n_test, classes) + "\n";
  };
  Options o;
  o.metrics = {"accuracy"};
  const std::string same = rec("a", 1, 500, 2) + rec("b", 1, 500, 2) + rec("a", 2, 500, 2);
  EXPECT_NO_THROW(aggregate(parse(dir, same), Plan{}, o));
  for (const auto& [other, what] : {std::pair{rec("b", 2, 300, 2), "300 test sequences of 2 classes"},
                                    std::pair{rec("b", 2, 500, 3), "500 test sequences of 3 classes"}}) {
    const std::string e = test::error_of([&] { aggregate(parse(dir, same + other), Plan{}, o); });
    EXPECT_NE(e.find(fmt::format("results.jsonl:4: job b|t|10|2 scored {}, job a|t|10|1 on line 1 500 of 2: the "
                                 "records of task 't' were made from different test tables",
                                 what)),
              std::string::npos)
        << e;
  }
  // A first record that gives no counts (an earlier genemask's) hid a difference among the
  // later ones: each is compared with the first that gives them.
  const std::string uncounted = R"({"model":"a","group":"","task":"t","shots":10,"seed":3,"status":"ok",)"
                                R"("accuracy":0.6,"auc":0.6})" "\n";
  EXPECT_NO_THROW(aggregate(parse(dir, uncounted + same), Plan{}, o));
  const std::string e = test::error_of([&] { aggregate(parse(dir, uncounted + same + rec("b", 2, 300, 2)), Plan{}, o); });
  EXPECT_NE(e.find("results.jsonl:5: job b|t|10|2 scored 300 test sequences of 2 classes, job a|t|10|1 on line 2 "
                   "500 of 2: the records of task 't' were made from different test tables"),
            std::string::npos)
      << e;
}

// A sweep's plan.json records its inputs' SHA-256; records made from other inputs (another
// sweep's, appended to the same file) were reported against it without a word.
TEST(Report, RecordsOfOtherInputsThanThePlansAreRefused) {
  test::TempDir dir;
  const std::string a(64, 'a'), b(64, 'b'), c(64, 'c');
  const auto rec = [&](const std::string& model, int seed, const std::string& test, const std::string& train,
                       const std::string& weights) {
    return fmt::format(R"({{"model":"{}","group":"","task":"t","shots":10,"seed":{},"status":"ok","accuracy":0.6,)"
                       R"("auc":0.6,"test_sha256":"{}","train_sha256":"{}","model_sha256":"{}"}})",
                       model, seed, test, train, weights) + "\n";
  };
  test::write_file(dir.file("plan.json"), fmt::format(R"({{"format": "genemask-sweep-plan",
      "models": [{{"name": "m", "path": "/x", "weights_sha256": "{0}"}}, {{"name": "r", "path": "random",
                  "config": "logo", "config_sha256": "{1}"}}],
      "tasks": [{{"name": "t", "test": "/t", "test_sha256": "{0}", "dir": "/d",
                  "shot_train_sha256": {{"10": "{1}"}}}}], "shots": [10], "seeds": [1]}})",
                                                      a, b));
  const Plan plan = sweep::read_plan_order(dir.file("plan.json"));
  ASSERT_EQ(plan.tasks.size(), 1u);
  EXPECT_EQ(plan.tasks[0].test_sha256, a);
  EXPECT_EQ(plan.tasks[0].shot_train_sha256.at(10), b);
  Options o;
  o.metrics = {"accuracy"};
  EXPECT_NO_THROW(aggregate(parse(dir, rec("m", 1, a, b, a) + rec("r", 1, a, b, b)), plan, o));
  const auto error = [&](const std::string& text) {
    return test::error_of([&] { aggregate(parse(dir, text), plan, o); });
  };
  EXPECT_NE(error(rec("m", 1, c, b, a)).find("results.jsonl:1: the test table of task 't' of job m|t|10|1 is not the "
                                             "one the plan " + dir.file("plan.json") + " records (SHA-256 cccccccccccc"
                                             "... vs aaaaaaaaaaaa...)"),
            std::string::npos);
  EXPECT_NE(error(rec("m", 1, a, c, a)).find("the training table of task 't' at 10 shots of job m|t|10|1"),
            std::string::npos);
  EXPECT_NE(error(rec("m", 1, a, b, c)).find("the model 'm' of job m|t|10|1"), std::string::npos);
  EXPECT_NE(error(rec("r", 1, a, b, a)).find("the model 'r' of job r|t|10|1"), std::string::npos);
  // A plan that is not the sweep's own records no digests: nothing to hold the records to.
  test::write_file(dir.file("own.json"), R"({"models": ["m"], "tasks": ["t"]})");
  EXPECT_NO_THROW(aggregate(parse(dir, rec("m", 1, c, c, c)), sweep::read_plan_order(dir.file("own.json")), o));
}

// Records without digests: one task at one shot count trained on tables of other sizes, and
// one model name fine-tuned from two checkpoints, were averaged into one cell without a word.
TEST(Report, RecordsOfOneCellFromTwoTrainingTablesOrCheckpointsAreRefused) {
  test::TempDir dir;
  const auto rec = [](const std::string& model, int seed, int n_train, const std::string& checkpoint, int step,
                      const std::string& extra = "") {
    return fmt::format(R"({{"model":"{}","group":"","task":"t","shots":4,"seed":{},"status":"ok","accuracy":0.6,)"
                       R"("auc":0.6,"n_train":{},"checkpoint":"{}","checkpoint_step":{}{}}})",
                       model, seed, n_train, checkpoint, step < 0 ? "null" : std::to_string(step), extra) + "\n";
  };
  Options o;
  o.metrics = {"accuracy"};
  const std::string same = rec("a", 1, 8, "/r/step-100", 100) + rec("a", 2, 8, "/r/step-100", 100) +
                           rec("b", 1, 8, "random", -1) + rec("b", 2, 0, "random", -1);  // n_train 0: not given
  EXPECT_NO_THROW(aggregate(parse(dir, same), Plan{}, o));
  const auto error = [&](const std::string& text) {
    return test::error_of([&] { aggregate(parse(dir, same + text), Plan{}, o); });
  };
  EXPECT_NE(error(rec("a", 3, 20, "/r/step-100", 100))
                .find("results.jsonl:5: job a|t|4|3 trained on 20 sequences, job a|t|4|1 on line 1 on 8: the records "
                      "of task 't' at 4 shots were made from different training tables"),
            std::string::npos);
  EXPECT_NE(error(rec("a", 3, 8, "/r/step-200", 200))
                .find("job a|t|4|3 fine-tuned model 'a' from step 200 (/r/step-200), job a|t|4|1 on line 1 from step "
                      "100 (/r/step-100): the records are of two models under one name"),
            std::string::npos);
  EXPECT_NE(error(rec("a", 3, 8, "random", -1)).find("fine-tuned model 'a' from no checkpoint (random)"),
            std::string::npos);
  // The same behind a first record that gives neither (an earlier genemask's): the later
  // records are compared with the first that gives each.
  const std::string bare = R"({"model":"a","group":"","task":"t","shots":4,"seed":9,"status":"ok","accuracy":0.6,)"
                           R"("auc":0.6})" "\n";
  const auto behind = [&](const std::string& text) {
    return test::error_of([&] { aggregate(parse(dir, bare + same + text), Plan{}, o); });
  };
  EXPECT_NO_THROW(aggregate(parse(dir, bare + same), Plan{}, o));
  EXPECT_NE(behind(rec("a", 3, 20, "/r/step-100", 100))
                .find("results.jsonl:6: job a|t|4|3 trained on 20 sequences, job a|t|4|1 on line 2 on 8"),
            std::string::npos);
  EXPECT_NE(behind(rec("a", 3, 8, "/r/step-200", 200))
                .find("job a|t|4|3 fine-tuned model 'a' from step 200 (/r/step-200), job a|t|4|1 on line 2 from step "
                      "100 (/r/step-100)"),
            std::string::npos);
  // A random model's record with a step (edited): the two sides are told apart.
  EXPECT_NE(error(rec("b", 3, 8, "random", 100))
                .find("job b|t|4|3 fine-tuned model 'b' from no checkpoint (random), yet with step 100, job b|t|4|1 on "
                      "line 3 from no checkpoint (random):"),
            std::string::npos);
  // Two checkpoint directories at one step (two pretraining runs), or two model directories
  // without a step: refused unless the weights' digests show one model.
  EXPECT_NE(error(rec("a", 3, 8, "/s/step-100", 100))
                .find("results.jsonl:5: job a|t|4|3 fine-tuned model 'a' from /s/step-100, job a|t|4|1 on line 1 from "
                      "/r/step-100, and the records carry no SHA-256 of the weights"),
            std::string::npos);
  const std::string d1 = R"(,"model_sha256":")" + std::string(64, 'a') + "\"";
  const std::string d2 = R"(,"model_sha256":")" + std::string(64, 'b') + "\"";
  EXPECT_NE(test::error_of([&] {
              aggregate(parse(dir, rec("m", 1, 8, "/models/x", -1) + rec("m", 2, 8, "/models/y", -1)), Plan{}, o);
            }).find("fine-tuned model 'm' from /models/y, job m|t|4|1 on line 1 from /models/x"),
            std::string::npos);
  // A model directory moved between two parts of a sweep: one digest, one model.
  EXPECT_NO_THROW(aggregate(parse(dir, rec("m", 1, 8, "/models/x", -1, d1) + rec("m", 2, 8, "/moved/x", -1, d1)),
                            Plan{}, o));
  EXPECT_NE(test::error_of([&] {
              aggregate(parse(dir, rec("m", 1, 8, "/models/x", -1, d1) + rec("m", 2, 8, "/models/y", -1, d2)),
                        Plan{}, o);
            }).find("the model 'm' of job m|t|4|2"),
            std::string::npos);
  // An N-shot record trained on N of each class: 4-shot of 2 classes is 8 sequences, and one
  // of 6 is not 4-shot (Table 1 would publish it in the 4-shot rows).
  EXPECT_NO_THROW(aggregate(parse(dir, rec("c", 1, 8, "random", -1, R"(,"classes":2)")), Plan{}, o));
  EXPECT_NE(test::error_of([&] { aggregate(parse(dir, rec("c", 1, 6, "random", -1, R"(,"classes":2)")), Plan{}, o); })
                .find("results.jsonl:1: job c|t|4|1 trained on 6 sequences, but as 4-shot of 2 classes it trains on 8 "
                      "(4 of each class): the record is not 4-shot"),
            std::string::npos);
  // What each job cut or could not read is said per model and task (sweeps wrote neither).
  const Table t = aggregate(
      parse(dir, rec("a", 1, 8, "/r/step-100", 100, R"(,"truncated":3,"unknown_only":2,"unterminated_tables":1)") +
                     rec("a", 2, 8, "/r/step-100", 100, R"(,"truncated":0,"unknown_only":0,"unterminated_tables":0)")),
      Plan{}, o);
  std::string all = fmt::format("{}", fmt::join(t.warnings, "\n"));
  EXPECT_NE(all.find("model 'a' on task 't': 1 record(s) trained on or scored sequences whose 6-mers are all [UNK] "
                     "(up to 2 per job, unknown_only"),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("model 'a' on task 't': 1 record(s) cut sequences longer than the model's positions (up to 3 per "
                     "job, truncated)"),
            std::string::npos)
      << all;
  // A table whose last line has no line end (a job's log says which): per task.
  EXPECT_NE(all.find("task 't': 1 record(s) read a training or test table whose last line has no line end "
                     "(unterminated_tables): a table cut short"),
            std::string::npos)
      << all;
  EXPECT_EQ(aggregate(parse(dir, rec("a", 1, 8, "/r/step-100", 100, R"(,"unterminated_tables":0)")), Plan{}, o)
                .warnings,
            std::vector<std::string>{});
  EXPECT_NE(error(rec("a", 3, 8, "/r/step-100", 100, R"(,"unterminated_tables":-1)"))
                .find("\"unterminated_tables\" is -1, expected a count >= 0"),
            std::string::npos);
}
