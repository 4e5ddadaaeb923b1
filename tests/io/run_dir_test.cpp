#include "io/run_dir.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>

#include "io/dir_lock.hpp"
#include "io/error.hpp"
#include "test_util.hpp"

using namespace genemask;
using genemask::test::TempDir;
namespace fs = std::filesystem;

namespace {
/// RUN/checkpoints/NAME with a state.json (a complete checkpoint) or without.
void make_checkpoint(const std::string& run, const std::string& name, bool complete = true,
                     const std::string& state = "{}") {
  fs::create_directories(run + "/checkpoints/" + name);
  test::write_file(run + "/checkpoints/" + name + "/model.safetensors", "x");
  if (complete) test::write_file(run + "/checkpoints/" + name + "/state.json", state);
}
}  // namespace

// Regression (issue 21): a stray checkpoints/step-latest or a step of 20 digits made every
// command that reads a run fail with the bare text "stoll".
TEST(RunDir, CheckpointNamesAreStepsThatFit) {
  EXPECT_EQ(io::checkpoint_step_of("step-00000020"), 20);
  EXPECT_EQ(io::checkpoint_step_of("step-0"), 0);
  EXPECT_EQ(io::checkpoint_step_of("step-9223372036854775807"), INT64_MAX);
  for (const char* not_a_step : {"step-latest", "step-99999999999999999999", "step-9223372036854775808", "step-",
                                 "step--1", "step-+1", "step-0020.tmp", "step-00000020 ", "Step-1", "step1", "",
                                 "step-12a", "step-00000000000000000001"})
    EXPECT_FALSE(io::checkpoint_step_of(not_a_step).has_value()) << not_a_step;
}

TEST(RunDir, StrayDirectoriesAreIgnored) {
  TempDir tmp;
  const std::string run = tmp.file("run");
  make_checkpoint(run, "step-00000010");
  make_checkpoint(run, "step-00000020");
  make_checkpoint(run, "step-00000030", /*complete=*/false);  // still being written
  make_checkpoint(run, "step-00000040.tmp");
  make_checkpoint(run, "step-latest");
  make_checkpoint(run, "step-99999999999999999999");
  test::write_file(run + "/checkpoints/step-00000050", "a file, not a directory");
  EXPECT_EQ(io::checkpoint_steps(run), (std::vector<int64_t>{10, 20}));
  const auto r = io::resolve_model(run);
  EXPECT_EQ(r.dir, io::checkpoint_dir(run, 20));
  EXPECT_EQ(r.step, 20);
  EXPECT_EQ(r.run, run);
  EXPECT_EQ(r.run_steps, -1);  // state.json of before format 2: no "steps"
}

TEST(RunDir, ResolveRunCheckpointAndModelDirectory) {
  TempDir tmp;
  const std::string run = tmp.file("run");
  make_checkpoint(run, "step-00000004", true, R"({"step": 4, "steps": 8})");
  // A run: its newest complete checkpoint, with the --steps it was started for.
  auto r = io::resolve_model(run);
  EXPECT_EQ(r.step, 4);
  EXPECT_EQ(r.run_steps, 8);
  // A checkpoint named explicitly: itself, its step from its name.
  r = io::resolve_model(run + "/checkpoints/step-00000004/");
  EXPECT_EQ(r.dir, run + "/checkpoints/step-00000004/");
  EXPECT_EQ(r.step, 4);
  EXPECT_EQ(r.run_steps, 8);
  EXPECT_EQ(fs::path(r.run).lexically_normal(), fs::path(run).lexically_normal());
  // A model directory (export-hf): no step.
  fs::create_directories(tmp.file("hf"));
  test::write_file(tmp.file("hf/model.safetensors"), "x");
  r = io::resolve_model(tmp.file("hf"));
  EXPECT_EQ(r.dir, tmp.file("hf"));
  EXPECT_EQ(r.step, -1);
  EXPECT_EQ(r.run, "");
  // Neither: one InputError naming the path.
  fs::create_directories(tmp.file("empty/checkpoints/step-latest"));
  try {
    io::resolve_model(tmp.file("empty"));
    FAIL() << "no error";
  } catch (const io::InputError& e) {
    EXPECT_NE(std::string(e.what()).find(tmp.file("empty") + ": no complete checkpoint"), std::string::npos) << e.what();
  }
  // A sharded Hugging Face checkpoint: named as such, not "no model.safetensors".
  fs::create_directories(tmp.file("sharded"));
  test::write_file(tmp.file("sharded/model.safetensors.index.json"), "{}");
  test::write_file(tmp.file("sharded/model-00001-of-00002.safetensors"), "x");
  EXPECT_NE(test::error_of([&] { io::resolve_model(tmp.file("sharded")); })
                .find(tmp.file("sharded") + ": is a sharded checkpoint (model.safetensors.index.json), which genemask "
                                            "does not read"),
            std::string::npos);
}

