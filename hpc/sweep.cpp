// The sweep's manager/worker protocol. Messages are Boost.Serialization binary archives
// sent as MPI_BYTE, point-to-point on `comm`:
//   kTagReady  worker -> manager  empty: the worker has started and wants a job
//   kTagResult worker -> manager  JobResult of the job it was given; also asks for the next
//   kTagJob    manager -> worker  Job (with its attempt number)
//   kTagStop   manager -> worker  empty: no more jobs, leave the loop
// The manager answers every Ready/Result at once with a Job or a Stop, so a worker has at
// most one job and a failed job can always be retried on the worker that reported it.
// Nobody blocks in MPI_Recv: Open MPI's blocking receive busy-polls a core, and on a
// laptop `mpirun -np 2` the manager would steal the only spare core from the worker.
// Receivers poll MPI_Iprobe and sleep in between (50 us growing to 2 ms while idle).
#include "hpc/sweep.hpp"

#include <memory>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <boost/archive/binary_iarchive.hpp>
#include <boost/archive/binary_oarchive.hpp>
#include <boost/serialization/string.hpp>
#include <boost/serialization/vector.hpp>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <deque>
#include <filesystem>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <thread>
#include <tuple>

#include "hpc/mpi.hpp"
#include "io/atomic_file.hpp"
#include "io/dir_lock.hpp"
#include "io/error.hpp"
#include "io/output_guard.hpp"
#include "io/json.hpp"
#include "io/sha256.hpp"

namespace fs = std::filesystem;

namespace genemask::hpc {
namespace {

constexpr int kTagReady = 7101, kTagResult = 7102, kTagJob = 7103, kTagStop = 7104;
constexpr int kManager = 0;

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

volatile std::sig_atomic_t g_stop_signal = 0;
// Not extern "C": a C-linkage name is global across the shared libraries of the process
// (the trainer has a handler of its own), whatever namespace it is written in.
void on_sweep_stop_signal(int sig) { g_stop_signal = sig; }

/// SIGTERM/SIGINT/SIGUSR1 (Slurm's warning signal, which mpirun passes on to every rank) set
/// a flag for the duration of the sweep (on every rank: mpirun and Slurm signal all ranks,
/// and a worker should finish and return the job it has).
class StopSignals {
 public:
  StopSignals() {
    g_stop_signal = 0;
    struct sigaction sa {};
    sa.sa_handler = on_sweep_stop_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, &old_term_);
    sigaction(SIGINT, &sa, &old_int_);
    sigaction(SIGUSR1, &sa, &old_usr1_);
  }
  ~StopSignals() {
    sigaction(SIGTERM, &old_term_, nullptr);
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGUSR1, &old_usr1_, nullptr);
  }
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

 private:
  struct sigaction old_term_ {}, old_int_ {}, old_usr1_ {};
};

template <class T>
std::string pack(const T& v) {
  std::ostringstream os;
  {
    boost::archive::binary_oarchive oa(os);
    oa << v;
  }
  return os.str();
}
template <class T>
T unpack(const std::string& bytes) {
  std::istringstream is(bytes);
  boost::archive::binary_iarchive ia(is);
  T v;
  ia >> v;
  return v;
}

void send_bytes(const std::string& bytes, int dest, int tag, MPI_Comm comm) {
  GM_MPI_CHECK(MPI_Send(bytes.data(), checked_int(bytes.size(), "sweep message"), MPI_BYTE, dest, tag, comm));
}

struct Message {
  int source = 0, tag = 0;
  std::string bytes;
};

/// Waits for a message from `source` (or any), polling with short sleeps instead of a
/// spinning MPI_Recv.
Message receive(int source, MPI_Comm comm) {
  auto pause = std::chrono::microseconds(50);
  for (;;) {
    int flag = 0;
    MPI_Status st;
    GM_MPI_CHECK(MPI_Iprobe(source, MPI_ANY_TAG, comm, &flag, &st));
    if (flag) {
      int n = 0;
      GM_MPI_CHECK(MPI_Get_count(&st, MPI_BYTE, &n));
      Message m{st.MPI_SOURCE, st.MPI_TAG, std::string(static_cast<size_t>(n), '\0')};
      GM_MPI_CHECK(MPI_Recv(m.bytes.data(), n, MPI_BYTE, st.MPI_SOURCE, st.MPI_TAG, comm, MPI_STATUS_IGNORE));
      return m;
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(2000));
  }
}

