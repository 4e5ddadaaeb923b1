#include "hpc/mpi.hpp"

#include <fmt/format.h>

#include <cstdlib>

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
  GM_MPI_CHECK(MPI_Bcast(data.data(), checked_int(data.size(), "broadcast size"), MPI_UINT64_T, root, comm));
}

MpiEnv::MpiEnv(int& argc, char**& argv) {
  if (!launched_by_mpi()) return;
  int provided = 0;
  GM_MPI_CHECK(MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided));
  GM_MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  g_mpi_active = true;
  rank_ = comm_rank(MPI_COMM_WORLD);
  size_ = comm_size(MPI_COMM_WORLD);
}

MpiEnv::~MpiEnv() {
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
    GM_MPI_CHECK(MPI_Reduce(is_root ? MPI_IN_PLACE : buf, is_root ? buf : nullptr, n, MPI_UINT64_T, op, root, comm));
  }
}
}  // namespace

void reduce_sum_u64(std::vector<uint64_t>& data, int root, MPI_Comm comm) { reduce_chunked(data, MPI_SUM, root, comm); }
void reduce_bor_u64(std::vector<uint64_t>& data, int root, MPI_Comm comm) { reduce_chunked(data, MPI_BOR, root, comm); }

uint64_t allreduce_max_u64(uint64_t v, MPI_Comm comm) {
  if (!g_mpi_active) return v;
  uint64_t out = 0;
  GM_MPI_CHECK(MPI_Allreduce(&v, &out, 1, MPI_UINT64_T, MPI_MAX, comm));
  return out;
}
double allreduce_max_double(double v, MPI_Comm comm) {
  if (!g_mpi_active) return v;
  double out = 0;
  GM_MPI_CHECK(MPI_Allreduce(&v, &out, 1, MPI_DOUBLE, MPI_MAX, comm));
  return out;
}

std::vector<std::string> gather_bytes(const std::string& mine, int root, MPI_Comm comm) {
  if (!g_mpi_active) return {mine};
  const int size = comm_size(comm);
  const bool is_root = comm_rank(comm) == root;
  int n = checked_int(mine.size(), "gathered message size");
  std::vector<int> sizes(is_root ? static_cast<size_t>(size) : 0);
  GM_MPI_CHECK(MPI_Gather(&n, 1, MPI_INT, is_root ? sizes.data() : nullptr, 1, MPI_INT, root, comm));
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
  GM_MPI_CHECK(MPI_Gatherv(mine.data(), n, MPI_BYTE, is_root ? all.data() : nullptr, is_root ? sizes.data() : nullptr,
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
  GM_MPI_CHECK(MPI_Bcast(&n, 1, MPI_UINT64_T, root, comm));
  bytes.resize(n);
  constexpr uint64_t kChunk = uint64_t{1} << 30;
  for (uint64_t off = 0; off < n; off += kChunk)
    GM_MPI_CHECK(MPI_Bcast(bytes.data() + off, checked_int(std::min(kChunk, n - off), "broadcast chunk"), MPI_BYTE,
                           root, comm));
}

void allreduce_sum_f32(float* data, uint64_t n, MPI_Comm comm) {
  if (!g_mpi_active) return;
  constexpr uint64_t kChunk = uint64_t{1} << 27;
  for (uint64_t off = 0; off < n; off += kChunk)
    GM_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, data + off, checked_int(std::min(kChunk, n - off), "allreduce chunk"),
                               MPI_FLOAT, MPI_SUM, comm));
}

void bcast_f32(float* data, uint64_t n, int root, MPI_Comm comm) {
  if (!g_mpi_active) return;
  constexpr uint64_t kChunk = uint64_t{1} << 27;
  for (uint64_t off = 0; off < n; off += kChunk)
    GM_MPI_CHECK(MPI_Bcast(data + off, checked_int(std::min(kChunk, n - off), "broadcast chunk"), MPI_FLOAT, root, comm));
}

double allreduce_sum_double(double v, MPI_Comm comm) {
  if (!g_mpi_active) return v;
  double out = 0;
  GM_MPI_CHECK(MPI_Allreduce(&v, &out, 1, MPI_DOUBLE, MPI_SUM, comm));
  return out;
}

std::pair<int, int> local_rank_size(MPI_Comm comm) {
  if (!g_mpi_active) return {0, 1};
  MPI_Comm local;
  GM_MPI_CHECK(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, comm_rank(comm), MPI_INFO_NULL, &local));
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
  if (g_mpi_active) GM_MPI_CHECK(MPI_Barrier(comm));
}

bool any_rank(bool mine, MPI_Comm comm) {
  if (!g_mpi_active) return mine;
  int in = mine ? 1 : 0, out = 0;
  GM_MPI_CHECK(MPI_Allreduce(&in, &out, 1, MPI_INT, MPI_MAX, comm));
  return out != 0;
}

}  // namespace genemask::hpc
