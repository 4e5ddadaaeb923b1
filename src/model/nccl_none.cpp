// Builds without NCCL (a CPU-only LibTorch, or no nccl.h): `--allreduce nccl` is refused
// before it gets here.
#include "model/grad_sync.hpp"

namespace genemask::model {

bool nccl_built() { return false; }

std::unique_ptr<NcclComm> make_nccl_comm(MPI_Comm, const torch::Device&) {
  throw std::invalid_argument("this genemask was built without NCCL; use --allreduce mpi (docs/build.md)");
}

}  // namespace genemask::model
