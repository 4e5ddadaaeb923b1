#pragma once
// The few-shot sweep driver. Rank 0 (the manager) expands the plan to jobs, skips the
// ones DIR/results.jsonl already holds as ok, and hands the rest out one at a time to
// ranks 1..R-1 (the workers), long jobs first; with one rank, rank 0 runs the jobs itself.
// Every finished job becomes one line of DIR/results.jsonl (one write(2) + fsync on an
// O_APPEND descriptor, rank 0 only), so a kill at any moment loses at most the jobs in flight.
// Torch-free: the caller supplies the JobRunner (the CLI's runs libgenemask_model.so).
#include <mpi.h>

#include <functional>
#include <string>
#include <vector>

#include "genemask/eval/plan.hpp"
#include "genemask/eval/results.hpp"

namespace genemask::hpc {

using sweep::Job;
using sweep::Plan;

/// What a worker was given: its threads and, for device cuda, its GPU ordinal.
struct WorkerSetup {
  int rank = 0;
  int threads = 1;
  std::string device = "cpu";
  int device_index = 0;
};

/// Runs one job on a worker and returns its test metrics; throws to report a failure
/// (the sweep records the message and retries the job on any worker).
using JobRunner = std::function<results::RunMetrics(const Job&, const WorkerSetup&)>;

/// A finished attempt, sent worker -> manager.
struct JobResult {
  std::string key;
  bool ok = false;
  results::RunMetrics metrics;
  double seconds = 0;
  std::string host, error;
  std::string device;  // "cpu" or "cuda:<ordinal>"
  int rank = 0;
  int stop_signal = 0;    // the worker got SIGTERM/SIGINT/SIGUSR1: the whole sweep stops
  bool declined = false;  // not run: the job came after the worker's stop signal
  bool disk_error = false;  // failed writing its output to a full or failing disk (io::WriteError): the sweep stops
  // SHA-256 of what the worker read (the tables, the weights or a random model's config
  // file; "" for none), checked against the job's before it ran.
  std::string train_sha256, test_sha256, model_sha256;

  template <class A>
  void serialize(A& ar, const unsigned int version) {
    ar & key & ok;
    metrics.serialize(ar, version);
    ar & seconds & host & error & device & rank & stop_signal & declined;
    ar & train_sha256 & test_sha256 & model_sha256 & disk_error;
  }
};

struct SweepOptions {
  std::string plan;    // plan file (read on rank 0 only)
  std::string out;     // DIR
  bool force = false;  // run although the plan changed incompatibly (stale records move aside)
  bool simulated = false;  // the runner makes pseudo-metrics (--simulate): its records say so
  double progress_interval_s = 5;  // rank-0 progress lines on stderr; <= 0: none
  std::function<int()> gpu_count;  // GPUs visible to a worker (device cuda); null: 1
};

struct SweepSummary {
  uint64_t jobs_total = 0, jobs_skipped = 0;  // skipped: ok in results.jsonl before this run
  uint64_t ok = 0, failed = 0, retried = 0;   // of the jobs run now
  uint64_t remaining = 0;                     // neither skipped nor finished (interrupted)
  uint64_t stale_records = 0;                 // moved to results.stale.jsonl by --force
  uint64_t repaired_bytes = 0;                // torn final line removed from results.jsonl
  int workers = 0;
  double seconds = 0;
  std::vector<double> utilisation;            // per worker: busy seconds / dispatch wall seconds
  double mean_utilisation = 0;
  double overhead_ms_per_job = 0;  // manager: result arrived -> next job sent
  double write_ms_per_job = 0;     // manager: appending + fsync of the result line
  bool interrupted = false;        // SIGTERM/SIGINT: no new jobs were handed out
  /// A job could not write its output to a full or failing disk: no new jobs were handed out,
  /// and the jobs so failed are not recorded (the next run does them). Its error, or "".
  std::string disk_error;
  bool setup_failed = false;       // ranks > 0: rank 0 threw the plan/setup error
};

/// Collective. Runs the sweep of `o.plan` into `o.out`. A plan or setup error is thrown on
/// rank 0; the other ranks return with setup_failed (and must not call collectives).
/// SIGTERM/SIGINT make the manager stop handing out jobs; results still coming back are written.
SweepSummary run_sweep(const SweepOptions& o, const JobRunner& runner, MPI_Comm comm);

// ---- testing and benchmarks ---------------------------------------------------------

/// A stand-in for fine-tuning: sleeps seconds_per_1000_shots * shots / 1000, writes
/// out/metrics.json, and returns pseudo-metrics that depend only on the job key.
JobRunner simulated_runner(double seconds_per_1000_shots);
results::RunMetrics simulated_metrics(const std::string& key);

/// "GLOB:K" (jobs whose key matches the shell pattern GLOB fail their first K attempts)
/// or "GLOB:always".
struct FailureRule {
  std::string pattern;
  int attempts = 0;  // < 0: always
};
FailureRule parse_failure_rule(const std::string& spec);
/// Wraps a runner: matching jobs throw "injected failure (attempt N)" before running.
JobRunner with_injected_failures(JobRunner inner, std::vector<FailureRule> rules);

// ---- results.jsonl (genemask/eval/results.hpp) ------------------------------------------

/// The record of one job's final attempt, as the sweep writes it to results.jsonl.
results::Record result_record(const Job& job, const JobResult& r, int attempts, bool simulated = false);

}  // namespace genemask::hpc
