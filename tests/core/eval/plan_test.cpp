// Sweep plans (genemask/eval/plan.hpp): JSON and YAML give the same jobs, errors name file,
// key path and value, what a plan may expand to is bounded, plan changes are classified.
#include <gtest/gtest.h>

#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <set>

#include "genemask/eval/plan.hpp"
#include "io/dir_lock.hpp"
#include "io/sha256.hpp"
#include "test_util.hpp"

using namespace genemask;
namespace fs = std::filesystem;

namespace {

std::string plan_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const sweep::PlanError& e) {
    return e.what();
  }
  return "no error";
}

class SweepPlan : public ::testing::Test {
 protected:
  void SetUp() override {
    d_ = tmp_.path();
    test::write_file(d_ + "/train.csv", "sequence,label\nACGTACGT,0\n");
    test::write_file(d_ + "/test.csv", "sequence,label\nACGTACGT,0\n");
    test::write_file(d_ + "/tiny.json", "{}\n");
    // The released few-shot layout, with Splice-40's train file name at 50 shots.
    fs::create_directories(d_ + "/prom/10");
    fs::create_directories(d_ + "/prom/50");
    test::write_file(d_ + "/prom/10/train.tsv", "x\n");
    test::write_file(d_ + "/prom/50/train_splice40_50.tsv", "x\n");
    test::write_file(d_ + "/prom/dev.tsv", "x\n");
  }
  sweep::Plan json_plan(const std::string& text) {
    test::write_file(d_ + "/p.json", text);
    return sweep::load_plan(d_ + "/p.json");
  }
  sweep::Plan yaml_plan(const std::string& text) {
    test::write_file(d_ + "/p.yaml", text);
    return sweep::load_plan(d_ + "/p.yaml");
  }
  test::TempDir tmp_;
  std::string d_;
};

const char* kJson = R"({
  "models": [{"name": "Random LOGO", "path": "random", "group": "LOGO"},
             {"name": "Tiny", "path": "random", "config": "tiny.json"}],
  "tasks": [{"name": "plain", "train": "train.csv", "test": "test.csv"},
            {"name": "prom", "dir": "prom"}],
  "shots": [10, 50], "seeds": 3, "retries": 1, "threads_per_worker": 2,
  "finetune": {"epochs": 2, "lr": 0.001}
})";

const char* kYaml = R"(# the same plan in YAML
models:
  - {name: Random LOGO, path: random, group: LOGO}
  - name: Tiny
    path: random
    config: tiny.json
tasks:
  - name: plain
    train: train.csv
    test: test.csv
  - {name: prom, dir: prom}
shots: [10, 50]
seeds: [1, 2, 3]
retries: 1
threads_per_worker: 2
finetune:
  epochs: 2
  lr: 1.0e-3
)";

TEST_F(SweepPlan, JsonAndYamlGiveTheSameJobs) {
  const sweep::Plan a = json_plan(kJson), b = yaml_plan(kYaml);
  auto ja = sweep::plan_to_json(a), jb = sweep::plan_to_json(b);
  ja.erase("source");
  jb.erase("source");
  EXPECT_EQ(ja, jb);
  const auto jobs_a = sweep::expand_jobs(a, "/out"), jobs_b = sweep::expand_jobs(b, "/out");
  ASSERT_EQ(jobs_a.size(), 2u * 2 * 2 * 3);
  ASSERT_EQ(jobs_a.size(), jobs_b.size());
  for (size_t i = 0; i < jobs_a.size(); ++i) {
    EXPECT_EQ(jobs_a[i].key, jobs_b[i].key);
    EXPECT_EQ(jobs_a[i].train, jobs_b[i].train);
    EXPECT_EQ(jobs_a[i].config, jobs_b[i].config);
    EXPECT_EQ(jobs_a[i].finetune.lr, jobs_b[i].finetune.lr);
  }
  // Long jobs first, then plan order: model, task, seed.
  EXPECT_EQ(jobs_a.front().key, "Random LOGO|plain|50|1");
  EXPECT_EQ(jobs_a[1].key, "Random LOGO|plain|50|2");
  EXPECT_EQ(jobs_a[3].key, "Random LOGO|prom|50|1");
  EXPECT_EQ(jobs_a[12].key, "Random LOGO|plain|10|1");
  EXPECT_EQ(jobs_a.back().key, "Tiny|prom|10|3");
  // Sampled shots from a full training set; fixed shot files (shots = 0) from the layout.
  EXPECT_EQ(jobs_a[0].sample_shots, 50);
  EXPECT_EQ(jobs_a[0].train, d_ + "/train.csv");
  EXPECT_EQ(jobs_a[3].sample_shots, 0);
  EXPECT_EQ(jobs_a[3].train, d_ + "/prom/50/train_splice40_50.tsv");
  EXPECT_EQ(jobs_a[3].test, d_ + "/prom/dev.tsv");
  EXPECT_EQ(jobs_a.back().train, d_ + "/prom/10/train.tsv");
  EXPECT_EQ(jobs_a[0].group, "LOGO");
  EXPECT_EQ(jobs_a[0].config, "logo");
  EXPECT_EQ(jobs_a.back().config, d_ + "/tiny.json");
  EXPECT_EQ(jobs_a[0].out, "/out/runs/Random_LOGO__plain__50__1");
  EXPECT_EQ(a.threads_per_worker, 2);
  EXPECT_EQ(a.retries, 1);
  EXPECT_EQ(a.finetune.epochs, 2);
}

