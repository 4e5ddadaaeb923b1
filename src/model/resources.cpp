#include "model/resources.hpp"

#include <sched.h>
#include <sys/resource.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <fmt/format.h>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>
#include <tuple>
#include <vector>

#include "io/error.hpp"

namespace genemask::model {
namespace {

/// Calls `visit` with every directory that may hold this process's cgroup settings of the
/// controller `controller` ("" for cgroup v2's unified tree): the group named in
/// /proc/self/cgroup and its parents, under the usual mount points. Inside a container the
/// group's own files are often mounted at the root, which is visited too.
void for_each_cgroup_dir(const std::string& controller, const std::function<void(const std::string&)>& visit) {
  std::ifstream in("/proc/self/cgroup");
  std::string line;
  while (std::getline(in, line)) {
    // "0::/path" (v2), or "4:cpu,cpuacct:/path" (v1)
    const size_t a = line.find(':'), b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1);
    std::vector<std::string> roots;
    if (controllers.empty())
      roots = {"/sys/fs/cgroup", "/sys/fs/cgroup/unified"};
    else if (!controller.empty() && ("," + controllers + ",").find("," + controller + ",") != std::string::npos)
      roots = {"/sys/fs/cgroup/" + controllers, "/sys/fs/cgroup/" + controller};
    else
      continue;
    const std::string rel = line.substr(b + 1);
    for (const auto& root : roots) {
      for (std::string p = rel; !p.empty() && p != "/"; p = p.substr(0, p.rfind('/'))) visit(root + p);
      visit(root);
    }
  }
}

/// The CPU quota of a cgroup directory in cores (quota / period, rounded up), 0 for none:
/// v2's cpu.max ("max 100000" or "200000 100000"), or v1's cpu.cfs_quota_us (-1: none).
int quota_cores(const std::string& dir) {
  double quota = -1, period = 0;
  std::ifstream v2(dir + "/cpu.max");
  std::string q;
  if (v2 >> q >> period) {
    if (q == "max") return 0;
    quota = std::strtod(q.c_str(), nullptr);
  } else {
    std::ifstream qf(dir + "/cpu.cfs_quota_us"), pf(dir + "/cpu.cfs_period_us");
    if (!(qf >> quota) || !(pf >> period)) return 0;
  }
  if (!(quota > 0 && period > 0)) return 0;
  return std::max(1, static_cast<int>(std::ceil(quota / period)));
}

/// A number from a file ("max" and anything unreadable: nothing).
bool read_u64(const std::string& path, uint64_t* v) {
  std::ifstream in(path);
  std::string s;
  if (!(in >> s) || s.empty() || !std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  *v = std::strtoull(s.c_str(), nullptr, 10);
  return true;
}

/// A "Key:   123 kB" line of /proc/self/status or /proc/meminfo, in bytes.
bool proc_kb(const char* file, const std::string& key, uint64_t* bytes) {
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line))
    if (line.compare(0, key.size() + 1, key + ":") == 0) {
      std::istringstream f(line.substr(key.size() + 1));
      uint64_t kb = 0;
      if (!(f >> kb)) return false;
      *bytes = kb * 1024;
      return true;
    }
  return false;
}

}  // namespace

CoreBudget available_cores() {
  CoreBudget b;
  cpu_set_t set;
  CPU_ZERO(&set);
  b.affinity = ::sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 0;
  if (b.affinity <= 0) b.affinity = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  for_each_cgroup_dir("cpu", [&](const std::string& dir) {
    const int q = quota_cores(dir);
    if (q > 0 && (b.cgroup_quota == 0 || q < b.cgroup_quota)) b.cgroup_quota = q;
  });
  b.cores = b.cgroup_quota > 0 ? std::min(b.affinity, b.cgroup_quota) : b.affinity;
  return b;
}

MemoryBudget available_memory() {
  MemoryBudget m;
  auto take = [&](uint64_t bytes, const char* why) {
    if (bytes < m.bytes) {
      m.bytes = bytes;
      m.limited_by = why;
    }
  };
  uint64_t v = 0;
  if (proc_kb("/proc/meminfo", "MemAvailable", &v)) take(v, "available memory");
  for_each_cgroup_dir("memory", [&](const std::string& dir) {
    uint64_t limit = 0, used = 0;
    if (read_u64(dir + "/memory.max", &limit)) {
      read_u64(dir + "/memory.current", &used);
    } else if (read_u64(dir + "/memory.limit_in_bytes", &limit)) {
      if (limit >= (uint64_t{1} << 60)) return;  // v1's "no limit" is a huge number
      read_u64(dir + "/memory.usage_in_bytes", &used);
    } else {
      return;
    }
    take(limit > used ? limit - used : 0, "cgroup memory limit");
  });
  for (const auto& [resource, key, why] : {std::tuple{RLIMIT_AS, "VmSize", "ulimit -v"},
                                           std::tuple{RLIMIT_DATA, "VmData", "ulimit -d"}}) {
    rlimit rl{};
    if (::getrlimit(resource, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) continue;
    uint64_t used = 0;
    proc_kb("/proc/self/status", key, &used);
    take(rl.rlim_cur > used ? rl.rlim_cur - used : 0, why);
  }
  return m;
}

void check_memory(const std::string& path, uint64_t need_bytes, const std::string& what, const std::string& remedy) {
  const MemoryBudget m = available_memory();
  if (need_bytes <= m.bytes) return;
  const double gib = 1024.0 * 1024.0 * 1024.0;
  throw io::InputError(path, fmt::format("{} needs about {:.2f} GiB of memory, but only {:.2f} GiB are available ({}); {}",
                                         what, static_cast<double>(need_bytes) / gib,
                                         static_cast<double>(m.bytes) / gib, m.limited_by, remedy));
}

}  // namespace genemask::model
