// genemask's own CUDA kernels timed alone at a model's shapes, each against the bytes it must
// move and the copy bandwidth measured in the same run, beside the LibTorch kernels the eager
// step runs for the same work; and each variant of a kernel checked against its default.
// It says which kernel is far from the memory's bound, and which variant to make the default,
// from one short run on a GPU (train_bench times whole steps, where a kernel's share is a
// few percent and within the step's noise).
//
// Usage: kernel_bench [CONFIG [BATCH [SEQ]]] [--repeats N]
//   CONFIG dnabert (default) or logo, BATCH sequences (default 64) of SEQ positions (default
//   512): the rows are BATCH x SEQ tokens, as in a padded step of that micro-batch.
//   --repeats N   launches per timed sample (default 20); 7 samples, the median reported
// -> a table on stderr and one JSON line on stdout:
//   device, config, rows, copy_gbs (the best of 5 device-to-device copies of 1 GiB: bytes
//   read and written per second, the bound the kernels' GB/s are read against), and cases:
//   one per kernel and variant: kernel, variant, impl ("genemask" or "libtorch"), width (the
//   row's size), bytes (what the kernel must read and write at least), median_us, gbs,
//   of_copy (gbs / copy_gbs), vs_default (the time of genemask's default variant of the
//   kernel / this case's: above 1, this case is faster; for a LibTorch case below 1, genemask's
//   kernel is faster), same_bits (a variant's outputs against the default's, where the kernel promises
//   the same bits; null where it does not), max_rel_diff (where it does not: the largest
//   difference of the sums it groups otherwise, relative to their largest magnitude)
// A kernel's "default" here is the variant the others are checked and timed against, not
// always the step's: since 2026-11-30 the step takes ln-lean, ln-smem (above a hidden size of
// 256), bias-sum and ce by default (src/model/fusions.hpp).
// The kernels and their variants (src/model/cuda/):
//   gelu_forward, gelu_backward   the fused bias + GELU over [rows, intermediate] bf16, with
//                 1, 2 and 4 rows in flight (cuda/rows_in_flight.hpp); LibTorch: the eager
//                 step's GELU (its bias is added in the product) and GELU backward + the
//                 bias's column sum; and, as the memory's floor, an add and a product that
//                 move the same bytes without GELU's arithmetic
//   ln_forward    the fused dropout (0.1) + residual add + LayerNorm with the bf16 copy over
//                 [rows, hidden], saving the pre-norm sum and a keep byte per element
//                 (default) or only the keep mask's bits (ln-lean, the step's; same_bits: y, its copy,
//                 the rows' statistics, and the bits against the default's bytes); LibTorch:
//                 dropout, add, LayerNorm, cast
//   ln_backward   its backward with gamma's and beta's sums in registers (default) and in
//                 shared memory (ln-smem, the step's above a hidden size of 256), each also computing
//                 the pre-norm sum again from h and the residual (ln-lean; same_bits: every
//                 gradient against the same sums' without it); LibTorch: the eager
//                 composition's backward kernels
//   column_sum    the bias gradients of the Q/K/V product (3 x hidden) and of an output product
//                 (hidden) by genemask's column-sum kernel (the step takes it with
//                 GENEMASK_FUSED's bias-sum, on by default); LibTorch: sum(0) in bf16, the
//                 step's without bias-sum
//   qkv_stack     the Q/K/V product's three gradients, as the attention's backward leaves
//                 them, stacked into the product's gradient with the bias's column sums in one
//                 pass (the node the step takes with bias-sum; same_bits: the stack and sums
//                 against LibTorch's stack and the column-sum kernel's sums of it); LibTorch's
//                 stack, then the column-sum kernel (bias-sum without the node); LibTorch's
//                 stack, then sum(0) in bf16 (the step's without bias-sum)
//   ffn_forward, ffn_backward   the feed-forward's first product with the bias + GELU and the
//                 second's input gradient with GELU's derivative + the bias's gradient: the
//                 step's default (a cuBLAS product, then the fused bias + GELU kernel) against
//                 the same work in the products' CUTLASS epilogues (gemm-gelu; Hopper only:
//                 the cooperative schedule, the step's, and ping-pong), whose outputs are
//                 compared with the default's (max_rel_diff); LibTorch: the product alone
//   cross_entropy the MLM loss over the masked rows' logits (15% of the rows x the
//                 vocabulary), forward and backward, by genemask's kernels (the step takes
//                 them with GENEMASK_FUSED's ce, on by default); LibTorch: the logits cast to
//                 fp32, cross_entropy and its backward, the step's without ce
// Exit: 0; 1 when a variant's bits differ where the kernel promises the same; 2 for a bad
// argument or no GPU.
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstdio>
#include <cmath>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "bench/bench_args.hpp"
#include "model/bert.hpp"
#include "model/cuda/bias_gelu_kernels.hpp"
#include "model/cuda/column_sum_kernels.hpp"
#include "model/linear_bgrad.hpp"
#include "model/cuda/cross_entropy_kernels.hpp"
#include "model/cuda/gemm_gelu_kernels.hpp"
#include "model/cuda/residual_layer_norm_kernels.hpp"

