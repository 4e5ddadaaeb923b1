// One MLM training step of a named config, as `genemask pretrain` runs it (masked-rows
// decoder, SDPA attention, gradients in flat buckets, clipping, fused AdamW), timed.
// Usage: train_bench CONFIG THREADS BATCH SEQ STEPS [DEVICE cpu|cuda] [PRECISION fp32|bf16]
//   -> one JSON line: best and median step time, tokens/s, a breakdown of the step
//      (forward+backward, clip, optimizer; measured in extra steps with a device sync
//      between the parts), model FLOPs per token, on a GPU the peak allocated memory, and MFU:
//      the achieved FLOP/s over this machine's matrix-product peak in the step's precision,
//      measured in the same run (fp32 and bf16; fp32 only on a CPU without bf16
//      instructions), with the CPU's model and bf16 instructions.
// Usage: train_bench peaks THREADS [DEVICE]
//   -> one JSON line: only the fp32 and bf16 matrix-product peaks and the CPU (the MFU
//      denominators of bench/finetune_bench.sh).
#include <ATen/DeviceAccelerator.h>
#include <ATen/autocast_mode.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "model/bert.hpp"
#include "model/grad_sync.hpp"
#include "model/optim.hpp"
#include "model/runtime.hpp"

using namespace genemask::model;
using clock_type = std::chrono::steady_clock;

namespace {
double seconds_since(clock_type::time_point t) { return std::chrono::duration<double>(clock_type::now() - t).count(); }
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

/// The machine's matrix-product peak in `dtype` on `dev` with the threads set: the best
/// GFLOP/s of a 2048^3 product (1024^3 on the CPU for bf16 without bf16 instructions, which
/// is slow), over a few repeats after a warm-up. The denominator of MFU.
double matmul_peak_gflops(const torch::Device& dev, torch::Dtype dtype, int64_t n) {
  auto a = torch::randn({n, n}, torch::TensorOptions().dtype(dtype).device(dev));
  auto b = torch::randn({n, n}, torch::TensorOptions().dtype(dtype).device(dev));
  auto sync = [&] {
    if (dev.is_cuda()) at::accelerator::synchronizeDevice(dev.index());
  };
  auto c = torch::mm(a, b);  // warm-up
  sync();
  double best = 1e30;
  for (int i = 0; i < 5; ++i) {
    const auto t0 = clock_type::now();
    c = torch::mm(a, b);
    sync();
    best = std::min(best, seconds_since(t0));
  }
  return 2.0 * static_cast<double>(n * n * n) / best / 1e9;
}

/// The peaks of this machine with the threads set, and its CPU, as JSON members.
std::string peaks_json(const torch::Device& dev, double* peak32_out = nullptr, double* peak16_out = nullptr) {
  const CpuBf16 cpu = cpu_bf16();
  const bool bf16_hw = dev.is_cuda() || !cpu.instructions.empty();
  const double peak32 = matmul_peak_gflops(dev, torch::kFloat32, 2048);
  const double peak16 = bf16_hw ? matmul_peak_gflops(dev, torch::kBFloat16, 2048) : 0;
  if (peak32_out) *peak32_out = peak32;
  if (peak16_out) *peak16_out = peak16;
  std::string cpu_model;
  for (char ch : cpu.model)
    if (ch != '"' && ch != '\\') cpu_model += ch;
  return fmt::format("\"peak_fp32_gflops\":{:.1f},\"peak_bf16_gflops\":{},\"cpu\":\"{}\",\"cpu_bf16\":\"{}\"", peak32,
                     bf16_hw ? fmt::format("{:.1f}", peak16) : "null", cpu_model,
                     cpu.instructions.empty() ? "none (bf16 emulated: fp32 peak only)" : cpu.instructions);
}
}  // namespace