TEST_F(SweepPlan, FinetunePrecisionDefaultsToAutoAndFp32IsWrittenAsBefore) {
  const std::string task = R"("tasks": [{"name": "t", "train": "train.csv", "test": "test.csv"}])";
  const std::string model = R"({"models": [{"name": "m", "path": "random"}], )";
  const auto dflt = json_plan(model + task + "}");
  EXPECT_EQ(dflt.finetune.precision, "auto");
  EXPECT_EQ(sweep::plan_to_json(dflt)["finetune"]["precision"], "auto");
  // An explicit fp32 normalises as plans did before auto was the default (no field), so the
  // plan.json of an earlier sweep still matches it ...
  const auto fp32 = json_plan(model + R"("finetune": {"precision": "fp32"}, )" + task + "}");
  EXPECT_EQ(fp32.finetune.precision, "fp32");
  const auto old_json = sweep::plan_to_json(fp32);
  EXPECT_FALSE(old_json["finetune"].contains("precision"));
  EXPECT_FALSE(sweep::compare_plans(old_json, old_json).settings_changed);
  // ... while a plan that leaves it out (auto) is a change of settings against that earlier
  // sweep: continuing it needs fp32 given or --force, so fp32 and bf16 records never mix.
  const auto d = sweep::compare_plans(old_json, sweep::plan_to_json(dflt));
  EXPECT_TRUE(d.settings_changed);
  ASSERT_FALSE(d.changes.empty());
  EXPECT_NE(d.changes.front().find("auto"), std::string::npos) << d.changes.front();
  // The sweep's own plan.json, read back as a plan, is the fp32 plan it was written from (it
  // meant auto, and the sweep's own plan was refused as changed, --force rerunning in bf16).
  const auto own = sweep::plan_from_json(old_json, d_ + "/sw/plan.json", d_);
  EXPECT_EQ(own.finetune.precision, "fp32");
  EXPECT_TRUE(sweep::compare_plans(old_json, sweep::plan_to_json(own)).changes.empty());
  EXPECT_EQ(sweep::plan_from_json(sweep::plan_to_json(dflt), d_ + "/sw/plan.json", d_).finetune.precision, "auto");
  const auto bf16 = json_plan(model + R"("finetune": {"precision": "bf16"}, )" + task + "}");
  EXPECT_EQ(bf16.finetune.precision, "bf16");
  EXPECT_EQ(sweep::plan_to_json(bf16)["finetune"]["precision"], "bf16");
}

// A key given twice (two "seeds", two "models" lists) kept the last one without a word.
TEST_F(SweepPlan, AKeyGivenTwiceIsRefusedInJsonAndYaml) {
  const std::string e = plan_error([&] {
    yaml_plan("models:\n  - {name: m, path: random}\ntasks:\n  - {name: t, train: train.csv, test: test.csv}\n"
              "seeds: 2\nseeds: 5\n");
  });
  EXPECT_EQ(e, d_ + "/p.yaml:6: the key 'seeds' appears twice in one mapping; give it once");
  EXPECT_NE(plan_error([&] {
              yaml_plan("models:\n  - {name: m, path: random, path: random}\ntasks: []\n");
            }).find("the key 'path' appears twice in one mapping (under models[0])"),
            std::string::npos);
  EXPECT_NE(plan_error([&] {
              json_plan(R"({"models": [{"name": "m", "path": "random"}], "models": [], "tasks": []})");
            }).find("the key \"models\" appears twice in one object"),
            std::string::npos);
}

TEST_F(SweepPlan, DefaultsAreThePapersShotsAndTenSeeds) {
  const auto p = json_plan(R"({"models": [{"name": "m", "path": "random"}],
                               "tasks": [{"name": "t", "train": "train.csv", "test": "test.csv"}]})");
  EXPECT_EQ(p.shots, (std::vector<int64_t>{10, 50, 100, 500, 1000}));
  EXPECT_EQ(p.seeds.size(), 10u);
  EXPECT_EQ(p.seeds.front(), 1u);
  EXPECT_EQ(p.retries, 2);
  EXPECT_EQ(sweep::expand_jobs(p, "o").size(), 50u);
}

