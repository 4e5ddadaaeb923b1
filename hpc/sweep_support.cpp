// The sweep's file side (results.jsonl) and its testing aids (simulated runner, injected
// failures). The MPI part is in sweep.cpp.
#include <fcntl.h>
#include <fnmatch.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "genemask/rng.hpp"
#include "hpc/sweep.hpp"
#include "io/atomic_file.hpp"
#include "io/json.hpp"

namespace fs = std::filesystem;

namespace genemask::hpc {

results::Record result_record(const Job& job, const JobResult& r, int attempts, bool simulated) {
  results::Record rec = results::make_record(job.model, job.group, job.task, job.shots, job.seed,
                                             r.ok ? &r.metrics : nullptr, r.error);
  rec.seconds = r.seconds;
  rec.host = r.host;
  rec.rank = r.rank;
  rec.device = r.device;
  rec.attempts = attempts;
  rec.out = job.out;
  rec.checkpoint = job.model_path;
  rec.checkpoint_step = job.checkpoint_step;
  rec.finetune = sweep::finetune_to_json(job.finetune);
  // What the worker read (its digests); before it could read them, what the plan recorded.
  rec.train_sha256 = r.train_sha256.empty() ? job.train_sha256 : r.train_sha256;
  rec.test_sha256 = r.test_sha256.empty() ? job.test_sha256 : r.test_sha256;
  rec.model_sha256 = r.model_sha256.empty() ? job.model_sha256 : r.model_sha256;
  rec.simulated = simulated;
  rec.arm = job.arm;
  rec.replicate = job.replicate;
  return rec;
}

namespace {

// The synthetic metrics' key hash: FNV-1a with this offset basis (not FNV's 14695981039346656037).
constexpr uint64_t kSimulateBasis = 1469598103934665603ULL;

double unit(uint64_t x) { return static_cast<double>(splitmix64(x) >> 11) / 9007199254740992.0; }  // [0, 1)

}  // namespace

results::RunMetrics simulated_metrics(const std::string& key) {
  const uint64_t h = fnv1a(key, kSimulateBasis);
  results::RunMetrics m;
  m.test.accuracy = 0.5 + 0.45 * unit(h);
  m.test.auc = 0.5 + 0.45 * unit(h + 1);
  m.test.f1 = 0.4 + 0.5 * unit(h + 2);
  m.test.mcc = 2 * m.test.accuracy - 1;
  m.n_train = 2 * (1 + fnv1a(key + "#n", kSimulateBasis) % 1000);
  m.test.n = 200;
  m.test.classes = 2;
  return m;
}

JobRunner simulated_runner(double seconds_per_1000_shots) {
  return [seconds_per_1000_shots](const Job& job, const WorkerSetup&) {
    const double s = seconds_per_1000_shots * static_cast<double>(job.shots) / 1000.0;
    if (s > 0) std::this_thread::sleep_for(std::chrono::duration<double>(s));
    results::RunMetrics m = simulated_metrics(job.key);
    m.n_train = 2 * static_cast<uint64_t>(job.shots);
    if (!job.out.empty()) {
      fs::create_directories(job.out);
      nlohmann::json j;
      m.to_json(j);
      j["simulated"] = true;
      io::AtomicFile f(job.out + "/metrics.json");
      f.stream() << io::json_text(j) << "\n";
      f.commit();
    }
    return m;
  };
}

FailureRule parse_failure_rule(const std::string& spec) {
  const size_t colon = spec.rfind(':');
  FailureRule r;
  if (colon == std::string::npos || colon == 0)
    throw std::runtime_error(fmt::format("--inject-failure \"{}\": expected GLOB:K or GLOB:always", spec));
  r.pattern = spec.substr(0, colon);
  const std::string k = spec.substr(colon + 1);
  if (k == "always") {
    r.attempts = -1;
  } else {
    try {
      size_t used = 0;
      r.attempts = std::stoi(k, &used);
      if (used != k.size() || r.attempts < 0) throw std::invalid_argument(k);
    } catch (const std::exception&) {
      throw std::runtime_error(
          fmt::format("--inject-failure \"{}\": \"{}\" is not a number of attempts >= 0 or \"always\"", spec, k));
    }
  }
  return r;
}

JobRunner with_injected_failures(JobRunner inner, std::vector<FailureRule> rules) {
  return [inner = std::move(inner), rules = std::move(rules)](const Job& job, const WorkerSetup& w) {
    for (const auto& r : rules)
      if (::fnmatch(r.pattern.c_str(), job.key.c_str(), 0) == 0 && (r.attempts < 0 || job.attempt <= r.attempts))
        throw std::runtime_error(fmt::format("injected failure (attempt {})", job.attempt));
    return inner(job, w);
  };
}

}  // namespace genemask::hpc