// Regression: a format-2 state.json with its "files" deleted turned every digest check off:
// export-hf published another step's weights as this step's.
TEST(RunDir, AFormatTwoCheckpointWithoutDigestsIsRefused) {
  TempDir tmp;
  const std::string run = tmp.file("run");
  make_checkpoint(run, "step-00000004", true, R"({"format_version": 2, "step": 4, "steps": 4})");
  EXPECT_EQ(test::error_of([&] { io::resolve_model(run); }),
            run + "/checkpoints/step-00000004/state.json: is format version 2 or later but has no \"files\" (the "
                  "SHA-256 of the checkpoint's files): the checkpoint is damaged or its state.json was edited; use "
                  "another checkpoint");
  // With them, the weights are checked; format 1 (no version) recorded none and reads as before.
  test::write_file(run + "/checkpoints/step-00000004/state.json",
                   R"({"format_version": 2, "step": 4, "steps": 4, "files": {"model.safetensors": "00"}})");
  EXPECT_NE(test::error_of([&] { io::resolve_model(run); }).find("model.safetensors: is not the file its checkpoint's"),
            std::string::npos);
  test::write_file(run + "/checkpoints/step-00000004/state.json", R"({"step": 4, "steps": 4})");
  EXPECT_EQ(io::resolve_model(run).step, 4);
}

TEST(RunDir, LockHolderNamesALiveLockOnly) {
  TempDir tmp;
  EXPECT_EQ(io::lock_holder(tmp.path()), "");           // no lock file
  EXPECT_FALSE(fs::exists(tmp.file(".genemask.lock")));  // and none made by asking
  {
    io::DirLock lock(tmp.path(), "genemask run");
    // flock is per open file: this process's second descriptor sees the lock as another's.
    EXPECT_NE(io::lock_holder(tmp.path()).find("pid " + std::to_string(::getpid())), std::string::npos);
  }
  EXPECT_EQ(io::lock_holder(tmp.path()), "");  // released: the file stays, unlocked
}

// A finished run continued with --resume --steps M and killed before its next checkpoint:
// the checkpoint's state.json still records the old --steps; the run's metrics.jsonl logs
// steps past it. Taken for the run's final model before.
TEST(RunDir, StepsLoggedPastTheNewestCheckpointMarkARunUnfinished) {
  TempDir tmp;
  const std::string run = tmp.file("run");
  make_checkpoint(run, "step-00000004", true, R"({"steps": 4})");
  const auto reason = [&](const std::string& metrics) {
    test::write_file(run + "/metrics.jsonl", metrics);
    const auto r = io::resolve_model(run);
    return io::unfinished_run_reason(r, run, "OTHER");
  };
  const std::string done = "{\"loss\":1.0,\"step\":3}\n{\"eval_loss\":1.0,\"step\":4}\n{\"loss\":1.0,\"step\":4}\n";
  EXPECT_EQ(reason(done), "");
  EXPECT_EQ(reason(""), "");
  EXPECT_EQ(reason(done + "{\"loss\":1.0,\"step\":5}\n"),
            "the run \"" + run + "\" has not finished: its metrics.jsonl logs step 5, past its newest checkpoint (step "
            "4): it was continued (pretrain --resume with more --steps) and stopped before its next checkpoint; finish "
            "it with `genemask pretrain ... --resume`, or OTHER");
  // A last line torn by the kill counts by its step when the line holds it whole.
  EXPECT_NE(reason(done + "{\"grad_norm\":0.5,\"loss\":1.0,\"step\":6,\"tok").find("logs step 6"), std::string::npos);
  EXPECT_EQ(reason(done + "{\"grad_norm\":0.5,\"loss\":1.0,\"step\":6"), "");  // its digits may be cut: not read
  EXPECT_EQ(reason(done + "{\"grad_norm\":0.5,\"lo"), "");
  // A long file: only its end is read, and a line past the newest checkpoint is found there.
  std::string many;
  for (int i = 0; i < 40000; ++i) many += "{\"loss\":1.0,\"step\":1}\n";
  EXPECT_NE(reason(many + "{\"loss\":1.0,\"step\":9}\n").find("logs step 9"), std::string::npos);
  EXPECT_EQ(reason(many + done), "");
  // A run of a genemask that writes markers (the readers lock in checkpoints/) copied without
  // its marker (`cp -r RUN/* DEST`): the --steps of its latest start are not known, so a start
  // stopped before its next checkpoint (its log cut) read as a finished run.
  test::write_file(run + "/checkpoints/.genemask-readers.lock", "");
  EXPECT_EQ(reason(done), "the run \"" + run + "\" has no .genemask.json (copied without its hidden files, e.g. `cp -r "
                          "RUN/* DEST`?): the --steps of its latest start are recorded there, so whether it stopped "
                          "before its next checkpoint cannot be told, and its newest checkpoint (step 4) is not known "
                          "to be its final model; copy the run with its hidden files (cp -a RUN DEST), or OTHER");
  test::write_file(run + "/.genemask.json", R"({"format": "genemask-output", "command": "pretrain", "complete": true, )"
                                            R"("entries": ["checkpoints", "metrics.jsonl"], "steps": 4})");
  EXPECT_EQ(reason(done), "");
  // A checkpoint named explicitly is that step, whatever the run's marker says.
  fs::remove(run + "/.genemask.json");
  EXPECT_EQ(io::unfinished_run_reason(io::resolve_model(run + "/checkpoints/step-00000004"),
                                      run + "/checkpoints/step-00000004", "OTHER"),
            "");
}
