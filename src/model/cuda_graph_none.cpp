// StepGraph in a build whose LibTorch has no CUDA: never available.
#include "model/cuda_graph.hpp"

#include <stdexcept>

namespace genemask::model {

struct StepGraph::Impl {};

std::string cuda_device_name(int) { return ""; }

struct HostSyncCounter::Impl {};
HostSyncCounter::HostSyncCounter(const torch::Device&) : impl_(std::make_unique<Impl>()) {}
HostSyncCounter::~HostSyncCounter() = default;
int64_t HostSyncCounter::count() const { return -1; }

std::string StepGraph::unavailable(const torch::Device& dev) {
  return dev.is_cuda() ? "this build's LibTorch has no CUDA" : "the device is a CPU";
}
StepGraph::StepGraph(const torch::Device& dev) {
  throw std::invalid_argument("CUDA graph: " + unavailable(dev));
}
StepGraph::~StepGraph() = default;
void StepGraph::capture(const std::function<void()>&, int, const StepGraph*) {}
void StepGraph::replay() {}
bool StepGraph::captured() const { return false; }

}  // namespace genemask::model