int main(int argc, char** argv) {
  if (argc > 2 && std::string(argv[1]) == "peaks") {
    torch::set_num_threads(std::stoi(argv[2]));
    const torch::Device dev = pick_device(argc > 3 ? argv[3] : "cpu", 0, "--device");
    use_device(dev, /*tf32=*/true);
    std::printf("{\"threads\":%s,%s}\n", argv[2], peaks_json(dev).c_str());
    return 0;
  }
  const std::string name = argc > 1 ? argv[1] : "logo";
  const int threads = argc > 2 ? std::stoi(argv[2]) : 1;
  const int64_t batch = argc > 3 ? std::stoll(argv[3]) : 10, seq = argc > 4 ? std::stoll(argv[4]) : 512;
  const int steps = argc > 5 ? std::stoi(argv[5]) : 5;
  const std::string device_name = argc > 6 ? argv[6] : "cpu", precision = argc > 7 ? argv[7] : "fp32";
  const double mask_fraction = 0.15;
  torch::set_num_threads(threads);
  const torch::Device dev = pick_device(device_name, 0, "--device");
  use_device(dev, /*tf32=*/true);
  const bool bf16 = precision == "bf16";
  auto sync = [&] {
    if (dev.is_cuda()) at::accelerator::synchronizeDevice(dev.index());
  };
  torch::manual_seed(0);
  BertConfig cfg = BertConfig::named(name);
  BertForMaskedLM m(cfg);
  init_weights(*m, cfg);
  m->to(dev);
  m->train();
  std::vector<torch::Tensor> params = m->parameters();
  AdamWSettings s;
  s.lr = 4e-4;
  s.beta2 = 0.98;
  s.eps = 1e-6;
  auto opt = make_adamw(m->named_parameters(), s);
  FusedAdamW fused(*opt);
  GradBuckets grads(params, MPI_COMM_SELF, AllReduce::Local);
  auto ids = torch::randint(5, 4101, {batch, seq}, torch::kLong);
  auto labels = torch::where(torch::rand({batch, seq}) < mask_fraction, ids, torch::full({batch, seq}, -100, torch::kLong));
  auto flat = labels.reshape({-1});
  auto rows = (flat != -100).nonzero().reshape({-1});
  auto targets = flat.index_select(0, rows);
  ids = ids.to(dev);
  rows = rows.to(dev);
  targets = targets.to(dev);
  const double masked = static_cast<double>(rows.numel());
  double t_fb = 0, t_clip = 0, t_opt = 0;
  auto step = [&](bool split) {
    auto t0 = clock_type::now();
    grads.zero();
    {
      torch::Tensor loss;
      {
        genemask::model::Autocast autocast(bf16);  // bf16 on the GPU or the CPU, as the trainer runs it
        // No padding: no mask, which lets a GPU use its flash kernel, as the trainer does.
        loss = m->masked_lm_loss_sum(ids, torch::Tensor(), rows, targets) / masked;
      }
      loss.backward();
    }
    if (split) sync(), t_fb += seconds_since(t0), t0 = clock_type::now();
    grads.clip(1.0);
    if (split) sync(), t_clip += seconds_since(t0), t0 = clock_type::now();
    fused.step(4e-4);
    if (split) sync(), t_opt += seconds_since(t0);
  };
  step(false);  // warm-up
  step(false);
  sync();
  if (dev.is_cuda()) at::accelerator::resetPeakStats(dev.index());
  std::vector<double> times;
  for (int i = 0; i < steps; ++i) {
    auto t0 = clock_type::now();
    step(false);
    sync();
    times.push_back(seconds_since(t0));
  }
  for (int i = 0; i < steps; ++i) step(true);
  const double best = *std::min_element(times.begin(), times.end()), med = median(times);
  // Model FLOPs per token of a training step (3 x forward), counting the matrix products:
  // per layer 8H^2 (Q, K, V, output) + 4HF (feed-forward) + 4SH (scores and context), and the
  // MLM head (transform H^2 + decoder HV, 2 FLOPs per multiply-add) on the masked share.
  const double H = static_cast<double>(cfg.hidden_size), F = static_cast<double>(cfg.intermediate_size);
  const double V = static_cast<double>(cfg.vocab_size), S = static_cast<double>(seq);
  const double flops_per_token =
      3.0 * (static_cast<double>(cfg.num_hidden_layers) * (8 * H * H + 4 * H * F + 4 * S * H) +
             masked / static_cast<double>(batch * seq) * 2 * (H * H + H * V));
  double peak_gib = 0;
  if (dev.is_cuda())
    peak_gib = static_cast<double>(at::accelerator::getDeviceStats(dev.index()).allocated_bytes[0].peak) / (1 << 30);
  const double tokens = static_cast<double>(batch * seq);
  // MFU against this machine's own peaks, measured now with the same threads. A CPU without
  // bf16 instructions has no bf16 peak worth the name (emulated): fp32 only, and it says so.
  double peak32 = 0, peak16 = 0;
  const std::string peaks = peaks_json(dev, &peak32, &peak16);
  const double achieved_gflops = flops_per_token * tokens / med / 1e9;
  const double mfu = achieved_gflops / (bf16 && peak16 > 0 ? peak16 : peak32);
  std::printf(
      "{\"impl\":\"genemask\",\"config\":\"%s\",\"threads\":%d,\"device\":\"%s\",\"precision\":\"%s\",\"batch\":%lld,"
      "\"seq\":%lld,\"step_s\":%.5f,\"median_step_s\":%.5f,\"tokens_per_s\":%.0f,\"median_tokens_per_s\":%.0f,"
      "\"breakdown_s\":{\"forward_backward\":%.5f,\"clip\":%.5f,\"optimizer\":%.5f},\"flops_per_token\":%.4g,"
      "\"masked_fraction\":%.5f,\"achieved_tflops\":%.2f,\"peak_memory_gib\":%.3f,\"mfu\":%.3f,%s}\n",
      name.c_str(), threads, device_name.c_str(), precision.c_str(), static_cast<long long>(batch),
      static_cast<long long>(seq), best, med, tokens / best, tokens / med, t_fb / steps, t_clip / steps, t_opt / steps,
      flops_per_token, masked / tokens, flops_per_token * tokens / med / 1e12, peak_gib, mfu, peaks.c_str());
  return 0;
}
