#include "model/runtime.hpp"

#include <mutex>
#include <fstream>
#include <ATen/Context.h>
#include <ATen/autocast_mode.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/Exception.h>
#include <torch/version.h>

#include "model/grad_sync.hpp"

#include <dlfcn.h>
#include <malloc.h>

#include <climits>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <fmt/format.h>
#include <stdexcept>
#include <thread>

namespace genemask::model {
namespace {

/// Keeps the warnings LibTorch raises (e.g. "CUDA initialization: Found no NVIDIA driver")
/// instead of printing them, so that they can be part of one error line.
class KeepWarnings : public c10::WarningHandler {
 public:
  void process(const c10::Warning& w) override {
    if (!text.empty()) text += "; ";
    text += w.msg();
  }
  std::string text;
};


}  // namespace

bool tune_cpu_allocator() {
  static const bool tuned = [] {
    for (const char* v : {"MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_", "MALLOC_ARENA_MAX",
                          "GLIBC_TUNABLES"})
      if (std::getenv(v)) return false;  // the user's choice
    // A training step allocates and frees the same large activations every step. Above
    // glibc's mmap threshold each is a fresh mmap whose pages fault in again (a sixth of a
    // CPU bf16 logo step, docs/benchmarks.md): keep them in the heap, and keep freed memory
    // for the next step instead of returning it to the system.
    return mallopt(M_MMAP_THRESHOLD, 1 << 30) == 1 && mallopt(M_TRIM_THRESHOLD, INT_MAX) == 1 &&
           mallopt(M_TOP_PAD, 512 << 20) == 1;
  }();
  return tuned;
}

bool widen_onednn_primitive_cache() {
  static const bool widened = [] {
    if (std::getenv("ONEDNN_PRIMITIVE_CACHE_CAPACITY") || std::getenv("DNNL_PRIMITIVE_CACHE_CAPACITY"))
      return false;  // the user's choice
    return setenv("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "16384", 0) == 0;
  }();
  return widened;
}

void tune_cpu_for_training() {
  tune_cpu_allocator();
  widen_onednn_primitive_cache();
}

int set_intra_op_threads(int requested, int ranks_on_node, bool announce) {
  if (requested < 0) throw std::invalid_argument(fmt::format("--threads must be >= 0, got {}", requested));
  const CoreBudget b = available_cores();
  int threads = requested > 0 ? requested : std::max(1, b.cores / std::max(1, ranks_on_node));
  if (threads > b.cores) {
    // More threads than cores only slows LibTorch down, and thousands of them exhaust the
    // address space: its pool then waits forever on a futex instead of failing.
    threads = b.cores;
    if (announce)
      std::cerr << fmt::format("[genemask] --threads {} is more than the {} core(s) this process may use (CPU "
                               "affinity: {}, cgroup CPU quota: {}); using {}",
                               requested, b.cores, b.affinity,
                               b.cgroup_quota > 0 ? std::to_string(b.cgroup_quota) : std::string("none"), threads)
                << std::endl;
  }
  torch::set_num_threads(threads);
  return threads;
}

namespace {
/// The CPU's model name and its bf16 matrix instructions, from /proc/cpuinfo (Linux).
std::pair<std::string, std::string> cpu_bf16_support() {
  std::ifstream in("/proc/cpuinfo");
  std::string line, model, flags;
  while (std::getline(in, line) && (model.empty() || flags.empty())) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string key = line.substr(0, line.find_last_not_of(" \t", colon - 1) + 1);
    const std::string value = colon + 2 <= line.size() ? line.substr(colon + 2) : "";
    if (key == "model name" && model.empty()) model = value;
    if (key == "flags" && flags.empty()) flags = " " + value + " ";
  }
  std::string bf16;
  if (flags.find(" amx_bf16 ") != std::string::npos) bf16 = "AMX-BF16";
  if (flags.find(" avx512_bf16 ") != std::string::npos) bf16 += std::string(bf16.empty() ? "" : ", ") + "AVX512-BF16";
  return {model, bf16};
}
}  // namespace

CpuBf16 cpu_bf16() {
  static const CpuBf16 c = [] {
    const auto [model, bf16] = cpu_bf16_support();
    return CpuBf16{model, bf16};
  }();
  return c;
}

RuntimeInfo runtime_info() {
  RuntimeInfo r;
  r.cpu_model = cpu_bf16().model;
  r.cpu_bf16 = cpu_bf16().instructions;
  r.torch_version = TORCH_VERSION;
  const auto& hooks = at::detail::getCUDAHooks();
  r.cuda_built = hooks.isBuilt();
  if (!r.cuda_built) return r;
  try {
    const long rt = hooks.versionCUDART();  // CUDART_VERSION: 13000 = 13.0, 12080 = 12.8
    r.cuda_version = fmt::format("{}.{}", rt / 1000, (rt / 10) % 100);
    if (hooks.hasCuDNN()) {
      // CUDNN_VERSION: major*10000 + minor*100 + patch from cuDNN 9 on (91900 = 9.19.0),
      // major*1000 + minor*100 + patch before.
      const long v = hooks.versionCuDNN();
      const long major_div = v >= 90000 ? 10000 : 1000;
      r.cudnn_version = fmt::format("{}.{}.{}", v / major_div, (v % major_div) / 100, v % 100);
    }
  } catch (const std::exception&) {
    // versions are informative; the GPU count below is what matters
  }
  KeepWarnings keep;
  {
    c10::WarningUtils::WarningHandlerGuard guard(&keep);
    try {
      r.gpus = static_cast<int>(torch::cuda::device_count());
    } catch (const std::exception& e) {
      r.gpus = 0;
      keep.text = e.what();
    }
  }
  if (r.gpus == 0) {
    std::string why = keep.text;
    if (why.empty()) {
      // LibTorch says nothing when there is no driver: tell that case from "no device".
      void* driver = ::dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
      why = driver ? "the NVIDIA driver reports no CUDA device" : "no NVIDIA driver: libcuda.so.1 cannot be loaded";
      if (driver) ::dlclose(driver);
    }
    if (const char* v = std::getenv("CUDA_VISIBLE_DEVICES")) why += fmt::format("; CUDA_VISIBLE_DEVICES='{}'", v);
    // One line: the first line of what CUDA said.
    r.no_gpu_reason = why.substr(0, why.find('\n'));
  }
  return r;
}

torch::Device pick_device(const std::string& device, int index, const std::string& flag) {
  if (device == "cpu") return torch::Device(torch::kCPU);
  if (device != "cuda") throw std::invalid_argument(fmt::format("--device must be cpu or cuda, got '{}'", device));
  const RuntimeInfo info = runtime_info();
  if (!info.cuda_built)
    throw std::runtime_error(fmt::format(
        "--device cuda: this genemask was built against LibTorch {} without CUDA; rebuild it against a CUDA "
        "LibTorch (docs/build.md), or use --device cpu",
        info.torch_version));
  if (info.gpus == 0)
    throw std::runtime_error(fmt::format(
        "--device cuda: no GPU is visible ({}); check with `nvidia-smi`, CUDA_VISIBLE_DEVICES and the job's GPU "
        "request (e.g. --gpus-per-node), or use --device cpu",
        info.no_gpu_reason));
  if (index < 0 || index >= info.gpus)
    throw std::invalid_argument(fmt::format("{} {}: only {} GPU(s) are visible (ordinals 0..{})", flag, index,
                                            info.gpus, info.gpus - 1));
  return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(index));
}