/// SHA-256 of a file a job reads, computed once per version of it on this worker: the weights
/// of a model are read by many jobs. A version is the file's identity, size and times.
std::string cached_sha256(const std::string& path) {
  struct Entry {
    dev_t dev;
    ino_t ino;
    off_t size;
    timespec mtime, ctime;
    std::string sha256;
  };
  static std::map<std::string, Entry> cache;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    throw io::InputError(path, fmt::format("cannot read: {} (it was there when the sweep planned)", std::strerror(errno)));
  auto it = cache.find(path);
  if (it != cache.end() && it->second.dev == st.st_dev && it->second.ino == st.st_ino && it->second.size == st.st_size &&
      it->second.mtime.tv_sec == st.st_mtim.tv_sec && it->second.mtime.tv_nsec == st.st_mtim.tv_nsec &&
      it->second.ctime.tv_sec == st.st_ctim.tv_sec && it->second.ctime.tv_nsec == st.st_ctim.tv_nsec)
    return it->second.sha256;
  const std::string sha = io::sha256_file(path);
  cache[path] = Entry{st.st_dev, st.st_ino, st.st_size, st.st_mtim, st.st_ctim, sha};
  return sha;
}

/// The identity of what `job` reads now, into r; throws when it is not what the plan
/// recorded: results of one sweep never come from two versions of an input.
void check_job_inputs(const Job& job, JobResult& r) {
  const auto check = [&](const std::string& file, const std::string& planned, std::string& now, const char* what) {
    if (file.empty()) return;
    now = cached_sha256(file);
    if (!planned.empty() && now != planned)
      throw io::InputError(file, fmt::format("{} changed since the sweep planned it (SHA-256 {}... then, {}... now): "
                                             "this job's result would not be comparable with the others; run the "
                                             "sweep again (it refuses the changed plan; --force reruns the affected "
                                             "jobs)",
                                             what, planned.substr(0, 12), now.substr(0, 12)));
  };
  check(job.train, job.train_sha256, r.train_sha256, "the training table");
  check(job.test, job.test_sha256, r.test_sha256, "the test table");
  if (job.model_path == "random") {
    if (job.config.find(".json") != std::string::npos)
      check(job.config, job.model_sha256, r.model_sha256, "the model's config file");
  } else {
    const std::string st = job.model_path + "/model.safetensors";
    const std::string weights = fs::exists(st) ? st : job.model_path + "/pytorch_model.bin";
    check(weights, job.model_sha256, r.model_sha256, "the model's weights");
  }
}

/// Runs one attempt; a thrown exception is the job's failure, not the worker's.
JobResult run_job(const JobRunner& runner, const Job& job, const WorkerSetup& w, const std::string& host) {
  JobResult r;
  r.key = job.key;
  r.host = host;
  r.rank = w.rank;
  r.device = w.device == "cuda" ? "cuda:" + std::to_string(w.device_index) : w.device;
  const auto t0 = Clock::now();
  try {
    check_job_inputs(job, r);
    r.metrics = runner(job, w);
    r.ok = true;
  } catch (const io::WriteError& e) {
    r.error = e.what();
    r.disk_error = e.of_the_disk();
  } catch (const std::exception& e) {
    r.error = e.what();
  } catch (...) {
    r.error = "unknown exception";
  }
  r.seconds = since(t0);
  return r;
}

/// Appends one line per record with a single write(2) on an O_APPEND descriptor, then
/// fsync: after a crash the file holds whole lines plus at most one torn last line, which
/// the next run repairs.
class ResultsWriter {
 public:
  explicit ResultsWriter(const std::string& path) : file_(path, /*sync=*/true) {}
  void append(const nlohmann::json& record) { file_.append(io::json_text(record) + "\n"); }

