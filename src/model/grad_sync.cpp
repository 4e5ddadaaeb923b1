#include "model/grad_sync.hpp"

#include <fmt/format.h>

#include "hpc/mpi.hpp"

namespace genemask::model {

std::string to_string(AllReduce a) {
  switch (a) {
    case AllReduce::Local: return "none (one rank)";
    case AllReduce::Mpi: return "MPI";
    case AllReduce::Nccl: return "NCCL";
  }
  return "?";
}

AllReduce choose_allreduce(const std::string& requested, const torch::Device& device, int gpus_on_node,
                           int ranks_on_node, MPI_Comm comm) {
  if (requested != "auto" && requested != "nccl" && requested != "mpi")
    throw std::invalid_argument(fmt::format("--allreduce must be auto, nccl or mpi, got '{}'", requested));
  const int world = hpc::comm_size(comm);
  // Every rank must decide the same: a node with fewer GPUs than ranks rules NCCL out for all.
  const bool own_gpu = device.is_cuda() && gpus_on_node >= ranks_on_node;
  const bool all_own = !hpc::any_rank(!own_gpu, comm);
  if (requested == "mpi") return world == 1 ? AllReduce::Local : AllReduce::Mpi;
  if (requested == "nccl") {
    if (!device.is_cuda()) throw std::invalid_argument("--allreduce nccl needs --device cuda");
    if (!nccl_built())
      throw std::invalid_argument("--allreduce nccl: this genemask was built without NCCL (docs/build.md)");
    if (!all_own)
      throw std::invalid_argument(fmt::format(
          "--allreduce nccl needs a GPU per rank, but a node runs more ranks than it has GPUs (here {} ranks, {} "
          "GPUs); use --allreduce mpi, or fewer ranks per node",
          ranks_on_node, gpus_on_node));
    return AllReduce::Nccl;
  }
  if (world == 1) return AllReduce::Local;
  return all_own && nccl_built() ? AllReduce::Nccl : AllReduce::Mpi;
}

GradBuckets::GradBuckets(const std::vector<torch::Tensor>& params, MPI_Comm comm, AllReduce how,
                         int64_t bucket_floats)
    : params_(params), comm_(comm), how_(how) {
  torch::NoGradGuard ng;
  size_t i = 0;
  while (i < params_.size()) {
    size_t j = i;
    int64_t n = 0;
    while (j < params_.size() && (n == 0 || n + params_[j].numel() <= bucket_floats)) n += params_[j++].numel();
    auto flat = torch::zeros({n}, params_[i].options().dtype(torch::kFloat32));
    int64_t off = 0;
    for (size_t k = i; k < j; ++k) {
      auto& p = params_[k];
      if (p.scalar_type() != torch::kFloat32 || p.device() != flat.device())
        throw std::invalid_argument("GradBuckets: parameters must be fp32 on one device");
      p.mutable_grad() = flat.narrow(0, off, p.numel()).view(p.sizes());
      off += p.numel();
    }
    buckets_.push_back(flat);
    i = j;
  }
  if (how_ == AllReduce::Mpi && !buckets_.empty() && buckets_.front().is_cuda())
    staging_ = torch::empty({bucket_floats_max()}, torch::TensorOptions().dtype(torch::kFloat32).pinned_memory(true));
  if (how_ == AllReduce::Nccl && !buckets_.empty()) nccl_ = make_nccl_comm(comm_, buckets_.front().device());
}

GradBuckets::~GradBuckets() = default;

int64_t GradBuckets::bucket_floats_max() const {
  int64_t m = 0;
  for (const auto& b : buckets_) m = std::max(m, b.numel());
  return m;
}

void GradBuckets::zero() {
  for (auto& b : buckets_) b.zero_();
}

bool GradBuckets::intact() const {
  for (const auto& p : params_) {
    const auto& g = p.grad();
    if (!g.defined()) return false;
    bool inside = false;
    for (const auto& b : buckets_)
      inside = inside || (g.data_ptr() >= b.data_ptr() &&
                          static_cast<const char*>(g.data_ptr()) + g.nbytes() <= static_cast<const char*>(b.data_ptr()) + b.nbytes());
    if (!inside) return false;
  }
  return true;
}

void GradBuckets::allreduce() {
  switch (how_) {
    case AllReduce::Local:
      return;
    case AllReduce::Nccl:
      for (auto& b : buckets_) nccl_->allreduce_sum(b);
      return;
    case AllReduce::Mpi:
      for (auto& b : buckets_) {
        const auto n = static_cast<uint64_t>(b.numel());
        if (!b.is_cuda()) {
          hpc::allreduce_sum_f32(b.data_ptr<float>(), n, comm_);
          continue;
        }
        // A blocking copy out (it waits for backward); MPI on the pinned copy; an
        // asynchronous copy back, stream-ordered before the next bucket's copy out.
        auto host = staging_.narrow(0, 0, b.numel());
        host.copy_(b);
        hpc::allreduce_sum_f32(host.data_ptr<float>(), n, comm_);
        b.copy_(host, /*non_blocking=*/true);
      }
      return;
  }
}

torch::Tensor GradBuckets::clip(double max_norm) {
  torch::NoGradGuard ng;
  std::vector<torch::Tensor> norms;
  for (const auto& b : buckets_) norms.push_back(b.norm(2));
  auto total = torch::stack(norms).norm(2);
  auto coef = torch::clamp_max(max_norm / (total + 1e-6), 1.0);
  for (auto& b : buckets_) b.mul_(coef);
  return total;
}

}  // namespace genemask::model