// A plan reached through a symbolic link reads its relative paths from the link's directory;
// one that names another existing file from the directory the link leads to (another
// train.csv beside the link) was read without a word: refused, naming both (the genome
// lists' rule, io/listed_paths.hpp). One found only where the link leads says so.
TEST_F(SweepPlan, ARelativePathOfTwoMeaningsThroughALinkIsRefused) {
  const std::string text = R"({"models": [{"name": "m", "path": "random"}],
                               "tasks": [{"name": "t", "train": "train.csv", "test": "test.csv"}]})";
  test::write_file(d_ + "/p.json", text);
  const std::string via = d_ + "/via";
  fs::create_directories(via);
  fs::create_symlink(d_ + "/p.json", via + "/p.json");
  fs::create_symlink(d_ + "/test.csv", via + "/test.csv");  // one file from both: fine
  test::write_file(via + "/train.csv", "sequence,label\nTTTTTTTT,1\n");
  EXPECT_EQ(plan_error([&] { sweep::load_plan(via + "/p.json"); }),
            via + "/p.json: tasks[0].train: the relative path 'train.csv' names " + via +
                "/train.csv from the plan's directory as given, but the plan is reached through a symbolic link, and "
                "from the directory it leads to (" + d_ + "/) it names another file, " + d_ +
                "/train.csv; write the path absolute, or give the plan by its real path");
  fs::remove(via + "/train.csv");
  EXPECT_NE(plan_error([&] { sweep::load_plan(via + "/p.json"); })
                .find("(the plan is reached through a symbolic link, and relative paths are read from the link's "
                      "directory; from the directory it leads to, the path names " + d_ + "/train.csv: give the plan "
                      "by its real path)"),
            std::string::npos);
  fs::create_symlink(d_ + "/train.csv", via + "/train.csv");
  EXPECT_EQ(sweep::load_plan(via + "/p.json").tasks.at(0).train, via + "/train.csv");
  EXPECT_EQ(sweep::load_plan(d_ + "/p.json").tasks.at(0).train, d_ + "/train.csv");  // no link: as always
}

TEST_F(SweepPlan, ErrorsNameFileKeyAndValue) {
  const std::string f = d_ + "/p.json";
  EXPECT_EQ(plan_error([&] { json_plan(R"({"models": [{"name": "m", "path": "nope"}], "tasks": []})"); }),
            f + ": models[0].path: \"nope\" does not exist (expected a model directory, a pretrain run, or \"random\": " +
                d_ + "/nope)");
  EXPECT_EQ(plan_error([&] { json_plan(R"({"models": [{"name": "m", "path": "random"}], "shots": [10, -5]})"); }),
            f + ": shots[1]: -5 is not a positive integer");
  EXPECT_EQ(plan_error([&] { json_plan(R"({"models": [{"name": "m", "path": "random"}], "shot": [10]})"); }),
            f + ": shot: unknown key (expected one of: models, tasks, shots, seeds, retries, threads_per_worker, device, "
                "ranks_per_gpu, finetune)");
  EXPECT_EQ(plan_error([&] { json_plan(R"({"models": [{"name": "a|b", "path": "random"}]})"); }),
            f + ": models[0].name: \"a|b\" contains '|' (the job key separator); choose another name");
  // test.tsv beside dev.tsv: test.tsv was taken without a word.
  test::write_file(d_ + "/prom/test.tsv", "x\n");
  EXPECT_EQ(plan_error([&] { json_plan(R"({"models": [{"name": "m", "path": "random"}], "shots": [10],
                                           "tasks": [{"name": "p", "dir": "prom"}]})"); }),
            f + ": tasks[0].dir: \"" + d_ + "/prom\" has both test.tsv and dev.tsv: give \"test\" explicitly (the "
                                              "table to score on)");
  EXPECT_NO_THROW(json_plan(R"({"models": [{"name": "m", "path": "random"}], "shots": [10],
                                "tasks": [{"name": "p", "dir": "prom", "test": "prom/dev.tsv"}]})"));
  fs::remove(d_ + "/prom/test.tsv");
  // A line break in a name went on as live LaTeX after a `%` comment of table1.tex.
  EXPECT_EQ(plan_error([&] { json_plan(R"({"models": [{"name": "m\n\\end{document}", "path": "random"}]})"); }),
            f + ": models[0].name: \"m\\x0a\\end{document}\" holds a control character (byte 0x0a at "
                "position 2): names are printed into the lines of tables and job lists; choose another name");
  EXPECT_NE(plan_error([&] { json_plan(R"({"models": [{"name": "m", "group": "g\t", "path": "random"}]})"); })
                .find(": models[0].group: \"g\\x09\" holds a control character"),
            std::string::npos);
  EXPECT_EQ(plan_error([&] {
              json_plan(R"({"models": [{"name": "m", "path": "random"}],
                            "tasks": [{"name": "t", "train": "train.csv", "test": "test.csv"}], "device": "tpu"})");
            }),
            f + ": device: \"tpu\" is not cpu or cuda");
  EXPECT_EQ(plan_error([&] {
              json_plan(R"({"models": [{"name": "m", "path": "random"}], "shots": [10, 100],
                            "tasks": [{"name": "p", "dir": "prom"}]})");
            }),
            f + ": tasks[0].dir: \"" + d_ +
                "/prom/100\" has no train.tsv or train*.tsv for 100 shots (the released few-shot layout is "
                "DIR/<shots>/train.tsv; remove 100 from shots or add the file)");
  EXPECT_EQ(plan_error([&] { json_plan("{\"models\": [}"); }).substr(0, f.size() + 18), f + ":1: not valid JSON");
}

