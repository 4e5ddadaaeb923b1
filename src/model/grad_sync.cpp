#include "model/grad_sync.hpp"

#include <fmt/format.h>

#include <exception>
#include <map>
#include <nlohmann/json.hpp>

#include "hpc/mpi.hpp"
#include "io/atomic_file.hpp"

namespace genemask::model {

std::string to_string(AllReduce a) {
  switch (a) {
    case AllReduce::Local: return "none (one rank)";
    case AllReduce::Mpi: return "MPI";
    case AllReduce::Nccl: return "NCCL";
  }
  return "?";
}

std::string shared_gpu(const std::vector<RankGpu>& ranks) {
  std::map<std::pair<std::string, std::string>, size_t> first;
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (ranks[i].gpu.empty()) continue;
    auto [it, fresh] = first.emplace(std::make_pair(ranks[i].host, ranks[i].gpu), i);
    if (!fresh) return fmt::format("ranks {} and {} on {} share GPU {}", it->second, i, ranks[i].host, ranks[i].gpu);
  }
  return "";
}

AllReduce decide_allreduce(const std::string& requested, const std::vector<RankGpu>& ranks, bool nccl_available) {
  if (requested != "auto" && requested != "nccl" && requested != "mpi")
    throw std::invalid_argument(fmt::format("--allreduce must be auto, nccl or mpi, got '{}'", requested));
  const size_t world = ranks.size();
  bool on_gpus = world > 0;
  for (const auto& r : ranks) on_gpus = on_gpus && !r.gpu.empty();
  const std::string shared = on_gpus ? shared_gpu(ranks) : "";  // the first two ranks of one host on one GPU, if any
  const bool own = on_gpus && shared.empty();
  if (requested == "mpi") return world <= 1 ? AllReduce::Local : AllReduce::Mpi;
  if (requested == "nccl") {
    if (!on_gpus) throw std::invalid_argument("--allreduce nccl needs --device cuda");
    if (!nccl_available)
      throw std::invalid_argument("--allreduce nccl: this genemask was built without NCCL (docs/build.md)");
    if (!own)
      throw std::invalid_argument(fmt::format(
          "--allreduce nccl needs a GPU per rank, but {}; use --allreduce mpi, fewer ranks per node, or one GPU per "
          "rank (e.g. srun --gpus-per-task=1)",
          shared));
    return AllReduce::Nccl;
  }
  if (world <= 1) return AllReduce::Local;
  return own && nccl_available ? AllReduce::Nccl : AllReduce::Mpi;
}

std::vector<RankGpu> gather_rank_gpus(const torch::Device& device, MPI_Comm comm) {
  const std::string mine = nlohmann::json{io::host_name(), gpu_identity(device)}.dump();
  const auto all = hpc::gather_bytes(mine, 0, comm);
  std::string joined;  // rank 0's JSON array of every rank's pair, sent to all
  if (hpc::comm_rank(comm) == 0) {
    nlohmann::json a = nlohmann::json::array();
    for (const auto& one : all) a.push_back(nlohmann::json::parse(one));
    joined = a.dump();
  }
  hpc::bcast_bytes(joined, 0, comm);
  std::vector<RankGpu> ranks;
  for (const auto& j : nlohmann::json::parse(joined)) ranks.push_back({j[0].get<std::string>(), j[1].get<std::string>()});
  return ranks;
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

GradBuckets::~GradBuckets() {
  if (nccl_ && std::uncaught_exceptions() > 0) nccl_->abort();
}

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