 private:
  io::AppendFile file_;
};

/// What rank 0 prepares before any job runs.
struct Setup {
  std::vector<Job> jobs;      // still to run, in dispatch order
  uint64_t total = 0, skipped = 0, stale = 0, repaired = 0;
  int retries = 2, threads = 1, ranks_per_gpu = 1;
  std::string device = "cpu";
  std::string sweep_id;               // the sweep's id (DIR's marker), in every record
  std::shared_ptr<io::DirLock> lock;  // DIR is this sweep's until it ends
};

/// Whether `plan` is DIR/plan.json itself (the same file) as a sweep wrote it: in a sweep's
/// directory (its marker), in the normalised format.
bool is_own_plan(const std::string& plan, const std::string& plan_path, const std::string& dir) {
  struct stat a {}, b {};
  if (::stat(plan.c_str(), &a) != 0 || ::stat(plan_path.c_str(), &b) != 0 || a.st_dev != b.st_dev || a.st_ino != b.st_ino)
    return false;
  try {
    const auto marker = io::read_output_marker(dir);
    if (!marker || (*marker)["command"] != "sweep") return false;
  } catch (const std::exception&) {
    return false;
  }
  const io::JsonParse j = io::try_read_json_file(plan_path);
  return j.ok() && j.value.is_object() && j.value.value("format", "") == "genemask-sweep-plan";
}