TEST_F(SweepPlan, YamlErrorsNameTheLine) {
  const std::string f = d_ + "/p.yaml";
  const std::string kTask = "tasks: [{name: t, train: train.csv, test: test.csv}]\n";
  EXPECT_EQ(plan_error([&] { yaml_plan("models:\n  - name: m\n    path: random\nseeds: 0\n"); }),
            f + ":4: seeds: 0 is not a positive count or a list of seeds");
  // 010 is 10 in YAML 1.2 and 8 in YAML 1.1 (PyYAML): taken as neither. 1e400 ended with
  // "error: stod", no file or key.
  EXPECT_NE(plan_error([&] { yaml_plan("models:\n  - name: m\n    path: random\nseeds: [1, 010]\n" + kTask); })
                .find(f + ":4: seeds[1]: \"010\""),
            std::string::npos);
  EXPECT_NE(plan_error([&] { yaml_plan("models:\n  - name: m\n    path: random\nfinetune: {lr: 1e400}\n" + kTask); })
                .find(f + ":4: finetune.lr: \"1e400\""),
            std::string::npos);
  EXPECT_EQ(yaml_plan("models:\n  - name: m\n    path: random\nseeds: [+3, 10]\nfinetune: {lr: 2e-3}\n" + kTask).seeds,
            (std::vector<uint64_t>{3, 10}));
  EXPECT_EQ(plan_error([&] {
              yaml_plan("models:\n  - name: m\n    path: random\n    config: huge\ntasks: []\n");
            }),
            f + ":4: models[0].config: \"huge\" does not exist (expected logo, dnabert or a config.json: " + d_ + "/huge)");
  EXPECT_EQ(plan_error([&] { yaml_plan("models:\n  - name: m\n    path: random\nfinetune: {dropout: 1.5}\n" + kTask); }),
            f + ":4: finetune.dropout: 1.5 is not a probability in [0, 1)");
  EXPECT_EQ(plan_error([&] { yaml_plan("models:\n  - name: m\n    path: random\nfinetune: {precision: fp16}\n" + kTask); }),
            f + ":4: finetune.precision: \"fp16\" is not fp32, bf16 or auto");
  // Quoted numbers stay strings and are rejected where a number is expected.
  EXPECT_EQ(plan_error([&] { yaml_plan("models:\n  - name: m\n    path: random\nretries: \"3\"\n" + kTask); }),
            f + ":4: retries: \"3\" is not an integer >= 0");
  // Regression: a second document (after ---) was parsed and dropped: only the first plan ran.
  EXPECT_EQ(plan_error([&] {
              yaml_plan("models: [{name: A, path: random}]\n" + kTask + "---\nmodels: [{name: B, path: random}]\n");
            }),
            f + ":3: a second YAML document (after '---'): a plan is one document, and only the first would be read; "
                "put each plan in a file of its own");
  EXPECT_EQ(yaml_plan("---\nmodels: [{name: A, path: random}]\n" + kTask).models.size(), 1u);  // one, marked
  // Seeds are uint64_t, as `finetune --seed` takes them: 2^63 was "not a non-negative integer".
  EXPECT_EQ(yaml_plan("models: [{name: m, path: random}]\nseeds: [9223372036854775808, 18446744073709551615]\n" + kTask)
                .seeds,
            (std::vector<uint64_t>{9223372036854775808ull, 18446744073709551615ull}));
  EXPECT_EQ(plan_error([&] { json_plan(R"({"models": [{"name": "m", "path": "random"}], "seeds": [18446744073709551616]})"); }),
            d_ + "/p.json: seeds[0]: 1.8446744073709552e+19 is not a non-negative integer (at most 18446744073709551615)");
  EXPECT_NE(plan_error([&] { json_plan(R"({"models": [{"name": "m", "path": "random"}], "seeds": [-1]})"); })
                .find("seeds[0]: -1 is not a non-negative integer"),
            std::string::npos);
}

