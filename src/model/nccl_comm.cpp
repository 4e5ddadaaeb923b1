// The NCCL communicator: compiled only where the LibTorch has CUDA and nccl.h was found
// (GENEMASK_HAVE_NCCL); nccl_none.cpp stands in otherwise.
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <fmt/format.h>

#include <cstring>

#include "hpc/mpi.hpp"

#include "model/grad_sync.hpp"

namespace genemask::model {
namespace {

void check(ncclResult_t r, ncclComm_t comm, const char* what) {
  if (r == ncclSuccess) return;
  std::string last = comm ? ncclGetLastError(comm) : "";
  throw std::runtime_error(fmt::format("NCCL {} failed: {}{}{}; set NCCL_DEBUG=INFO for details", what,
                                      ncclGetErrorString(r), last.empty() ? "" : ": ", last));
}

class Nccl final : public NcclComm {
 public:
  Nccl(MPI_Comm comm, const torch::Device& device) : device_(device) {
    const int rank = hpc::comm_rank(comm), world = hpc::comm_size(comm);
    ncclUniqueId id{};
    std::string bytes;
    if (rank == 0) {
      check(ncclGetUniqueId(&id), nullptr, "ncclGetUniqueId");
      bytes.assign(reinterpret_cast<const char*>(&id), sizeof id);
    }
    hpc::bcast_bytes(bytes, 0, comm);  // the bootstrap: rank 0's id to every rank
    if (bytes.size() != sizeof id) throw std::runtime_error("NCCL bootstrap: wrong unique-id size");
    std::memcpy(&id, bytes.data(), sizeof id);
    check(ncclCommInitRank(&comm_, world, id, rank), nullptr, "ncclCommInitRank");
  }
  ~Nccl() override {
    if (comm_) ncclCommDestroy(comm_);
  }
  void abort() override {
    if (comm_) ncclCommAbort(comm_);  // returns without waiting for the other ranks
    comm_ = nullptr;
  }
  void allreduce_sum(torch::Tensor& flat) override {
    if (!flat.is_cuda() || flat.scalar_type() != torch::kFloat32 || !flat.is_contiguous())
      throw std::invalid_argument("NCCL all-reduce: needs a contiguous fp32 CUDA tensor");
    auto stream = c10::cuda::getCurrentCUDAStream(device_.index());
    check(ncclAllReduce(flat.data_ptr(), flat.data_ptr(), static_cast<size_t>(flat.numel()), ncclFloat, ncclSum, comm_,
                        stream.stream()),
          comm_, "ncclAllReduce");
  }

 private:
  torch::Device device_;
  ncclComm_t comm_ = nullptr;
};

}  // namespace

bool nccl_built() { return true; }

std::string gpu_identity(const torch::Device& device) {
  if (!device.is_cuda()) return "";
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, device.index()) != cudaSuccess)
    throw std::runtime_error(fmt::format("cannot read the properties of GPU {}", device.index()));
  // nvidia-smi's form: GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx.
  std::string hex;
  for (int i = 0; i < 16; ++i) {
    hex += fmt::format("{:02x}", static_cast<unsigned char>(prop.uuid.bytes[i]));
    if (i == 3 || i == 5 || i == 7 || i == 9) hex += '-';
  }
  return "GPU-" + hex;
}

bool gpu_bf16_native(int index) {
  // One attribute, not cudaGetDeviceProperties: that one fills every property (of the order
  // of a millisecond of host time), and packed attention asks once per layer and step.
  int major = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, index) != cudaSuccess) {
    (void)cudaGetLastError();  // not left for a later launch check to report
    return false;              // no GPU there: auto means fp32
  }
  return major >= 8;
}

std::unique_ptr<NcclComm> make_nccl_comm(MPI_Comm comm, const torch::Device& device) {
  return std::make_unique<Nccl>(comm, device);
}

}  // namespace genemask::model