/// Rank 0: plan, DIR/plan.json, results.jsonl (repair, skip ok jobs, --force). Throws.
Setup prepare(const SweepOptions& o) {
  const Plan plan = sweep::load_plan(o.plan);
  {  // The plan's models and tables are inputs too: DIR inside one of them is refused up front
    // (the jobs' own check refused each job, after DIR was made inside it).
    std::vector<io::NamedPath> inputs;
    for (const auto& m : plan.models) {
      if (m.path != "random") inputs.push_back({"the plan's model " + m.name, m.path});
      else if (fs::path(m.config).is_absolute()) inputs.push_back({"the plan's config of " + m.name, m.config});
    }
    for (const auto& t : plan.tasks)
      for (const std::string* p : {&t.dir, &t.train, &t.test})
        if (!p->empty()) inputs.push_back({"the plan's task " + t.name, *p});
    io::check_outputs(inputs, {{"--out", o.out, io::OutputKind::directory}});
  }
  // A new DIR goes again if the set-up fails (what the sweep wrote there, never anyone else's).
  io::OutputDir out_dir(o.out, {"plan.json", "results.jsonl", "results.stale.jsonl", "runs"});
  Setup s;
  try {
    s.lock = std::make_shared<io::DirLock>(o.out, "genemask sweep");  // two sweeps would run every job twice
    out_dir.locked();  // another sweep's directory, made between this one's mkdir and its lock: kept
  } catch (...) {
    out_dir.keep();  // another sweep's directory, maybe made a moment ago: never removed here
    throw;
  }
  // `--plan DIR/plan.json --out DIR`: the sweep's own normalised plan continues it, and is
  // not rewritten (it is the input). Any other file there (a plan of the user's) would be
  // replaced: refused, as DIR/results.jsonl as an input is.
  const std::string plan_path = (fs::path(o.out) / "plan.json").string();
  const bool own_plan = is_own_plan(o.plan, plan_path, o.out);
  if (!own_plan) io::check_writable_target(plan_path);
  io::check_writable_target((fs::path(o.out) / "results.jsonl").string());
  // A new or empty directory, or this command's (a sweep continues where it stopped).
  io::claim_run_directory(o.out, "sweep", "--out", {"plan.json", "results.jsonl", "results.stale.jsonl", "runs"},
                          [](const std::string& d) {  // a sweep of before the markers: its plan and results
                            return fs::is_regular_file(fs::path(d) / "plan.json") &&
                                   fs::is_regular_file(fs::path(d) / "results.jsonl");
                          });
  fs::create_directories(fs::path(o.out) / "runs");
  // The sweep's id, made when DIR is first claimed and kept by every restart: each record
  // carries it with the plan's job count, so that a report of a results file without its
  // plan counts each sweep's jobs (records of two sweeps concatenated too).
  if (const auto mk = io::read_output_marker(o.out); mk && mk->contains("sweep_id") && (*mk)["sweep_id"].is_string()) {
    s.sweep_id = (*mk)["sweep_id"].get<std::string>();
  } else {
    s.sweep_id = io::random_id();
    io::set_output_marker_value(o.out, "sweep_id", s.sweep_id);
  }
  const std::string results_path = (fs::path(o.out) / "results.jsonl").string();
  const nlohmann::json new_plan = sweep::plan_to_json(plan);
  std::vector<Job> all = sweep::expand_jobs(plan, fs::absolute(o.out).lexically_normal().string());
  s.total = all.size();
  sweep::PlanDiff diff;
  if (fs::exists(plan_path)) {
    errno = 0;
    std::ifstream in(plan_path, std::ios::binary);
    if (!in)
      throw io::InputError(plan_path, fmt::format("cannot read the previous plan ({}); to start over, remove it and move results.jsonl aside (its records would be kept and checked against the new plan's inputs)",
                                                  io::open_error_reason(errno)));
    std::stringstream text;
    text << in.rdbuf();
    io::JsonParse parsed = io::try_parse_json(text.str());
    if (!parsed.ok())
      throw io::InputError(plan_path, parsed.line,
                           fmt::format("cannot read the previous plan ({}); to start over, remove it and move results.jsonl aside (its records would be kept and checked against the new plan's inputs)", parsed.error));
    const nlohmann::json old_plan = std::move(parsed.value);
    diff = sweep::compare_plans(old_plan, new_plan);
    if (!diff.changes.empty() && !o.force) {
      std::string list;
      for (const auto& c : diff.changes) list += (list.empty() ? "" : "; ") + c;
      throw std::runtime_error(fmt::format(
          "{}: the plan {} changed incompatibly with this sweep's ({}); use another --out, or --force to rerun the "
          "affected jobs (their old records move to results.stale.jsonl)",
          plan_path, o.plan, list));
    }
  }
  // A results.jsonl of another name too (a `cp -al` snapshot of DIR) or behind a link becomes
  // DIR's own before it is repaired or appended to: the other sweep's records stay its own.
  io::own_append_file(results_path);
  io::own_append_file((fs::path(o.out) / "results.stale.jsonl").string());
  results::ResultsFile rf = results::read_results(results_path, /*repair=*/true, /*missing_ok=*/true);
  s.repaired = rf.repaired_bytes;
  std::set<std::string> keys;
  std::map<std::string, const Job*> by_key;
  for (const auto& j : all) keys.insert(j.key), by_key[j.key] = &j;
  // A record whose inputs (their SHA-256) are not the plan's now: run on another test table,
  // training table or weights than the jobs still to run would be. Never averaged with them.
  const auto other_inputs = [&](const results::Record& r) -> std::string {
    const auto it = by_key.find(r.job);
    if (it == by_key.end()) return "";
    if (r.ok && r.simulated != o.simulated)
      return fmt::format("{}:{}: job {} {}", results_path, r.line, r.job,
                         r.simulated ? "holds pseudo-metrics of a simulated sweep (--simulate), not a result"
                                     : "holds a real result, and this sweep simulates");
    const Job& j = *it->second;
    for (const auto& [was, now, what] : {std::tuple{&r.train_sha256, &j.train_sha256, "training table"},
                                         std::tuple{&r.test_sha256, &j.test_sha256, "test table"},
                                         std::tuple{&r.model_sha256, &j.model_sha256, "model"}})
      if (!was->empty() && !now->empty() && *was != *now)
        return fmt::format("{}:{}: job {} was run on another {} (SHA-256 {}...) than the plan's now ({}...)", results_path,
                           r.line, r.job, what, was->substr(0, 12), now->substr(0, 12));
    // The settings too: a plan.json removed (or lost) leaves nothing else to hold them against.
    if (r.ok && !r.finetune.is_null() && r.finetune != sweep::finetune_to_json(j.finetune))
      return fmt::format("{}:{}: job {} was run with other fine-tuning settings ({}) than the plan's now ({})",
                         results_path, r.line, r.job, io::json_excerpt(r.finetune, 120),
                         io::json_excerpt(sweep::finetune_to_json(j.finetune), 120));
    return "";
  };
  size_t mismatched = 0;
  std::string first_mismatch;
  for (const auto& r : rf.records)
    if (std::string why = other_inputs(r); !why.empty()) {
      if (first_mismatch.empty()) first_mismatch = why;
      ++mismatched;
    }
  if (mismatched && !o.force)
    throw io::InputError(results_path, fmt::format("{} record(s) were run on other inputs than the plan's now (first: {}); "
                                                   "use another --out, or --force to move them to results.stale.jsonl "
                                                   "and run those jobs again",
                                                   mismatched, first_mismatch));
  if (!diff.changes.empty() || mismatched) {  // --force: keep results.jsonl to the records still valid
    std::vector<const results::Record*> keep, stale;
    for (const auto& r : rf.records) {
      const bool valid = !diff.settings_changed && keys.count(r.job) && !diff.changed_models.count(r.model) &&
                         !diff.changed_tasks.count(r.task) && other_inputs(r).empty();
      (valid ? keep : stale).push_back(&r);
    }
    if (!stale.empty()) {  // the lines move as they were written
      // Written whole and renamed into place (the earlier stale records, then these): a write
      // refused half-way leaves the earlier file as it was, and a rerun moves the records once.
      const std::string stale_path = (fs::path(o.out) / "results.stale.jsonl").string();
      io::AtomicFile st(stale_path);
      if (fs::exists(stale_path)) {
        std::ifstream earlier(stale_path, std::ios::binary);
        std::ostringstream text;
        text << earlier.rdbuf();
        if (earlier.bad()) throw std::runtime_error(fmt::format("cannot read {}: {}", stale_path, std::strerror(errno)));
        const std::string records = text.str();
        st.stream() << records;
        if (!records.empty() && records.back() != '\n') st.stream() << '\n';  // the next record starts a line
      }
      for (const auto* r : stale) st.stream() << r->text << "\n";
      st.commit();
      io::AtomicFile f(results_path);
      for (const auto* r : keep) f.stream() << r->text << "\n";
      f.commit();
      s.stale = stale.size();
      std::vector<results::Record> kept;
      for (const auto* r : keep) kept.push_back(*r);
      rf.records = std::move(kept);
    }
  }
  if (!own_plan) {
    io::AtomicFile f(plan_path);
    f.stream() << io::json_text(new_plan, 2) << "\n";
    f.commit();
  }
  std::set<std::string> done;
  for (const auto& r : rf.records)
    if (r.ok) done.insert(r.job);
  for (auto& j : all)
    if (done.count(j.key))
      ++s.skipped;
    else
      s.jobs.push_back(std::move(j));
  s.retries = plan.retries;
  s.threads = plan.threads_per_worker;
  s.ranks_per_gpu = plan.ranks_per_gpu;
  s.device = plan.device;
  out_dir.keep();  // from here on DIR holds results
  return s;
}

