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

namespace fs = std::filesystem;

namespace genemask::hpc {

ResultsFile read_results(const std::string& path, bool repair) {
  ResultsFile rf;
  std::ifstream in(path, std::ios::binary);
  if (!in) return rf;
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  size_t pos = 0, line = 0, good_end = 0;
  while (pos < text.size()) {
    ++line;
    const size_t nl = text.find('\n', pos);
    const bool last = nl == std::string::npos || nl + 1 == text.size();
    const std::string s = text.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
    nlohmann::json j = nlohmann::json::parse(s, nullptr, /*allow_exceptions=*/false);
    const bool parsed = !j.is_discarded() && j.is_object() && j.contains("job");
    if (nl == std::string::npos || !parsed) {
      // A kill during the last append can leave a torn final line; anywhere else a bad line
      // means the file was edited or is not ours.
      if (!last)
        throw std::runtime_error(fmt::format("{}:{}: not a result record ({}...): repair or remove the line", path, line,
                                             s.substr(0, 60)));
      break;
    }
    rf.records.push_back(std::move(j));
    pos = nl + 1;
    good_end = pos;
  }
  rf.repaired_bytes = text.size() - good_end;
  if (repair && rf.repaired_bytes > 0 &&
      ::truncate(path.c_str(), static_cast<off_t>(good_end)) != 0)
    throw std::runtime_error(fmt::format("cannot truncate the torn last line of {}: {}", path, std::strerror(errno)));
  return rf;
}

nlohmann::json result_record(const Job& job, const JobResult& r, int attempts) {
  nlohmann::json j{{"job", job.key},   {"model", job.model},          {"group", job.group}, {"task", job.task},
                   {"shots", job.shots}, {"seed", job.seed},          {"status", r.ok ? "ok" : "failed"}};
  if (r.ok) {
    j["accuracy"] = r.metrics.accuracy;
    j["auc"] = r.metrics.auc;
    j["f1"] = r.metrics.f1;
    j["mcc"] = r.metrics.mcc;
    j["n_train"] = r.metrics.n_train;
    j["n_test"] = r.metrics.n_test;
    j["classes"] = r.metrics.classes;
  }
  j["seconds"] = r.seconds;
  j["host"] = r.host;
  j["rank"] = r.rank;
  j["device"] = r.device;
  j["attempts"] = attempts;
  j["out"] = job.out;
  if (!r.ok) j["error"] = r.error;
  return j;
}

namespace {

// The synthetic metrics' key hash: FNV-1a with this offset basis (not FNV's 14695981039346656037).
constexpr uint64_t kSimulateBasis = 1469598103934665603ULL;

double unit(uint64_t x) { return static_cast<double>(splitmix64(x) >> 11) / 9007199254740992.0; }  // [0, 1)

}  // namespace

JobMetrics simulated_metrics(const std::string& key) {
  const uint64_t h = fnv1a(key, kSimulateBasis);
  JobMetrics m;
  m.accuracy = 0.5 + 0.45 * unit(h);
  m.auc = 0.5 + 0.45 * unit(h + 1);
  m.f1 = 0.4 + 0.5 * unit(h + 2);
  m.mcc = 2 * m.accuracy - 1;
  m.n_train = 2 * (1 + fnv1a(key + "#n", kSimulateBasis) % 1000);
  m.n_test = 200;
  m.classes = 2;
  return m;
}

JobRunner simulated_runner(double seconds_per_1000_shots) {
  return [seconds_per_1000_shots](const Job& job, const WorkerSetup&) {
    const double s = seconds_per_1000_shots * static_cast<double>(job.shots) / 1000.0;
    if (s > 0) std::this_thread::sleep_for(std::chrono::duration<double>(s));
    JobMetrics m = simulated_metrics(job.key);
    m.n_train = 2 * static_cast<uint64_t>(job.shots);
    if (!job.out.empty()) {
      fs::create_directories(job.out);
      io::AtomicFile f(job.out + "/metrics.json");
      f.stream() << nlohmann::json{{"accuracy", m.accuracy}, {"auc", m.auc},         {"f1", m.f1},
                                   {"mcc", m.mcc},           {"n_test", m.n_test},   {"n_train", m.n_train},
                                   {"simulated", true}}
                        .dump()
                 << "\n";
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
