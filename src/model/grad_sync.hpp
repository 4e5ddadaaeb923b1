#pragma once
// Data-parallel gradients: every parameter's .grad() is a view into one of a few flat
// buckets, so that backward accumulates straight into them, and zeroing, clipping and the
// sum over ranks each touch a few large buffers instead of hundreds of small tensors.
//
// The sum over ranks goes through
//   - NCCL, on the GPU's compute stream, when every rank has a GPU of its own: the
//     communicator is bootstrapped over MPI (rank 0 makes the unique id and broadcasts it);
//   - MPI otherwise: in place in host memory on CPUs, or through one flat pinned staging
//     buffer when ranks share a GPU;
//   - nothing with one rank (unless NCCL is asked for, to test it).
#include <mpi.h>
#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

namespace genemask::model {

enum class AllReduce { Local, Mpi, Nccl };

/// One rank's GPU as its node sees it: the host name, and the GPU's identity (its UUID, the
/// same whatever CUDA_VISIBLE_DEVICES numbering the rank sees), empty for a rank on the CPU.
struct RankGpu {
  std::string host, gpu;
};

/// What `--allreduce auto|nccl|mpi` means for ranks whose GPUs are `ranks` (index = rank):
/// pure, so that each layout is unit-tested without a GPU. NCCL needs a GPU per rank: on
/// every host, the ranks' GPU identities all differ. That holds under per-task binding
/// (`--gpus-per-task=1`, `--gpu-bind`, a wrapper setting CUDA_VISIBLE_DEVICES per rank: each
/// rank sees one GPU, ordinal 0, but a different one) and with one rank per visible GPU; it
/// fails when two ranks of a host share a GPU. auto: NCCL when it holds and `nccl_available`,
/// MPI for more than one rank otherwise, Local for one. nccl where it cannot work is an error
/// that names the ranks sharing a GPU; anything but auto, nccl or mpi is an error too.
AllReduce decide_allreduce(const std::string& requested, const std::vector<RankGpu>& ranks, bool nccl_available);

/// "ranks I and J on HOST share GPU G" for the first two ranks of one host on one GPU, "" when
/// no two do (ranks on the CPU share nothing).
std::string shared_gpu(const std::vector<RankGpu>& ranks);
/// Every rank's host and GPU identity (gpu_identity(device)), on every rank; collective.
std::vector<RankGpu> gather_rank_gpus(const torch::Device& device, MPI_Comm comm);

/// A GPU's identity: its UUID as nvidia-smi -L writes it ("GPU-8f6b...") where this build has
/// CUDA; "" for the CPU.
std::string gpu_identity(const torch::Device& device);
/// Whether GPU `index` multiplies bf16 matrices in hardware (compute capability 8.0 or
/// newer; true where this build cannot tell).
bool gpu_bf16_native(int index);
std::string to_string(AllReduce a);
/// Whether this build has NCCL (a CUDA LibTorch and nccl.h at build time).
bool nccl_built();

/// The NCCL communicator of an MPI communicator's ranks, one GPU each.
class NcclComm {
 public:
  virtual ~NcclComm() = default;
  /// In-place sum over ranks of a contiguous fp32 CUDA tensor, on the current stream.
  virtual void allreduce_sum(torch::Tensor& flat) = 0;
  /// Tears the communicator down without waiting for the other ranks (ncclCommAbort): the
  /// way out when this rank fails while its peers may sit in an all-reduce, where
  /// ncclCommDestroy would wait for them forever. The destructor then does nothing more.
  virtual void abort() = 0;
};
/// Collective over comm; `device` is this rank's GPU, already made current.
std::unique_ptr<NcclComm> make_nccl_comm(MPI_Comm comm, const torch::Device& device);

class GradBuckets {
 public:
  /// Makes each parameter's gradient a zeroed view into a bucket of up to `bucket_floats`
  /// floats on the parameters' device (a larger parameter gets a bucket of its own).
  GradBuckets(const std::vector<torch::Tensor>& params, MPI_Comm comm, AllReduce how,
              int64_t bucket_floats = int64_t{1} << 24);
  ~GradBuckets();
  /// Unwinding from an error (std::uncaught_exceptions() > 0) aborts the NCCL communicator
  /// instead of destroying it, so that the error reaches MPI_Abort instead of waiting for
  /// peers stuck in an all-reduce.
  GradBuckets(const GradBuckets&) = delete;
  GradBuckets& operator=(const GradBuckets&) = delete;

  /// Zeroes every gradient, keeping the views (never set them to none: opt.zero_grad()
  /// would, and backward would then allocate fresh gradients outside the buckets).
  void zero();
  /// Sums the gradients over ranks.
  void allreduce();
  /// clip_grad_norm_(params, max_norm) on the buckets: the total L2 norm before clipping, as
  /// a device scalar (no host synchronisation), and the gradients scaled by
  /// min(1, max_norm / (norm + 1e-6)).
  torch::Tensor clip(double max_norm);
  /// Whether every parameter's gradient is still a view into its bucket.
  bool intact() const;

  AllReduce how() const { return how_; }
  size_t bucket_count() const { return buckets_.size(); }
  int64_t bucket_floats_max() const;
  /// Replaces the NCCL communicator (tests: a fake one that records how it ended).
  void set_nccl_for_test(std::unique_ptr<NcclComm> comm) { nccl_ = std::move(comm); }

 private:
  std::vector<torch::Tensor> params_, buckets_;
  torch::Tensor staging_;  // pinned host memory: MPI over a GPU's buckets
  std::unique_ptr<NcclComm> nccl_;
  MPI_Comm comm_;
  AllReduce how_;
};

}  // namespace genemask::model