/// The manager's bookkeeping: queue, attempts, records, progress, timing.
class Manager {
 public:
  Manager(const SweepOptions& o, Setup& s, SweepSummary& sum)
      : o_(o), s_(s), sum_(sum), writer_((fs::path(o.out) / "results.jsonl").string()) {
    for (size_t i = 0; i < s.jobs.size(); ++i) queue_.push_back(i);
    attempts_.assign(s.jobs.size(), 0);
    failed_on_.assign(s.jobs.size(), -1);
    start_ = last_progress_ = Clock::now();
  }

  /// The next job for `worker` (with its attempt number), or null when none should start.
  /// A retry goes to another worker when there is other work for this one.
  const Job* next(int worker) {
    if (g_stop_signal || worker_stop_) sum_.interrupted = true;
    if (queue_.empty() || g_stop_signal || worker_stop_ || !sum_.disk_error.empty()) return nullptr;
    auto it = std::find_if(queue_.begin(), queue_.end(), [&](size_t j) { return failed_on_[j] != worker; });
    if (it == queue_.end()) it = queue_.begin();
    const size_t i = *it;
    queue_.erase(it);
    s_.jobs[i].attempt = ++attempts_[i];
    return &s_.jobs[i];
  }

  /// Handles a finished attempt of `job`; returns the record to append (null when the job
  /// goes back to the queue for a retry).
  std::unique_ptr<nlohmann::json> finish(const Job& job, const JobResult& r) {
    const size_t i = static_cast<size_t>(&job - s_.jobs.data());
    if (r.stop_signal && !worker_stop_) {
      // A signal to one rank stops the sweep as a signal to mpirun does: no new jobs.
      worker_stop_ = r.stop_signal;
      std::cerr << fmt::format("[genemask sweep] rank {} on {} was stopped by signal {}: no new jobs are handed out; "
                               "the running ones are recorded",
                               r.rank, r.host, r.stop_signal)
                << std::endl;
    }
    // The disk, not the job: every job after it would fail the same way, and be recorded as
    // failed. No new jobs; this one is not recorded.
    const bool disk = !r.ok && r.disk_error;
    if (disk && sum_.disk_error.empty())
      sum_.disk_error = fmt::format("job {} on rank {} ({}) could not write its output: {}", job.key, r.rank, r.host,
                                    r.error);
    if (r.declined || disk) {  // never started, or stopped by the disk: the next run does it
      --attempts_[i];
      queue_.push_front(i);
      return nullptr;
    }
    busy_s_[r.rank] += r.seconds;
    if (!r.ok && attempts_[i] <= s_.retries && !g_stop_signal && !worker_stop_) {
      ++sum_.retried;
      failed_on_[i] = r.rank;
      queue_.push_front(i);  // at the front: it is as long as the jobs being handed out now
      return nullptr;
    }
    if (!r.ok && (g_stop_signal || worker_stop_) && attempts_[i] <= s_.retries) return nullptr;  // retried by the next run
    ++(r.ok ? sum_.ok : sum_.failed);
    results::Record rec = result_record(job, r, attempts_[i], o_.simulated);
    rec.jobs_total = static_cast<int64_t>(s_.total);
    rec.sweep_id = s_.sweep_id;
    return std::make_unique<nlohmann::json>(rec.to_json());
  }

