#include "model/graph_step.hpp"

#include <ATen/core/Generator.h>
#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <mutex>
#include <stdexcept>
#include <utility>
#include <vector>

#include "model/cuda_graph.hpp"
#include "model/grad_sync.hpp"
#include "model/optim.hpp"
#include "model/packing.hpp"
#include "model/runtime.hpp"
#include "model/weight_copies.hpp"

namespace genemask::model {

StaticShape static_shape(const StaticLimits& limits, int64_t rows, int64_t masked) {
  if (limits.samples <= 0 || limits.cols <= 0 || rows <= 0 || rows > limits.samples || masked < 0)
    throw std::invalid_argument(fmt::format("static_shape: {} rows masking {} positions for {} samples of {} positions",
                                            rows, masked, limits.samples, limits.cols));
  const int64_t step = (limits.samples + kRowBuckets - 1) / kRowBuckets;
  StaticShape s;
  s.rows = std::min(limits.samples, (rows + step - 1) / step * step);
  s.cols = limits.cols;
  s.samples = limits.samples;
  if (limits.capacity > 0) {
    s.capacity = limits.capacity;
  } else {
    const int64_t positions = s.rows * s.cols;
    const int64_t level = (positions + kCapacityLevels - 1) / kCapacityLevels;
    s.capacity = std::min(positions, std::max<int64_t>(1, (masked + level - 1) / level) * level);
  }
  return s;
}

std::optional<torch::Tensor> stage_static(const Batch& b, bool packing, const StaticLimits& limits, bool pinned,
                                          StaticShape& shape, int64_t& masked, int64_t& rows) {
  masked = 0;
  for (const int64_t l : b.labels) masked += l != kIgnoreLabel;
  const PackedBatch laid = packing ? pack_batch(b, limits.cols) : one_per_row(b);
  rows = laid.rows;
  if (laid.rows < 1 || b.rows > limits.samples || laid.cols > limits.cols) return std::nullopt;
  const StaticShape s = shape = static_shape(limits, laid.rows, masked);
  if (masked > s.capacity) return std::nullopt;
  const PackedBatch w = widen(laid, s.rows, s.cols);
  auto buf = torch::empty({s.cells()}, torch::TensorOptions().dtype(torch::kLong).pinned_memory(pinned));
  int64_t* p = buf.data_ptr<int64_t>();
  const int64_t n = s.rows * s.cols;
  std::copy(w.input_ids.begin(), w.input_ids.end(), p);
  std::copy(w.position_ids.begin(), w.position_ids.end(), p + n);
  int64_t* cu = p + 2 * n;
  std::copy(w.cu_seqlens.begin(), w.cu_seqlens.end(), cu);
  std::fill(cu + w.cu_seqlens.size(), cu + s.boundaries(), n);  // zero-length segments at the end
  int64_t* masked_rows = cu + s.boundaries();
  int64_t* targets = masked_rows + s.capacity;
  int64_t k = 0;
  for (int64_t i = 0; i < n; ++i)
    if (w.labels[static_cast<size_t>(i)] != kIgnoreLabel) {
      masked_rows[k] = i;
      targets[k++] = w.labels[static_cast<size_t>(i)];
    }
  std::fill(masked_rows + k, masked_rows + s.capacity, 0);  // position 0, ignored target: exactly 0 loss
  std::fill(targets + k, targets + s.capacity, kIgnoreLabel);
  return buf;
}

std::string decide_cuda_graphs(const std::string& requested, const std::string& unavailable, const std::string& shared,
                               double flops_per_token) {
  if (requested == "off") return "--cuda-graphs off";
  if (requested != "on" && requested != "auto")
    throw std::invalid_argument(fmt::format("--cuda-graphs must be auto, on or off, got '{}'", requested));
  // Ranks sharing a GPU would each hold a copy of the graphs' memory pool beside the
  // other's model: the eager step's allocator shares the GPU more gracefully.
  const std::string why = !unavailable.empty() ? unavailable : shared;
  if (!why.empty()) {
    if (requested == "on")
      throw std::invalid_argument(fmt::format("--cuda-graphs on: the step cannot be captured here: {}; use "
                                              "--cuda-graphs auto (the eager step where graphs cannot run) or off",
                                              why));
    return why;
  }
  if (requested == "auto" && flops_per_token > kGraphsMaxFlopsPerToken)
    return fmt::format("the model's matrix products ({:.0f} million FLOPs per token, above {:.0f}) hide the kernel "
                       "launches, and the graphs' fixed shapes measured slower there; --cuda-graphs on captures it",
                       flops_per_token / 1e6, kGraphsMaxFlopsPerToken / 1e6);
  return "";
}


/// The fixed buffers of one shape: a staged micro-batch (views into buf), the layout over
/// it, and its graph.
struct ShapeBuffers {
  StaticShape shape;
  torch::Tensor buf, ids, rows, targets, cu64;
  PackedLayout layout;
  std::unique_ptr<StepGraph> graph;

