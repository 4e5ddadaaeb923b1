#include "model/graph_step.hpp"

#include <ATen/core/Generator.h>
#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <mutex>
#include <stdexcept>
#include <vector>

#include "model/cuda_graph.hpp"
#include "model/grad_sync.hpp"
#include "model/optim.hpp"
#include "model/packing.hpp"
#include "model/runtime.hpp"
#include "model/static_rows.hpp"

namespace genemask::model {

StaticShape static_shape(int64_t rows, int64_t cols) {
  if (rows <= 0 || cols <= 0) throw std::invalid_argument(fmt::format("static_shape: {} x {} positions", rows, cols));
  return {rows, cols, masked_rows_capacity(rows, cols, kStaticMaskedFraction)};
}

std::optional<torch::Tensor> stage_static(const Batch& b, bool packing, const StaticShape& s, bool pinned,
                                          int64_t& masked) {
  masked = 0;
  for (const int64_t l : b.labels) masked += l != kIgnoreLabel;
  // A batch wider or longer than the fixed shape (none comes from the loader, whose
  // micro-batches are batch-per-rank samples of at most the model's width) runs eagerly too.
  if (masked > s.capacity || b.rows > s.rows || b.cols > s.cols) return std::nullopt;
  const PackedBatch w = widen(packing ? pack_batch(b, s.cols) : one_per_row(b), s.rows, s.cols);
  auto buf = torch::empty({s.cells()}, torch::TensorOptions().dtype(torch::kLong).pinned_memory(pinned));
  int64_t* p = buf.data_ptr<int64_t>();
  const int64_t n = s.rows * s.cols;
  std::copy(w.input_ids.begin(), w.input_ids.end(), p);
  std::copy(w.position_ids.begin(), w.position_ids.end(), p + n);
  int64_t* cu = p + 2 * n;
  std::copy(w.cu_seqlens.begin(), w.cu_seqlens.end(), cu);
  std::fill(cu + w.cu_seqlens.size(), cu + s.boundaries(), n);  // zero-length segments at the end
  int64_t* rows = cu + s.boundaries();
  int64_t* targets = rows + s.capacity;
  int64_t k = 0;
  for (int64_t i = 0; i < n; ++i)
    if (w.labels[static_cast<size_t>(i)] != kIgnoreLabel) {
      rows[k] = i;
      targets[k++] = w.labels[static_cast<size_t>(i)];
    }
  std::fill(rows + k, rows + s.capacity, 0);  // position 0, ignored target: exactly 0 loss
  std::fill(targets + k, targets + s.capacity, kIgnoreLabel);
  return buf;
}

std::string decide_cuda_graphs(const std::string& requested, const std::string& unavailable, const std::string& shared) {
  if (requested == "off") return "--cuda-graphs off";
  if (requested != "on" && requested != "auto")
    throw std::invalid_argument(fmt::format("--cuda-graphs must be auto, on or off, got '{}'", requested));
  // Ranks sharing a GPU would each hold a copy of the graphs' memory pool beside the
  // other's model: the eager step's allocator shares the GPU more gracefully.
  const std::string why = !unavailable.empty() ? unavailable : shared;
  if (why.empty()) return "";
  if (requested == "on")
    throw std::invalid_argument(fmt::format("--cuda-graphs on: the step cannot be captured here: {}; use --cuda-graphs "
                                            "auto (the eager step where graphs cannot run) or off",
                                            why));
  return why;
}

namespace {

at::Generator generator_of(const torch::Device& d) {
  return d.is_cuda() ? at::globalContext().defaultGenerator(d) : at::detail::getDefaultCPUGenerator();
}

/// Clones of tensors, and their values put back: what a graph's warm-up and capture change
/// (weights, optimizer state, gradients, the generator) is undone before the real steps.
class Snapshot {
 public:
  Snapshot(std::vector<torch::Tensor> live, const torch::Device& dev) : live_(std::move(live)), gen_(generator_of(dev)) {
    torch::NoGradGuard ng;
    for (const auto& t : live_) saved_.push_back(t.clone());
    std::lock_guard<std::mutex> lock(gen_.mutex());
    rng_ = gen_.get_state();
  }
  void restore() {
    torch::NoGradGuard ng;
    for (size_t i = 0; i < live_.size(); ++i) live_[i].copy_(saved_[i]);
    std::lock_guard<std::mutex> lock(gen_.mutex());
    gen_.set_state(rng_);
  }

 private:
  std::vector<torch::Tensor> live_, saved_;
  at::Generator gen_;
  torch::Tensor rng_;
};

}  // namespace

struct GraphStep::Impl {
  BertForMaskedLM model;
  GradBuckets& grads;
  FusedAdamW& fused;
  StaticShape shape;
  torch::Device dev;
  bool bf16;
  double clip;
  bool capture;
  // The fixed buffers: one staged micro-batch (views into buf), the layout over it, and the
  // step's scalars.
  torch::Tensor buf, ids, rows, targets, cu64;
  PackedLayout layout;
  torch::Tensor loss, divisor, lr, norm;
  std::unique_ptr<StepGraph> forward_backward, update;

