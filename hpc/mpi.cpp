#include "hpc/mpi.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <mutex>
#include <thread>

#include "io/atomic_file.hpp"
#include "io/host_name.hpp"
#include "io/parse_number.hpp"

namespace genemask::hpc {

void throw_mpi_error(int code, const char* call, const char* file, int line) {
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, msg, &len);
  throw MpiError(fmt::format("MPI error in {} ({}:{}): {}", call, file, line, std::string(msg, static_cast<size_t>(len))));
}

int checked_int(uint64_t v, const char* what) {
  if (v > static_cast<uint64_t>(std::numeric_limits<int>::max()))
    throw std::overflow_error(fmt::format("{} = {} does not fit in an MPI int count", what, v));
  return static_cast<int>(v);
}

namespace {
bool g_mpi_active = false;
}

bool mpi_active() { return g_mpi_active; }

namespace {
/// The integer value of a variable, or `none` when it is unset, empty or not a number.
long env_int(const EnvLookup& env, const char* name, long none = -1) {
  const char* v = env(name);
  if (!v || !*v) return none;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  return *end == '\0' ? n : none;
}
}  // namespace

int slurm_step_tasks(const EnvLookup& env) {
  long n = env_int(env, "SLURM_STEP_NUM_TASKS", 0);
  if (n <= 0 && env("SLURM_STEP_ID")) n = env_int(env, "SLURM_NTASKS", 0);
  return n > 0 ? static_cast<int>(n) : 0;
}

bool launched_by_mpi(const EnvLookup& env) {
  if (const char* f = env("GENEMASK_FORCE_MPI"); f && *f && std::string(f) != "0") return true;
  for (const char* size : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "MPI_LOCALNRANKS"})
    if (env_int(env, size, 0) > 1) return true;
  for (const char* rank : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"})
    if (env_int(env, rank, 0) > 0) return true;
  return slurm_step_tasks(env) > 1;
}

bool launched_by_mpi() { return launched_by_mpi([](const char* n) { return std::getenv(n); }); }

void abort_job(int code) {
  if (g_mpi_active) MPI_Abort(MPI_COMM_WORLD, code);
  std::exit(code);
}

void bcast_u64(std::vector<uint64_t>& data, int root, MPI_Comm comm) {
  if (!g_mpi_active) return;
  GM_MPI_WAIT(MPI_Bcast(data.data(), checked_int(data.size(), "broadcast size"), MPI_UINT64_T, root, comm));
}

long mpi_timeout_s(const EnvLookup& env) {
  const char* v = env("GENEMASK_MPI_TIMEOUT");
  if (!v || !*v) return kDefaultMpiTimeoutS;
  // Digits only (no sign, space or exponent), and at most kMaxMpiTimeoutS: a larger number
  // of seconds would overflow the watchdog's nanoseconds and end the job at once.
  constexpr long kMaxMpiTimeoutS = 1000000000;  // 31 years
  const auto n = io::parse_decimal_u64(v);
  if (!n || *n > static_cast<uint64_t>(kMaxMpiTimeoutS))
    throw std::invalid_argument(fmt::format(
        "GENEMASK_MPI_TIMEOUT='{}': not a whole number of seconds from 0 to {} (the longest wait of one rank for the "
        "others; 0: no limit; default {})",
        v, kMaxMpiTimeoutS, kDefaultMpiTimeoutS));
  return static_cast<long>(*n);
}