  void write(const nlohmann::json& record) {
    const auto t0 = Clock::now();
    writer_.append(record);
    write_s_ += since(t0);
    ++writes_;
  }

  void overhead(double s) {
    overhead_s_ += s;
    ++dispatches_;
  }

  void progress(size_t running, bool force = false) {
    if (o_.progress_interval_s <= 0 || (!force && since(last_progress_) < o_.progress_interval_s)) return;
    last_progress_ = Clock::now();
    const uint64_t done = sum_.ok + sum_.failed, todo = s_.jobs.size();
    const double el = since(start_);
    const double eta = done ? el * static_cast<double>(todo - done) / static_cast<double>(done) : 0.0;
    std::cerr << fmt::format("[genemask sweep] {}/{} jobs done ({} skipped), {} failed, {} retried, {} running, "
                             "elapsed {:.0f} s, ETA {}",
                             done + s_.skipped, s_.total, s_.skipped, sum_.failed, sum_.retried, running, el,
                             done ? fmt::format("{:.0f} s", eta) : std::string("?"))
              << std::endl;
  }

  void finalize(const std::vector<int>& worker_ranks) {
    const double wall = since(start_);
    sum_.seconds = wall;
    sum_.remaining = s_.jobs.size() - sum_.ok - sum_.failed;
    double total = 0;
    for (int r : worker_ranks) {
      const double u = wall > 0 ? busy_s_[r] / wall : 0.0;
      sum_.utilisation.push_back(u);
      total += u;
    }
    sum_.mean_utilisation = worker_ranks.empty() ? 0 : total / static_cast<double>(worker_ranks.size());
    sum_.overhead_ms_per_job = dispatches_ ? 1e3 * overhead_s_ / static_cast<double>(dispatches_) : 0;
    sum_.write_ms_per_job = writes_ ? 1e3 * write_s_ / static_cast<double>(writes_) : 0;
  }

