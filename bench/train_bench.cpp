// One MLM training step of a named config, as `genemask pretrain` runs it (masked-rows
// decoder, SDPA attention, gradients in flat buckets, clipping, fused AdamW), timed.
// Usage: train_bench CONFIG THREADS BATCH SEQ STEPS [DEVICE cpu|cuda] [PRECISION fp32|bf16]
//   -> one JSON line: best and median step time, tokens/s, a breakdown of the step
//      (forward+backward, clip, optimizer; measured in extra steps with a device sync
//      between the parts), model FLOPs per token, on a GPU the peak allocated memory, and MFU:
//      the achieved FLOP/s over this machine's matrix-product peak in the step's precision,
//      measured in the same run (fp32 and bf16; fp32 only on a CPU without bf16
//      instructions), with the CPU's model and bf16 instructions.
// Options after the positional arguments:
//   --graph          the whole step (forward, backward, clipping, optimizer) as one CUDA
//                    graph, replayed each step (GPU only)
//   --profile N      N more steps under LibTorch's profiler: "profile" holds the step's time
//                    by class (matrix products, attention, elementwise and normalisation,
//                    optimizer, copies and casts, GPU idle) and the costliest kernels
//   --unfused-qkv    Q, K and V as three products (the fused product's ablation)
//   --unfused-ln     dropout, residual add and LayerNorm as LibTorch's separate kernels
//                    (the fused kernel's ablation; src/model/residual_layer_norm.hpp)
//   --no-ln-bf16     under bf16, the next products cast the residual LayerNorms' fp32
//                    output themselves (autocast) instead of reading the bf16 copy the fused
//                    kernel writes (src/model/fusions.hpp's ln-bf16, on by default: its
//                    ablation); --ln-bf16 asks for the default explicitly
//   --no-fused-gelu  on a GPU, the feed-forward's bias added in the product's epilogue and
//                    LibTorch's GELU, instead of one kernel each way for both after a
//                    bias-free product (src/model/fusions.hpp's gelu, on by default: its
//                    ablation); --fused-gelu asks for the default explicitly
//   --bgrad          on a GPU under bf16, the linear layers' bias gradients in the epilogue
//                    of their weight-gradient products (src/model/fusions.hpp's bgrad; off
//                    by default); --no-bgrad asks for the default explicitly; the JSON's
//                    bgrad_products counts the products fused and those that fell back
//   --no-cpu-bias    on the CPU under bf16, ATen's linear (the bias copied into the output
//                    first) instead of oneDNN's with the bias in its epilogue
//                    (src/model/fusions.hpp's cpu-bias, on by default: its ablation); the
//                    JSON's cpu_bias says whether the layers took it (a CPU whose bf16
//                    products ATen sends to oneDNN), not only that it was asked for
//   --no-bias-sum    on a GPU under bf16, the linear layers' bias gradients summed by ATen's
//                    reduction instead of genemask's column-sum kernel (src/model/fusions.hpp's
//                    bias-sum, on by default: its ablation; bgrad takes precedence);
//                    --bias-sum asks for the default; the JSON's bgrad_products counts the
//                    kernel's sums as column_sums, and the Q/K/V products' gradients stacked
//                    in the same pass as stacked
//   --no-ln-smem     on a GPU, the fused LayerNorm's backward sums gamma's and beta's
//                    gradients in registers instead of shared memory (src/model/fusions.hpp's
//                    ln-smem, on by default: its ablation); --ln-smem asks for the default;
//                    the JSON's ln_smem says whether the kernel takes it (above a hidden size
//                    of 256)
//   --no-ln-lean     on a GPU, the fused LayerNorm's forward saves the pre-norm sum and a keep
//                    byte per element for its backward (src/model/fusions.hpp's ln-lean, on
//                    by default: its ablation; the same numbers either way); --ln-lean asks
//                    for the default
//   --no-fused-ce    on a GPU, LibTorch's MLM loss (the logits cast to fp32, log-softmax, NLL)
//                    instead of one kernel each way over the logits in their own dtype
//                    (src/model/fusions.hpp's ce, on by default: its ablation); --fused-ce
//                    asks for the default
//   --ce-pad         on a GPU, the MLM decoder's product over its 4101 classes padded to 4104
//                    (cuBLAS's aligned kernels), the loss reading the real columns
//                    (src/model/fusions.hpp's ce-pad, off by default); --no-ce-pad asks for
//                    the default
//   --cudnn-varlen   on a GPU with --packing, the packed rows' attention by cuDNN's SDPA over
//                    ragged segments instead of flash attention's varlen kernel
//                    (src/model/fusions.hpp's cudnn-varlen, off by default); --no-cudnn-varlen
//                    asks for the default
//   --gemm-gelu      on a Hopper GPU under bf16, the feed-forward's products with the bias +
//                    GELU and its derivative + the bias gradient in their epilogues (CUTLASS;
//                    src/model/fusions.hpp's gemm-gelu, off by default); --no-gemm-gelu asks
//                    for the default; the JSON's gemm_gelu says whether the fused node ran
//   (every fusion flag's default is GENEMASK_FUSED's where that is set)
//   --no-weight-bf16 under bf16, the products cast the fp32 weights in every forward pass
//                    (autocast) instead of reading bf16 copies that the optimizer step makes
//                    again (src/model/fusions.hpp's weight-bf16, on by default: its ablation;
//                    the same numbers either way); --weight-bf16 asks for the default; the
//                    JSON's weight_bf16 says whether the copies were kept
//   --gelu-rows N    the fused bias + GELU's kernels load N of a thread's rows at once (1, 2
//                    or 4; the same bits for each: src/model/cuda/rows_in_flight.hpp; default
//                    the kernels' own); the JSON's gelu_rows_in_flight says N where the fused
//                    GELU runs (a GPU), else null
//   --sdpa B         scaled_dot_product_attention with backend B only: flash, cudnn or
//                    efficient (default: LibTorch's choice); packed rows on a GPU call flash
//                    attention over segments directly either way
//   --check-graph N  N steps eager and N steps replayed as a graph, from the same weights,
//                    optimizer state and generator state: "graph_check" holds both losses
//   --lengths L      full (default: every sample SEQ positions) or uniform (each sample's
//                    length drawn uniformly from 7 .. SEQ positions, as the shards' recipe of
//                    5-510 tokens between [CLS] and [SEP] gives at SEQ 512)
//   --packing        the samples packed several to a row of SEQ positions, attention within
//                    each (src/model/packing.hpp); without it, one per row padded to the
//                    longest. tokens/s counts real tokens only, "positions" what was computed
// MFU follows src/model/flops.hpp (one definition for every figure): against the matrix
// peak measured in this run, and on a known GPU against its datasheet peak too.
// Usage: train_bench peaks THREADS [DEVICE]
//   -> one JSON line: only the fp32 and bf16 matrix-product peaks and the CPU (the MFU
//      denominators of bench/finetune_bench.sh).
#include <ATen/DeviceAccelerator.h>
#include <ATen/autocast_mode.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "bench/bench_args.hpp"
#include "genemask/corpus/loader.hpp"
#include "model/bert.hpp"
#include "model/cuda_graph.hpp"
#include "model/feed_forward.hpp"
#include "model/packing.hpp"
#include "model/flops.hpp"
#include "model/grad_sync.hpp"
#include "model/optim.hpp"
#include "model/fusions.hpp"
#include "model/linear_bgrad.hpp"
#include "model/cuda/smem_sum_slots.hpp"
#include "model/linear_cpu.hpp"
#include "model/runtime.hpp"
#include "model/step_profile.hpp"
#include "model/weight_copies.hpp"