// Regression: a 600-byte plan of nested aliases expanded to 20 GB before std::bad_alloc, and
// `seeds: 1000000000000` to 21 GB; a 300-character model name passed and failed every job.
TEST_F(SweepPlan, ExpansionIsBounded) {
  const std::string f = d_ + "/p.yaml";
  const std::string kTask = "tasks: [{name: t, train: train.csv, test: test.csv}]\n";
  // Billion laughs: each level lists the previous one nine times (9^9 values in all).
  std::string laughs = "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n";
  for (char level = 'b'; level <= 'i'; ++level) {
    const char prev = static_cast<char>(level - 1);
    laughs += fmt::format("{0}: &{0} [*{1}, *{1}, *{1}, *{1}, *{1}, *{1}, *{1}, *{1}, *{1}]\n", level, prev);
  }
  const std::string err = plan_error([&] { yaml_plan(laughs); });
  EXPECT_NE(err.find("the plan expands to more than 100000 values (nested YAML aliases?)"), std::string::npos) << err;
  EXPECT_EQ(err.rfind(f + ":", 0), 0u) << err;
  // A few aliases are fine: the expansion is what is counted.
  EXPECT_NO_THROW(yaml_plan("models: [{name: m, path: random}]\ntasks: [{name: t, train: &f train.csv, test: *f}]\n"));
  EXPECT_EQ(plan_error([&] { yaml_plan("models: [{name: m, path: random}]\nseeds: 1000000000000\n" + kTask); }),
            f + ":2: seeds: 1000000000000 seeds is more than the 100000 a plan may have (the paper runs 10)");
  EXPECT_NO_THROW(yaml_plan("models: [{name: m, path: random}]\nseeds: 100000\nshots: [10]\n" + kTask));
  // models x tasks x shots x seeds: 11 x 1 x 1 x 100000 is over the million.
  std::string models = "models:\n";
  for (int i = 0; i < 11; ++i) models += fmt::format("  - {{name: m{}, path: random}}\n", i);
  EXPECT_EQ(plan_error([&] { yaml_plan(models + "seeds: 100000\nshots: [10]\n" + kTask); }),
            f + ":1: 11 models x 1 tasks x 1 shots x 100000 seeds is more than the 1000000 jobs a sweep may run; split it "
                "into several plans");
  // Run directory names: <model>__<task>__<shots>__<seed> within 255 bytes, checked at plan time.
  const std::string long_name(300, 'x');
  EXPECT_EQ(plan_error([&] { yaml_plan("models: [{name: " + long_name + ", path: random}]\n" + kTask); }),
            f + ":1: models[0].name: \"" + std::string(40, 'x') +
                "...\" (300 bytes) makes run directory names up to 313 bytes long, over the file-name limit of 255; "
                "shorten the model or task name");
  // Exactly at the limit: 255 = model + 1 ("t") + 6 + 4 ("1000") + 2 ("10").
  const std::string edge(255 - 1 - 6 - 4 - 2, 'y');
  const auto p = yaml_plan("models: [{name: " + edge + ", path: random}]\n" + kTask);
  for (const auto& job : sweep::expand_jobs(p, "/o"))
    EXPECT_LE(fs::path(job.out).filename().string().size(), sweep::kMaxRunDirName);
  EXPECT_NE(plan_error([&] { yaml_plan("models: [{name: " + edge + "z, path: random}]\n" + kTask); }), "no error");
  // Distinct names that join into one run directory: two jobs would share (and write over)
  // it. Each accepted plan's jobs have distinct directories (a brute-force check).
  const std::string two_tasks = "tasks: [{name: c, train: train.csv, test: test.csv}, {name: b__c, train: train.csv, test: test.csv}]\n";
  EXPECT_EQ(plan_error([&] { yaml_plan("models: [{name: a__b, path: random}, {name: a, path: random}]\n" + two_tasks); }),
            f + ":1: models[1].name: model \"a__b\" with task \"c\" and model \"a\" with task \"b__c\" give the same "
                "run directories (runs/a__b__c__SHOTS__SEED); rename one so that the names hold no \"__\"");
  const std::string underscores = "tasks: [{name: _b, train: train.csv, test: test.csv}, {name: b, train: train.csv, test: test.csv}]\n";
  EXPECT_NE(plan_error([&] { yaml_plan("models: [{name: a_, path: random}, {name: a, path: random}]\n" + underscores); })
                .find("give the same run directories (runs/a___b__SHOTS__SEED)"),
            std::string::npos);
  for (const std::string& models : {"models: [{name: a_b, path: random}, {name: a, path: random}]\n",
                                    "models: [{name: a.b, path: random}, {name: ab, path: random}]\n"}) {
    const auto ok = yaml_plan(models + two_tasks);
    std::set<std::string> outs;
    for (const auto& job : sweep::expand_jobs(ok, "/o")) EXPECT_TRUE(outs.insert(job.out).second) << job.out;
  }
  // The file itself is bounded before it is read into memory.
  test::write_file(d_ + "/big.json", std::string(sweep::kMaxPlanBytes + 1, ' '));
  EXPECT_EQ(plan_error([&] { sweep::load_plan(d_ + "/big.json"); }),
            d_ + "/big.json: the plan is 16777217 bytes, more than the 16777216 a plan may have: is this the plan file?");
}

