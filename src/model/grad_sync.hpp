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

/// What `--allreduce auto|nccl|mpi` means for this job: collective over comm. auto picks
/// NCCL when the device is cuda, this genemask has NCCL, and on every node there are at
/// least as many visible GPUs as ranks; MPI for more than one rank otherwise; Local for one.
/// Asking for nccl where it cannot work is an error that says why.
AllReduce choose_allreduce(const std::string& requested, const torch::Device& device, int gpus_on_node,
                           int ranks_on_node, MPI_Comm comm);
std::string to_string(AllReduce a);
/// Whether this build has NCCL (a CUDA LibTorch and nccl.h at build time).
bool nccl_built();

/// The NCCL communicator of an MPI communicator's ranks, one GPU each.
class NcclComm {
 public:
  virtual ~NcclComm() = default;
  /// In-place sum over ranks of a contiguous fp32 CUDA tensor, on the current stream.
  virtual void allreduce_sum(torch::Tensor& flat) = 0;
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

 private:
  std::vector<torch::Tensor> params_, buckets_;
  torch::Tensor staging_;  // pinned host memory: MPI over a GPU's buckets
  std::unique_ptr<NcclComm> nccl_;
  MPI_Comm comm_;
  AllReduce how_;
};

}  // namespace genemask::model