using namespace genemask::model;
using genemask::bench::integer;
using genemask::bench::positive_integer;
using clock_type = std::chrono::steady_clock;

namespace {
double seconds_since(clock_type::time_point t) { return std::chrono::duration<double>(clock_type::now() - t).count(); }
double median(std::vector<double> v) {
  if (v.empty()) throw std::logic_error("train_bench: the median of no step times");
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

/// The machine's matrix-product peak in `dtype` on `dev` with the threads set: the best
/// GFLOP/s of an n^3 product over a few repeats after a warm-up. The denominator of MFU.
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

/// A name for a JSON string written by hand: without quotes and backslashes.
std::string json_text(const std::string& s) {
  std::string out;
  for (char ch : s)
    if (ch != '"' && ch != '\\') out += ch;
  return out;
}

/// The peaks of this machine with the threads set, and its CPU, as JSON members.
std::string peaks_json(const torch::Device& dev, double* peak32_out = nullptr, double* peak16_out = nullptr) {
  const CpuBf16 cpu = cpu_bf16();
  const bool bf16_hw = dev.is_cuda() || !cpu.instructions.empty();
  // 8192^3 on a GPU (a 2048^3 product does not fill an H100), 2048^3 on a CPU.
  const int64_t n = dev.is_cuda() ? 8192 : 2048;
  const double peak32 = matmul_peak_gflops(dev, torch::kFloat32, n);
  const double peak16 = bf16_hw ? matmul_peak_gflops(dev, torch::kBFloat16, n) : 0;
  if (peak32_out) *peak32_out = peak32;
  if (peak16_out) *peak16_out = peak16;
  return fmt::format("\"peak_fp32_gflops\":{:.1f},\"peak_bf16_gflops\":{},\"cpu\":\"{}\",\"cpu_bf16\":\"{}\"", peak32,
                     bf16_hw ? fmt::format("{:.1f}", peak16) : "null", json_text(cpu.model),
                     cpu.instructions.empty() ? "none (bf16 emulated: fp32 peak only)" : cpu.instructions);
}
}  // namespace

int run(int argc, char** argv);

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {  // a bad number, an unknown config: one line, not a crash
    std::fprintf(stderr, "train_bench: error: %s\n", e.what());
    return 2;
  }
}