// Issue 21: each job took "the newest checkpoint" of a run when it started, so the seeds of
// one model could use different steps while the run went on.
TEST_F(SweepPlan, ARunResolvesOnceToItsNewestCheckpointAndMustHaveFinished) {
  auto checkpoint = [&](const std::string& name, const std::string& state) {
    fs::create_directories(d_ + "/run/checkpoints/" + name);
    test::write_file(d_ + "/run/checkpoints/" + name + "/model.safetensors", "x");
    test::write_file(d_ + "/run/checkpoints/" + name + "/state.json", state);
  };
  checkpoint("step-00000002", R"({"step": 2, "steps": 4})");
  checkpoint("step-00000004", R"({"step": 4, "steps": 4})");
  checkpoint("step-latest", R"({"step": 4, "steps": 4})");  // not a checkpoint name
  const std::string tail = R"(], "tasks": [{"name": "t", "train": "train.csv", "test": "test.csv"}], "shots": [10],
                               "seeds": [1, 2]})";
  const std::string newest = d_ + "/run/checkpoints/step-00000004";
  auto p = json_plan(R"({"models": [{"name": "m", "path": "run"})" + tail);
  EXPECT_EQ(p.models[0].path, d_ + "/run");
  EXPECT_EQ(p.models[0].checkpoint, newest);
  EXPECT_EQ(p.models[0].checkpoint_step, 4);
  for (const auto& job : sweep::expand_jobs(p, "/out")) {
    EXPECT_EQ(job.model_path, newest);
    EXPECT_EQ(job.checkpoint_step, 4);
  }
  const auto j = sweep::plan_to_json(p);
  EXPECT_EQ(j["models"][0]["checkpoint"], newest);
  EXPECT_EQ(j["models"][0]["checkpoint_step"], 4);
  // A newer checkpoint of a longer run: refused until the run ends, unless named explicitly.
  checkpoint("step-00000006", R"({"step": 6, "steps": 10})");
  const std::string f = d_ + "/p.json";
  EXPECT_EQ(plan_error([&] { json_plan(R"({"models": [{"name": "m", "path": "run"})" + tail); }),
            f + ": models[0].path: the run \"" + d_ + "/run\" has not finished: its newest checkpoint is step 6 of the "
                "10 steps it was started for; finish it with `genemask pretrain ... --resume`, or name a checkpoint "
                "directory (\"" + d_ + "/run/checkpoints/step-00000006\") to evaluate that step");
  p = json_plan(R"({"models": [{"name": "m", "path": "run/checkpoints/step-00000006"})" + tail);
  EXPECT_EQ(p.models[0].checkpoint, d_ + "/run/checkpoints/step-00000006");
  EXPECT_EQ(p.models[0].checkpoint_step, 6);
  test::write_file(d_ + "/run/checkpoints/step-00000006/state.json", R"({"step": 6, "steps": 6})");
  EXPECT_EQ(json_plan(R"({"models": [{"name": "m", "path": "run"})" + tail).models[0].checkpoint_step, 6);
  {
    io::DirLock live(d_ + "/run", "genemask run");  // a pretrain still writing it
    const std::string e = plan_error([&] { json_plan(R"({"models": [{"name": "m", "path": "run"})" + tail); });
    EXPECT_NE(e.find("models[0].path: the run \"" + d_ + "/run\" is still being trained (a live genemask pretrain "
                     "holds its lock: host "),
              std::string::npos)
        << e;
  }
  // A model directory: itself, no step; a directory that is neither is named.
  fs::create_directories(d_ + "/hf");
  test::write_file(d_ + "/hf/model.safetensors", "x");
  p = json_plan(R"({"models": [{"name": "m", "path": "hf"}, {"name": "r", "path": "random"})" + tail);
  EXPECT_EQ(p.models[0].checkpoint, d_ + "/hf");
  EXPECT_EQ(p.models[0].checkpoint_step, -1);
  EXPECT_TRUE(sweep::plan_to_json(p)["models"][0]["checkpoint_step"].is_null());
  EXPECT_FALSE(sweep::plan_to_json(p)["models"][1].contains("checkpoint"));
  fs::create_directories(d_ + "/empty");
  EXPECT_EQ(plan_error([&] { json_plan(R"({"models": [{"name": "m", "path": "empty"})" + tail); }),
            f + ": models[0].path: " + d_ + "/empty: no complete checkpoint (checkpoints/step-*/state.json) and no "
                "model.safetensors (expected a model directory, a pretrain run or \"random\")");
}

TEST(SweepPlanDiff, AResolvedCheckpointThatMovedIsAChange) {
  const nlohmann::json before = R"({"models": [{"name": "a", "path": "/r", "group": ""}]})"_json;  // plan.json of before
  nlohmann::json now = R"({"models": [{"name": "a", "path": "/r", "group": "",
                            "checkpoint": "/r/checkpoints/step-00000004", "checkpoint_step": 4}]})"_json;
  EXPECT_TRUE(sweep::compare_plans(before, now).changes.empty());
  EXPECT_TRUE(sweep::compare_plans(now, now).changes.empty());
  nlohmann::json later = now;
  later["models"][0]["checkpoint"] = "/r/checkpoints/step-00000006";
  later["models"][0]["checkpoint_step"] = 6;
  const auto d = sweep::compare_plans(now, later);
  ASSERT_EQ(d.changes.size(), 1u);
  EXPECT_EQ(d.changed_models, std::set<std::string>{"a"});
}