using namespace genemask::model;
using genemask::bench::positive_integer;

namespace {

struct Case {
  std::string kernel, variant, impl;
  int64_t width = 0;
  double bytes = 0, median_us = 0;
  std::optional<bool> same_bits;
  std::optional<double> max_rel_diff;
};

/// The median over 7 samples of one call's time in microseconds, each sample `repeats` calls
/// between two CUDA events, after one call to warm up.
double median_us(const std::function<void()>& call, int repeats) {
  call();
  std::vector<double> us;
  for (int s = 0; s < 7; ++s) {
    at::cuda::CUDAEvent start(cudaEventDefault), stop(cudaEventDefault);
    start.record();
    for (int i = 0; i < repeats; ++i) call();
    stop.record();
    stop.synchronize();
    us.push_back(1e3 * static_cast<double>(start.elapsed_time(stop)) / repeats);
  }
  std::sort(us.begin(), us.end());
  return us[us.size() / 2];
}

double max_rel_diff(const torch::Tensor& a, const torch::Tensor& b) {
  const double scale = std::max(b.abs().max().item<double>(), 1e-30);
  return (a.to(torch::kFloat64) - b.to(torch::kFloat64)).abs().max().item<double>() / scale;
}

void check(const char* what) { cuda::check_launch(what, "kernel_bench"); }

}  // namespace

int run(int argc, char** argv);

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kernel_bench: error: %s\n", e.what());
    return 2;
  }
}