namespace {
// The collective wait in progress (steady-clock ns since its start; 0: none) and the
// watchdog that watches it.
std::atomic<int64_t> g_wait_since{0};
std::atomic<const char*> g_wait_what{""};
long g_timeout_s = 0;
// The watchdog's state lives on the heap and is never freed, and the thread is detached: a
// command that ends with std::exit (without MpiEnv's destructor) must not meet a joinable
// std::thread or a destroyed mutex in the static destructors.
struct Watch {
  std::mutex mutex;
  std::condition_variable cv;
  bool stop = false;
};
Watch* g_watch = nullptr;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void watch(int rank, int size) {
  const auto tick = std::chrono::milliseconds(std::clamp<long>(g_timeout_s * 100, 100, 1000));
  Watch& w = *g_watch;
  std::unique_lock lock(w.mutex);
  while (!w.cv.wait_for(lock, tick, [&w] { return w.stop; })) {
    const int64_t since = g_wait_since.load();
    if (since == 0 || now_ns() - since < g_timeout_s * int64_t{1000000000}) continue;
    // The main thread is blocked inside MPI: MPI_Abort from this thread is not allowed
    // (MPI_THREAD_FUNNELED); a process that ends without MPI_Finalize makes the launcher
    // end the others.
    // The message in buffers on the stack: nothing on the way out allocates, so this thread
    // ends the job also when the memory is used up (a throw here would end it with
    // std::terminate, outputs left behind).
    const char* what = g_wait_what.load();
    char host[256];
    io::host_name_into(host, sizeof host);
    char why[1024];
    std::snprintf(why, sizeof why,
                  "error: rank %d of %d on host %s waited %lld s in %.*s without an answer from the other ranks: a "
                  "node, its network link or a rank has failed or hangs. Ending the job (exit status %d). The limit "
                  "is GENEMASK_MPI_TIMEOUT=%ld seconds (0: no limit)",
                  rank, size, host, static_cast<long long>((now_ns() - since) / 1000000000),
                  static_cast<int>(std::strcspn(what, "(")), what,  // the call's name, without its arguments
                  kExitMpiTimeout, static_cast<long>(g_timeout_s));
    io::remove_unfinished_outputs(why);
    std::_Exit(kExitMpiTimeout);
  }
}
}  // namespace

namespace {
/// Testing hook: GENEMASK_TEST_COLLECTIVE_DELAY=RANK:CALL:SECONDS makes rank RANK sleep
/// before the first collective whose call starts with CALL (e.g. "2:MPI_Reduce:8"), saying so
/// on stderr, so that a test can cut a node's link while the others wait for it.
void test_delay(const char* what) {
  static bool done = false;
  const char* v = std::getenv("GENEMASK_TEST_COLLECTIVE_DELAY");
  if (done || !v || !g_mpi_active) return;
  const std::string spec = v;
  const size_t a = spec.find(':'), b = spec.rfind(':');
  if (a == std::string::npos || b == a) return;
  int rank = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (std::to_string(rank) != spec.substr(0, a) || std::string(what).rfind(spec.substr(a + 1, b - a - 1), 0) != 0)
    return;
  done = true;
  std::cerr << fmt::format("genemask: test: rank {} on host {} pausing {} s before {}", rank, io::host_name(),
                           spec.substr(b + 1), spec.substr(a + 1, b - a - 1))
            << std::endl;
  ::sleep(static_cast<unsigned>(std::atoi(spec.c_str() + b + 1)));
}
}  // namespace

CollectiveWait::CollectiveWait(const char* what) {
  test_delay(what);
  if (g_timeout_s <= 0) return;
  int64_t idle = 0;
  if (g_wait_since.load(std::memory_order_relaxed) != 0) return;
  g_wait_what.store(what, std::memory_order_relaxed);
  outer_ = g_wait_since.compare_exchange_strong(idle, now_ns());
}

CollectiveWait::~CollectiveWait() {
  if (outer_) g_wait_since.store(0);
}

MpiEnv::MpiEnv(int& argc, char**& argv) {
  if (!launched_by_mpi()) return;
  // Before MPI_Init: every rank sees the same environment and refuses a bad value alike.
  const long timeout = mpi_timeout_s([](const char* n) { return std::getenv(n); });
  int provided = 0;
  GM_MPI_CHECK(MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided));
  GM_MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  g_mpi_active = true;
  rank_ = comm_rank(MPI_COMM_WORLD);
  size_ = comm_size(MPI_COMM_WORLD);
  timeout_s_ = timeout;
  if (timeout > 0 && size_ > 1) {
    g_timeout_s = timeout;
    g_watch = new Watch;
    std::thread(watch, rank_, size_).detach();
  }
}

MpiEnv::~MpiEnv() {
  if (g_watch) {
    {
      const std::lock_guard lock(g_watch->mutex);
      g_watch->stop = true;
    }
    g_watch->cv.notify_all();
  }
  g_wait_since.store(0);  // MPI_Finalize waits for the others too: not watched
  if (g_mpi_active) MPI_Finalize();
}

