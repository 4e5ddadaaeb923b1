#pragma once
// What this process may use of its machine: cores (CPU affinity, cgroup CPU quota) and
// memory (free memory, cgroup memory limit, ulimit -v / -d), for the thread count of every
// model command and for refusing, before it starts, work that cannot fit. Torch-free.
#include <cstdint>
#include <string>

namespace genemask::model {

/// The cores this process may run on: its CPU affinity (sched_getaffinity: taskset, Slurm's
/// CPU binding) and its cgroup's CPU quota (v2 cpu.max, v1 cpu.cfs_quota_us) when one is
/// set, rounded up.
struct CoreBudget {
  int cores = 1;         // min(affinity, quota)
  int affinity = 1;      // CPUs in the affinity mask
  int cgroup_quota = 0;  // 0: no quota
};
CoreBudget available_cores();

/// The memory this process may still allocate: the least of the system's MemAvailable, its
/// cgroup's memory limit less the cgroup's usage (v2 memory.max, v1 memory.limit_in_bytes),
/// and RLIMIT_AS / RLIMIT_DATA less this process's VmSize / VmData.
struct MemoryBudget {
  uint64_t bytes = UINT64_MAX;
  std::string limited_by;  // "available memory", "cgroup memory limit", "ulimit -v", "ulimit -d"
};
MemoryBudget available_memory();

/// Throws io::InputError naming `path` when `need_bytes` is more than available_memory():
/// "<what> needs about X GiB of memory, but only Y GiB are available (<limit>); <remedy>".
void check_memory(const std::string& path, uint64_t need_bytes, const std::string& what, const std::string& remedy);

}  // namespace genemask::model
