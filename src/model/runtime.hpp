#pragma once
// Thread count and device choice shared by the single-process model commands
// (finetune, variants).
#include <torch/torch.h>

#include <algorithm>
#include <fmt/format.h>
#include <stdexcept>
#include <string>
#include <thread>

namespace genemask::model {

/// Sets LibTorch's intra-op threads: `requested`, or all cores for 0. Returns the count.
inline int set_intra_op_threads(int requested) {
  const int threads = requested > 0 ? requested : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  torch::set_num_threads(threads);
  return threads;
}

/// "cpu", or "cuda" with a GPU ordinal; cuda needs a CUDA LibTorch and a visible GPU.
inline torch::Device pick_device(const std::string& device, int index) {
  if (device == "cpu") return torch::Device(torch::kCPU);
  if (device != "cuda") throw std::invalid_argument(fmt::format("--device must be cpu or cuda, got '{}'", device));
  if (!torch::cuda::is_available())
    throw std::runtime_error("--device cuda: this LibTorch build has no CUDA or no GPU is visible");
  return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(index));
}

}  // namespace genemask::model
