#include "model_plugin.hpp"

#include <dlfcn.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdlib>
#include <fmt/format.h>
#include <stdexcept>

#include "genemask/version.hpp"

namespace genemask::cli {

void* model_symbol(const char* symbol) {
  // $GENEMASK_MODEL_LIB; else next to the binary (the build tree); else by name, which the
  // dynamic linker finds through the binary's RUNPATH ($ORIGIN/../lib when installed).
  static void* handle = [] {
    std::string path;
    const char* env = std::getenv("GENEMASK_MODEL_LIB");
    if (env && !*env)
      throw std::runtime_error("GENEMASK_MODEL_LIB is set but empty: give the path of libgenemask_model.so, or unset "
                               "it (the library next to the binary, or in the lib/ of its install prefix, is used)");
    if (env) {
      path = env;
    } else {
      char exe[4096];
      const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
      std::string dir = n > 0 ? std::string(exe, static_cast<size_t>(n)) : std::string();
      dir = dir.substr(0, dir.rfind('/'));
      path = dir + "/libgenemask_model.so";
      if (::access(path.c_str(), F_OK) != 0) path = "libgenemask_model.so";
    }
    void* h = ::dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
    if (!h) {
      // What the dynamic linker said comes first; the hint fits its reason.
      const std::string why = ::dlerror();
      std::string hint;
      if (why.find("failed to map segment") != std::string::npos ||
          why.find("Cannot allocate memory") != std::string::npos || why.find("cannot allocate") != std::string::npos) {
        struct rlimit rl {};
        const bool limited = ::getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY;
        hint = limited ? fmt::format("not enough address space to map LibTorch under the virtual memory limit of {} MiB "
                                     "(ulimit -v); LibTorch with CUDA maps several GiB: raise the limit "
                                     "(ulimit -v unlimited, or Slurm's --mem) or run where more memory is available",
                                     static_cast<uint64_t>(rl.rlim_cur) >> 20)
                       : std::string("not enough memory to map LibTorch; run where more memory is available");
      } else if (env) {  // the path is the user's: the hint is about it, not about setting it
        hint = "GENEMASK_MODEL_LIB names it: give the path of a libgenemask_model.so built with this genemask, or "
               "unset GENEMASK_MODEL_LIB to use the one next to the binary";
      } else if (why.find("No such file") != std::string::npos && path.find('/') != std::string::npos) {
        hint = "keep libgenemask_model.so next to the genemask binary or in the lib/ of its install prefix, or set "
               "GENEMASK_MODEL_LIB; a build without LibTorch (-DGENEMASK_WITH_TORCH=OFF) has none";
      } else {
        hint = "a library it needs (LibTorch, CUDA) is missing or does not load: check LD_LIBRARY_PATH and the "
               "LibTorch it was built with (docs/build.md), or set GENEMASK_MODEL_LIB";
      }
      throw std::runtime_error(fmt::format("cannot load the training library {}: {}: {}", path, why, hint));
    }
    return h;
  }();
  void* s = ::dlsym(handle, symbol);
  if (!s) throw std::runtime_error(fmt::format("the training library lacks {}: rebuild genemask", symbol));
  return s;
}

std::string version_text() {
  std::string s = fmt::format("genemask {}\n", kVersion);
  model::RuntimeInfo r;
  try {
    GENEMASK_MODEL_ENTRY(genemask_model_runtime_info)(&r);
  } catch (const std::exception& e) {
    return s + fmt::format("LibTorch: not available: {}", e.what());
  }
  s += fmt::format("LibTorch {}\n", r.torch_version);
  if (r.cuda_built)
    s += fmt::format("CUDA: built with CUDA {}{}\n", r.cuda_version,
                     r.cudnn_version.empty() ? "" : ", cuDNN " + r.cudnn_version);
  else
    s += "CUDA: not built (CPU-only LibTorch)\n";
  s += fmt::format("CPU: {}; bf16 instructions: {}\n", r.cpu_model.empty() ? "unknown" : r.cpu_model,
                   r.cpu_bf16.empty() ? "none (--precision bf16 on this CPU is emulated, many times slower than fp32)" : r.cpu_bf16);
  s += fmt::format("GPUs visible: {}", r.gpus);
  if (r.cuda_built && r.gpus == 0) s += fmt::format(" ({})", r.no_gpu_reason);
  return s;
}

}  // namespace genemask::cli
