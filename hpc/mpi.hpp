#pragma once
// Checked MPI: every call's return code is checked (GM_MPI_CHECK), every size that goes
// into an int argument is checked (checked_int) or the transfer is chunked.
#include <mpi.h>

#include <cstdint>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <boost/archive/binary_iarchive.hpp>
#include <boost/archive/binary_oarchive.hpp>

namespace genemask::hpc {

class MpiError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

[[noreturn]] void throw_mpi_error(int code, const char* call, const char* file, int line);

#define GM_MPI_CHECK(call)                                                               \
  do {                                                                                   \
    const int gm_mpi_rc_ = (call);                                                       \
    if (gm_mpi_rc_ != MPI_SUCCESS) ::genemask::hpc::throw_mpi_error(gm_mpi_rc_, #call, __FILE__, __LINE__); \
  } while (0)

/// size_t -> int for MPI count arguments; throws instead of silently truncating.
int checked_int(uint64_t v, const char* what);

/// False when the process was not started by an MPI launcher (mpirun, mpiexec, srun):
/// then MPI is never initialised (Open MPI's singleton start-up costs ~0.3 s) and every
/// collective below acts as on a communicator of one rank.
bool mpi_active();

/// A lookup of environment variables (std::getenv, or a made-up environment in tests).
using EnvLookup = std::function<const char*(const char*)>;

/// The tasks of the Slurm step this process runs in: SLURM_STEP_NUM_TASKS, or SLURM_NTASKS
/// for a task of a step (SLURM_STEP_ID set); 0 outside any step (a batch script itself).
int slurm_step_tasks(const EnvLookup& env);

/// True when this process is one of several ranks: an MPI launcher says the world is larger
/// than one (OMPI_COMM_WORLD_SIZE, PMI_SIZE or MPI_LOCALNRANKS above 1, or a rank above 0 in
/// OMPI_COMM_WORLD_RANK, PMIX_RANK, PMI_RANK), or it is a task of a Slurm step of several
/// tasks (slurm_step_tasks() > 1; so rank 0 of `srun -n 4`, whose PMIX_RANK is 0, joins
/// too), or GENEMASK_FORCE_MPI=1. A one-task step (`srun --gpus=1 script`) and `mpiexec -n
/// 1` run without MPI, as a plain command does.
bool launched_by_mpi(const EnvLookup& env);
bool launched_by_mpi();

/// How long one collective may wait for the other ranks before this rank ends the job:
/// GENEMASK_MPI_TIMEOUT in seconds (default kDefaultMpiTimeoutS; 0: no limit). A node that
/// dies is noticed by the MPI launcher within seconds, but a link that silently drops
/// packets, or a rank that hangs, would leave the others waiting until the job's time
/// limit. Throws std::invalid_argument, naming the variable, for a value that is not a
/// whole number of seconds >= 0.
constexpr long kDefaultMpiTimeoutS = 1800;
constexpr int kExitMpiTimeout = 75;  // EX_TEMPFAIL: the job scripts requeue on it
long mpi_timeout_s(const EnvLookup& env);

/// While one lives, this rank is waiting in a collective (`what`, e.g. "MPI_Allreduce").
/// A watchdog thread (started by MpiEnv when the timeout is not 0) ends the process when
/// the wait exceeds the timeout: one line naming the rank, its host, the call and the
/// limit, the live temporaries removed, exit status kExitMpiTimeout; the launcher then ends
/// the other ranks. Nests (the outermost wait counts); cheap (two atomic stores).
class CollectiveWait {
 public:
  explicit CollectiveWait(const char* what);
  ~CollectiveWait();
  CollectiveWait(const CollectiveWait&) = delete;
  CollectiveWait& operator=(const CollectiveWait&) = delete;

 private:
  bool outer_ = false;
};

/// GM_MPI_CHECK for a call that waits for other ranks: under a CollectiveWait.
#define GM_MPI_WAIT(call)                                    \
  do {                                                       \
    const ::genemask::hpc::CollectiveWait gm_mpi_wait_(#call); \
    GM_MPI_CHECK(call);                                      \
  } while (0)

/// MPI_Init / MPI_Finalize (when launched by MPI); errors are returned (not fatal) so that
/// GM_MPI_CHECK sees them.
class MpiEnv {
 public:
  MpiEnv(int& argc, char**& argv);
  ~MpiEnv();
  MpiEnv(const MpiEnv&) = delete;
  MpiEnv& operator=(const MpiEnv&) = delete;
  int rank() const { return rank_; }
  /// The watchdog's limit (mpi_timeout_s), 0 without MPI.
  long timeout_s() const { return timeout_s_; }
  int size() const { return size_; }
  MPI_Comm comm() const { return MPI_COMM_WORLD; }

 private:
  int rank_ = 0, size_ = 1;
  long timeout_s_ = 0;
};

int comm_rank(MPI_Comm comm);
int comm_size(MPI_Comm comm);

/// Collective. Element-wise sum onto root (other ranks' data left unspecified), chunked.
void reduce_sum_u64(std::vector<uint64_t>& data, int root, MPI_Comm comm);
/// Collective. Element-wise bitwise OR onto root, chunked.
void reduce_bor_u64(std::vector<uint64_t>& data, int root, MPI_Comm comm);
/// Point to point, chunked like the reductions: `n` uint64 values to `dest` / from `source`
/// (tag 0; messages between two ranks arrive in the order they were sent).
void send_u64(const uint64_t* data, uint64_t n, int dest, MPI_Comm comm);
void recv_u64(uint64_t* data, uint64_t n, int source, MPI_Comm comm);
/// Collective. Element-wise sum of n uint64 values onto every rank (in place).
void allreduce_sum_u64(uint64_t* data, uint64_t n, MPI_Comm comm);
/// Collective. Max of a scalar on all ranks.
uint64_t allreduce_max_u64(uint64_t v, MPI_Comm comm);
double allreduce_max_double(double v, MPI_Comm comm);
/// Collective. In-place element-wise max of a few doubles on all ranks (one message).
void allreduce_max_doubles(double* data, int n, MPI_Comm comm);

/// Collective. Broadcast of uint64 values from root.
void bcast_u64(std::vector<uint64_t>& data, int root, MPI_Comm comm);
/// Ends every rank of the job (MPI_Abort), or the process without MPI.
[[noreturn]] void abort_job(int code);

/// Collective. Gathers one byte string per rank onto root (in rank order).
std::vector<std::string> gather_bytes(const std::string& mine, int root, MPI_Comm comm);

/// Collective. Gathers a Boost-serializable value from every rank onto root.
template <class T>
std::vector<T> gather_serialized(const T& value, int root, MPI_Comm comm) {
  std::ostringstream os;
  {
    boost::archive::binary_oarchive oa(os);
    oa << value;
  }
  std::vector<std::string> parts = gather_bytes(os.str(), root, comm);
  std::vector<T> out;
  for (const auto& p : parts) {
    std::istringstream is(p);
    boost::archive::binary_iarchive ia(is);
    T v;
    ia >> v;
    out.push_back(std::move(v));
  }
  return out;
}

/// Collective. Sends a Boost-serializable value from root to every rank.
void bcast_bytes(std::string& bytes, int root, MPI_Comm comm);
template <class T>
void bcast_serialized(T& value, int root, MPI_Comm comm) {
  if (!mpi_active()) return;
  std::string bytes;
  if (comm_rank(comm) == root) {
    std::ostringstream os;
    {
      boost::archive::binary_oarchive oa(os);
      oa << value;
    }
    bytes = os.str();
  }
  bcast_bytes(bytes, root, comm);
  if (comm_rank(comm) != root) {
    std::istringstream is(bytes);
    boost::archive::binary_iarchive ia(is);
    ia >> value;
  }
}

/// Collective. In-place element-wise sum of a float buffer over all ranks, in chunks of at
/// most 2^27 floats (one call per bucket, not per tensor).
void allreduce_sum_f32(float* data, uint64_t n, MPI_Comm comm);
/// Collective. In-place broadcast of a float buffer from root.
void bcast_f32(float* data, uint64_t n, int root, MPI_Comm comm);
/// Collective. Sum of a double over all ranks.
double allreduce_sum_double(double v, MPI_Comm comm);
/// Collective. In-place element-wise sum of a few doubles over all ranks (one message).
void allreduce_sum_doubles(double* data, int n, MPI_Comm comm);

/// Collective. This process's rank and the number of ranks on its node
/// (MPI_Comm_split_type, shared memory).
std::pair<int, int> local_rank_size(MPI_Comm comm);
/// Under Slurm: "" when the MPI world fits the step, else why not. A world of one rank in a
/// step of several tasks means the tasks started as separate singletons (`srun` without an
/// MPI plugin its MPI speaks), which would each do the whole job: an error. A world larger
/// than one is an MPI launcher's, also when it differs from the step's tasks: `mpiexec -n 2`
/// inside a one-task step (`srun --gpus=1 scripts/gpu-check.sh`) is a nested launch.
std::string slurm_world_problem(int world_size, const EnvLookup& env);
/// Throws slurm_world_problem() for this process's environment, if any.
void check_slurm_world(int world_size);

/// Collective. MPI_Barrier (nothing without MPI).
void barrier(MPI_Comm comm);

/// Collective: true on every rank when any rank passes true.
bool any_rank(bool mine, MPI_Comm comm);

}  // namespace genemask::hpc