 private:
  const SweepOptions& o_;
  Setup& s_;
  SweepSummary& sum_;
  ResultsWriter writer_;
  std::deque<size_t> queue_;
  std::vector<int> attempts_, failed_on_;  // failed_on_: rank of the last failed attempt
  int worker_stop_ = 0;                    // a worker's stop signal
  std::map<int, double> busy_s_;
  double overhead_s_ = 0, write_s_ = 0;
  uint64_t dispatches_ = 0, writes_ = 0;
  Clock::time_point start_, last_progress_;
};

/// One rank: the manager runs every job itself.
void run_alone(Manager& m, const JobRunner& runner, const WorkerSetup& w) {
  const std::string host = io::host_name();
  Clock::time_point arrived{};
  bool have_arrival = false;
  while (const Job* job = m.next(w.rank)) {
    if (have_arrival) m.overhead(since(arrived));
    const JobResult r = run_job(runner, *job, w, host);
    if (auto rec = m.finish(*job, r)) m.write(*rec);  // timed on its own, as with workers
    arrived = Clock::now();
    have_arrival = true;
    m.progress(0);
  }
  m.finalize({w.rank});
}

/// The manager's sends are non-blocking: Open MPI's MPI_Send of even a small message can
/// wait until the receiver next enters MPI (up to its polling pause), which would add that
/// wait to every dispatch. One outstanding send per worker; its buffer lives until done.
class Sender {
 public:
  explicit Sender(MPI_Comm comm) : comm_(comm) {}
  ~Sender() {
    for (auto& [rank, p] : pending_) MPI_Wait(&p.first, MPI_STATUS_IGNORE);
  }
  Sender(const Sender&) = delete;
  Sender& operator=(const Sender&) = delete;
  void send(std::string bytes, int dest, int tag) {
    auto& p = pending_.try_emplace(dest, MPI_REQUEST_NULL, std::string()).first->second;
    if (p.first != MPI_REQUEST_NULL) GM_MPI_CHECK(MPI_Wait(&p.first, MPI_STATUS_IGNORE));
    p.second = std::move(bytes);
    GM_MPI_CHECK(MPI_Isend(p.second.data(), checked_int(p.second.size(), "sweep message"), MPI_BYTE, dest, tag, comm_,
                           &p.first));
  }
  void finish() {
    for (auto& [rank, p] : pending_) GM_MPI_CHECK(MPI_Wait(&p.first, MPI_STATUS_IGNORE));
  }

 private:
  MPI_Comm comm_;
  std::map<int, std::pair<MPI_Request, std::string>> pending_;
};

void run_manager(Manager& m, int size, MPI_Comm comm) {
  Sender sender(comm);
  std::map<int, const Job*> in_flight;
  int active = size - 1;
  while (active > 0) {
    const Message msg = receive(MPI_ANY_SOURCE, comm);
    const auto arrived = Clock::now();
    std::unique_ptr<nlohmann::json> record;
    if (msg.tag == kTagResult) {
      const auto r = unpack<JobResult>(msg.bytes);
      const Job* job = in_flight.at(msg.source);
      in_flight.erase(msg.source);
      if (job->key != r.key) throw std::logic_error("sweep: rank " + std::to_string(msg.source) + " returned " + r.key);
      record = m.finish(*job, r);
    } else if (msg.tag != kTagReady) {
      throw std::logic_error(fmt::format("sweep: unexpected message tag {} from rank {}", msg.tag, msg.source));
    }
    // Send first, write second: the worker starts while the manager fsyncs.
    if (const Job* next = m.next(msg.source)) {
      sender.send(pack(*next), msg.source, kTagJob);
      in_flight[msg.source] = next;
      if (msg.tag == kTagResult) m.overhead(since(arrived));
    } else {
      sender.send(std::string(), msg.source, kTagStop);
      --active;
    }
    if (record) m.write(*record);
    m.progress(in_flight.size());
  }
  sender.finish();
  std::vector<int> workers;
  for (int r = 1; r < size; ++r) workers.push_back(r);
  m.finalize(workers);
}

