// StepGraph on a CUDA LibTorch (cuda_graph_none.cpp elsewhere).
#include "model/cuda_graph.hpp"

#include <ATen/DeviceAccelerator.h>
#include <ATen/autocast_mode.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/util/Exception.h>

#include <stdexcept>
#include <string_view>

namespace genemask::model {

struct StepGraph::Impl {
  torch::Device dev;
  std::unique_ptr<at::cuda::CUDAGraph> graph;  // made at capture: its constructor needs a GPU
  bool captured = false;
  explicit Impl(const torch::Device& d) : dev(d) {}
};

std::string cuda_device_name(int index) {
  return at::cuda::getDeviceProperties(static_cast<c10::DeviceIndex>(index))->name;
}

struct HostSyncCounter::Impl : c10::WarningHandler {
  bool on = false;
  int64_t n = 0;
  c10::WarningHandler* before = nullptr;
  c10::cuda::SyncDebugMode mode_before = c10::cuda::SyncDebugMode::L_DISABLED;
  void process(const c10::Warning& w) override {
    // c10::cuda::warn_or_error_on_sync's words in its warning mode.
    if (std::string_view(w.msg()).find("called a synchronizing CUDA operation") != std::string_view::npos)
      ++n;
    else
      before->process(w);
  }
};

HostSyncCounter::HostSyncCounter(const torch::Device& dev) : impl_(std::make_unique<Impl>()) {
  if (!dev.is_cuda()) return;
  impl_->on = true;
  impl_->before = c10::WarningUtils::get_warning_handler();
  impl_->mode_before = c10::cuda::warning_state().get_sync_debug_mode();
  c10::WarningUtils::set_warning_handler(impl_.get());
  c10::cuda::warning_state().set_sync_debug_mode(c10::cuda::SyncDebugMode::L_WARN);
}

HostSyncCounter::~HostSyncCounter() {
  if (!impl_->on) return;
  c10::cuda::warning_state().set_sync_debug_mode(impl_->mode_before);
  c10::WarningUtils::set_warning_handler(impl_->before);
}

int64_t HostSyncCounter::count() const { return impl_->on ? impl_->n : -1; }

std::string StepGraph::unavailable(const torch::Device& dev) {
  if (!dev.is_cuda()) return "the device is a CPU";
  return "";
}

StepGraph::StepGraph(const torch::Device& dev) {
  if (const std::string why = unavailable(dev); !why.empty()) throw std::invalid_argument("CUDA graph: " + why);
  impl_ = std::make_unique<Impl>(dev);
}
StepGraph::~StepGraph() = default;

void StepGraph::capture(const std::function<void()>& step, int warmup, const StepGraph* pool_of) {
  if (impl_->captured) throw std::logic_error("StepGraph::capture: already captured");
  if (pool_of && !pool_of->captured()) throw std::logic_error("StepGraph::capture: the pool's graph is not captured");
  const c10::MempoolId_t pool = pool_of ? pool_of->impl_->graph->pool() : c10::MempoolId_t{0, 0};
  const auto index = impl_->dev.index();
  at::accelerator::synchronizeDevice(index);
  const c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool(/*isHighPriority=*/false, static_cast<c10::DeviceIndex>(index));
  {
    const c10::cuda::CUDAStreamGuard guard(side);
    for (int i = 0; i < warmup; ++i) step();
    side.synchronize();
    const bool cache = at::autocast::is_autocast_cache_enabled();
    at::autocast::set_autocast_cache_enabled(false);
    try {
      // Thread-local mode: the data loader's thread may allocate pinned host memory meanwhile.
      impl_->graph = std::make_unique<at::cuda::CUDAGraph>();
      impl_->graph->capture_begin(pool, cudaStreamCaptureModeThreadLocal);
      step();
      impl_->graph->capture_end();
    } catch (...) {
      at::autocast::set_autocast_cache_enabled(cache);
      throw;
    }
    at::autocast::set_autocast_cache_enabled(cache);
  }
  at::accelerator::synchronizeDevice(index);
  impl_->captured = true;
}

void StepGraph::replay() {
  if (!impl_->captured) throw std::logic_error("StepGraph::replay: nothing captured");
  impl_->graph->replay();
}

bool StepGraph::captured() const { return impl_->captured; }

}  // namespace genemask::model