int run(int argc, char** argv) {
  std::vector<std::string> pos;
  int repeats = 20;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      std::printf(
          "Usage: kernel_bench [CONFIG [BATCH [SEQ]]] [--repeats N]\n"
          "genemask's CUDA kernels timed alone at CONFIG's shapes (default dnabert 64 512), against\n"
          "the bytes each must move, the copy bandwidth of the same run, and the LibTorch kernels of\n"
          "the eager step; the variants of each kernel checked against its default. A table on\n"
          "stderr, one JSON line on stdout (the fields: the comment at the top of bench/kernel_bench.cpp).\n"
          "  --repeats N   launches per timed sample (default 20; 7 samples, the median reported)\n");
      return 0;
    }
    if (a == "--repeats") {
      if (i + 1 >= argc) throw std::invalid_argument("--repeats needs a value (see --help)");
      repeats = static_cast<int>(positive_integer("--repeats", argv[++i]));
    }
    else if (a.rfind("--", 0) == 0) throw std::invalid_argument(fmt::format("unknown option '{}' (see --help)", a));
    else pos.push_back(a);
  }
  if (pos.size() > 3) throw std::invalid_argument("at most CONFIG, BATCH and SEQ (see --help)");
  const std::string name = pos.size() > 0 ? pos[0] : "dnabert";
  const int64_t batch = pos.size() > 1 ? positive_integer("BATCH", pos[1]) : 64, seq = pos.size() > 2 ? positive_integer("SEQ", pos[2]) : 512;
  const BertConfig cfg = BertConfig::named(name);
  if (!torch::cuda::is_available()) {
    std::fprintf(stderr, "kernel_bench: no GPU visible: the kernels it times run on a GPU\n");
    return 2;
  }
  const torch::Device gpu(torch::kCUDA, 0);
  const auto f32 = torch::TensorOptions().device(gpu), bf16 = f32.dtype(torch::kBFloat16);
  const int64_t rows = batch * seq, H = cfg.hidden_size, I = cfg.intermediate_size;
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  torch::manual_seed(0);
  std::vector<Case> cases;
  bool bits_ok = true;

  // The bound: a device-to-device copy of 1 GiB, the best of 5.
  double copy_gbs = 0;
  {
    auto src = torch::empty({int64_t{1} << 28}, f32).fill_(1), dst = torch::empty_like(src);
    const double bytes = 2.0 * static_cast<double>(src.numel()) * 4;
    for (int i = 0; i < 5; ++i) copy_gbs = std::max(copy_gbs, bytes / median_us([&] { dst.copy_(src); }, 2) / 1e3);
  }
  auto add = [&](const std::string& kernel, const std::string& variant, const std::string& impl, int64_t width,
                 double bytes, double us, std::optional<bool> same_bits = std::nullopt,
                 std::optional<double> rel = std::nullopt) {
    if (same_bits && !*same_bits) bits_ok = false;
    cases.push_back({kernel, variant, impl, width, bytes, us, same_bits, rel});
  };

  // The fused bias + GELU over [rows, I] bf16, 1, 2 and 4 rows in flight; LibTorch's GELU.
  {
    auto z = torch::randn({rows, I}, bf16), dy = torch::randn({rows, I}, bf16);
    auto bias = 0.5 * torch::randn({I}, f32);
    auto y = torch::empty_like(z), y1 = torch::empty_like(z), dz = torch::empty_like(z), dz1 = torch::empty_like(z);
    const int64_t blocks = cuda::bias_gelu_row_blocks(rows);
    auto partial = torch::empty({blocks, I}, f32), partial1 = torch::empty_like(partial);
    const double elements = static_cast<double>(rows) * static_cast<double>(I);
    const double fwd_bytes = 4 * elements, bwd_bytes = 6 * elements;
    for (const int r : {1, 2, 4}) {
      auto& out = r == 1 ? y1 : y;
      const double tf = median_us([&] {
        TORCH_CHECK(cuda::bias_gelu_forward(true, z.data_ptr(), bias.data_ptr<float>(), out.data_ptr(), rows,
                                            static_cast<int>(I), stream, r));
      }, repeats);
      check("gelu forward");
      auto& g = r == 1 ? dz1 : dz;
      auto& p = r == 1 ? partial1 : partial;
      const double tb = median_us([&] {
        TORCH_CHECK(cuda::bias_gelu_backward(true, dy.data_ptr(), z.data_ptr(), bias.data_ptr<float>(), g.data_ptr(),
                                             p.data_ptr<float>(), rows, static_cast<int>(I), stream, r));
        (void)p.sum(0);  // the bias's gradient, as the autograd node returns it
      }, repeats);
      check("gelu backward");
      const std::string v = fmt::format("{} rows in flight{}", r, r == cuda::kBiasGeluRowsInFlight ? " (default)" : "");
      std::optional<bool> fsame, bsame;
      if (r != 1) fsame = torch::equal(y, y1), bsame = torch::equal(dz, dz1) && torch::equal(partial, partial1);
      add("gelu_forward", v, "genemask", I, fwd_bytes, tf, fsame);
      add("gelu_backward", v, "genemask", I, bwd_bytes, tb, bsame);
    }
    const auto bias16 = bias.to(torch::kBFloat16);
    auto zb = z + bias16;  // what the product with its bias gives the eager GELU
    add("gelu_forward", "GELU (the bias in the product)", "libtorch", I, fwd_bytes,
         median_us([&] { (void)torch::gelu(zb); }, repeats));
    add("gelu_backward", "GELU backward + the bias's sum(0)", "libtorch", I, bwd_bytes,
         median_us([&] { (void)at::gelu_backward(dy, zb).sum(0); }, repeats));
    // The memory's floor for these bytes: LibTorch's elementwise kernels that move the same
    // bytes without GELU's arithmetic (an erf and, backward, an exp per element). Where the
    // fused kernels are much slower than these, their arithmetic bounds them, not the memory.
    add("gelu_forward", "z + bias: the same bytes, no GELU", "libtorch", I, fwd_bytes,
         median_us([&] { (void)torch::add(z, bias16); }, repeats));
    add("gelu_backward", "dy * z: the same bytes, no GELU", "libtorch", I, bwd_bytes,
         median_us([&] { (void)torch::mul(dy, z); }, repeats));
  }

  // The feed-forward's first product with the bias + GELU, and the second product's input
  // gradient with GELU's derivative and the bias's gradient: the step's default (a cuBLAS
  // product, then the fused bias + GELU kernel; backward its kernel and the partial sums' sum)
  // against the same work in the products' CUTLASS epilogues (gemm-gelu, feed_forward.hpp; on
  // a GPU of compute capability 9.0 in a build with CUTLASS), whose outputs are compared with
  // the default's (max_rel_diff: y forward; dz, then the bias's gradient, backward). bytes:
  // what the epilogue forms must move at least (x or dy, the weight, z, and y or dz, bf16).
  {
    const double sh = std::sqrt(static_cast<double>(H)), si = std::sqrt(static_cast<double>(I));
    auto x = torch::randn({rows, H}, bf16), w1 = (torch::randn({I, H}, f32) / sh).to(torch::kBFloat16);
    auto w2 = (torch::randn({H, I}, f32) / si).to(torch::kBFloat16), dout = torch::randn({rows, H}, bf16);
    auto b1 = 0.5 * torch::randn({I}, f32);
    auto z = torch::empty({rows, I}, bf16), y = torch::empty_like(z), dy = torch::empty_like(z), dz = torch::empty_like(z);
    auto partial = torch::empty({cuda::bias_gelu_row_blocks(rows), I}, f32);
    torch::Tensor db;
    const double bytes = 2.0 * (static_cast<double>(rows) * static_cast<double>(H) + static_cast<double>(I * H)) +
                         4.0 * static_cast<double>(rows) * static_cast<double>(I);
    const auto w1t = w1.t();
    const double tf = median_us([&] {
      at::mm_out(z, x, w1t);
      TORCH_CHECK(cuda::bias_gelu_forward(true, z.data_ptr(), b1.data_ptr<float>(), y.data_ptr(), rows,
                                          static_cast<int>(I), stream));
    }, repeats);
    check("feed-forward forward (separate)");
    const double tb = median_us([&] {
      at::mm_out(dy, dout, w2);
      TORCH_CHECK(cuda::bias_gelu_backward(true, dy.data_ptr(), z.data_ptr(), b1.data_ptr<float>(), dz.data_ptr(),
                                           partial.data_ptr<float>(), rows, static_cast<int>(I), stream));
      db = partial.sum(0);
    }, repeats);
    check("feed-forward backward (separate)");
    add("ffn_forward", "(default) cuBLAS product, then bias + GELU", "genemask", I, bytes, tf);
    add("ffn_backward", "(default) cuBLAS product, then GELU' + bias sums", "genemask", I, bytes, tb);
    add("ffn_forward", "the cuBLAS product alone", "libtorch", I, bytes, median_us([&] { at::mm_out(z, x, w1t); }, repeats));
    add("ffn_backward", "the cuBLAS product alone", "libtorch", I, bytes, median_us([&] { at::mm_out(dy, dout, w2); }, repeats));
    const auto* props = at::cuda::getCurrentDeviceProperties();
    if (cuda::gemm_gelu_built() && props->major == 9 && props->minor == 0) {
      const int sms = props->multiProcessorCount;
      for (const auto kernel : {cuda::GemmGeluKernel::cooperative, cuda::GemmGeluKernel::pingpong}) {
        const bool coop = kernel == cuda::GemmGeluKernel::cooperative;
        const std::string which = coop ? "gemm-gelu (cooperative, the step's)" : "gemm-gelu (ping-pong)";
        auto y2 = torch::empty_like(z), z2 = torch::empty_like(z), dz2 = torch::empty_like(z);
        auto db2 = torch::empty({I}, f32);
        auto u8 = f32.dtype(torch::kUInt8);
        auto wsf = torch::empty({static_cast<int64_t>(cuda::gemm_bias_gelu_workspace(rows, I, H, sms, kernel)) + 1}, u8);
        auto wsb = torch::empty({static_cast<int64_t>(cuda::gemm_dgelu_workspace(rows, I, H, sms, kernel)) + 1}, u8);
        const double tf2 = median_us([&] {
          TORCH_CHECK(cuda::gemm_bias_gelu(x.data_ptr(), w1.data_ptr(), b1.data_ptr<float>(), y2.data_ptr(),
                                           z2.data_ptr(), rows, I, H, wsf.data_ptr(), sms, stream, kernel));
        }, repeats);
        check("feed-forward forward (gemm-gelu)");
        const double tb2 = median_us([&] {
          TORCH_CHECK(cuda::gemm_dgelu(dout.data_ptr(), w2.data_ptr(), z2.data_ptr(), dz2.data_ptr(),
                                       db2.data_ptr<float>(), rows, I, H, wsb.data_ptr(), sms, stream, kernel));
        }, repeats);
        check("feed-forward backward (gemm-gelu)");
        add("ffn_forward", which + ": y", "genemask", I, bytes, tf2, std::nullopt, max_rel_diff(y2, y));
        add("ffn_backward", which + ": dz", "genemask", I, bytes, tb2, std::nullopt, max_rel_diff(dz2, dz));
        add("ffn_backward", which + ": the bias gradient", "genemask", I, 0, tb2, std::nullopt, max_rel_diff(db2, db));
      }
    } else {
      std::fprintf(stderr, "kernel_bench: gemm-gelu not timed: %s\n",
                   cuda::gemm_gelu_built() ? "its kernels need a GPU of compute capability 9.0"
                                           : "this build has no CUTLASS");
    }
  }

  // The fused dropout + residual add + LayerNorm with the bf16 copy over [rows, H], p 0.1.
  {
    const float p = 0.1f, eps = 1e-12f;
    auto h = torch::randn({rows, H}, bf16), residual = torch::randn({rows, H}, f32);
    auto gamma = 1 + 0.1 * torch::randn({H}, f32), beta = 0.1 * torch::randn({H}, f32);
    auto y = torch::empty({rows, H}, f32), sum = torch::empty_like(y), y_low = torch::empty({rows, H}, bf16);
    auto keep = torch::empty({rows, H}, f32.dtype(torch::kUInt8));
    auto mean = torch::empty({rows}, f32), rstd = torch::empty({rows}, f32);
    const at::PhiloxCudaState philox(1234, 0);
    const double elements = static_cast<double>(rows) * static_cast<double>(H);
    const double bytes = 17 * elements;  // h 2, residual 4, y 4, y_low 2, sum 4, keep 1
    const double tf = median_us([&] {
      cuda::residual_layer_norm_forward(true, h.data_ptr(), residual.data_ptr<float>(), gamma.data_ptr<float>(),
                                        beta.data_ptr<float>(), y.data_ptr<float>(), y_low.data_ptr(), sum.data_ptr<float>(),
                                        keep.data_ptr<uint8_t>(), mean.data_ptr<float>(), rstd.data_ptr<float>(), rows,
                                        static_cast<int>(H), p, eps, philox, /*lean=*/false, stream);
    }, repeats);
    check("LayerNorm forward");
    add("ln_forward", "(default)", "genemask", H, bytes, tf);
    // ln-lean: no sum, the keep mask as bits (keep_bits.hpp), from the same draws.
    auto y2 = torch::empty_like(y), y_low2 = torch::empty_like(y_low), mean2 = torch::empty_like(mean),
         rstd2 = torch::empty_like(rstd);
    auto keep_bits = torch::empty({rows, cuda::keep_bytes_per_row(static_cast<int>(H))}, f32.dtype(torch::kUInt8));
    const double lean_bytes = (12 + 1.0 / 8) * elements;  // h 2, residual 4, y 4, y_low 2, keep 1/8
    const double tfl = median_us([&] {
      cuda::residual_layer_norm_forward(true, h.data_ptr(), residual.data_ptr<float>(), gamma.data_ptr<float>(),
                                        beta.data_ptr<float>(), y2.data_ptr<float>(), y_low2.data_ptr(), nullptr,
                                        keep_bits.data_ptr<uint8_t>(), mean2.data_ptr<float>(), rstd2.data_ptr<float>(),
                                        rows, static_cast<int>(H), p, eps, philox, /*lean=*/true, stream);
    }, repeats);
    check("LayerNorm forward (lean)");
    {
      // The default's keep bytes packed as keep_bits.hpp lays them out: bit j % 8 of byte j / 8.
      const auto kb = keep.to(torch::kInt32);
      const int64_t pad = cuda::keep_bytes_per_row(static_cast<int>(H)) * 8 - H;
      auto padded = torch::constant_pad_nd(kb, {0, pad}).view({rows, -1, 8});
      auto weights = torch::pow(2, torch::arange(8, kb.options())).view({1, 1, 8});
      const auto packed = (padded * weights).sum(-1).to(torch::kUInt8);
      add("ln_forward", "keep bits, no sum (ln-lean)", "genemask", H, lean_bytes, tfl,
          torch::equal(y2, y) && torch::equal(y_low2, y_low) && torch::equal(mean2, mean) && torch::equal(rstd2, rstd) &&
              torch::equal(packed, keep_bits));
    }
    add("ln_forward", "dropout, add, LayerNorm, cast", "libtorch", H, bytes, median_us([&] {
           auto s = at::native_dropout(h, p, true);
           auto x = std::get<0>(s) + residual;
           auto out = at::native_layer_norm(x, {H}, gamma, beta, eps);
           (void)std::get<0>(out).to(torch::kBFloat16);
         }, repeats));

    // Backward: y's gradient in fp32 (the next LayerNorm's residual) and in bf16 (the copy's,
    // from the next product).
    auto dy = torch::randn({rows, H}, f32), dy_low = torch::randn({rows, H}, bf16);
    auto dh = torch::empty({rows, H}, bf16), d_res = torch::empty({rows, H}, f32);
    auto dh1 = torch::empty_like(dh), d_res1 = torch::empty_like(d_res);
    const double bbytes = 17 * elements;  // dy 4, dy_low 2, sum 4, keep 1, dh 2, d_residual 4
    const double lean_bbytes = (18 + 1.0 / 8) * elements;  // dy 4, dy_low 2, h 2, residual 4, keep 1/8, dh 2, d_residual 4
    torch::Tensor sums1;
    for (const bool smem : {false, true}) {
      if (smem && !cuda::takes_smem_sums(static_cast<int>(H), true)) continue;
      auto partial = torch::empty({cuda::backward_partial_rows(rows, smem), 2, H}, f32);
      auto& g = smem ? dh : dh1;
      auto& d = smem ? d_res : d_res1;
      int blocks = 0;
      torch::Tensor sums;
      // lean: the sum from h, the residual and the keep bits (ln-lean), else the saved sum.
      auto backward = [&](bool lean, torch::Tensor& dh_out, torch::Tensor& d_res_out) {
        blocks = cuda::residual_layer_norm_backward(
            true, dy.data_ptr<float>(), dy_low.data_ptr(), lean ? nullptr : sum.data_ptr<float>(),
            lean ? h.data_ptr() : nullptr, lean ? residual.data_ptr<float>() : nullptr,
            lean ? keep_bits.data_ptr<uint8_t>() : keep.data_ptr<uint8_t>(), mean.data_ptr<float>(),
            rstd.data_ptr<float>(), gamma.data_ptr<float>(), dh_out.data_ptr(), d_res_out.data_ptr<float>(),
            partial.data_ptr<float>(), rows, static_cast<int>(H), p, smem, lean, stream);
        sums = partial.narrow(0, 0, blocks).sum(0);  // gamma's and beta's gradients, as the node returns them
      };
      const double tb = median_us([&] { backward(false, g, d); }, repeats);
      check("LayerNorm backward");
      const auto these_sums = sums;
      if (!smem) {
        sums1 = sums;
        add("ln_backward", "register sums (default)", "genemask", H, bbytes, tb);
      } else {
        // h's and the residual's gradients: the same per-row arithmetic, so the same bits;
        // gamma's and beta's sums grouped per block otherwise.
        add("ln_backward", "shared-memory sums (ln-smem)", "genemask", H, bbytes, tb,
             torch::equal(dh, dh1) && torch::equal(d_res, d_res1), max_rel_diff(sums, sums1));
      }
      // ln-lean: the same sums recomputed, so every gradient the same bits as just now.
      auto dh_lean = torch::empty_like(dh), d_res_lean = torch::empty_like(d_res);
      const double tl = median_us([&] { backward(true, dh_lean, d_res_lean); }, repeats);
      check("LayerNorm backward (lean)");
      add("ln_backward", smem ? "shared-memory sums, sum recomputed (ln-smem, ln-lean)" : "sum recomputed (ln-lean)",
          "genemask", H, lean_bbytes, tl,
          torch::equal(dh_lean, g) && torch::equal(d_res_lean, d) && torch::equal(sums, these_sums));
    }
    // LibTorch: the eager composition's backward kernels, as autograd runs them.
    auto keep_mask = keep.to(torch::kBool);
    auto x = sum;
    const auto stats = at::native_layer_norm(x, {H}, gamma, beta, eps);  // ATen's own mean and rstd
    const auto &amean = std::get<1>(stats), &arstd = std::get<2>(stats);
    add("ln_backward", "sum of y's gradients, LayerNorm, dropout backward", "libtorch", H, bbytes, median_us([&] {
           auto g = dy + dy_low.to(torch::kFloat32);
           auto out = at::native_layer_norm_backward(g, x, {H}, amean, arstd, gamma, beta, {true, true, true});
           (void)at::native_dropout_backward(std::get<0>(out).to(torch::kBFloat16), keep_mask, 1.0 / (1.0 - p));
         }, repeats));
  }

  // The column sums of the Q/K/V product's (3H) and an output product's (H) gradients.
  for (const int64_t N : {3 * H, H}) {
    auto g = torch::randn({rows, N}, bf16);
    auto partial = torch::empty({cuda::column_sum_row_blocks(rows, static_cast<int>(N)), N}, f32);
    const double bytes = 2 * static_cast<double>(rows) * static_cast<double>(N);
    const double t = median_us([&] {
      cuda::column_sum(true, g.data_ptr(), partial.data_ptr<float>(), rows, static_cast<int>(N), stream);
      (void)partial.sum(0);
    }, repeats);
    check("column sum");
    add("column_sum", "(default)", "genemask", N, bytes, t);
    add("column_sum", "sum(0) in bf16", "libtorch", N, bytes, median_us([&] { (void)g.sum(0); }, repeats));
  }

  // The Q/K/V product's three gradients as the attention's backward leaves them ([B, heads, L,
  // d] memory, viewed as [B, L, heads, d]) stacked into its [rows, 3H] gradient, with the
  // bias's column sums: in one pass (qkv_linear.hpp's node, taken with bias-sum), against
  // LibTorch's stack and then the column-sum kernel (bias-sum without the node), and
  // LibTorch's stack and sum(0) (the step's without bias-sum).
  {
    const int64_t heads = cfg.num_attention_heads, d = H / heads;
    std::vector<torch::Tensor> parts;
    for (int i = 0; i < 3; ++i) parts.push_back(torch::randn({batch, heads, seq, d}, bf16).transpose(1, 2));
    const double bytes = 2 * 2 * static_cast<double>(rows) * static_cast<double>(3 * H);  // read the parts, write the stack
    const double t = median_us([&] { (void)stack_column_sums(parts[0], parts[1], parts[2]); }, repeats);
    check("stacked column sums");
    const auto [stack, sums] = stack_column_sums(parts[0], parts[1], parts[2]);
    const auto want = torch::stack(parts, 2).view({rows, 3 * H});
    add("qkv_stack", "(default) stack and sums in one pass", "genemask", 3 * H, bytes, t,
        torch::equal(stack, want) && torch::equal(sums, column_sums(want)));
    add("qkv_stack", "stack, then the column-sum kernel", "genemask", 3 * H, bytes,
        median_us([&] { (void)column_sums(torch::stack(parts, 2).view({rows, 3 * H})); }, repeats));
    add("qkv_stack", "stack, then sum(0) in bf16", "libtorch", 3 * H, bytes,
        median_us([&] { (void)torch::stack(parts, 2).view({rows, 3 * H}).sum(0); }, repeats));
  }

  // The MLM loss over the decoder's logits of the masked rows (15% of the rows, as the
  // shards' recipe masks them) and the vocabulary, forward and backward together: genemask's
  // kernels (GENEMASK_FUSED's ce) and LibTorch's composition (the logits cast to fp32,
  // cross_entropy summed, and its backward to the bf16 logits), as the step runs them.
  {
    const int64_t N = std::max<int64_t>(1, rows * 15 / 100), V = cfg.vocab_size;
    auto logits = 3 * torch::randn({N, V}, f32);
    logits = logits.to(torch::kBFloat16);
    auto targets = torch::randint(0, V, {N}, f32.dtype(torch::kLong));
    auto stats = torch::empty({N, 2}, f32), loss = torch::empty({N}, f32), dx = torch::empty_like(logits);
    const auto g = torch::ones({}, f32);
    const double bytes = 6 * static_cast<double>(N) * static_cast<double>(V);  // read forward, read and write backward
    const double t = median_us([&] {
      cuda::cross_entropy_forward(true, logits.data_ptr(), targets.data_ptr<int64_t>(), stats.data_ptr<float>(),
                                  loss.data_ptr<float>(), N, static_cast<int>(V), static_cast<int>(V), stream);
      (void)loss.sum();
      cuda::cross_entropy_backward(true, logits.data_ptr(), targets.data_ptr<int64_t>(), stats.data_ptr<float>(),
                                   g.data_ptr<float>(), dx.data_ptr(), N, static_cast<int>(V), static_cast<int>(V),
                                   stream);
    }, repeats);
    check("cross-entropy");
    add("cross_entropy", "(default) forward + backward", "genemask", V, bytes, t);
    auto leaf = logits.detach().requires_grad_();
    add("cross_entropy", "cast, cross_entropy, backward", "libtorch", V, bytes, median_us([&] {
          auto l = torch::nn::functional::cross_entropy(
              leaf.to(torch::kFloat32), targets, torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum));
          (void)torch::autograd::grad({l}, {leaf});
        }, repeats));
  }

  // The table, then the JSON line.
  std::fprintf(stderr, "kernel_bench: %s, %s, %lld rows (%lld x %lld), copy bandwidth %.0f GB/s (read + write)\n",
               at::cuda::getCurrentDeviceProperties()->name, name.c_str(), static_cast<long long>(rows),
               static_cast<long long>(batch), static_cast<long long>(seq), copy_gbs);
  std::fprintf(stderr, "%-14s %-9s %6s %-50s %10s %8s %8s %10s %s\n", "kernel", "impl", "width", "variant", "us", "GB/s",
               "of copy", "vs default", "bits");
  // A kernel's default: genemask's case of that kernel and width whose variant says so.
  auto default_us = [&](const Case& c) {
    for (const Case& d : cases)
      if (d.kernel == c.kernel && d.width == c.width && d.impl == "genemask" &&
          d.variant.find("default") != std::string::npos)
        return d.median_us;
    return c.median_us;
  };
  std::string json;
  for (const Case& c : cases) {
    const double gbs = c.bytes / c.median_us / 1e3, vs = default_us(c) / c.median_us;
    const std::string bits = c.same_bits ? (*c.same_bits ? "same" : "DIFFER") : "";
    const std::string rel = c.max_rel_diff ? fmt::format(" (sums {:.2g})", *c.max_rel_diff) : "";
    std::fprintf(stderr, "%-14s %-9s %6lld %-50s %10.1f %8.0f %7.1f%% %9.2fx %s%s\n", c.kernel.c_str(), c.impl.c_str(),
                 static_cast<long long>(c.width), c.variant.c_str(), c.median_us, gbs, 100 * gbs / copy_gbs, vs,
                 bits.c_str(), rel.c_str());
    json += fmt::format(
        "{}{{\"kernel\":\"{}\",\"variant\":\"{}\",\"impl\":\"{}\",\"width\":{},\"bytes\":{:.0f},\"median_us\":{:.2f},"
        "\"gbs\":{:.1f},\"of_copy\":{:.4f},\"vs_default\":{:.4f},\"same_bits\":{},\"max_rel_diff\":{}}}",
        json.empty() ? "" : ",", c.kernel, c.variant, c.impl, c.width, c.bytes, c.median_us, gbs, gbs / copy_gbs, vs,
        c.same_bits ? (*c.same_bits ? "true" : "false") : "null",
        c.max_rel_diff ? fmt::format("{:.3g}", *c.max_rel_diff) : "null");
  }
  std::printf("{\"device\":\"%s\",\"config\":\"%s\",\"batch\":%lld,\"seq\":%lld,\"rows\":%lld,\"copy_gbs\":%.1f,\"cases\":[%s]}\n",
              at::cuda::getCurrentDeviceProperties()->name, name.c_str(), static_cast<long long>(batch),
              static_cast<long long>(seq), static_cast<long long>(rows), copy_gbs, json.c_str());
  if (!bits_ok) std::fprintf(stderr, "kernel_bench: a variant's bits differ from its default's where the kernel promises the same\n");
  return bits_ok ? 0 : 1;
}