  Impl(BertForMaskedLM m, GradBuckets& g, FusedAdamW& f, const StaticShape& s, const torch::Device& d, bool b,
       double c, bool cap)
      : model(std::move(m)), grads(g), fused(f), shape(s), dev(d), bf16(b), clip(c), capture(cap) {
    const int64_t n = s.rows * s.cols;
    buf = torch::zeros({s.cells()}, torch::TensorOptions().dtype(torch::kLong).device(dev));
    ids = buf.narrow(0, 0, n).view({s.rows, s.cols});
    cu64 = buf.narrow(0, 2 * n, s.boundaries());
    rows = buf.narrow(0, 2 * n + s.boundaries(), s.capacity);
    targets = buf.narrow(0, 2 * n + s.boundaries() + s.capacity, s.capacity);
    layout.position_ids = buf.narrow(0, n, n).view({s.rows, s.cols});
    layout.cu_seqlens = torch::zeros({s.boundaries()}, torch::TensorOptions().dtype(torch::kInt).device(dev));
    layout.segments = cu64;  // read by the CPU's attention only, where buf is on the CPU
    layout.max_seqlen = s.cols;
    const auto f32 = torch::TensorOptions().dtype(torch::kFloat32).device(dev);
    loss = torch::zeros({}, f32.dtype(torch::kFloat64));
    divisor = torch::ones({}, f32);
    lr = torch::zeros({}, f32);
    norm = torch::zeros({}, f32);
  }

  /// One micro-batch's forward and backward on the fixed buffers (what the first graph holds).
  void forward_backward_body() {
    layout.cu_seqlens.copy_(cu64);
    layout.block_mask_ = torch::Tensor();  // made again from this micro-batch's boundaries
    torch::Tensor l;
    {
      Autocast autocast(bf16);
      l = model->masked_lm_loss_sum(ids, layout, rows, targets);
    }
    (l / divisor).backward();
    loss.add_(l.detach().to(torch::kFloat64));
  }

  /// Clipping and the optimizer (what the second graph holds).
  void update_body() {
    norm.copy_(grads.clip(clip));
    fused.step(lr);
  }

  std::vector<torch::Tensor> gradients() {
    std::vector<torch::Tensor> g;
    for (const auto& p : model->parameters()) g.push_back(p.grad());
    return g;
  }
};

GraphStep::GraphStep(BertForMaskedLM model, GradBuckets& grads, FusedAdamW& fused, const StaticShape& s,
                     const torch::Device& dev, bool bf16, double clip, bool capture)
    : impl_(std::make_unique<Impl>(std::move(model), grads, fused, s, dev, bf16, clip, capture)) {
  if (capture) {
    if (const std::string why = StepGraph::unavailable(dev); !why.empty())
      throw std::invalid_argument("CUDA graph: " + why);
  }
}
GraphStep::~GraphStep() = default;

void GraphStep::begin(double divisor) {
  torch::NoGradGuard ng;
  impl_->loss.zero_();
  impl_->divisor.fill_(std::max(1.0, divisor));
}

void GraphStep::micro(const torch::Tensor& staged) {
  Impl& m = *impl_;
  if (staged.numel() != m.shape.cells())
    throw std::invalid_argument(fmt::format("GraphStep: a staged micro-batch of {} values, not {}", staged.numel(),
                                            m.shape.cells()));
  m.buf.copy_(staged, /*non_blocking=*/true);
  if (!m.capture) {
    m.forward_backward_body();
    return;
  }
  if (!m.forward_backward) {
    // The warm-up and capture run the body: their gradients, loss and random draws are undone.
    std::vector<torch::Tensor> live = m.gradients();
    live.push_back(m.loss);
    Snapshot before(std::move(live), m.dev);
    m.forward_backward = std::make_unique<StepGraph>(m.dev);
    m.forward_backward->capture([&] { m.forward_backward_body(); });
    before.restore();
  }
  m.forward_backward->replay();
}

torch::Tensor& GraphStep::loss_sum() { return impl_->loss; }

torch::Tensor GraphStep::finish(double lr) {
  Impl& m = *impl_;
  {
    torch::NoGradGuard ng;
    m.lr.fill_(lr);
  }
  if (!m.capture) {
    m.update_body();
  } else {
    if (!m.update) {
      std::vector<torch::Tensor> live = m.model->parameters();
      for (auto& t : m.fused.state_tensors()) live.push_back(t);
      for (auto& t : m.gradients()) live.push_back(t);
      Snapshot before(std::move(live), m.dev);
      m.update = std::make_unique<StepGraph>(m.dev);
      m.update->capture([&] { m.update_body(); });
      before.restore();
    }
    m.update->replay();
  }
  m.fused.advance_host_steps();
  return m.norm;
}

bool GraphStep::captured() const { return impl_->forward_backward && impl_->update; }

}  // namespace genemask::model