int comm_rank(MPI_Comm comm) {
  if (!g_mpi_active) return 0;
  int r = 0;
  GM_MPI_CHECK(MPI_Comm_rank(comm, &r));
  return r;
}
int comm_size(MPI_Comm comm) {
  if (!g_mpi_active) return 1;
  int s = 0;
  GM_MPI_CHECK(MPI_Comm_size(comm, &s));
  return s;
}

namespace {
constexpr uint64_t kChunkElems = uint64_t{1} << 24;  // 128 MiB of uint64 per call

void reduce_chunked(std::vector<uint64_t>& data, MPI_Op op, int root, MPI_Comm comm) {
  if (!g_mpi_active) return;
  const bool is_root = comm_rank(comm) == root;
  for (uint64_t off = 0; off < data.size(); off += kChunkElems) {
    const int n = checked_int(std::min<uint64_t>(kChunkElems, data.size() - off), "reduce chunk");
    void* buf = data.data() + off;
    GM_MPI_WAIT(MPI_Reduce(is_root ? MPI_IN_PLACE : buf, is_root ? buf : nullptr, n, MPI_UINT64_T, op, root, comm));
  }
}
}  // namespace

void allreduce_sum_u64(uint64_t* data, uint64_t n, MPI_Comm comm) {
  if (!g_mpi_active) return;
  for (uint64_t off = 0; off < n; off += kChunkElems) {
    const int c = checked_int(std::min<uint64_t>(kChunkElems, n - off), "all-reduce chunk");
    GM_MPI_WAIT(MPI_Allreduce(MPI_IN_PLACE, data + off, c, MPI_UINT64_T, MPI_SUM, comm));
  }
}
void send_u64(const uint64_t* data, uint64_t n, int dest, MPI_Comm comm) {
  if (!g_mpi_active) return;
  for (uint64_t off = 0; off < n; off += kChunkElems) {
    const int c = checked_int(std::min<uint64_t>(kChunkElems, n - off), "send chunk");
    GM_MPI_WAIT(MPI_Send(data + off, c, MPI_UINT64_T, dest, 0, comm));
  }
}
void recv_u64(uint64_t* data, uint64_t n, int source, MPI_Comm comm) {
  if (!g_mpi_active) return;
  for (uint64_t off = 0; off < n; off += kChunkElems) {
    const int c = checked_int(std::min<uint64_t>(kChunkElems, n - off), "receive chunk");
    GM_MPI_WAIT(MPI_Recv(data + off, c, MPI_UINT64_T, source, 0, comm, MPI_STATUS_IGNORE));
  }
}

void reduce_sum_u64(std::vector<uint64_t>& data, int root, MPI_Comm comm) { reduce_chunked(data, MPI_SUM, root, comm); }
void reduce_bor_u64(std::vector<uint64_t>& data, int root, MPI_Comm comm) { reduce_chunked(data, MPI_BOR, root, comm); }

uint64_t allreduce_max_u64(uint64_t v, MPI_Comm comm) {
  if (!g_mpi_active) return v;
  uint64_t out = 0;
  GM_MPI_WAIT(MPI_Allreduce(&v, &out, 1, MPI_UINT64_T, MPI_MAX, comm));
  return out;
}
void allreduce_max_doubles(double* data, int n, MPI_Comm comm) {
  if (!g_mpi_active || n == 0) return;
  GM_MPI_WAIT(MPI_Allreduce(MPI_IN_PLACE, data, n, MPI_DOUBLE, MPI_MAX, comm));
}
double allreduce_max_double(double v, MPI_Comm comm) {
  allreduce_max_doubles(&v, 1, comm);
  return v;
}

std::vector<std::string> gather_bytes(const std::string& mine, int root, MPI_Comm comm) {
  if (!g_mpi_active) return {mine};
  const int size = comm_size(comm);
  const bool is_root = comm_rank(comm) == root;
  int n = checked_int(mine.size(), "gathered message size");
  std::vector<int> sizes(is_root ? static_cast<size_t>(size) : 0);
  GM_MPI_WAIT(MPI_Gather(&n, 1, MPI_INT, is_root ? sizes.data() : nullptr, 1, MPI_INT, root, comm));
  std::vector<int> displs;
  std::string all;
  if (is_root) {
    uint64_t total = 0;
    for (int s : sizes) {
      displs.push_back(checked_int(total, "gathered bytes"));
      total += static_cast<uint64_t>(s);
    }
    all.resize(total);
  }
  GM_MPI_WAIT(MPI_Gatherv(mine.data(), n, MPI_BYTE, is_root ? all.data() : nullptr, is_root ? sizes.data() : nullptr,
                           is_root ? displs.data() : nullptr, MPI_BYTE, root, comm));
  std::vector<std::string> out;
  if (is_root)
    for (int r = 0; r < size; ++r)
      out.push_back(all.substr(static_cast<size_t>(displs[static_cast<size_t>(r)]), static_cast<size_t>(sizes[static_cast<size_t>(r)])));
  return out;
}

