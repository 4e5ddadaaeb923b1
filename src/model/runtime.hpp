#pragma once
// Thread count and device choice for every model command (pretrain, embed, finetune,
// variants), and what the LibTorch offers (`genemask --version`).
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/torch.h>

#include <string>

#include "model/resources.hpp"
#include "model/runtime_info.hpp"

namespace genemask::model {

/// Sets LibTorch's intra-op threads: `requested`, or the available cores shared by
/// `ranks_on_node` ranks for 0, never more than available_cores() (a larger request is
/// capped, with one "[genemask] ..." line on stderr when `announce`). Returns the count.
/// A negative request is an error.
int set_intra_op_threads(int requested, int ranks_on_node = 1, bool announce = true);

/// glibc's allocator set for training (called by pretrain and finetune, so by sweep; not
/// by embed, predict or variants, whose peak resident size it raised by 153 MiB on a 300 kb
/// sequence): blocks up to 1 GiB come from the heap, not from a fresh mmap each time, and
/// freed memory is kept for reuse (M_MMAP_THRESHOLD, M_TRIM_THRESHOLD, M_TOP_PAD): a logo
/// bf16 step on the CPU was about 16% faster. The resident size stays at the run's peak.
/// Nothing when the user set MALLOC_*_ or GLIBC_TUNABLES. True when it was applied.
bool tune_cpu_allocator();

/// oneDNN, which runs LibTorch's bf16 products on the CPU, compiles a primitive (about 1 ms)
/// for every product shape it meets and keeps the last 1024. Packed batches bring new shapes
/// every step (each segment length in the attention's products, the masked rows in the
/// decoder's): a few thousand over a run, so past 1024 the same shapes were compiled again
/// and again. This keeps 16384 (ONEDNN_PRIMITIVE_CACHE_CAPACITY): a packed bf16 logo
/// pretrain on an AMX Xeon ran 1.13x faster over 120 steps, its peak resident size 16 MiB
/// larger (docs/benchmarks.md). Called by pretrain, finetune and train_bench before their
/// first product (oneDNN reads the variable once); nothing when the user set it. True when
/// it was set here.
bool widen_onednn_primitive_cache();
/// What a training command sets up on the CPU before its first product: tune_cpu_allocator()
/// and widen_onednn_primitive_cache() (pretrain, finetune, so sweep, and train_bench, which
/// measures the step as pretrain runs it).
void tune_cpu_for_training();

/// The LibTorch version, its CUDA build, and the GPUs visible now (never throws).
RuntimeInfo runtime_info();

/// "cpu", or "cuda" with GPU ordinal `index`. For cuda, a LibTorch without CUDA, no
/// visible GPU, or an ordinal past the visible GPUs is a one-line error that says how to
/// check. `flag` names the option in that message.
torch::Device pick_device(const std::string& device, int index, const std::string& flag = "--gpu");

/// The device of an MPI rank: for cuda, the GPU of its node-local rank (modulo the GPUs
/// visible), so that ranks of a node spread over its GPUs.
torch::Device pick_rank_device(const std::string& device, int local_rank);

/// Binds this process to `device` before any CUDA work (its context, NCCL and the caching
/// allocator then live on that GPU, not on GPU 0), and for cuda sets TF32 for fp32 matrix
/// products and convolutions on or off. Nothing for cpu.
void use_device(const torch::Device& device, bool tf32 = true);

/// TF32 for fp32 matrix products (cuBLAS) and convolutions (cuDNN) on or off, through the
/// API that keeps LibTorch's legacy and per-backend records consistent, so that code reading
/// either (allowTF32CuBLAS(), float32MatmulPrecision()) agrees and never throws. Needs no GPU.
void set_tf32(bool on);

/// The CPU's model name and its bf16 matrix instructions ("AMX-BF16, AVX512-BF16", "" for
/// none), read once from /proc/cpuinfo.
struct CpuBf16 {
  std::string model, instructions;
};
CpuBf16 cpu_bf16();

/// The precision `--precision` (fp32, bf16 or auto) means on `device` ("cpu" or "cuda"):
/// auto is bf16 where the device multiplies bf16 matrices in hardware (`gpu_bf16`: a GPU of
/// compute capability 8.0 or newer; `cpu_instructions`: AMX-BF16 or AVX512-BF16, as
/// cpu_bf16() reads them), else fp32. Anything else is a one-line error. Pure.
std::string resolve_precision(const std::string& precision, const std::string& device, bool gpu_bf16,
                              const std::string& cpu_instructions);

/// Whether `--precision` asks for bf16 here (resolve_precision with this machine's CPU and
/// GPU 0). On a CPU without AMX-BF16 or AVX512-BF16, an explicit bf16 runs (emulated, so
/// that it behaves the same everywhere) and, with `announce`, says once on stderr that it is
/// slower than fp32 there; auto never chooses it.
bool wants_bf16(const std::string& precision, const std::string& device, bool announce = true);

/// The name summaries, metrics files and sweep records give the precision used.
inline const char* precision_name(bool bf16) { return bf16 ? "bf16" : "fp32"; }

/// bf16 autocast while alive, for a forward pass, on CUDA and on the CPU (each applies to the
/// operations on its own device): matrix products in bf16; weights, gradients, the optimizer
/// and the loss (logits cast to fp32 before the cross-entropy) stay fp32. Nothing when off.
class Autocast {
 public:
  explicit Autocast(bool on);
  ~Autocast();
  Autocast(const Autocast&) = delete;
  Autocast& operator=(const Autocast&) = delete;

 private:
  bool on_;
};

/// Autocast off while alive, inside an autocast region too: for code that chooses its own
/// dtypes (the fused CPU attention, the classifier's fp32 head). Restores it on exit.
class NoAutocast {
 private:
  c10::impl::ExcludeDispatchKeyGuard guard_{c10::autocast_dispatch_keyset};
};

}  // namespace genemask::model
