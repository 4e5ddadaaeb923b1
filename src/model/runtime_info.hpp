#pragma once
// What the LibTorch under genemask offers: its version, CUDA, and the GPUs visible now
// (`genemask --version`). Torch-free, so that the CLI can hold it.
#include <string>

namespace genemask::model {

struct RuntimeInfo {
  std::string torch_version;  // e.g. "2.11.0"
  bool cuda_built = false;    // LibTorch compiled with CUDA
  std::string cuda_version;   // the CUDA runtime it was built with, e.g. "13.0"; empty without CUDA
  std::string cudnn_version;  // e.g. "9.19.0"; empty without cuDNN
  int gpus = 0;               // GPUs visible to this process now
  std::string no_gpu_reason;  // with CUDA built and no GPU visible: what CUDA said
  std::string cpu_model;      // /proc/cpuinfo's model name
  std::string cpu_bf16;       // the CPU's bf16 matrix instructions: "AMX-BF16, AVX512-BF16", or "" for none
};

}  // namespace genemask::model