int run(int argc, char** argv) {
  if (argc > 2 && std::string(argv[1]) == "peaks") {
    torch::set_num_threads(static_cast<int>(positive_integer("THREADS", argv[2])));
    const torch::Device dev = pick_device(argc > 3 ? argv[3] : "cpu", 0, "--device");
    use_device(dev, /*tf32=*/true);
    std::printf("{\"threads\":%s,%s}\n", argv[2], peaks_json(dev).c_str());
    return 0;
  }
  std::vector<std::string> pos;
  // The fusions' defaults: GENEMASK_FUSED's where set (fusions.hpp), else the built-in ones;
  // the flags below change them one by one.
  const Fusions base = fusions();
  bool graph = false, unfused_qkv = !base.qkv, unfused_ln = !base.ln, ln_bf16 = base.ln_bf16, fused_gelu = base.gelu,
       bgrad = base.bgrad, cpu_bias = base.cpu_bias, ln_smem = base.ln_smem, bias_sum = base.bias_sum,
       fused_ce = base.ce, weight_bf16 = base.weight_bf16, ce_pad = base.ce_pad, cudnn_varlen = base.cudnn_varlen,
       ln_lean = base.ln_lean, gemm_gelu = base.gemm_gelu, packing = false;
  std::string lengths = "full", sdpa;
  int profile = 0, check_graph = 0, gelu_rows = gelu_rows_in_flight();
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--graph") graph = true;
    else if (a == "--unfused-qkv") unfused_qkv = true;
    else if (a == "--unfused-ln") unfused_ln = true;
    else if (a == "--ln-bf16") ln_bf16 = true;
    else if (a == "--no-ln-bf16") ln_bf16 = false;
    else if (a == "--fused-gelu") fused_gelu = true;
    else if (a == "--no-fused-gelu") fused_gelu = false;
    else if (a == "--bgrad") bgrad = true;
    else if (a == "--no-bgrad") bgrad = false;
    else if (a == "--no-cpu-bias") cpu_bias = false;
    else if (a == "--ln-smem") ln_smem = true;
    else if (a == "--no-ln-smem") ln_smem = false;
    else if (a == "--ln-lean") ln_lean = true;
    else if (a == "--no-ln-lean") ln_lean = false;
    else if (a == "--gelu-rows" && i + 1 < argc) gelu_rows = static_cast<int>(integer("--gelu-rows", argv[++i]));
    else if (a == "--bias-sum") bias_sum = true;
    else if (a == "--no-bias-sum") bias_sum = false;
    else if (a == "--fused-ce") fused_ce = true;
    else if (a == "--no-fused-ce") fused_ce = false;
    else if (a == "--ce-pad") ce_pad = true;
    else if (a == "--no-ce-pad") ce_pad = false;
    else if (a == "--cudnn-varlen") cudnn_varlen = true;
    else if (a == "--no-cudnn-varlen") cudnn_varlen = false;
    else if (a == "--gemm-gelu") gemm_gelu = true;
    else if (a == "--no-gemm-gelu") gemm_gelu = false;
    else if (a == "--weight-bf16") weight_bf16 = true;
    else if (a == "--no-weight-bf16") weight_bf16 = false;
    else if (a == "--packing") packing = true;
    else if (a == "--lengths" && i + 1 < argc) lengths = argv[++i];
    else if (a == "--sdpa" && i + 1 < argc) sdpa = argv[++i];
    else if (a == "--profile" && i + 1 < argc) profile = static_cast<int>(integer("--profile", argv[++i]));
    else if (a == "--check-graph" && i + 1 < argc) check_graph = static_cast<int>(integer("--check-graph", argv[++i]));
    else if (a.rfind("--", 0) == 0) {
      std::fprintf(stderr, "train_bench: unknown option '%s'\n", a.c_str());
      return 2;
    } else pos.push_back(a);
  }
  auto arg = [&](size_t i, const char* fallback) { return i < pos.size() ? pos[i] : std::string(fallback); };
  const std::string name = arg(0, "logo");
  const int threads = static_cast<int>(positive_integer("THREADS", arg(1, "1")));
  const int64_t batch = positive_integer("BATCH", arg(2, "10")), seq = positive_integer("SEQ", arg(3, "512"));
  const int steps = static_cast<int>(positive_integer("STEPS", arg(4, "5")));
  const std::string device_name = arg(5, "cpu"), precision = arg(6, "fp32");
  // Any other name would run fp32 under it, and take MFU against the fp32 peak.
  if (precision != "fp32" && precision != "bf16")
    throw std::invalid_argument(fmt::format("PRECISION must be fp32 or bf16, got '{}'", precision));
  const double mask_fraction = 0.15;
  torch::set_num_threads(threads);
  const torch::Device dev = pick_device(device_name, 0, "--device");
  use_device(dev, /*tf32=*/true);
  const bool bf16 = precision == "bf16";
  set_fusions({!unfused_qkv, !unfused_ln, ln_bf16, fused_gelu, bgrad, cpu_bias, ln_smem, bias_sum, fused_ce, weight_bf16,
               ln_lean, ce_pad, cudnn_varlen, gemm_gelu});
  set_gelu_rows_in_flight(gelu_rows);  // std::invalid_argument (exit 2) unless 1, 2 or 4
  // Whether the model's linear layers take cpu-bias here (linear_cpu.hpp: the fusion on, a bf16
  // step on a CPU whose bf16 products ATen sends to oneDNN), asked of a layer of the model's kind.
  const bool cpu_bias_taken = dev.is_cpu() && bf16 && [] {
    const auto o = torch::TensorOptions().dtype(torch::kBFloat16);
    return cpu_bias_linear_takes(torch::zeros({32, 64}, o), torch::zeros({64, 64}, o), torch::zeros({64}, o));
  }();
  // glibc's allocator and oneDNN's primitive cache as pretrain and finetune set them
  // (runtime.hpp): a step's activations come from the heap, not from fresh mmaps whose pages
  // fault in again every step, and no product shape is compiled twice.
  tune_cpu_for_training();
  if (!sdpa.empty()) {
    if (sdpa != "flash" && sdpa != "cudnn" && sdpa != "efficient") {
      std::fprintf(stderr, "train_bench: --sdpa '%s': expected flash, cudnn or efficient\n", sdpa.c_str());
      return 2;
    }
    auto& ctx = at::globalContext();
    ctx.setSDPUseFlash(sdpa == "flash");
    ctx.setSDPUseCuDNN(sdpa == "cudnn");
    ctx.setSDPUseMemEfficient(sdpa == "efficient");
    ctx.setSDPUseMath(false);
  }
  if ((graph || check_graph > 0) && !StepGraph::unavailable(dev).empty()) {
    std::fprintf(stderr, "train_bench: no CUDA graph here: %s\n", StepGraph::unavailable(dev).c_str());
    return 2;
  }
  auto sync = [&] {
    if (dev.is_cuda()) at::accelerator::synchronizeDevice(dev.index());
  };
  const BertConfig cfg = BertConfig::named(name);
  // One model with its optimizer, gradient buckets and the step's static outputs.
  struct Bench {
    BertForMaskedLM m{nullptr};
    std::unique_ptr<torch::optim::AdamW> opt;
    std::unique_ptr<FusedAdamW> fused;
    std::unique_ptr<GradBuckets> grads;
    std::unique_ptr<WeightCopies> copies;  // under bf16 with weight-bf16, as pretrain keeps them
    std::vector<torch::Tensor> params;
    torch::Tensor loss_out, lr;
  };
  auto make = [&] {
    torch::manual_seed(0);
    auto b = std::make_unique<Bench>();
    b->m = BertForMaskedLM(cfg);
    init_weights(*b->m, cfg);
    b->m->to(dev);
    b->m->train();
    b->params = b->m->parameters();
    AdamWSettings s;
    s.lr = 4e-4;
    s.beta2 = 0.98;
    s.eps = 1e-6;
    b->opt = make_adamw(b->m->named_parameters(), s);
    b->fused = std::make_unique<FusedAdamW>(*b->opt);
    if (bf16 && weight_bf16) b->copies = bert_weight_copies(*b->m);
    b->fused->keep_weight_copies(b->copies.get());
    b->grads = std::make_unique<GradBuckets>(b->params, MPI_COMM_SELF, AllReduce::Local);
    b->loss_out = torch::zeros({}, torch::TensorOptions().dtype(torch::kFloat32).device(dev));
    b->lr = torch::full({}, 4e-4, torch::TensorOptions().dtype(torch::kFloat32).device(dev));
    return b;
  };
  if (lengths != "full" && lengths != "uniform") {
    std::fprintf(stderr, "train_bench: --lengths must be full or uniform, got '%s'\n", lengths.c_str());
    return 2;
  }
  if (seq < 7 || seq > cfg.max_position_embeddings) {
    std::fprintf(stderr, "train_bench: SEQ must be in 7..%lld\n", static_cast<long long>(cfg.max_position_embeddings));
    return 2;
  }
  // The batch as the loader gives it: [CLS] tokens [SEP] per sample, padded to the longest,
  // 15% of the real positions masked.
  genemask::Batch hb;
  {
    torch::manual_seed(1);
    std::vector<int64_t> len(static_cast<size_t>(batch), seq);
    if (lengths == "uniform") len = [&] {
        auto l = torch::randint(7, seq + 1, {batch}, torch::kLong);
        return std::vector<int64_t>(l.data_ptr<int64_t>(), l.data_ptr<int64_t>() + batch);
      }();
    hb.rows = batch;
    hb.cols = *std::max_element(len.begin(), len.end());
    auto ids0 = torch::randint(5, 4101, {batch, hb.cols}, torch::kLong);
    auto pick = torch::rand({batch, hb.cols}) < mask_fraction;
    hb.input_ids.assign(static_cast<size_t>(batch * hb.cols), 0);
    hb.attention_mask = hb.input_ids;
    hb.labels.assign(hb.input_ids.size(), genemask::kIgnoreLabel);
    const auto ia = ids0.accessor<int64_t, 2>();
    const auto pa = pick.accessor<bool, 2>();
    for (int64_t r = 0; r < batch; ++r)
      for (int64_t c = 0; c < len[static_cast<size_t>(r)]; ++c) {
        const auto i = static_cast<size_t>(r * hb.cols + c);
        hb.attention_mask[i] = 1;
        hb.input_ids[i] = ia[r][c];
        if (pa[r][c]) hb.labels[i] = hb.input_ids[i];
      }
  }
  double real_tokens = 0, len_sq = 0;
  for (int64_t r = 0; r < batch; ++r) {
    double n = 0;
    for (int64_t c = 0; c < hb.cols; ++c) n += static_cast<double>(hb.attention_mask[static_cast<size_t>(r * hb.cols + c)]);
    real_tokens += n;
    len_sq += n * n;
  }
  auto as_tensor = [](const std::vector<int64_t>& v, int64_t r, int64_t c) { return torch::tensor(v, torch::kLong).view({r, c}); };
  torch::Tensor ids, mask, labels;
  std::optional<PackedLayout> layout;
  int64_t positions = batch * hb.cols;
  if (packing) {
    const PackedBatch p = pack_batch(hb, seq);
    ids = as_tensor(p.input_ids, p.rows, p.cols);
    labels = as_tensor(p.labels, p.rows, p.cols);
    PackedLayout l = packed_layout(p, dev);
    if (dev.is_cuda()) l.block_mask();  // made before any capture (used where flash cannot run)
    layout = std::move(l);
    positions = p.rows * p.cols;
  } else {
    ids = as_tensor(hb.input_ids, hb.rows, hb.cols);
    labels = as_tensor(hb.labels, hb.rows, hb.cols);
    if (real_tokens < static_cast<double>(positions)) mask = as_tensor(hb.attention_mask, hb.rows, hb.cols).to(dev);
  }
  auto flat = labels.reshape({-1});
  auto rows = (flat != -100).nonzero().reshape({-1});
  auto targets = flat.index_select(0, rows);
  ids = ids.to(dev);
  rows = rows.to(dev);
  targets = targets.to(dev);
  const double masked = static_cast<double>(rows.numel());
  double t_fb = 0, t_clip = 0, t_opt = 0;
  // One training step as the trainer runs it; `tensor_lr`: the capturable optimizer step.
  auto body = [&](Bench& b, bool split, bool tensor_lr) {
    auto t0 = clock_type::now();
    b.grads->zero();
    {
      torch::Tensor loss;
      {
        genemask::model::Autocast autocast(bf16);  // bf16 on the GPU or the CPU, as the trainer runs it
        const UseWeightCopies use_copies(b.copies.get());
        // Without padding no mask, which lets a GPU use its flash kernel, as the trainer does.
        loss = (layout ? b.m->masked_lm_loss_sum(ids, *layout, rows, targets)
                       : b.m->masked_lm_loss_sum(ids, mask, rows, targets)) /
               masked;
      }
      loss.backward();
      b.loss_out.copy_(loss.detach());
    }
    if (split) sync(), t_fb += seconds_since(t0), t0 = clock_type::now();
    b.grads->clip(1.0);
    if (split) sync(), t_clip += seconds_since(t0), t0 = clock_type::now();
    if (tensor_lr) b.fused->step(b.lr);
    else b.fused->step(4e-4);
    if (split) sync(), t_opt += seconds_since(t0);
  };

  std::string graph_check_json = "null";
  if (check_graph > 0) {
    // The same steps eagerly and as graph replays, from the same weights, optimizer state and
    // CUDA generator state (the graph's warm-up steps are undone before the replays).
    std::vector<double> eager_losses, graph_losses;
    {
      auto a = make();
      for (int i = 0; i < check_graph; ++i) {
        body(*a, false, false);
        eager_losses.push_back(a->loss_out.item<double>());
      }
    }
    auto b = make();
    std::vector<torch::Tensor> state = b->params;
    for (auto& t : b->fused->state_tensors()) state.push_back(t);
    StateSnapshot before(std::move(state), dev);
    StepGraph g(dev);
    g.capture([&] { body(*b, false, true); });
    before.restore();
    if (b->copies) b->copies->refresh();  // the copies of the weights put back
    for (int i = 0; i < check_graph; ++i) {
      g.replay();
      graph_losses.push_back(b->loss_out.item<double>());
    }
    double worst = 0;
    std::string e, gl;
    for (int i = 0; i < check_graph; ++i) {
      worst = std::max(worst, std::abs(eager_losses[i] - graph_losses[i]) / std::max(1e-30, std::abs(eager_losses[i])));
      e += fmt::format("{}{:.9g}", i ? "," : "", eager_losses[i]);
      gl += fmt::format("{}{:.9g}", i ? "," : "", graph_losses[i]);
    }
    graph_check_json = fmt::format("{{\"eager\":[{}],\"graph\":[{}],\"max_rel_diff\":{:.3g}}}", e, gl, worst);
  }

  auto b = make();
  std::unique_ptr<StepGraph> g;
  std::function<void(bool)> step;
  if (graph) {
    g = std::make_unique<StepGraph>(dev);
    g->capture([&] { body(*b, false, true); });
    step = [&](bool) {
      g->replay();
      b->fused->advance_host_steps();
    };
  } else {
    step = [&](bool split) { body(*b, split, false); };
  }
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
  if (!graph)
    for (int i = 0; i < steps; ++i) step(true);
  std::string profile_json = "null";
  if (profile > 0) profile_json = profile_steps([&] { step(false); }, profile, dev).to_json();
  const double best = *std::min_element(times.begin(), times.end()), med = median(times);
  const ModelShape shape{cfg.num_hidden_layers, cfg.hidden_size, cfg.intermediate_size, cfg.vocab_size};
  const double tokens = real_tokens;
  const double step_flops = training_flops(shape, tokens, len_sq, masked);
  const double flops_per_token = step_flops / tokens;
  std::string peak_gib = "null";  // the GPU allocator's peak; none measured on a CPU
  if (dev.is_cuda())
    peak_gib = fmt::format(
        "{:.3f}", static_cast<double>(at::accelerator::getDeviceStats(dev.index()).allocated_bytes[0].peak) / (1 << 30));
  // MFU against this machine's own peaks, measured now with the same threads. A CPU without
  // bf16 instructions has no bf16 peak worth the name (emulated): fp32 only, and it says so.
  double peak32 = 0, peak16 = 0;
  const std::string peaks = peaks_json(dev, &peak32, &peak16);
  const double achieved_tflops = step_flops / med / 1e12;
  const double measured_peak_tflops = (bf16 && peak16 > 0 ? peak16 : peak32) / 1e3;
  const std::string gpu = dev.is_cuda() ? cuda_device_name(dev.index()) : "";
  const double datasheet = bf16 && dev.is_cuda() ? datasheet_bf16_tflops(gpu) : 0;
  // How the linear layers' weight gradients were made with bgrad (linear_bgrad.hpp).
  const LinearBgradCounts bc = linear_bgrad_counts();
  const std::string bgrad_products =
      fmt::format("{{\"fused\":{},\"fused_bf16\":{},\"fallback\":{},\"column_sums\":{},\"stacked\":{}}}", bc.fused,
                  bc.fused_bf16, bc.fallback, bc.column_sums, bc.stacked);
  // The packed attention's kernels the steps ran (bert.hpp): a JSON list of their names.
  std::string packed_paths = "[";
  for (const auto& path : packed_attention_paths_taken()) packed_paths += (packed_paths.size() > 1 ? ",\"" : "\"") + path + "\"";
  packed_paths += "]";
  const std::string breakdown =
      graph ? "null"
            : fmt::format("{{\"forward_backward\":{:.5f},\"clip\":{:.5f},\"optimizer\":{:.5f}}}", t_fb / steps,
                          t_clip / steps, t_opt / steps);
  std::printf(
      "{\"impl\":\"genemask\",\"config\":\"%s\",\"threads\":%d,\"device\":\"%s\",\"precision\":\"%s\",\"batch\":%lld,"
      "\"seq\":%lld,\"cuda_graph\":%s,\"fused_qkv\":%s,\"fused_ln\":%s,\"ln_bf16\":%s,\"fused_gelu\":%s,\"gelu_rows_in_flight\":%s,\"bgrad\":%s,\"bgrad_products\":%s,\"cpu_bias\":%s,\"ln_smem\":%s,\"ln_lean\":%s,\"bias_sum\":%s,\"fused_ce\":%s,\"ce_pad\":%s,\"cudnn_varlen\":%s,\"gemm_gelu\":%s,\"weight_bf16\":%s,\"sdpa\":\"%s\",\"step_s\":%.5f,\"median_step_s\":%.5f,\"tokens_per_s\":%.0f,"
      "\"median_tokens_per_s\":%.0f,\"lengths\":\"%s\",\"packing\":%s,\"packed_attention\":%s,\"real_tokens\":%.0f,\"positions\":%lld,\"breakdown_s\":%s,\"flops_per_token\":%.4g,\"masked_fraction\":%.5f,"
      "\"achieved_tflops\":%.4g,\"peak_memory_gib\":%s,\"measured_peak_tflops\":%.4g,\"mfu\":%.4f,\"gpu\":\"%s\","
      "\"datasheet_tflops\":%s,\"mfu_datasheet\":%s,\"profile\":%s,\"graph_check\":%s,%s}\n",
      name.c_str(), threads, device_name.c_str(), precision.c_str(), static_cast<long long>(batch),
      static_cast<long long>(seq), graph ? "true" : "false", unfused_qkv ? "false" : "true",
      !unfused_ln && dev.is_cuda() ? "true" : "false", ln_bf16 && bf16 ? "true" : "false", fused_gelu && dev.is_cuda() ? "true" : "false",
      fused_gelu && dev.is_cuda() ? std::to_string(gelu_rows_in_flight()).c_str() : "null", bgrad && dev.is_cuda() && bf16 ? "true" : "false",
      bgrad_products.c_str(), cpu_bias_taken ? "true" : "false",
      ln_smem && !unfused_ln && dev.is_cuda() && cuda::takes_smem_sums(static_cast<int>(cfg.hidden_size), true)
          ? "true"
          : "false",
      ln_lean && !unfused_ln && dev.is_cuda() ? "true" : "false", bias_sum && !bgrad && dev.is_cuda() && bf16 ? "true" : "false", fused_ce && dev.is_cuda() ? "true" : "false",
      ce_pad && dev.is_cuda() && padded_classes(cfg.vocab_size) != cfg.vocab_size ? "true" : "false",
      cudnn_varlen && dev.is_cuda() && packing ? "true" : "false",
      fused_feed_forward_counts().forward > 0 ? "true" : "false",
      weight_bf16 && bf16 ? "true" : "false",
      sdpa.empty() ? "auto" : sdpa.c_str(), best, med, tokens / best, tokens / med, lengths.c_str(), packing ? "true" : "false",
      packed_paths.c_str(), real_tokens,
      static_cast<long long>(positions), breakdown.c_str(),
      flops_per_token, masked / tokens, achieved_tflops, peak_gib.c_str(), measured_peak_tflops,
      mfu(achieved_tflops, measured_peak_tflops), json_text(gpu).c_str(),
      datasheet > 0 ? fmt::format("{:.0f}", datasheet).c_str() : "null",
      datasheet > 0 ? fmt::format("{:.4f}", achieved_tflops / datasheet).c_str() : "null", profile_json.c_str(),
      graph_check_json.c_str(), peaks.c_str());
  return 0;
}