TEST(SweepPlanDiff, OnlyAddedJobsAreCompatible) {
  nlohmann::json old_plan = R"({"models": [{"name": "a", "path": "/a", "group": ""}],
      "tasks": [{"name": "t", "dir": "/t", "test": "/t/test.tsv", "shot_train": {"10": "/t/10/train.tsv"}}],
      "shots": [10], "seeds": [1, 2], "finetune": {"lr": 0}, "device": "cpu"})"_json;
  nlohmann::json grown = old_plan;
  grown["models"].push_back({{"name", "b"}, {"path", "/b"}, {"group", ""}});
  grown["shots"].push_back(50);
  grown["tasks"][0]["shot_train"]["50"] = "/t/50/train.tsv";
  grown["seeds"].push_back(3);
  grown["models"][0]["group"] = "LOGO";  // presentation only
  EXPECT_TRUE(sweep::compare_plans(old_plan, grown).changes.empty());

  nlohmann::json moved = old_plan;
  moved["models"][0]["path"] = "/elsewhere";
  moved["seeds"] = {1};
  const auto d = sweep::compare_plans(old_plan, moved);
  ASSERT_EQ(d.changes.size(), 2u);
  EXPECT_EQ(d.changes[1], "seeds 2 was removed from seeds");
  EXPECT_EQ(d.changed_models, std::set<std::string>{"a"});
  EXPECT_FALSE(d.settings_changed);

  nlohmann::json tuned = old_plan;
  tuned["finetune"]["lr"] = 0.01;
  EXPECT_TRUE(sweep::compare_plans(old_plan, tuned).settings_changed);
}

// Issue 31: a sweep's plan records the SHA-256 of what its jobs read, and its own plan.json
// is a plan it reads back (it was refused: "format: unknown key"), pinning those inputs.
TEST_F(SweepPlan, PlanJsonRoundTripsAndPinsItsInputs) {
  fs::create_directories(d_ + "/hf");
  test::write_file(d_ + "/hf/model.safetensors", "weights");
  auto p = json_plan(R"({"models": [{"name": "m", "path": "hf"}, {"name": "Tiny", "path": "random", "config": "tiny.json"}],
                        "tasks": [{"name": "plain", "train": "train.csv", "test": "test.csv"}, {"name": "prom", "dir": "prom"}],
                        "shots": [10, 50], "seeds": 2})");
  const nlohmann::json j = sweep::plan_to_json(p);
  EXPECT_EQ(j["models"][0]["weights_sha256"], io::sha256_hex("weights"));
  EXPECT_EQ(j["models"][1]["config_sha256"], io::sha256_hex("{}\n"));
  EXPECT_EQ(j["tasks"][0]["test_sha256"], io::sha256_hex("sequence,label\nACGTACGT,0\n"));
  EXPECT_EQ(j["tasks"][0]["train_sha256"], io::sha256_hex("sequence,label\nACGTACGT,0\n"));
  EXPECT_EQ(j["tasks"][1]["shot_train_sha256"]["10"], io::sha256_hex("x\n"));
  for (const auto& job : sweep::expand_jobs(p, "/out")) {
    EXPECT_EQ(job.test_sha256.size(), 64u);
    EXPECT_EQ(job.train_sha256.size(), 64u);
    EXPECT_EQ(job.model_sha256.size(), job.model == "m" || job.model == "Tiny" ? 64u : 0u);
  }
  // Written as the sweep writes it, read back: the same plan.
  test::write_file(d_ + "/own.json", j.dump(2));
  nlohmann::json again = sweep::plan_to_json(sweep::load_plan(d_ + "/own.json"));
  nlohmann::json want = j;
  again.erase("source"), want.erase("source");
  EXPECT_EQ(again, want);
  // An input that changed since the plan.json was written is named, with the field.
  test::write_file(d_ + "/test.csv", "sequence,label\nACGTACGT,1\n");
  const std::string e = plan_error([&] { sweep::load_plan(d_ + "/own.json"); });
  EXPECT_NE(e.find(d_ + "/own.json: tasks[0].test_sha256: the plan records"), std::string::npos) << e;
  EXPECT_NE(e.find("the input changed since the plan was written"), std::string::npos) << e;
  // compare_plans says what changed, by input.
  const auto d = sweep::compare_plans(j, sweep::plan_to_json(json_plan(test::read_file(d_ + "/p.json"))));
  ASSERT_EQ(d.changes.size(), 1u);
  EXPECT_NE(d.changes[0].find("task \"plain\" changed: the content of the test table changed (SHA-256"),
            std::string::npos) << d.changes[0];
  EXPECT_EQ(d.changed_tasks, std::set<std::string>{"plain"});
  // A plan.json of an earlier genemask (no digests) cannot be checked: a change, said so.
  nlohmann::json old = j;
  old["tasks"][0].erase("test_sha256");
  const auto d2 = sweep::compare_plans(old, j);
  ASSERT_EQ(d2.changes.size(), 1u);
  EXPECT_NE(d2.changes[0].find("recorded no SHA-256 of the test table"), std::string::npos) << d2.changes[0];
}

