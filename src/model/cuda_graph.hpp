#pragma once
// A CUDA graph of a whole training step (forward, backward, clipping, optimizer): captured
// once, replayed every step, so that the host launches one graph instead of ~100 kernels
// per layer. What it captures must have static shapes and read its per-step inputs from
// tensors it was captured with (the batch, the learning rate, the loss divisor), and write
// its outputs into tensors it was captured with.
//
// Dropout in a replayed graph draws from the CUDA generator as the eager step does: each
// replay advances the generator's offset by what the captured step consumed, so a graph
// step and an eager step from the same generator state draw the same numbers.
#include <torch/torch.h>

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace genemask::model {

/// GPU `index`'s name as CUDA reports it ("NVIDIA H100 80GB HBM3"); "" in a build without CUDA.
std::string cuda_device_name(int index);

/// Clones of live tensors and of a device's random generator state, put back by restore():
/// what a graph's warm-up and capture change (weights, optimizer state, gradients, dropout
/// draws) undone before the real steps, so the replays start where the eager step would.
class StateSnapshot {
 public:
  StateSnapshot(std::vector<torch::Tensor> live, const torch::Device& dev)
      : live_(std::move(live)),
        gen_(dev.is_cuda() ? at::globalContext().defaultGenerator(dev) : at::detail::getDefaultCPUGenerator()) {
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

/// Counts, while it lives, the times the host waited for the GPU on this thread as LibTorch
/// reports them (c10's sync debug mode: a tensor's value read on the host, a blocking copy, a
/// stream or device synchronised); the other warnings of the thread go on to the handler
/// before. One at a time in a process. On a CPU, or in a build without CUDA, it counts
/// nothing and count() is -1. Waits LibTorch does not report (cuDNN's or NCCL's own) are not
/// counted.
class HostSyncCounter {
 public:
  explicit HostSyncCounter(const torch::Device& dev);
  ~HostSyncCounter();
  HostSyncCounter(const HostSyncCounter&) = delete;
  HostSyncCounter& operator=(const HostSyncCounter&) = delete;
  int64_t count() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

class StepGraph {
 public:
  /// Why a step cannot be captured on `dev` in this build: "" when it can; else one
  /// sentence ("the device is a CPU", "this build's LibTorch has no CUDA").
  static std::string unavailable(const torch::Device& dev);

  explicit StepGraph(const torch::Device& dev);
  ~StepGraph();
  StepGraph(const StepGraph&) = delete;
  StepGraph& operator=(const StepGraph&) = delete;

  /// Runs `step` `warmup` times eagerly on a side stream (allocations and library handles
  /// settle), then captures one call of it, with the autocast weight cache off (a cached
  /// cast would be a tensor of the capture). The warm-up calls do run: a caller that must
  /// not see them saves and restores its state around this. `pool_of`: a graph captured
  /// before whose memory pool this one shares; right for graphs that never run at once and
  /// keep no tensor in the pool between replays (their outputs live in tensors made outside).
  void capture(const std::function<void()>& step, int warmup = 2, const StepGraph* pool_of = nullptr);
  /// Launches the captured step on the current stream.
  void replay();
  bool captured() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace genemask::model