void run_worker(const JobRunner& runner, const WorkerSetup& w, MPI_Comm comm) {
  const std::string host = io::host_name();
  send_bytes(std::string(), kManager, kTagReady, comm);
  for (;;) {
    const Message msg = receive(kManager, comm);
    if (msg.tag == kTagStop) return;
    if (msg.tag != kTagJob) throw std::logic_error(fmt::format("sweep: unexpected message tag {} from the manager", msg.tag));
    const Job job = unpack<Job>(msg.bytes);
    JobResult r;
    if (g_stop_signal) {  // stopped while waiting: hand the job back unstarted
      r.key = job.key;
      r.host = host;
      r.rank = w.rank;
      r.declined = true;
    } else {
      r = run_job(runner, job, w, host);
    }
    r.stop_signal = g_stop_signal;  // the manager stops handing out jobs to every worker
    send_bytes(pack(r), kManager, kTagResult, comm);
  }
}

}  // namespace

SweepSummary run_sweep(const SweepOptions& o, const JobRunner& runner, MPI_Comm comm) {
  const int rank = comm_rank(comm), size = comm_size(comm);
  check_slurm_world(size);
  StopSignals signals;
  Setup setup;
  std::string error;
  if (rank == kManager) {
    try {
      setup = prepare(o);
    } catch (const std::exception& e) {
      error = e.what();
    }
  }
  // A bad plan or DIR: rank 0 throws (one error line, then main's MPI_Abort ends the
  // job); the other ranks return at once and wait to be ended, so the line is not repeated.
  bcast_bytes(error, kManager, comm);
  if (!error.empty()) {
    if (rank == kManager) throw std::runtime_error(error);
    SweepSummary failed;
    failed.setup_failed = true;
    return failed;
  }
  std::string settings = pack(std::vector<std::string>{setup.device, std::to_string(setup.threads),
                                                       std::to_string(setup.ranks_per_gpu)});
  bcast_bytes(settings, kManager, comm);
  const auto sv = unpack<std::vector<std::string>>(settings);

  WorkerSetup w;
  w.rank = rank;
  w.device = sv[0];
  w.threads = std::stoi(sv[1]);
  const int ranks_per_gpu = std::stoi(sv[2]);
  // GPU of a worker: its rank among the workers on its node, ranks_per_gpu to a GPU.
  if (mpi_active()) {
    MPI_Comm workers = MPI_COMM_NULL;
    const bool is_worker = rank != kManager || size == 1;
    GM_MPI_CHECK(MPI_Comm_split(comm, is_worker ? 0 : MPI_UNDEFINED, rank, &workers));
    if (is_worker) {
      const int local = local_rank_size(workers).first;
      const int gpus = std::max(1, o.gpu_count ? o.gpu_count() : 1);
      if (w.device == "cuda") w.device_index = (local / ranks_per_gpu) % gpus;
      GM_MPI_CHECK(MPI_Comm_free(&workers));
    }
  } else if (w.device == "cuda") {
    w.device_index = 0;
  }

  SweepSummary sum;
  sum.workers = size > 1 ? size - 1 : 1;
  if (rank == kManager) {
    sum.jobs_total = setup.total;
    sum.jobs_skipped = setup.skipped;
    sum.stale_records = setup.stale;
    sum.repaired_bytes = setup.repaired;
    if (setup.repaired && o.progress_interval_s > 0)
      std::cerr << fmt::format("[genemask sweep] removed a torn last line ({} bytes) from results.jsonl", setup.repaired)
                << std::endl;
    Manager m(o, setup, sum);
    if (size == 1)
      run_alone(m, runner, w);
    else
      run_manager(m, size, comm);
    m.progress(0, /*force=*/true);
  } else {
    run_worker(runner, w, comm);
  }
  if (g_stop_signal) sum.interrupted = true;
  return sum;
}

}  // namespace genemask::hpc
