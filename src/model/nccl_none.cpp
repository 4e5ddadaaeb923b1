// Builds without NCCL (a CPU-only LibTorch, or no nccl.h): `--allreduce nccl` is refused
// before it gets here.
#include "model/grad_sync.hpp"

namespace genemask::model {

bool nccl_built() { return false; }

// Without NCCL the identity only tells ranks apart for the decision, which is MPI anyway.
std::string gpu_identity(const torch::Device& device) {
  return device.is_cuda() ? "cuda:" + std::to_string(device.index()) : "";
}

bool gpu_bf16_native(int) { return true; }  // cannot tell without the CUDA runtime: every current training GPU can

std::unique_ptr<NcclComm> make_nccl_comm(MPI_Comm, const torch::Device&) {
  throw std::invalid_argument("this genemask was built without NCCL; use --allreduce mpi (docs/build.md)");
}

}  // namespace genemask::model