void bcast_bytes(std::string& bytes, int root, MPI_Comm comm) {
  if (!g_mpi_active) return;
  uint64_t n = bytes.size();
  GM_MPI_WAIT(MPI_Bcast(&n, 1, MPI_UINT64_T, root, comm));
  bytes.resize(n);
  constexpr uint64_t kChunk = uint64_t{1} << 30;
  for (uint64_t off = 0; off < n; off += kChunk)
    GM_MPI_WAIT(MPI_Bcast(bytes.data() + off, checked_int(std::min(kChunk, n - off), "broadcast chunk"), MPI_BYTE,
                           root, comm));
}

void allreduce_sum_f32(float* data, uint64_t n, MPI_Comm comm) {
  if (!g_mpi_active) return;
  constexpr uint64_t kChunk = uint64_t{1} << 27;
  for (uint64_t off = 0; off < n; off += kChunk)
    GM_MPI_WAIT(MPI_Allreduce(MPI_IN_PLACE, data + off, checked_int(std::min(kChunk, n - off), "allreduce chunk"),
                               MPI_FLOAT, MPI_SUM, comm));
}

void bcast_f32(float* data, uint64_t n, int root, MPI_Comm comm) {
  if (!g_mpi_active) return;
  constexpr uint64_t kChunk = uint64_t{1} << 27;
  for (uint64_t off = 0; off < n; off += kChunk)
    GM_MPI_WAIT(MPI_Bcast(data + off, checked_int(std::min(kChunk, n - off), "broadcast chunk"), MPI_FLOAT, root, comm));
}

void allreduce_sum_doubles(double* data, int n, MPI_Comm comm) {
  if (!g_mpi_active || n == 0) return;
  GM_MPI_WAIT(MPI_Allreduce(MPI_IN_PLACE, data, n, MPI_DOUBLE, MPI_SUM, comm));
}
double allreduce_sum_double(double v, MPI_Comm comm) {
  allreduce_sum_doubles(&v, 1, comm);
  return v;
}

std::pair<int, int> local_rank_size(MPI_Comm comm) {
  if (!g_mpi_active) return {0, 1};
  MPI_Comm local;
  GM_MPI_WAIT(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, comm_rank(comm), MPI_INFO_NULL, &local));
  std::pair<int, int> rs{comm_rank(local), comm_size(local)};
  MPI_Comm_free(&local);
  return rs;
}

std::string slurm_world_problem(int world_size, const EnvLookup& env) {
  const int tasks = slurm_step_tasks(env);
  if (tasks <= 1 || world_size != 1) return "";
  return fmt::format(
      "the Slurm step has {} tasks (SLURM_STEP_NUM_TASKS) but MPI sees 1 rank: the tasks were started as separate "
      "runs without MPI wiring, each of which would do the whole job (try `srun --mpi=pmix`, see `srun --mpi=list`, "
      "or mpirun inside the allocation)",
      tasks);
}

void check_slurm_world(int world_size) {
  const std::string why = slurm_world_problem(world_size, [](const char* n) { return std::getenv(n); });
  if (!why.empty()) throw std::runtime_error(why);
}

void barrier(MPI_Comm comm) {
  if (g_mpi_active) GM_MPI_WAIT(MPI_Barrier(comm));
}

bool any_rank(bool mine, MPI_Comm comm) {
  if (!g_mpi_active) return mine;
  int in = mine ? 1 : 0, out = 0;
  GM_MPI_WAIT(MPI_Allreduce(&in, &out, 1, MPI_INT, MPI_MAX, comm));
  return out != 0;
}

}  // namespace genemask::hpc