torch::Device pick_rank_device(const std::string& device, int local_rank) {
  if (device != "cuda") return pick_device(device, 0);
  const int gpus = std::max(1, runtime_info().gpus);
  return pick_device(device, local_rank % gpus, "node-local rank");
}

void use_device(const torch::Device& device, bool tf32) {
  if (!device.is_cuda()) return;
  c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA)->setDevice(device);
  set_tf32(tf32);
}

void set_tf32(bool on) {
  // The setters that keep LibTorch's two records of the choice in step: the legacy flag
  // (float32_matmul_precision, read by TunableOp, cuBLASLt and SDPA through
  // allowTF32CuBLAS()) and the per-backend precision of the newer API. Setting only the
  // newer one (setFloat32Precision) leaves them disagreeing, and allowTF32CuBLAS() then
  // throws "you have used mix of the legacy and new APIs" in the first matrix product.
  at::globalContext().setAllowTF32CuBLAS(on);
  at::globalContext().setAllowTF32CuDNN(on);
}

std::string resolve_precision(const std::string& precision, const std::string& device, bool gpu_bf16,
                              const std::string& cpu_instructions) {
  if (precision == "fp32" || precision == "bf16") return precision;
  if (precision != "auto")
    throw std::invalid_argument(fmt::format("--precision must be fp32, bf16 or auto, got '{}'", precision));
  const bool native = device == "cuda" ? gpu_bf16 : !cpu_instructions.empty();
  return precision_name(native);
}

bool wants_bf16(const std::string& precision, const std::string& device, bool announce) {
  const bool gpu = device == "cuda" && precision == "auto" && gpu_bf16_native(0);
  if (resolve_precision(precision, device, gpu, cpu_bf16().instructions) == "fp32") return false;
  if (precision == "bf16" && device == "cpu" && announce && cpu_bf16().instructions.empty()) {
    static std::once_flag once;
    std::call_once(once, [] {
      std::cerr << fmt::format(
          "[genemask] --precision bf16 on a CPU without AMX-BF16 or AVX512-BF16 ({}): bf16 matrix products are "
          "emulated, many times slower than fp32 (34x for a logo training step on an AMD EPYC, docs/benchmarks.md); "
          "use fp32 here\n",
          cpu_bf16().model.empty() ? "unknown CPU" : cpu_bf16().model);
    });
  }
  return true;
}

Autocast::Autocast(bool on) : on_(on) {
  if (!on_) return;
  for (auto type : {at::kCUDA, at::kCPU}) {
    at::autocast::set_autocast_dtype(type, at::kBFloat16);
    at::autocast::set_autocast_enabled(type, true);
  }
}
Autocast::~Autocast() {
  if (!on_) return;
  for (auto type : {at::kCUDA, at::kCPU}) at::autocast::set_autocast_enabled(type, false);
  at::autocast::clear_cache();
}

}  // namespace genemask::model