// Issue 33: models as pretraining replicates of an arm; the jobs and the normalised plan carry
// them, and the report groups by them (a presentation change, not a plan change).
TEST_F(SweepPlan, ReplicatesOfAnArm) {
  const std::string head = R"({"models": [)";
  const std::string tail = R"(], "tasks": [{"name": "t", "train": "train.csv", "test": "test.csv"}], "shots": [10], "seeds": 2})";
  auto p = json_plan(head + R"({"name": "G s1", "path": "random", "arm": "GeneMask", "replicate": 1},
                                {"name": "G s2", "path": "random", "arm": "GeneMask", "replicate": 2},
                                {"name": "R", "path": "random"})" + tail);
  EXPECT_EQ(p.models[1].arm, "GeneMask");
  EXPECT_EQ(p.models[1].replicate, 2);
  EXPECT_EQ(p.models[2].replicate, -1);
  for (const auto& j : sweep::expand_jobs(p, "/out"))
    EXPECT_EQ(j.arm, j.model == "R" ? "" : "GeneMask") << j.key;
  const auto j = sweep::plan_to_json(p);
  EXPECT_EQ(j["models"][0]["replicate"], 1);
  EXPECT_FALSE(j["models"][2].contains("arm"));
  nlohmann::json renamed = j;
  renamed["models"][0]["arm"] = "GM";  // how the report groups models: no job changes
  EXPECT_TRUE(sweep::compare_plans(j, renamed).changes.empty());
  const std::string f = d_ + "/p.json";
  EXPECT_EQ(plan_error([&] { json_plan(head + R"({"name": "a", "path": "random", "arm": "G"})" + tail); }),
            f + ": models[0].arm: \"arm\" and \"replicate\" go together: a replicate is one pretraining run (e.g. its "
                "seed) of an arm (the strategy)");
  EXPECT_EQ(plan_error([&] {
              json_plan(head + R"({"name": "a", "path": "random", "arm": "G", "replicate": 1},
                                  {"name": "b", "path": "random", "arm": "G", "replicate": 1})" + tail);
            }),
            f + ": models[1].replicate: 1 of arm \"G\" is also models[0] (\"a\"): each replicate of an arm is one model");
  EXPECT_EQ(plan_error([&] {
              json_plan(head + R"({"name": "G", "path": "random"}, {"name": "b", "path": "random", "arm": "G", "replicate": 1})" + tail);
            }),
            f + ": models[1].arm: \"G\" is also the name of models[0]: name an arm apart from the models");
  EXPECT_NE(plan_error([&] { json_plan(head + R"({"name": "a", "path": "random", "arm": "G", "replicate": -1})" + tail); })
                .find("models[0].replicate: -1 is not an integer >= 0"),
            std::string::npos);
}

}  // namespace

// Issue 21: a plan nested 100,000 deep crashed (SIGSEGV) formatting its error (JSON) or in
// yaml-cpp's recursive parser (YAML); now it is refused with the file and line.
TEST_F(SweepPlan, NestingIsBounded) {
  const std::string deep(100000, '[');
  const std::string fj = d_ + "/p.json", fy = d_ + "/p.yaml";
  EXPECT_EQ(plan_error([&] { json_plan("{\"models\":\n" + deep + std::string(100000, ']') + "}"); }),
            fj + ":2: arrays and objects nested more than 64 levels deep (byte 75): not a file genemask reads (YAML "
                 "plans need a .yaml or .yml name)");
  // A value nested less deep than the limit is quoted in the error, cut short.
  std::string e = plan_error([&] { json_plan("{\"models\": " + std::string(60, '[') + std::string(60, ']') + "}"); });
  EXPECT_EQ(e, fj + ": models[0]: " + std::string(59, '[') + std::string(21, ']') +
                   "... is not a mapping (expected keys: name, path, config, group, arm, replicate)");
  // YAML: flow style, block style ("- - - ..." on one line), and aliases expanded.
  e = plan_error([&] { yaml_plan("models:\n  - " + deep + "\n"); });
  EXPECT_EQ(e, fy + ":2: the plan nests lists and mappings more than 64 levels deep; a plan needs a few levels") << e.substr(0, 300);
  std::string block = "models:\n";
  for (int i = 0; i < 100000; ++i) block += "- ";
  e = plan_error([&] { yaml_plan(block + "x\n"); });
  EXPECT_NE(e.find(fy + ":2: the plan nests lists and mappings more than 64 levels deep"), std::string::npos)
      << e.substr(0, 300);
  // 40 levels, named 40 times deeper by an alias: deep only once expanded.
  const std::string forty = std::string(40, '[') + "x" + std::string(40, ']');
  e = plan_error([&] { yaml_plan("a: &a " + forty + "\nmodels: " + std::string(40, '[') + "*a" + std::string(40, ']') + "\n"); });
  EXPECT_NE(e.find("more than 64 levels deep once its YAML aliases are expanded"), std::string::npos) << e.substr(0, 300);
  // At the limit, the nesting itself is no error (the plan is wrong for other reasons).
  e = plan_error([&] { yaml_plan("models: " + std::string(63, '[') + "x" + std::string(63, ']') + "\n"); });
  EXPECT_EQ(e.find("levels deep"), std::string::npos) << e.substr(0, 300);
}

TEST_F(SweepPlan, AnAliasInsideWhatItNamesIsAnError) {
  const std::string e = plan_error([&] { yaml_plan("models: &a [*a]\n"); });
  // yaml-cpp builds a cycle; expanding it stops at the depth bound, not the stack's end.
  EXPECT_EQ(e, d_ + "/p.yaml:1: the plan nests lists and mappings more than 64 levels deep once its YAML aliases are "
                    "expanded (an alias inside what it names?); a plan needs a few levels");
}
