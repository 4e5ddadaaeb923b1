// genemask sweep: few-shot evaluations of models x tasks x shots x seeds over MPI ranks.
// The manager/worker driver is hpc/sweep; this file supplies the job runner: one
// fine-tuning run through libgenemask_model.so (or, for tests and benchmarks, a simulation).
#include <dirent.h>
#include <mpi.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <regex>

#include "common.hpp"
#include "hpc/mpi.hpp"
#include "hpc/sweep.hpp"
#include "model/finetune.hpp"
#include "model_plugin.hpp"

namespace genemask::cli {
namespace {

struct SweepCli {
  hpc::SweepOptions o;
  bool strict = false, verbose = false, quiet = false;
  double simulate_s = -1;  // < 0: real fine-tuning
  std::vector<std::string> failures;
};

/// GPUs a worker may use: CUDA_VISIBLE_DEVICES when set, else the /dev/nvidiaN devices
/// (the CLI is Torch-free; the plugin maps the ordinal through CUDA_VISIBLE_DEVICES).
int visible_gpus() {
  if (const char* v = std::getenv("CUDA_VISIBLE_DEVICES")) {
    std::string s = v;
    if (s.empty()) return 0;
    return static_cast<int>(std::count(s.begin(), s.end(), ',')) + 1;
  }
  int n = 0;
  if (DIR* d = ::opendir("/dev")) {
    static const std::regex re("nvidia[0-9]+");
    while (const dirent* e = ::readdir(d))
      if (std::regex_match(e->d_name, re)) ++n;
    ::closedir(d);
  }
  return n;
}

hpc::JobRunner finetune_runner(const Context& ctx, bool verbose) {
  // Resolved before the sweep starts, so a missing library stops the run instead of
  // failing every job.
  auto fn = GENEMASK_MODEL_ENTRY(genemask_model_finetune);
  return [fn, &ctx, verbose](const hpc::Job& job, const hpc::WorkerSetup& w) {
    model::FinetuneOptions f;
    f.model = job.model_path;
    f.config = job.config.empty() ? f.config : job.config;
    f.train = job.train;
    f.test = job.test;
    f.out = job.out;
    f.shots = job.sample_shots;
    f.file_shots = job.sample_shots == 0 ? job.shots : 0;  // a fixed shot file is recorded as job.shots-shot
    f.seed = job.seed;
    f.lr = job.finetune.lr;
    f.epochs = job.finetune.epochs;
    f.batch = job.finetune.batch;
    f.dropout = job.finetune.dropout;
    f.warmup_fraction = job.finetune.warmup_fraction;
    f.weight_decay = job.finetune.weight_decay;
    f.precision = job.finetune.precision;
    f.threads = w.threads;
    f.device = w.device;
    f.device_index = w.device_index;
    f.command_line = ctx.command_line + "  # job " + job.key;
    const std::function<void(const std::string&)> log = [&](const std::string& line) {
      if (verbose) std::cerr << "[sweep rank " << w.rank << " " << job.key << "] " << line << std::endl;
    };
    // The job's model and tables are inputs too: its run directory must not replace them.
    const io::InputsInUse inputs({{"model", job.model_path}, {"train", job.train}, {"test", job.test}});
    model::FinetuneSummary s;
    fn(&f, &log, &s);
    return s.metrics;
  };
}

void run_sweep_command(SweepCli& c, const Context& ctx) {
  std::vector<hpc::FailureRule> rules;
  for (const auto& f : c.failures) rules.push_back(hpc::parse_failure_rule(f));
  c.o.gpu_count = visible_gpus;
  const bool runs_jobs = ctx.rank != 0 || ctx.size == 1;
  hpc::JobRunner runner;
  c.o.simulated = c.simulate_s >= 0;
  if (c.simulate_s >= 0)
    runner = hpc::simulated_runner(c.simulate_s);
  else if (runs_jobs)
    runner = finetune_runner(ctx, c.verbose);  // the manager never loads Torch
  if (!rules.empty()) runner = hpc::with_injected_failures(runner, rules);
  if (ctx.rank != 0 || c.quiet) c.o.progress_interval_s = 0;

  const hpc::SweepSummary s = hpc::run_sweep(c.o, runner, MPI_COMM_WORLD);
  // Rank 0 threw the plan/setup error and aborts the job; waiting here (rank 0 never comes)
  // keeps this rank from finalizing MPI during the abort, which can leave mpiexec hanging.
  if (s.setup_failed) {
    hpc::barrier(MPI_COMM_WORLD);
    std::exit(1);
  }
  print_summary(ctx, {{"command", "sweep"},
                      {"plan", c.o.plan},
                      {"out", c.o.out},
                      {"jobs_total", s.jobs_total},
                      {"jobs_skipped", s.jobs_skipped},
                      {"ok", s.ok},
                      {"failed", s.failed},
                      {"retried", s.retried},
                      {"remaining", s.remaining},
                      {"workers", s.workers},
                      {"seconds", s.seconds},
                      {"utilisation", {{"per_worker", s.utilisation}, {"mean", s.mean_utilisation}}},
                      {"overhead_ms_per_job", s.overhead_ms_per_job},
                      {"write_ms_per_job", s.write_ms_per_job},
                      {"interrupted", s.interrupted},
                      {"disk_error", s.disk_error.empty() ? nlohmann::json(nullptr) : nlohmann::json(s.disk_error)},
                      {"stale_records", s.stale_records},
                      {"repaired_bytes", s.repaired_bytes},
                      {"simulated", c.simulate_s >= 0}});
  // A job that found the disk full (or failing) stopped the sweep: an error, whatever --strict.
  if (hpc::any_rank(ctx.rank == 0 && !s.disk_error.empty(), MPI_COMM_WORLD)) {
    if (ctx.rank == 0)
      std::cerr << "genemask: error: sweep stopped: " << s.disk_error << "; no new jobs were handed out and "
                << s.remaining << " job(s) did not run (the ones the disk stopped are not recorded as failed): free "
                << "space (or fix the disk) and run the same command again to continue" << std::endl;
    std::cout.flush();
    if (hpc::mpi_active()) MPI_Finalize();
    std::exit(1);
  }
  if (ctx.rank == 0 && s.failed > 0 && !c.strict && s.ok + s.jobs_skipped > 0)
    std::cerr << "genemask: warning: " << s.failed << " job(s) failed; the error of each is in " << c.o.out
              << "/results.jsonl (report leaves them out and says so; --strict makes this an error)" << std::endl;
  // Stopped by a signal with jobs left, or --strict with failed or unfinished jobs: every rank
  // exits with kExitStopped (without MPI_Abort, which would also kill the summary's reader
  // with a scary banner).
  const bool stopped = ctx.rank == 0 && s.interrupted && s.remaining > 0;
  const bool bad = ctx.rank == 0 && c.strict && (s.failed > 0 || s.remaining > 0);
  // Every job failed (none ok, now or in an earlier run): nothing to report, so not a
  // success even without --strict (a setup problem such as an unloadable model).
  const bool all_failed = ctx.rank == 0 && s.failed > 0 && s.ok == 0 && s.jobs_skipped == 0;
  if (hpc::any_rank(all_failed && !stopped && !bad, MPI_COMM_WORLD)) {
    if (ctx.rank == 0)
      std::cerr << "genemask: error: all " << s.failed << " job(s) failed; the error of each is in " << c.o.out
                << "/results.jsonl" << std::endl;
    std::cout.flush();
    if (hpc::mpi_active()) MPI_Finalize();
    std::exit(1);
  }
  if (hpc::any_rank(stopped || bad, MPI_COMM_WORLD)) {
    if (ctx.rank == 0 && stopped)
      std::cerr << "genemask: sweep stopped by a signal with " << s.remaining
                << " job(s) not run; run the same command again to continue" << std::endl;
    else if (ctx.rank == 0)
      std::cerr << "genemask: error: " << s.failed << " job(s) failed and " << s.remaining
                << " did not run (--strict); see " << c.o.out << "/results.jsonl" << std::endl;
    std::cout.flush();
    if (hpc::mpi_active()) MPI_Finalize();
    std::exit(kExitStopped);
  }
}

}  // namespace

void register_sweep(CLI::App& app, Context& ctx) {
  auto c = std::make_shared<SweepCli>();
  auto* sub = app.add_subcommand("sweep", "Few-shot evaluation of models x tasks x shots x seeds (MPI manager/worker)");
  sub->add_option("--plan", c->o.plan, "plan (JSON, or YAML by .yaml/.yml name); see docs/sweep.md")
      ->required()
      ->check(existing_file());
  sub->add_option("--out", c->o.out, "sweep directory: plan.json, results.jsonl, runs/<job>/")->required();
  sub->add_flag("--force", c->o.force,
                "run although the plan changed incompatibly; the affected old records move to results.stale.jsonl");
  sub->add_flag("--strict", c->strict, "exit non-zero (3) when a job failed or was not run");
  // --progress-interval and --quiet as in every other command; --progress-every is the older
  // name, and 0 (none) stays accepted for it.
  sub->add_option("--progress-interval,--progress-every", c->o.progress_interval_s,
                  "seconds between progress lines on stderr (0 or --quiet: none)")
      ->capture_default_str()
      ->check(non_negative());
  sub->add_flag("--quiet", c->quiet, "no progress lines");
  sub->add_flag("--verbose", c->verbose, "show the fine-tuning log lines of every job");
  sub->add_option("--simulate", c->simulate_s,
                  "testing/benchmarks: no fine-tuning; a job sleeps SECONDS x shots / 1000 and returns "
                  "pseudo-metrics from a hash of its key")
      ->group("");
  sub->add_option("--inject-failure", c->failures,
                  "testing: GLOB:K or GLOB:always; jobs whose key matches fail their first K attempts (or all)")
      ->group("");
  sub->footer("Rank 0 hands jobs to ranks 1..N-1, 1000-shot jobs first; with one rank it runs them itself. "
              "A restarted sweep skips the jobs results.jsonl has as ok; a failed job is retried `retries` times. "
              "SIGTERM/SIGINT/SIGUSR1: no new jobs, the running ones are recorded, then exit (status 3 when jobs are left).");
  sub->callback([c, &ctx] {
    ctx.inputs = {{"--plan", c->o.plan}};
    ctx.outputs = {{"--out", c->o.out, io::OutputKind::directory}};
    ctx.run = [c, &ctx] { run_sweep_command(*c, ctx); };
  });
}

}  // namespace genemask::cli