  ShapeBuffers(const StaticShape& s, const torch::Device& dev) : shape(s) {
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
  }
};

struct GraphStep::Impl {
  BertForMaskedLM model;
  GradBuckets& grads;
  FusedAdamW& fused;
  torch::Device dev;
  bool bf16;
  double clip;
  bool capture;
  std::map<std::pair<int64_t, int64_t>, std::unique_ptr<ShapeBuffers>> shapes;  // by rows and capacity
  torch::Tensor loss, divisor, lr, norm;
  std::unique_ptr<StepGraph> update;
  const StepGraph* pool = nullptr;  // the first graph captured: every later one shares its pool
  bool set_up = false;              // since begin(): a shape made or a graph captured

  Impl(BertForMaskedLM m, GradBuckets& g, FusedAdamW& f, const torch::Device& d, bool b, double c, bool cap)
      : model(std::move(m)), grads(g), fused(f), dev(d), bf16(b), clip(c), capture(cap) {
    const auto f32 = torch::TensorOptions().dtype(torch::kFloat32).device(dev);
    loss = torch::zeros({}, f32.dtype(torch::kFloat64));
    divisor = torch::ones({}, f32);
    lr = torch::zeros({}, f32);
    norm = torch::zeros({}, f32);
  }

  /// One micro-batch's forward and backward on a shape's buffers (what its graph holds).
  void forward_backward_body(ShapeBuffers& sb) {
    sb.layout.cu_seqlens.copy_(sb.cu64);
    sb.layout.boundaries_changed();  // the mask and cuDNN's boundaries made from this micro-batch's
    torch::Tensor l;
    {
      Autocast autocast(bf16);
      l = model->masked_lm_loss_sum(sb.ids, sb.layout, sb.rows, sb.targets);
    }
    (l / divisor).backward();
    loss.add_(l.detach().to(torch::kFloat64));
  }

  /// Clipping and the optimizer (what the update graph holds).
  void update_body() {
    norm.copy_(grads.clip(clip));
    fused.step(lr);
  }

  std::vector<torch::Tensor> gradients() {
    std::vector<torch::Tensor> g;
    for (const auto& p : model->parameters()) g.push_back(p.grad());
    return g;
  }

  /// Captures `body` into `graph`, sharing the first graph's pool; what warm-up and capture
  /// change (`live`, and the generator) is put back after.
  void capture_into(std::unique_ptr<StepGraph>& graph, std::vector<torch::Tensor> live,
                    const std::function<void()>& body) {
    StateSnapshot before(std::move(live), dev);
    graph = std::make_unique<StepGraph>(dev);
    graph->capture(body, 2, pool);
    before.restore();
    // The weights are back where they were before the warm-up's updates; so are their bf16
    // copies, which the replays read (made here, outside the graph).
    if (WeightCopies* copies = fused.weight_copies()) copies->refresh();
    if (!pool) pool = graph.get();
  }
};

GraphStep::GraphStep(BertForMaskedLM model, GradBuckets& grads, FusedAdamW& fused, const torch::Device& dev,
                     bool bf16, double clip, bool capture)
    : impl_(std::make_unique<Impl>(std::move(model), grads, fused, dev, bf16, clip, capture)) {
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
  impl_->set_up = false;
}

void GraphStep::micro(const torch::Tensor& staged, const StaticShape& shape) {
  Impl& m = *impl_;
  if (staged.numel() != shape.cells())
    throw std::invalid_argument(
        fmt::format("GraphStep: a staged micro-batch of {} values, not {}", staged.numel(), shape.cells()));
  auto& slot = m.shapes[{shape.rows, shape.capacity}];
  if (!slot) {
    slot = std::make_unique<ShapeBuffers>(shape, m.dev);
    m.set_up = true;
  }
  ShapeBuffers& sb = *slot;
  if (sb.shape.cells() != shape.cells() || sb.shape.cols != shape.cols)
    throw std::logic_error("GraphStep: two layouts of one shape");
  sb.buf.copy_(staged, /*non_blocking=*/true);
  if (!m.capture) {
    m.forward_backward_body(sb);
    return;
  }
  if (!sb.graph) {  // the warm-up and capture run the body: its gradients, loss and draws are undone
    std::vector<torch::Tensor> live = m.gradients();
    live.push_back(m.loss);
    m.capture_into(sb.graph, std::move(live), [&] { m.forward_backward_body(sb); });
  }
  sb.graph->replay();
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
      m.capture_into(m.update, std::move(live), [&] { m.update_body(); });
      m.set_up = true;
    }
    m.update->replay();
  }
  m.fused.advance_host_steps();
  return m.norm;
}

int GraphStep::graphs() const {
  int n = impl_->update ? 1 : 0;
  for (const auto& [key, sb] : impl_->shapes) n += sb->graph ? 1 : 0;
  return n;
}

int GraphStep::shapes() const { return static_cast<int>(impl_->shapes.size()); }

bool GraphStep::set_up() const { return impl_->set_up; }

}  // namespace genemask::model
