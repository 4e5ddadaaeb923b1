// The GPU step's CPU-checkable parts: one FLOP definition (against the step's matrix
// products counted one by one), the datasheet table, the profiler's classes and breakdown,
// the capturable optimizer step (tensor learning rate) against the plain one, the fused Q/K/V
// product against three separate ones, and the CUDA graph's refusal on a CPU.
#include <gtest/gtest.h>
#include <ATen/cpu/Utils.h>
#include <torch/csrc/autograd/profiler_kineto.h>

#include <cstdio>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <set>
#include <sstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/bert.hpp"
#include "model/cuda/int_divider.hpp"
#include "model/cuda/keep_bits.hpp"
#include "model/cuda/smem_sum_slots.hpp"
#include "model/bias_gelu.hpp"
#include "model/cross_entropy.hpp"
#include "model/cuda/gemm_gelu_shape.hpp"
#include "model/feed_forward.hpp"
#include "model/linear_bgrad.hpp"
#include "model/linear_cpu.hpp"
#include "model/qkv_linear.hpp"
#include "model/cuda_graph.hpp"
#include "model/flops.hpp"
#include "model/fusions.hpp"
#include "model/optim.hpp"
#include "model/residual_layer_norm.hpp"
#include "model/runtime.hpp"
#include "model/step_profile.hpp"
#include "model/weight_copies.hpp"
#include "model_test_util.hpp"

using namespace genemask::model;

namespace {
double max_abs_diff(const torch::Tensor& a, const torch::Tensor& b) { return (a - b).abs().max().item<double>(); }
/// The fusions these tests name by their first switches (qkv, ln, ln-bf16, gelu, bgrad: the
/// others' defaults as they were when each test was written), with ln-smem, bias-sum, ce and
/// ln-lean off: the defaults since 2026-11-30, which a test of one fusion must not turn on
/// beside it unasked (a brace list would take them from the defaults).
Fusions first_switches(bool qkv, bool ln, bool ln_bf16 = true, bool gelu = true, bool bgrad = false) {
  Fusions f;
  f.qkv = qkv;
  f.ln = ln;
  f.ln_bf16 = ln_bf16;
  f.gelu = gelu;
  f.bgrad = bgrad;
  f.ln_smem = f.bias_sum = f.ce = f.ln_lean = false;
  return f;
}
/// The fusions set to `f` for its life, then set back as they were.
struct FusionsFor {
  explicit FusionsFor(const Fusions& f) : saved(fusions()) { set_fusions(f); }
  ~FusionsFor() { set_fusions(saved); }
  FusionsFor(const FusionsFor&) = delete;
  FusionsFor& operator=(const FusionsFor&) = delete;
  const Fusions saved;
};
/// f() with fusions().ln_smem set to `on` and ln_lean to `lean` (the other fusions as they
/// are), then put back.
template <typename F>
auto with_ln_smem(bool on, F&& f, bool lean = false) {
  Fusions changed = fusions();
  changed.ln_smem = on;
  changed.ln_lean = lean;
  const FusionsFor scope(changed);
  return f();
}
/// A generator's state, read and set back under its lock: the same draws again.
torch::Tensor generator_state(at::Generator& gen) {
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get_state();
}
void set_generator_state(at::Generator& gen, const torch::Tensor& state) {
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(state);
}
}  // namespace

TEST(Flops, EqualsTheStepsMatrixProductsCountedOneByOne) {
  // Samples of unequal lengths (packed or padded alike: only real tokens count).
  const ModelShape m{12, 768, 3072, 4101};
  const std::vector<double> lengths = {512, 300, 7};
  const double masked = 123;
  // Forward, 2 FLOPs per multiply-add, product by product; training = 3 x forward.
  double fwd = 0, tokens = 0;
  for (double l : lengths) {
    tokens += l;
    for (int layer = 0; layer < 12; ++layer) {
      fwd += 3 * 2 * l * 768 * 768;   // Q, K, V
      fwd += 2 * l * l * 768;         // scores, all heads
      fwd += 2 * l * l * 768;         // probabilities x V
      fwd += 2 * l * 768 * 768;       // attention output
      fwd += 2 * 2 * l * 768 * 3072;  // feed-forward in and out
    }
  }
  fwd += masked * (2 * 768.0 * 768 + 2 * 768.0 * 4101);  // head transform and decoder, masked rows
  double sq = 0;
  for (double l : lengths) sq += l * l;
  EXPECT_NEAR(training_flops(m, tokens, sq, masked), 3 * fwd, 1e-9 * 3 * fwd);
  EXPECT_DOUBLE_EQ(matrix_parameters(m), 12.0 * (4 * 768.0 * 768 + 2 * 768.0 * 3072));
}

TEST(Flops, DatasheetPeaksByName) {
  EXPECT_EQ(datasheet_bf16_tflops("NVIDIA H100 80GB HBM3"), 989);
  EXPECT_EQ(datasheet_bf16_tflops("NVIDIA H200"), 989);
  EXPECT_EQ(datasheet_bf16_tflops("NVIDIA H100 PCIe"), 756);
  EXPECT_EQ(datasheet_bf16_tflops("NVIDIA A100-SXM4-80GB"), 312);
  EXPECT_EQ(datasheet_bf16_tflops("NVIDIA A100 80GB PCIe"), 312);
  EXPECT_EQ(datasheet_bf16_tflops("NVIDIA H100 NVL"), 835);
  EXPECT_EQ(datasheet_bf16_tflops("NVIDIA H200 NVL"), 835);  // not the SXM's 989
  EXPECT_EQ(datasheet_bf16_tflops("NVIDIA GH200 480GB"), 989);
  EXPECT_EQ(datasheet_bf16_tflops("NVIDIA H100 SXM5 80GB"), 989);
  // A MIG slice has a share of the GPU's units: no datasheet peak, so no MFU.
  EXPECT_EQ(datasheet_bf16_tflops("NVIDIA A100-SXM4-40GB MIG 1g.5gb"), 0);
  EXPECT_EQ(datasheet_bf16_tflops("NVIDIA H100 80GB HBM3 MIG 3g.40gb"), 0);
  EXPECT_EQ(datasheet_bf16_tflops("NVIDIA GeForce RTX 4090"), 0);
  EXPECT_EQ(datasheet_bf16_tflops(""), 0);
  EXPECT_DOUBLE_EQ(mfu(500, 1000), 0.5);
  EXPECT_LT(mfu(500, 0), 0);
}

// Ranks that share a GPU share its peak: two ranks on one H200 divide by 989, not 1978.
TEST(Flops, RunPeakCountsEachGpuOnce) {
  EXPECT_EQ(run_peak_tflops({"n1 GPU-a"}, {989}), 989);
  EXPECT_EQ(run_peak_tflops({"n1 GPU-a", "n1 GPU-a"}, {989, 989}), 989);
  EXPECT_EQ(run_peak_tflops({"n1 GPU-a", "n1 GPU-b", "n1 GPU-a", "n1 GPU-b"}, {989, 756, 989, 756}), 989 + 756);
  // The same identity on two hosts is two GPUs (the key holds the host).
  EXPECT_EQ(run_peak_tflops({"n1 GPU-a", "n2 GPU-a"}, {312, 312}), 624);
  // Any rank without a known peak (a CPU rank, fp32, a GPU not in the table, a MIG slice):
  // no peak at all, not the others' sum.
  EXPECT_EQ(run_peak_tflops({"n1 GPU-a", "n1 GPU-b"}, {989, 0}), 0);
  EXPECT_EQ(run_peak_tflops({"n1 GPU-a", ""}, {989, 989}), 0);
  EXPECT_EQ(run_peak_tflops({}, {}), 0);
  EXPECT_EQ(run_peak_tflops({"n1 GPU-a"}, {989, 989}), 0);
}

TEST(StepProfile, KernelAndOperatorClasses) {
  EXPECT_EQ(profile_class("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT", true), "matmul");
  EXPECT_EQ(profile_class("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", true), "matmul");
  EXPECT_EQ(profile_class("cudnn_generated_fort_native_sdpa_sm90_flash_bprop_wgmma_f16_knob_26", true), "attention");
  EXPECT_EQ(profile_class("void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128, 128, 4, cutlass::bfloat16_t>>", true),
            "attention");
  EXPECT_EQ(profile_class("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<FusedAdamMathFunctor>", true),
            "optimizer");
  EXPECT_EQ(profile_class("void at::native::vectorized_elementwise_kernel<8, at::native::bfloat16_copy_kernel_cuda>", true),
            "copies_casts");
  EXPECT_EQ(profile_class("Memcpy HtoD (Pinned -> Device)", true), "copies_casts");
  EXPECT_EQ(profile_class("void at::native::vectorized_layer_norm_kernel<float, float, false>", true), "elementwise_norm");
  EXPECT_EQ(profile_class("aten::addmm", false), "matmul");
  // A bf16 product on a CPU with AVX-512 goes to oneDNN under its own names: products too.
  EXPECT_EQ(profile_class("mkldnn::_linear_pointwise", false), "matmul");
  EXPECT_EQ(profile_class("mkldnn::_linear_pointwise.binary", false), "matmul");
  EXPECT_EQ(profile_class("aten::mkldnn_linear", false), "matmul");
  EXPECT_EQ(profile_class("aten::_mkldnn_matmul", false), "matmul");
  EXPECT_EQ(profile_class("onednn::qlinear_pointwise", false), "matmul");
  EXPECT_EQ(profile_class("aten::_addmm_activation", false), "matmul");
  EXPECT_EQ(profile_class("aten::mkldnn_convolution", false), "elementwise_norm");  // not a product of the model
  EXPECT_EQ(profile_class("aten::mkldnn_reshape", false), "elementwise_norm");
  EXPECT_EQ(profile_class("aten::_fused_adamw_", false), "optimizer");
  EXPECT_EQ(profile_class("aten::_to_copy", false), "copies_casts");
  EXPECT_EQ(profile_class("aten::native_layer_norm", false), "elementwise_norm");
  EXPECT_EQ(profile_class("aten::_scaled_dot_product_flash_attention_for_cpu", false), "attention");
}

TEST(StepProfile, CpuBreakdownOfAStepSeesItsParts) {
  torch::manual_seed(3);
  auto a = torch::randn({256, 256}), b = torch::randn({256, 256}, torch::requires_grad());
  const auto p = profile_steps(
      [&] {
        auto y = torch::relu(torch::mm(a, b));
        y.sum().backward();
      },
      3, torch::Device(torch::kCPU));
  ASSERT_EQ(p.seconds.size(), profile_classes().size());
  double total = 0;
  for (const auto& [k, v] : p.seconds) {
    EXPECT_GE(v, 0) << k;
    total += v;
  }
  EXPECT_GT(p.seconds[0].second, 0);  // matmul: the forward mm and the backward's
  EXPECT_EQ(p.seconds[0].first, "matmul");
  EXPECT_GT(p.seconds[2].second, 0);  // relu and its backward
  EXPECT_LE(total, p.step_s * 1.05 + 1e-4);  // one thread's own times fit in the wall time
  EXPECT_FALSE(p.top.empty());
  EXPECT_GT(p.kernels_per_step, 3);
  const auto j = nlohmann::json::parse(p.to_json());
  EXPECT_EQ(j["seconds_per_step"].size(), profile_classes().size());
}

TEST(FusedAdamW, TensorLearningRateStepEqualsThePlainStep) {
  // The capturable step (lr in a tensor, host counts advanced separately) against the plain
  // one, from the same gradients, over steps with a changing learning rate.
  auto cfg = genemask::test::small_bert_config(32, 64);
  torch::manual_seed(5);
  BertForMaskedLM a(cfg), b(cfg);
  init_weights(*a, cfg);
  a->eval();  // no dropout: the same gradients for both
  b->eval();
  {
    torch::NoGradGuard ng;
    auto pa = a->named_parameters();
    for (auto& p : b->named_parameters()) p.value().copy_(pa[p.key()]);
  }
  AdamWSettings s;
  s.lr = 1e-2;
  auto oa = make_adamw(a->named_parameters(), s), ob = make_adamw(b->named_parameters(), s);
  FusedAdamW fa(*oa), fb(*ob);
  auto lr = torch::zeros({});
  auto ids = torch::randint(5, 4101, {2, 12});
  std::map<std::string, torch::Tensor> initial;
  for (const auto& p : a->named_parameters()) initial[p.key()] = p.value().detach().clone();
  double moved = 0;
  for (int step = 0; step < 3; ++step) {
    for (auto* m : {&a, &b}) {
      (*m)->zero_grad();
      auto labels = ids.clone();
      (*m)->masked_lm_loss_sum(ids, torch::Tensor(), labels).backward();
    }
    const double rate = 1e-2 * (step + 1);
    fa.step(rate);
    lr.fill_(rate);
    fb.step(lr);
    fb.advance_host_steps();
  }
  auto pa = a->named_parameters(), pb = b->named_parameters();
  double worst = 0;
  for (const auto& p : pa) worst = std::max(worst, max_abs_diff(p.value(), pb[p.key()]));
  EXPECT_LT(worst, 1e-6);
  for (const auto& p : pa) moved = std::max(moved, max_abs_diff(p.value(), initial[p.key()]));
  EXPECT_GT(moved, 1e-3);  // the steps did move the weights
  for (const auto& p : pa) {
    auto& sa = static_cast<torch::optim::AdamWParamState&>(*oa->state().at(p.value().unsafeGetTensorImpl()));
    auto& sb = static_cast<torch::optim::AdamWParamState&>(*ob->state().at(pb[p.key()].unsafeGetTensorImpl()));
    EXPECT_EQ(sa.step(), 3);
    EXPECT_EQ(sb.step(), 3);
  }
  EXPECT_EQ(fb.state_tensors().size(), 3 * pa.size());
}

TEST(WeightCopies, AreAutocastsCastsAndPassTheGradientsAsTheyDo) {
  auto cfg = genemask::test::small_bert_config(32, 64);
  torch::manual_seed(21);
  BertForMaskedLM m(cfg);
  init_weights(*m, cfg);
  const auto copies = bert_weight_copies(*m);
  // Every linear layer's weight and bias, and the decoder's (the tied word embeddings and its
  // bias): the bf16 values autocast's cast makes. The rest (LayerNorms, the position and token
  // type tables) are read in fp32 and have none.
  size_t linears = 0;
  for (const auto& mod : m->modules(/*include_self=*/false))
    linears += dynamic_cast<const torch::nn::LinearImpl*>(mod.get()) ? 1 : 0;
  ASSERT_GT(linears, 0U);
  EXPECT_EQ(copies->size(), 2 * linears + 2);
  int64_t bytes = 0;
  for (const auto& np : m->named_parameters()) {
    const auto low = copies->low(np.value());
    if (!low.defined()) {
      EXPECT_TRUE(np.key().find("LayerNorm") != std::string::npos ||
                  np.key().find("position_embeddings") != std::string::npos ||
                  np.key().find("token_type_embeddings") != std::string::npos)
          << np.key();
      continue;
    }
    EXPECT_EQ(low.scalar_type(), torch::kBFloat16) << np.key();
    EXPECT_TRUE(torch::equal(low, np.value().to(torch::kBFloat16))) << np.key();
    bytes += low.numel() * 2;
  }
  EXPECT_EQ(copies->bytes(), bytes);
  // Q, K and V: one buffer, the concatenation autocast would cast, each third a part's copy.
  auto& self = *m->bert->encoder->layer->ptr(0)->as<BertLayerImpl>()->attention->self;
  const std::array<torch::Tensor, 3> ws{self.query->weight, self.key->weight, self.value->weight};
  const auto stack = copies->low_stack(ws);
  ASSERT_TRUE(stack.defined());
  EXPECT_TRUE(torch::equal(stack, torch::cat({ws[0], ws[1], ws[2]}, 0).to(torch::kBFloat16)));
  EXPECT_EQ(copies->low(ws[1]).data_ptr(), stack.narrow(0, 32, 32).data_ptr());
  EXPECT_FALSE(copies->low_stack({ws[1], ws[0], ws[2]}).defined());  // another order is no triple
  // As a product's operand under bf16 autocast, the copy gives the cast's output and the
  // weight the cast's gradient, bit for bit.
  {
    const auto& w = ws[0];
    auto x = torch::randn({5, 32}), r = torch::randn({5, 32});
    torch::Tensor y[2], g[2];
    for (int k = 0; k < 2; ++k) {
      w.mutable_grad() = torch::Tensor();
      {
        Autocast autocast(true);
        y[k] = at::linear(x, k == 0 ? w : low_operand(copies->low(w), w));
        (y[k].to(torch::kFloat32) * r).sum().backward();
      }
      g[k] = w.grad().clone();
    }
    EXPECT_EQ(y[1].scalar_type(), torch::kBFloat16);
    EXPECT_TRUE(torch::equal(y[0], y[1]));
    EXPECT_EQ(g[1].scalar_type(), torch::kFloat32);
    EXPECT_TRUE(torch::equal(g[0], g[1]));
    EXPECT_GT(g[1].abs().max().item<double>(), 0.0);
    EXPECT_TRUE(torch::equal(low_operand(torch::Tensor(), w), w));  // no copy: the weight itself
  }
  // A weight changed outside refresh() (its version counter moves): made again when read.
  {
    torch::NoGradGuard ng;
    ws[0].mul_(2);
  }
  EXPECT_EQ(copies->stale_refreshes(), 0);
  EXPECT_TRUE(torch::equal(copies->low_stack(ws), torch::cat({ws[0], ws[1], ws[2]}, 0).to(torch::kBFloat16)));
  EXPECT_EQ(copies->stale_refreshes(), 1);
  EXPECT_TRUE(torch::equal(copies->low(ws[0]), ws[0].to(torch::kBFloat16)));
  EXPECT_EQ(copies->stale_refreshes(), 1);  // fresh now
  // Every weight changed as an optimizer step changes them, then refresh() (the multi-tensor
  // copy): every copy the cast again, none made again when read.
  {
    torch::NoGradGuard ng;
    for (auto& p : m->parameters()) p.add_(torch::randn_like(p), 0.37);
  }
  copies->refresh();
  for (const auto& np : m->named_parameters()) {
    const auto low = copies->low(np.value());
    if (low.defined()) {
      EXPECT_TRUE(torch::equal(low, np.value().to(torch::kBFloat16))) << "after refresh: " << np.key();
    }
  }
  EXPECT_TRUE(torch::equal(copies->low_stack(ws), torch::cat({ws[0], ws[1], ws[2]}, 0).to(torch::kBFloat16)));
  EXPECT_EQ(copies->stale_refreshes(), 1);
  // In force only while put in force, and only under bf16 autocast on that device.
  const torch::Device cpu(torch::kCPU);
  EXPECT_EQ(weight_copies_for(cpu), nullptr);
  {
    const UseWeightCopies use(copies.get());
    EXPECT_EQ(weight_copies_for(cpu), nullptr);  // no autocast
    Autocast autocast(true);
    EXPECT_EQ(weight_copies_for(cpu), copies.get());
    {
      const UseWeightCopies none(nullptr);
      EXPECT_EQ(weight_copies_for(cpu), nullptr);
    }
    EXPECT_EQ(weight_copies_for(cpu), copies.get());
  }
  EXPECT_EQ(weight_copies_for(cpu), nullptr);
  // Refused: a parameter named twice, a triple of unlike shapes, a copy of another shape.
  EXPECT_THROW(WeightCopies({ws[0], ws[0]}, {}), std::invalid_argument);
  EXPECT_THROW(WeightCopies({ws[0]}, {ws}), std::invalid_argument);
  EXPECT_THROW(WeightCopies({}, {std::array<torch::Tensor, 3>{ws[0], ws[1], self.query->bias}}), std::invalid_argument);
  EXPECT_THROW(low_operand(torch::zeros({2, 2}, torch::kBFloat16), ws[0]), std::invalid_argument);
  EXPECT_THROW(bf16_operand(ws[0], torch::zeros({32, 32})), std::invalid_argument);  // fp32: no copy
  EXPECT_TRUE(torch::equal(bf16_operand(ws[0], torch::Tensor()), ws[0].to(torch::kBFloat16)));
}

TEST(WeightCopies, StepsComputeTheSameBitsWithThemAndWithout) {
  // Training steps under bf16 autocast (dropout on, the optimizer moving the weights) from the
  // same seed: with the copies the products read (made again by each optimizer step), every
  // loss and, after the steps, every weight and gradient equal those of the steps that cast.
  // On the CPU, and on a GPU where there is one (its fused kernels and CUDA generator).
  std::vector<torch::Device> devices = {torch::Device(torch::kCPU)};
  if (torch::cuda::is_available()) devices.emplace_back(torch::kCUDA, 0);
  for (const auto& dev : devices) {
    SCOPED_TRACE(dev.str());
    auto cfg = genemask::test::small_bert_config(32, 64);
    struct Run {
      BertForMaskedLM m{nullptr};
      std::unique_ptr<torch::optim::AdamW> opt;
      std::unique_ptr<FusedAdamW> fused;
      std::unique_ptr<WeightCopies> copies;
      std::vector<float> losses;
    };
    torch::manual_seed(4);
    const auto ids_cpu = torch::randint(5, 4101, {3, 16});
    const auto ids = ids_cpu.to(dev);
    const auto labels = torch::where(torch::rand({3, 16}) < 0.3, ids_cpu, torch::full_like(ids_cpu, -100)).to(dev);
    const auto mask = torch::ones({3, 16}, torch::kLong).index_put_({2, torch::indexing::Slice(10)}, 0).to(dev);
    auto loss_of = [&](Run& r) {
      Autocast autocast(true);
      const UseWeightCopies use(r.copies.get());
      return r.m->masked_lm_loss_sum(ids, mask, labels);
    };
    auto train = [&](bool with_copies) {
      Run r;
      torch::manual_seed(23);
      r.m = BertForMaskedLM(cfg);
      init_weights(*r.m, cfg);
      r.m->to(dev);
      r.m->train();
      AdamWSettings s;
      s.lr = 1e-2;
      r.opt = make_adamw(r.m->named_parameters(), s);
      r.fused = std::make_unique<FusedAdamW>(*r.opt);
      if (with_copies) r.copies = bert_weight_copies(*r.m);
      r.fused->keep_weight_copies(r.copies.get());
      for (int step = 0; step < 4; ++step) {
        r.m->zero_grad();
        auto l = loss_of(r);
        l.backward();
        r.losses.push_back(l.item<float>());
        r.fused->step(1e-2 * (step + 1));
      }
      return r;
    };
    Run cast = train(false), kept = train(true);
    ASSERT_EQ(kept.losses.size(), 4U);
    for (size_t i = 0; i < 4; ++i) EXPECT_EQ(kept.losses[i], cast.losses[i]) << "step " << i + 1;
    EXPECT_NE(kept.losses[0], kept.losses[3]);  // the steps did move the weights
    auto pc = cast.m->named_parameters(), pk = kept.m->named_parameters();
    for (const auto& p : pc) {
      EXPECT_TRUE(torch::equal(p.value(), pk[p.key()])) << p.key();
      EXPECT_TRUE(torch::equal(p.value().grad(), pk[p.key()].grad())) << p.key();
    }
    EXPECT_EQ(kept.copies->stale_refreshes(), 0);  // the optimizer kept them fresh
    // The products did read the copies: one spoiled in place (the weight untouched, so nothing
    // says it is stale) changes the loss; made again, the loss is the casts' once more.
    cast.m->eval();
    kept.m->eval();
    const float want = loss_of(cast).item<float>();
    EXPECT_EQ(loss_of(kept).item<float>(), want);
    const auto& dense = kept.m->bert->encoder->layer->ptr(0)->as<BertLayerImpl>()->output->dense->weight;
    {
      torch::NoGradGuard ng;
      kept.copies->low(dense).zero_();
    }
    EXPECT_NE(loss_of(kept).item<float>(), want);
    kept.copies->refresh();
    EXPECT_EQ(loss_of(kept).item<float>(), want);
  }
}

TEST(WeightCopies, AChangedThirdOfAStackIsMadeFreshWithTheOtherTwo) {
  // The Q/K/V copies are thirds of one buffer, with one version counter. On the path of three
  // products (fusions without qkv) each product saves its third for its backward; had key's
  // weight changed outside the optimizer, key's third would be made again only when key's
  // product read it, after query's product had saved the buffer, and the backward would stop
  // ("modified by an inplace operation"). Reading any third makes all three fresh first: the
  // loss and every gradient are those of the model that casts, and one copy was made again.
  Fusions f = fusions();
  f.qkv = false;
  const FusionsFor scope(f);
  auto cfg = genemask::test::small_bert_config(32, 64);
  torch::manual_seed(4);
  const auto ids = torch::randint(5, 4101, {2, 12});
  const auto labels = torch::where(torch::rand({2, 12}) < 0.4, ids, torch::full_like(ids, -100));
  auto run = [&](bool with_copies) {
    torch::manual_seed(23);
    BertForMaskedLM m(cfg);
    init_weights(*m, cfg);
    m->eval();
    std::unique_ptr<WeightCopies> copies;
    if (with_copies) copies = bert_weight_copies(*m);
    const auto& att = m->bert->encoder->layer->ptr(0)->as<BertLayerImpl>()->attention->self;
    {
      torch::NoGradGuard ng;
      att->key->weight.mul_(1.5);  // changed outside the optimizer: the copy is stale
    }
    torch::Tensor loss;
    {
      Autocast autocast(true);
      const UseWeightCopies use(copies.get());
      loss = m->masked_lm_loss_sum(ids, torch::Tensor(), labels);
    }
    EXPECT_NO_THROW(loss.backward());
    std::vector<torch::Tensor> grads;
    for (const auto& p : m->parameters()) grads.push_back(p.grad().defined() ? p.grad().clone() : torch::Tensor());
    if (copies) {
      EXPECT_EQ(copies->stale_refreshes(), 1);
    }
    return std::make_pair(loss.item<float>(), grads);
  };
  const auto [cast_loss, cast_grads] = run(false);
  const auto [kept_loss, kept_grads] = run(true);
  EXPECT_EQ(kept_loss, cast_loss);
  ASSERT_EQ(kept_grads.size(), cast_grads.size());
  for (size_t i = 0; i < cast_grads.size(); ++i) {
    ASSERT_EQ(kept_grads[i].defined(), cast_grads[i].defined()) << i;
    if (cast_grads[i].defined()) {
      EXPECT_TRUE(torch::equal(kept_grads[i], cast_grads[i])) << i;
    }
  }
}

TEST(Bert, FusedQkvProductEqualsThreeProducts) {
  auto cfg = genemask::test::small_bert_config(32, 64);
  torch::manual_seed(8);
  BertSelfAttention sa(cfg);
  sa->eval();
  auto x = torch::randn({3, 10, 32});
  auto key_mask = torch::ones({3, 1, 1, 10}, torch::kBool);
  key_mask[2].slice(-1, 6).fill_(false);
  const auto split = [&](const torch::Tensor& t) { return t.view({3, 10, 4, 8}).transpose(1, 2); };
  auto ref = attention_reference(split(sa->query(x)), split(sa->key(x)), split(sa->value(x)), key_mask, 0.0, false)
                 .transpose(1, 2)
                 .reshape({3, 10, 32});
  auto out = sa(x, key_mask);
  EXPECT_LT(max_abs_diff(out, ref), 1e-5);
  sa->fused_qkv = false;  // the three-product path gives the same
  EXPECT_LT(max_abs_diff(sa(x, key_mask), out), 1e-5);
  sa->fused_qkv = true;
  // Gradients reach the three separate parameters, equal to the three products' (x's too).
  auto grads = [&](bool fused) {
    sa->fused_qkv = fused;
    sa->zero_grad();
    auto xi = x.clone().requires_grad_();
    sa(xi, key_mask).pow(2).sum().backward();
    std::vector<torch::Tensor> g = {xi.grad()};
    for (auto* l : {&sa->query, &sa->key, &sa->value}) {
      g.push_back((*l)->weight.grad().clone());
      g.push_back((*l)->bias.grad().clone());
    }
    return g;
  };
  const auto gf = grads(true), gu = grads(false);
  sa->fused_qkv = true;
  for (size_t i = 0; i < gf.size(); ++i) {
    EXPECT_GT(gf[i].abs().sum().item<double>(), 0) << i;
    EXPECT_LT(max_abs_diff(gf[i], gu[i]), 1e-5 * std::max(1.0, gu[i].abs().max().item<double>())) << i;
  }
}

// Under bf16 autocast every linear layer is one product with its bias inside (addmm with a
// bf16 bias, or oneDNN's linear on the CPU: fusions.hpp's cpu-bias), never a product followed by a separate add of the fp32 bias over the whole
// output: the C++ frontend's torch::nn::functional::linear does that for inputs of 3
// dimensions, and on an H100 those adds were 16% of the DNABERT step. Checked on the CPU by
// the operators the profiler records (their input dtypes and shapes) in a forward and
// backward pass of the MLM model.
TEST(Bert, Bf16LinearsAddTheirBiasInTheProduct) {
  namespace prof = torch::profiler::impl;
  namespace kin = torch::autograd::profiler;
  auto cfg = genemask::test::small_bert_config(32, 64);
  torch::manual_seed(5);
  BertForMaskedLM m(cfg);
  auto ids = torch::randint(5, cfg.vocab_size, {2, 12}, torch::kLong);
  auto mask = torch::ones({2, 12}, torch::kLong);
  mask[1].slice(0, 9).fill_(0);
  // The operators `run` calls under autocast: how many products took a bf16 bias, and each
  // bias added outside its product.
  auto trace = [](const std::function<void()>& run, int& bf16_addmm) {
    const std::set<prof::ActivityType> acts = {prof::ActivityType::CPU};
    const prof::ProfilerConfig pc(prof::ProfilerState::KINETO, /*report_input_shapes=*/true);
    kin::prepareProfiler(pc, acts);
    kin::enableProfiler(pc, acts);
    {
      Autocast autocast(true);
      run();
    }
    auto result = kin::disableProfiler();
    bf16_addmm = 0;
    std::vector<std::string> separate;
    for (const auto& e : result->events()) {
      if (!e.hasTypes() || !e.hasShapes() || e.dtypes().size() < 2) continue;
      const auto& t = e.dtypes();
      const auto& sh = e.shapes();
      // addmm with a bf16 bias, or (cpu-bias, on a CPU whose bf16 products run through
      // oneDNN) oneDNN's linear with the bias in its epilogue.
      if ((e.name() == "aten::addmm" || e.name() == "mkldnn::_linear_pointwise") && t[0] == "c10::BFloat16" &&
          t[1] == "c10::BFloat16")
        ++bf16_addmm;
      // A 1-dimensional fp32 tensor added to a bf16 one of 2 or more dimensions.
      if ((e.name() == "aten::add_" || e.name() == "aten::add") && t[0] == "c10::BFloat16" && t[1] == "float" &&
          sh.size() >= 2 && sh[0].size() >= 2 && sh[1].size() == 1)
        separate.push_back(e.name() + fmt::format(" [{}] + [{}]", fmt::join(sh[0], ", "), fmt::join(sh[1], ", ")));
    }
    return separate;
  };
  int addmm = 0;
  // The control: the frontend's linear on a 3-dimensional input is seen adding its bias apart.
  torch::nn::Linear lin(32, 48);
  const auto x3 = torch::randn({2, 12, 32});
  const auto control = trace([&] { torch::nn::functional::linear(x3, lin->weight, lin->bias); }, addmm);
  ASSERT_EQ(control.size(), 1u) << fmt::format("{}", fmt::join(control, "; "));
  EXPECT_NE(control[0].find("[2, 12, 48] + [48]"), std::string::npos) << control[0];
  const auto separate = trace([&] { m->forward(ids, mask).to(torch::kFloat32).pow(2).mean().backward(); }, addmm);
  EXPECT_TRUE(separate.empty()) << fmt::format("{}", fmt::join(separate, "; "));
  // Per layer Q/K/V (one product or three), the attention output, the two feed-forward
  // products; the head's transform and decoder.
  EXPECT_GE(addmm, cfg.num_hidden_layers * 4 + 2);
}

TEST(Fusions, EnvironmentListParsed) {
  auto f = parse_fusions("qkv,ln");
  EXPECT_TRUE(f.qkv && f.ln);
  f = parse_fusions("ln");
  EXPECT_TRUE(!f.qkv && f.ln);
  f = parse_fusions("none");
  EXPECT_TRUE(!f.qkv && !f.ln && !f.ln_bf16);
  f = parse_fusions("qkv,ln,ln-bf16");
  EXPECT_TRUE(f.qkv && f.ln && f.ln_bf16);
  EXPECT_FALSE(parse_fusions("qkv,ln").ln_bf16);
  EXPECT_TRUE(Fusions{}.ln_bf16);  // on by default since a GPU run checked and timed it
  EXPECT_TRUE(Fusions{}.qkv && Fusions{}.ln);
  f = parse_fusions("gelu,qkv");
  EXPECT_TRUE(f.qkv && !f.ln && !f.ln_bf16 && f.gelu);
  EXPECT_TRUE(Fusions{}.gelu);  // on by default since a GPU run checked and timed it
  EXPECT_THROW(parse_fusions("qkv,GELU"), std::invalid_argument);
  EXPECT_THROW(parse_fusions("ln_bf16"), std::invalid_argument);
  // What a checkpoint records: the fusions that change the numbers (ln-bf16 does not).
  EXPECT_EQ(numeric_fusions(parse_fusions("qkv,ln,ln-bf16")), "qkv,ln");
  EXPECT_EQ(numeric_fusions(parse_fusions("ln-bf16,qkv")), "qkv");
  EXPECT_EQ(numeric_fusions(parse_fusions("ln")), "ln");
  EXPECT_EQ(numeric_fusions(parse_fusions("none")), "none");
  EXPECT_EQ(numeric_fusions(parse_fusions("gelu,ln-bf16,ln,qkv")), "qkv,ln,gelu");  // gelu changes them
  EXPECT_EQ(numeric_fusions(parse_fusions("gelu")), "gelu");
  f = parse_fusions("bgrad,ln-bf16");
  EXPECT_TRUE(!f.qkv && !f.ln && f.ln_bf16 && !f.gelu && f.bgrad);
  EXPECT_FALSE(Fusions{}.bgrad);  // off by default: timed on a GPU, it gained nothing
  EXPECT_FALSE(parse_fusions("qkv,ln,ln-bf16,gelu").bgrad);
  EXPECT_EQ(numeric_fusions(parse_fusions("bgrad,gelu,ln-bf16,ln,qkv")), "qkv,ln,gelu,bgrad");  // bgrad changes them
  EXPECT_EQ(numeric_fusions(Fusions{}), "qkv,ln,gelu,ln-smem,bias-sum,ce");
  EXPECT_EQ(numeric_fusions(parse_fusions("qkv,ln")), "qkv,ln");  // what a checkpoint written before gelu recorded
  EXPECT_EQ(parse_fusions(numeric_fusions(Fusions{})).qkv, true);
  EXPECT_THROW(parse_fusions(""), std::invalid_argument);
  // cpu-bias: on by default, named like the others, and not among the numeric ones.
  EXPECT_TRUE(Fusions{}.cpu_bias);
  EXPECT_FALSE(parse_fusions("qkv,ln,ln-bf16,gelu").cpu_bias);
  EXPECT_FALSE(parse_fusions("none").cpu_bias);
  f = parse_fusions("cpu-bias");
  EXPECT_TRUE(!f.qkv && !f.ln && !f.ln_bf16 && !f.gelu && !f.bgrad && f.cpu_bias);
  EXPECT_EQ(numeric_fusions(f), "none");
  EXPECT_EQ(numeric_fusions(parse_fusions("cpu-bias,qkv")), "qkv");
  EXPECT_THROW(parse_fusions("cpu_bias"), std::invalid_argument);
  // ln-smem: on by default (since an H200 run checked and timed it), named like the others,
  // and numeric (the gamma and beta gradients' grouping), after bgrad in the recorded list.
  EXPECT_TRUE(Fusions{}.ln_smem);
  EXPECT_FALSE(parse_fusions("qkv,ln,ln-bf16,gelu,bgrad,cpu-bias").ln_smem);
  f = parse_fusions("ln-smem,ln");
  EXPECT_TRUE(!f.qkv && f.ln && !f.ln_bf16 && !f.gelu && !f.bgrad && !f.cpu_bias && f.ln_smem);
  EXPECT_EQ(numeric_fusions(parse_fusions("ln-smem,bgrad,gelu,ln,qkv,cpu-bias")), "qkv,ln,gelu,bgrad,ln-smem");
  EXPECT_EQ(numeric_fusions(parse_fusions("ln-smem")), "ln-smem");
  EXPECT_TRUE(parse_fusions(numeric_fusions(parse_fusions("ln,ln-smem"))).ln_smem);
  EXPECT_THROW(parse_fusions("ln_smem"), std::invalid_argument);
  // bias-sum likewise, after ln-smem in the recorded list.
  EXPECT_TRUE(Fusions{}.bias_sum);
  f = parse_fusions("bias-sum");
  EXPECT_TRUE(!f.qkv && !f.ln && !f.ln_bf16 && !f.gelu && !f.bgrad && !f.cpu_bias && !f.ln_smem && f.bias_sum);
  EXPECT_EQ(numeric_fusions(parse_fusions("bias-sum,ln-smem,qkv")), "qkv,ln-smem,bias-sum");
  EXPECT_TRUE(parse_fusions(numeric_fusions(f)).bias_sum);
  EXPECT_THROW(parse_fusions("bias_sum"), std::invalid_argument);
  // ce likewise, last in the recorded list.
  EXPECT_TRUE(Fusions{}.ce);
  EXPECT_FALSE(parse_fusions("qkv,ln,ln-bf16,gelu,bgrad,cpu-bias,ln-smem,bias-sum").ce);
  f = parse_fusions("ce");
  EXPECT_TRUE(!f.qkv && !f.ln && !f.ln_bf16 && !f.gelu && !f.bgrad && !f.cpu_bias && !f.ln_smem && !f.bias_sum && f.ce);
  EXPECT_EQ(numeric_fusions(parse_fusions("ce,bias-sum,qkv,ln-bf16")), "qkv,bias-sum,ce");
  EXPECT_TRUE(parse_fusions(numeric_fusions(f)).ce);
  EXPECT_THROW(parse_fusions("CE"), std::invalid_argument);
  // weight-bf16: on by default (the same numbers), and not among the numeric ones.
  EXPECT_TRUE(Fusions{}.weight_bf16);
  EXPECT_FALSE(parse_fusions("qkv,ln,ln-bf16,gelu").weight_bf16);
  f = parse_fusions("weight-bf16");
  EXPECT_TRUE(!f.qkv && !f.ln && !f.ce && f.weight_bf16);
  EXPECT_EQ(numeric_fusions(f), "none");
  EXPECT_THROW(parse_fusions("weight_bf16"), std::invalid_argument);
  // ln-lean: on by default (since an H200 run checked and timed it), and not among the
  // numeric ones (the backward's sum recomputed to the bit).
  EXPECT_TRUE(Fusions{}.ln_lean);
  EXPECT_FALSE(parse_fusions("qkv,ln,ln-bf16,gelu,bgrad,cpu-bias,ln-smem,bias-sum,ce,weight-bf16").ln_lean);
  f = parse_fusions("ln,ln-lean");
  EXPECT_TRUE(!f.qkv && f.ln && !f.ln_smem && !f.weight_bf16 && f.ln_lean);
  EXPECT_EQ(numeric_fusions(f), "ln");
  EXPECT_THROW(parse_fusions("ln_lean"), std::invalid_argument);
  // ce-pad: off by default (until a GPU run has checked and timed it), numeric (another product
  // kernel), after ce in the recorded list; a checkpoint that recorded no ce-pad resumes
  // without it.
  EXPECT_FALSE(Fusions{}.ce_pad);
  EXPECT_FALSE(parse_fusions("qkv,ln,ln-bf16,gelu,bgrad,cpu-bias,ln-smem,bias-sum,ce,weight-bf16,ln-lean").ce_pad);
  f = parse_fusions("ce-pad,ce");
  EXPECT_TRUE(!f.qkv && !f.ln && f.ce && !f.weight_bf16 && !f.ln_lean && f.ce_pad);
  EXPECT_EQ(numeric_fusions(f), "ce,ce-pad");
  EXPECT_FALSE(with_numeric_of(parse_fusions("ce-pad"), parse_fusions("qkv,ln,gelu,ln-smem,bias-sum,ce")).ce_pad);
  EXPECT_TRUE(with_numeric_of(Fusions{}, parse_fusions("ce,ce-pad")).ce_pad);
  EXPECT_THROW(parse_fusions("ce_pad"), std::invalid_argument);
  // cudnn-varlen: off by default (until a GPU run has timed it), numeric, last.
  EXPECT_FALSE(Fusions{}.cudnn_varlen);
  EXPECT_EQ(numeric_fusions(parse_fusions("cudnn-varlen,qkv")), "qkv,cudnn-varlen");
  // gemm-gelu: off by default (until a GPU run has checked and timed it), numeric, last; a
  // checkpoint that recorded none resumes without it.
  EXPECT_FALSE(Fusions{}.gemm_gelu);
  EXPECT_EQ(numeric_fusions(parse_fusions("gemm-gelu,gelu")), "gelu,gemm-gelu");
  EXPECT_FALSE(with_numeric_of(parse_fusions("gemm-gelu"), parse_fusions("qkv,gelu")).gemm_gelu);
  EXPECT_THROW(parse_fusions("gemm_gelu"), std::invalid_argument);
  // What --resume adopts from a checkpoint's list: its numeric fusions, this run's others.
  f = with_numeric_of(Fusions{}, parse_fusions("qkv,ln"));
  EXPECT_TRUE(f.qkv && f.ln && !f.gelu && !f.bgrad && !f.ln_smem && !f.bias_sum && !f.ce);
  EXPECT_TRUE(f.ln_bf16 && f.cpu_bias && f.weight_bf16 && f.ln_lean);
  f = with_numeric_of(parse_fusions("qkv"), parse_fusions("gelu,ce,weight-bf16"));
  EXPECT_TRUE(!f.qkv && f.gelu && f.ce && !f.weight_bf16 && !f.ln_bf16);
  EXPECT_TRUE(with_numeric_of(parse_fusions("ln-lean"), parse_fusions("ln")).ln_lean);  // this run's
  EXPECT_FALSE(with_numeric_of(parse_fusions("ln"), parse_fusions("ln,ln-lean")).ln_lean);
  // The names in messages come from the same table as the parser's: every name listed parses
  // alone to exactly one switch, the numeric ones are those numeric_fusions records, and the
  // errors say what GENEMASK_FUSED takes.
  EXPECT_EQ(fusion_names(false),
            "qkv, ln, ln-bf16, gelu, bgrad, cpu-bias, ln-smem, bias-sum, ce, weight-bf16, ln-lean, ce-pad, cudnn-varlen "
            "and gemm-gelu");
  EXPECT_EQ(fusion_names(true), "qkv, ln, gelu, bgrad, ln-smem, bias-sum, ce, ce-pad, cudnn-varlen and gemm-gelu");
  // "a, b and c" as {a, b, c}
  auto split = [](std::string text) {
    for (const char* sep : {" and ", ", "})
      for (size_t at; (at = text.find(sep)) != std::string::npos;) text.replace(at, std::strlen(sep), ",");
    std::vector<std::string> out;
    std::stringstream in(text);
    for (std::string name; std::getline(in, name, ',');) out.push_back(name);
    return out;
  };
  const std::vector<std::string> numeric_names = split(fusion_names(true));
  std::string joined;
  for (const std::string& name : split(fusion_names(false))) {
    const Fusions one = parse_fusions(name);
    const bool* b = reinterpret_cast<const bool*>(&one);
    EXPECT_EQ(std::count(b, b + sizeof(Fusions), true), 1) << name;
    const bool numeric = std::find(numeric_names.begin(), numeric_names.end(), name) != numeric_names.end();
    EXPECT_EQ(numeric_fusions(one), numeric ? name : "none") << name;
    joined += (joined.empty() ? "" : ",") + name;
  }
  const Fusions every = parse_fusions(joined);
  const bool* b = reinterpret_cast<const bool*>(&every);
  EXPECT_EQ(std::count(b, b + sizeof(Fusions), true), static_cast<long>(sizeof(Fusions)));  // every switch named
  EXPECT_EQ(numeric_fusions(every), "qkv,ln,gelu,bgrad,ln-smem,bias-sum,ce,ce-pad,cudnn-varlen,gemm-gelu");
  for (const char* bad : {"qkv,fast", "", ","}) {
    try {
      parse_fusions(bad);
      ADD_FAILURE() << "'" << bad << "' was taken";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("expected a comma-separated list of " + fusion_names(false) + ", or none"),
                std::string::npos)
          << e.what();
    }
  }
}

// The shared-memory sums of the fused LayerNorm's backward (ln-smem): for every chunk count
// the kernel takes (H / 8 up to 128) and its 4 warps, the slots of (gamma or beta, warp,
// column) are all different and fill 2 x W x H floats exactly, a column's float is inside the
// float4 slot the kernel adds its chunk's half into, and the 8 lanes of a quarter-warp (on
// consecutive chunks) touch 8 consecutive float4s, i.e. all 32 banks once.
TEST(ResidualLayerNorm, SharedMemorySumSlotsAreABankConflictFreeLayout) {
  using genemask::model::cuda::smem_sum_float;
  using genemask::model::cuda::smem_sum_slot4;
  using genemask::model::cuda::takes_smem_sums;
  // Taken above H = 256 only (fewer warps per SM than the register sums at H <= 256).
  EXPECT_FALSE(takes_smem_sums(256, true));
  EXPECT_FALSE(takes_smem_sums(100, true));
  EXPECT_TRUE(takes_smem_sums(264, true));
  EXPECT_TRUE(takes_smem_sums(768, true));
  EXPECT_FALSE(takes_smem_sums(768, false));
  const int W = 4;
  for (int C = 1; C <= 128; ++C) {
    SCOPED_TRACE(testing::Message() << "C " << C);
    const int H = 8 * C;
    std::vector<int> seen(static_cast<size_t>(2 * W * H), 0);
    for (int which = 0; which < 2; ++which)
      for (int w = 0; w < W; ++w)
        for (int j = 0; j < H; ++j) {
          const int f = smem_sum_float(which, w, j, C, W);
          ASSERT_GE(f, 0);
          ASSERT_LT(f, 2 * W * H);
          ++seen[static_cast<size_t>(f)];
          EXPECT_EQ(f / 4, smem_sum_slot4(which, w, (j % 8) / 4, j / 8, C, W));
          EXPECT_EQ(f % 4, j % 4);
        }
    EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), 2 * W * H);  // a bijection
    for (int which = 0; which < 2; ++which)
      for (int w = 0; w < W; ++w)
        for (int half = 0; half < 2; ++half)
          for (int c0 = 0; c0 + 8 <= C; c0 += 8) {
            std::set<int> banks;
            for (int lane = 0; lane < 8; ++lane) {
              const int s4 = smem_sum_slot4(which, w, half, c0 + lane, C, W);
              EXPECT_EQ(s4, smem_sum_slot4(which, w, half, c0, C, W) + lane);
              for (int i = 0; i < 4; ++i) banks.insert((s4 * 4 + i) % 32);
            }
            EXPECT_EQ(banks.size(), 32u);
          }
  }
}

// ln-lean's keep mask as bits (cuda/keep_bits.hpp), checked as the kernels write and read it:
// for hidden sizes 1 to 300 and BERT's, in rows 0 and 5, the one-element kernel's ballots
// (lanes 0, 8, 16 and 24 writing a byte of each 32 elements) write every byte of the row
// once, the 8-element kernel's byte per chunk (H % 8 == 0) the very same bytes, and
// kept_bit reads every element's flag back.
TEST(ResidualLayerNorm, KeepBitsLayoutIsTheSameForBothKernels) {
  namespace c = genemask::model::cuda;
  std::mt19937 rng(3);
  std::vector<int> sizes;
  for (int H = 1; H <= 300; ++H) sizes.push_back(H);
  for (int H : {768, 777, 1016, 1024}) sizes.push_back(H);
  for (const int H : sizes)
    for (const int64_t r : {int64_t{0}, int64_t{5}}) {
      SCOPED_TRACE(testing::Message() << "H " << H << " row " << r);
      const int B = c::keep_bytes_per_row(H);
      ASSERT_EQ(B, (H + 7) / 8);
      std::vector<bool> kept(static_cast<size_t>(H));
      for (int j = 0; j < H; ++j) kept[static_cast<size_t>(j)] = rng() % 10 != 0;
      // The one-element kernel: lane `lane` holds element 32 k + lane.
      std::vector<int> writes(static_cast<size_t>(B), 0);
      std::vector<uint8_t> bytes(static_cast<size_t>(B), 0);
      for (int k = 0; 32 * k < H; ++k) {
        uint32_t ballot = 0;
        for (int lane = 0; lane < 32; ++lane)
          if (lane + 32 * k < H && kept[static_cast<size_t>(lane + 32 * k)]) ballot |= 1u << lane;
        for (int lane = 0; lane < 32; ++lane)
          if (c::writes_ballot_byte(lane, k, H)) {
            const int64_t at = c::keep_byte(r, H, lane + 32 * k) - r * B;
            ASSERT_GE(at, 0);
            ASSERT_LT(at, B);
            bytes[static_cast<size_t>(at)] = c::ballot_byte(ballot, lane);
            ++writes[static_cast<size_t>(at)];
          }
      }
      EXPECT_EQ(std::count(writes.begin(), writes.end(), 1), B);  // each byte once
      for (int j = 0; j < H; ++j)
        ASSERT_EQ(c::kept_bit(bytes[static_cast<size_t>(c::keep_byte(r, H, j) - r * B)], j), kept[static_cast<size_t>(j)])
            << j;
      // The 8-element kernel: lane's chunk c is elements 8 c .. 8 c + 7, its byte keep_byte(r, H, 8 c).
      if (H % 8 == 0) {
        std::vector<uint8_t> chunk_bytes(static_cast<size_t>(B), 0);
        for (int ch = 0; ch < H / 8; ++ch) {
          unsigned bits = 0;
          for (int e = 0; e < 8; ++e) bits |= static_cast<unsigned>(kept[static_cast<size_t>(8 * ch + e)]) << e;
          chunk_bytes[static_cast<size_t>(c::keep_byte(r, H, 8 * ch) - r * B)] = static_cast<uint8_t>(bits);
        }
        EXPECT_EQ(chunk_bytes, bytes);
      }
    }
}

// What a capture's warm-up changes is put back: the tensors' values (in place: the same
// storage, which graphs and optimizers hold) and the generator, whose next draws repeat.
TEST(StepGraph, StateSnapshotRestoresTensorsAndTheGenerator) {
  const torch::Device cpu(torch::kCPU);
  auto w = torch::randn({4, 3}), m = torch::zeros({5});
  const auto w0 = w.clone(), m0 = m.clone();
  const void* storage = w.data_ptr();
  StateSnapshot snap({w, m}, cpu);
  const auto first = torch::rand({6});  // the draws the generator gives from the snapshot on
  w.mul_(3).add_(1);
  m.fill_(7);
  torch::rand({100});
  snap.restore();
  EXPECT_TRUE(torch::equal(w, w0));
  EXPECT_TRUE(torch::equal(m, m0));
  EXPECT_EQ(w.data_ptr(), storage);
  EXPECT_TRUE(torch::equal(torch::rand({6}), first));
  // restore() again: the same state, not the state at the first restore's end.
  torch::rand({3});
  w.zero_();
  snap.restore();
  EXPECT_TRUE(torch::equal(w, w0));
  EXPECT_TRUE(torch::equal(torch::rand({6}), first));
}

TEST(StepGraph, RefusedOnTheCpuWithTheReason) {
  const torch::Device cpu(torch::kCPU);
  EXPECT_EQ(StepGraph::unavailable(cpu), "the device is a CPU");
  EXPECT_THROW(StepGraph g(cpu), std::invalid_argument);
}

namespace {
/// The eager composition the fused node replaces, with a given keep mask (1 = kept).
torch::Tensor eager_residual_ln(const torch::Tensor& h, const torch::Tensor& residual, const torch::Tensor& keep,
                                const torch::Tensor& gamma, const torch::Tensor& beta, double p, double eps) {
  auto dropped = p > 0 ? h.to(torch::kFloat32) * keep.to(torch::kFloat32) / (1 - p) : h.to(torch::kFloat32);
  return torch::layer_norm(dropped + residual, {residual.size(-1)}, gamma, beta, eps);
}
}  // namespace

// The fused dropout + residual add + LayerNorm against the eager composition, values and
// gradients of h, residual, gamma and beta, fp32 and bf16 h, hidden sizes of both configs
// and an odd one, with and without dropout (the keep mask read back from where the gradient
// of h is zero). On the CPU the node is not taken and BERT's residual output is the eager
// composition: the GPU assertions run where a GPU is visible.
TEST(ResidualLayerNorm, FusedKernelMatchesTheEagerComposition) {
  const torch::Device cpu(torch::kCPU);
  auto h0 = torch::randn({2, 3, 8}), r0 = torch::randn({2, 3, 8});
  EXPECT_FALSE(fused_residual_layer_norm_takes(h0, r0, torch::ones({8})));
  EXPECT_THROW(fused_residual_layer_norm(h0, r0, torch::ones({8}), torch::zeros({8}), 0.1, 1e-12), std::invalid_argument);
  {  // the module on the CPU: the eager composition
    auto cfg = genemask::test::small_bert_config(32, 64);
    torch::manual_seed(2);
    BertResidualOutput out(32, cfg);
    out->eval();
    auto x = torch::randn({2, 5, 32}), res = torch::randn({2, 5, 32});
    EXPECT_LT(max_abs_diff(out(x, res), out->LayerNorm(out->dense(x) + res)), 1e-6);
  }
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no GPU: the fused kernel's assertions need one";
  const torch::Device gpu(torch::kCUDA, 0);
  for (const auto dtype : {torch::kFloat32, torch::kBFloat16})
    // 777 and 300: H % 8 != 0, the one-element kernel above 256 (32 and 16 values a lane);
    // 384 and 1024: 2 and 4 chunks of 8 a lane; 777 and 1024 with 2960 rows, several a warp
    // with ln-smem's grid.
    for (const int64_t H : {256, 768, 520, 100, 777, 384, 1024, 300})
      for (const double p : {0.0, 0.1}) {
        SCOPED_TRACE(testing::Message() << "dtype " << dtype << " H " << H << " p " << p);
        torch::manual_seed(static_cast<uint64_t>(H) + (p > 0));
        const int64_t B = H == 777 || H == 1024 ? 80 : 4;
        auto h = torch::randn({B, 37, H}, torch::TensorOptions().device(gpu).dtype(dtype)).requires_grad_();
        auto res = torch::randn({B, 37, H}, torch::TensorOptions().device(gpu)).requires_grad_();
        auto gamma = (1 + 0.1 * torch::randn({H}, torch::TensorOptions().device(gpu))).requires_grad_();
        auto beta = (0.1 * torch::randn({H}, torch::TensorOptions().device(gpu))).requires_grad_();
        const double eps = 1e-12;
        auto gen = at::globalContext().defaultGenerator(gpu);
        const torch::Tensor before = generator_state(gen);
        auto y = with_ln_smem(false, [&] { return fused_residual_layer_norm(h, res, gamma, beta, p, eps); });
        auto dy = torch::randn_like(y);
        auto g = torch::autograd::grad({y}, {h, res, gamma, beta}, {dy});
        // The keep mask: where dh is zero (dy and the LayerNorm's gradient are nonzero almost surely).
        auto keep = p > 0 ? (g[0] != 0) : torch::ones_like(h, torch::kBool);
        if (p > 0) {
          const double kept = keep.to(torch::kFloat64).mean().item<double>();
          const double n = static_cast<double>(keep.numel()), sd = std::sqrt(p * (1 - p) / n);
          EXPECT_NEAR(kept, 1 - p, 5 * sd);  // the dropout rate, within 5 sigma
        }
        auto hr = h.detach().clone().requires_grad_(), rr = res.detach().clone().requires_grad_();
        auto gr = gamma.detach().clone().requires_grad_(), br = beta.detach().clone().requires_grad_();
        auto yr = eager_residual_ln(hr, rr, keep, gr, br, p, eps);
        auto ge = torch::autograd::grad({yr}, {hr, rr, gr, br}, {dy});
        const double tol = dtype == torch::kBFloat16 ? 2e-2 : 1e-4;  // bf16 dh is rounded to 8 bits
        EXPECT_LT(max_abs_diff(y, yr), 1e-4);
        EXPECT_LT(max_abs_diff(g[0].to(torch::kFloat32), ge[0].to(torch::kFloat32)),
                  tol * std::max(1.0, ge[0].abs().max().item<double>()));
        EXPECT_LT(max_abs_diff(g[1], ge[1]), 1e-4 * std::max(1.0, ge[1].abs().max().item<double>()));
        EXPECT_LT(max_abs_diff(g[2], ge[2]), 1e-3 * std::max(1.0, ge[2].abs().max().item<double>()));
        EXPECT_LT(max_abs_diff(g[3], ge[3]), 1e-3 * std::max(1.0, ge[3].abs().max().item<double>()));
        // The backward with gamma's and beta's sums in shared memory (ln-smem), from the same
        // draws: the same output and the same h and residual gradients bit for bit (the same
        // per-row arithmetic), gamma's and beta's within fp32 rounding of another grouping.
        {
          SCOPED_TRACE("ln-smem");
          set_generator_state(gen, before);
          const auto [ys, gs] = with_ln_smem(true, [&] {
            auto out = fused_residual_layer_norm(h, res, gamma, beta, p, eps);
            return std::make_pair(out, torch::autograd::grad({out}, {h, res, gamma, beta}, {dy}));
          });
          EXPECT_TRUE(torch::equal(ys, y));
          EXPECT_TRUE(torch::equal(gs[0], g[0]));
          EXPECT_TRUE(torch::equal(gs[1], g[1]));
          EXPECT_LT(max_abs_diff(gs[2], g[2]), 1e-5 * std::max(1.0, g[2].abs().max().item<double>()));
          EXPECT_LT(max_abs_diff(gs[3], g[3]), 1e-5 * std::max(1.0, g[3].abs().max().item<double>()));
          EXPECT_LT(max_abs_diff(gs[2], ge[2]), 1e-3 * std::max(1.0, ge[2].abs().max().item<double>()));
          EXPECT_LT(max_abs_diff(gs[3], ge[3]), 1e-3 * std::max(1.0, ge[3].abs().max().item<double>()));
          // ln-lean (no sum saved, the keep mask as bits, the backward's sum computed again),
          // with the register sums and the shared-memory sums: from the same draws, the same
          // output and every gradient the same bits as the same sums' without it.
          for (const bool smem : {false, true}) {
            SCOPED_TRACE(smem ? "ln-lean with ln-smem" : "ln-lean");
            set_generator_state(gen, before);
            const auto [yl, gl] = with_ln_smem(
                smem,
                [&] {
                  auto out = fused_residual_layer_norm(h, res, gamma, beta, p, eps);
                  return std::make_pair(out, torch::autograd::grad({out}, {h, res, gamma, beta}, {dy}));
                },
                /*lean=*/true);
            EXPECT_TRUE(torch::equal(yl, y));
            const auto& want = smem ? gs : g;
            for (int i = 0; i < 4; ++i) EXPECT_TRUE(torch::equal(gl[static_cast<size_t>(i)], want[static_cast<size_t>(i)])) << i;
          }
        }
        // The same draws again after the generator state is restored (checkpoints, graphs).
        if (p > 0) {
          const torch::Tensor state = generator_state(gen);
          auto a = fused_residual_layer_norm(h.detach(), res.detach(), gamma.detach(), beta.detach(), p, eps);
          set_generator_state(gen, state);
          auto b = fused_residual_layer_norm(h.detach(), res.detach(), gamma.detach(), beta.detach(), p, eps);
          auto c = fused_residual_layer_norm(h.detach(), res.detach(), gamma.detach(), beta.detach(), p, eps);
          EXPECT_TRUE(torch::equal(a, b));
          EXPECT_FALSE(torch::equal(b, c));  // and new draws after them
        }
      }
  // BERT's size (64 x 512 rows of 768, bf16, dropout 0.1), where both backward grids are full
  // and each warp takes many rows: ln-smem against the register sums and against fp64 sums.
  {
    SCOPED_TRACE("64 x 512 x 768");
    torch::manual_seed(5);
    auto h = torch::randn({64, 512, 768}, torch::TensorOptions().device(gpu).dtype(torch::kBFloat16)).requires_grad_();
    auto res = torch::randn({64, 512, 768}, torch::TensorOptions().device(gpu)).requires_grad_();
    auto gamma = (1 + 0.1 * torch::randn({768}, torch::TensorOptions().device(gpu))).requires_grad_();
    auto beta = (0.1 * torch::randn({768}, torch::TensorOptions().device(gpu))).requires_grad_();
    auto dy = torch::randn({64, 512, 768}, torch::TensorOptions().device(gpu));
    auto gen = at::globalContext().defaultGenerator(gpu);
    const torch::Tensor before = generator_state(gen);
    auto run = [&](bool smem, bool lean) {  // the same draws each time
      set_generator_state(gen, before);
      return with_ln_smem(
          smem,
          [&] {
            auto y = fused_residual_layer_norm(h, res, gamma, beta, 0.1, 1e-12);
            return torch::autograd::grad({y}, {h, res, gamma, beta}, {dy});
          },
          lean);
    };
    const auto reg = run(false, false), sm = run(true, false), again = run(true, false);
    EXPECT_TRUE(torch::equal(sm[0], reg[0]));
    EXPECT_TRUE(torch::equal(sm[1], reg[1]));
    for (int i : {2, 3}) EXPECT_TRUE(torch::equal(sm[i], again[i])) << i;  // the same bits each time
    // ln-lean: every gradient the same bits as without it, with either sums.
    const auto reg_lean = run(false, true), sm_lean = run(true, true);
    for (size_t i = 0; i < 4; ++i) {
      EXPECT_TRUE(torch::equal(reg_lean[i], reg[i])) << "ln-lean " << i;
      EXPECT_TRUE(torch::equal(sm_lean[i], sm[i])) << "ln-lean with ln-smem " << i;
    }
    // gamma's and beta's gradients in fp64 from the kernel's own row gradients: the sums of
    // dy x-hat and of dy over the 32768 rows (x-hat from the sum that the residual gradient
    // path saw: (dh and dres) do not give it, so from the forward's inputs).
    auto keep = (reg[0] != 0).to(torch::kFloat64);
    auto sum64 = res.detach().to(torch::kFloat64) + h.detach().to(torch::kFloat64) * keep / 0.9;
    auto mean = sum64.mean(-1, true), var = (sum64 - mean).pow(2).mean(-1, true);
    auto xhat = (sum64 - mean) / (var + 1e-12).sqrt();
    auto dy64 = dy.to(torch::kFloat64);
    const std::vector<int64_t> rows_dims{0, 1};
    auto dgamma = (dy64 * xhat).sum(rows_dims), dbeta = dy64.sum(rows_dims);
    for (const auto& [got, want] : {std::pair{sm[2], dgamma}, std::pair{sm[3], dbeta}, std::pair{reg[2], dgamma},
                                    std::pair{reg[3], dbeta}})
      EXPECT_LT((got.to(torch::kFloat64) - want).abs().max().item<double>(), 1e-4 * want.abs().max().item<double>() + 1e-3);
  }
  // h and the residual as views one element into their storage (not 16-byte aligned): the
  // forward takes the one-element kernel with ln-lean as without it; ln-lean's backward reads
  // h and the residual, which it keeps as aligned copies, so it takes the same backward kernel
  // as without it (which reads neither) and every gradient is the same bits, with either sums.
  // gamma and beta as strided views give what their contiguous copies give.
  for (const auto dtype : {torch::kFloat32, torch::kBFloat16})
    for (const int64_t H : {768, 520}) {
      SCOPED_TRACE(testing::Message() << "unaligned views, dtype " << dtype << " H " << H);
      torch::manual_seed(6);
      const int64_t n = 4 * 37 * H;
      auto opts = torch::TensorOptions().device(gpu);
      auto h = torch::randn({n + 1}, opts.dtype(dtype)).narrow(0, 1, n).view({4, 37, H}).requires_grad_();
      auto res = torch::randn({n + 1}, opts).narrow(0, 1, n).view({4, 37, H}).requires_grad_();
      ASSERT_NE(reinterpret_cast<uintptr_t>(h.data_ptr()) % 16, 0u);
      auto gb = torch::randn({H, 2}, opts);
      auto gamma = (1 + 0.1 * gb.select(1, 0)).detach().requires_grad_(), beta = (0.1 * gb.select(1, 1));
      auto gamma_s = (1 + 0.1 * gb).select(1, 0), beta_s = (0.1 * gb).select(1, 1);  // strided views
      ASSERT_FALSE(gamma_s.is_contiguous());
      beta = beta.detach().requires_grad_();
      auto dy = torch::randn({4, 37, H}, opts);
      auto gen = at::globalContext().defaultGenerator(gpu);
      const torch::Tensor before = generator_state(gen);
      auto run = [&](bool smem, bool lean) {
        set_generator_state(gen, before);
        return with_ln_smem(
            smem,
            [&] {
              auto y = fused_residual_layer_norm(h, res, gamma, beta, 0.1, 1e-12);
              auto g = torch::autograd::grad({y}, {h, res, gamma, beta}, {dy});
              g.insert(g.begin(), y.detach());
              return g;
            },
            lean);
      };
      for (const bool smem : {false, true}) {
        const auto plain = run(smem, false), lean = run(smem, true);
        for (size_t i = 0; i < 5; ++i) EXPECT_TRUE(torch::equal(lean[i], plain[i])) << (smem ? "ln-smem " : "") << i;
      }
      set_generator_state(gen, before);
      auto ys = fused_residual_layer_norm(h.detach(), res.detach(), gamma_s, beta_s, 0.1, 1e-12);
      EXPECT_TRUE(torch::equal(ys, run(false, false)[0]));
      // A beta that is not H fp32 values on h's GPU is refused, not read.
      for (const auto& bad : {torch::zeros({H - 1}, opts), torch::zeros({H}), torch::zeros({H}, opts.dtype(torch::kBFloat16))})
        EXPECT_THROW(fused_residual_layer_norm(h.detach(), res.detach(), gamma.detach(), bad, 0.1, 1e-12),
                     std::invalid_argument);
    }
}

namespace {
/// The MLM loss of a small model under bf16 autocast on `dev` (dropout on, the same seed for
/// the weights and the draws) and every parameter's gradient, with the fusions `f`.
std::pair<torch::Tensor, std::vector<torch::Tensor>> bf16_loss_and_grads(const torch::Device& dev, const Fusions& f) {
  auto cfg = genemask::test::small_bert_config(32, 64);
  set_fusions(f);
  torch::manual_seed(9);
  BertForMaskedLM m(cfg);
  m->to(dev);
  m->train();
  auto ids = torch::randint(5, cfg.vocab_size, {3, 14}, torch::kLong);
  auto mask = torch::ones({3, 14}, torch::kLong);
  mask[2].slice(0, 10).fill_(0);
  auto labels = torch::full({3, 14}, -100, torch::kLong);
  for (int64_t i = 1; i < 14; i += 3) labels.select(1, i).copy_(ids.select(1, i));
  torch::manual_seed(10);
  if (dev.is_cuda()) torch::cuda::manual_seed_all(10);
  torch::Tensor loss;
  {
    Autocast autocast(true);
    loss = m->masked_lm_loss_sum(ids.to(dev), mask.to(dev), labels.to(dev));
  }
  loss.backward();
  std::vector<torch::Tensor> grads;
  for (const auto& p : m->parameters()) grads.push_back(p.grad().cpu());
  return {loss.detach().cpu(), grads};
}
/// bf16_loss_and_grads' gradients of two runs, each within `rel` of the second's largest
/// value. The keys' biases get no gradient in exact arithmetic (a bias on every key shifts a
/// query's scores by one constant, which the softmax removes): theirs is rounding noise of
/// either run, so it is held to the scale of the model's gradients instead, and checked to be
/// that small.
void expect_grads_close(const std::vector<torch::Tensor>& on, const std::vector<torch::Tensor>& off, double rel) {
  ASSERT_EQ(on.size(), off.size());
  double scale = 0;
  for (const auto& g : off) scale = std::max(scale, g.abs().max().item<double>());
  const auto names = BertForMaskedLM(genemask::test::small_bert_config(32, 64))->named_parameters().keys();
  ASSERT_EQ(names.size(), off.size());
  int keys = 0;
  for (size_t i = 0; i < on.size(); ++i) {
    const bool zero = names[i].size() >= 8 && names[i].compare(names[i].size() - 8, 8, "key.bias") == 0;
    keys += zero;
    const double of = zero ? scale : std::max(1e-3, off[i].abs().max().item<double>());
    EXPECT_LT(max_abs_diff(on[i], off[i]), rel * of) << "parameter " << i << " " << names[i];
    if (zero) {
      EXPECT_LT(off[i].abs().max().item<double>(), 1e-2 * scale) << names[i] << ": not a zero gradient";
    }
  }
  EXPECT_EQ(keys, 2);  // one per layer of small_bert_config
}
/// The MLM loss and every gradient under bf16 autocast on the CPU, bit for bit the same with
/// the fusions `off` and with `on` (one whose fused path does not run on the CPU, or changes
/// nothing there); returns the gradients, on's then off's.
std::pair<std::vector<torch::Tensor>, std::vector<torch::Tensor>> expect_cpu_step_unchanged(const Fusions& off,
                                                                                              const Fusions& on) {
  const auto [loss_off, grads_off] = bf16_loss_and_grads(torch::Device(torch::kCPU), off);
  const auto [loss_on, grads_on] = bf16_loss_and_grads(torch::Device(torch::kCPU), on);
  EXPECT_TRUE(std::isfinite(loss_on.item<double>()));
  EXPECT_TRUE(torch::equal(loss_on, loss_off)) << loss_on.item<double>() << " vs " << loss_off.item<double>();
  EXPECT_EQ(grads_on.size(), grads_off.size());
  for (size_t i = 0; i < std::min(grads_on.size(), grads_off.size()); ++i)
    EXPECT_TRUE(torch::equal(grads_on[i], grads_off[i])) << "parameter " << i;
  return {grads_on, grads_off};
}
}  // namespace

// The CPU's bf16 linear with its bias in oneDNN's epilogue (fusions.hpp's cpu-bias,
// linear_cpu.hpp): where it is taken (a CPU whose bf16 products ATen sends to oneDNN: AVX-512
// BW/VL/DQ), its output and the gradients of x, the weight and the bias equal ATen's linear
// under bf16 autocast bit for bit, for 2-D and 3-D inputs, with and without autograd; it is
// not taken in fp32, off, for a non-contiguous input, for a product too small for oneDNN, or
// without a bias; and the MLM step's loss and every gradient are bit-identical on and off.
TEST(CpuBiasLinear, SameNumbersAsAtensLinear) {
  const Fusions saved = fusions();
  Fusions on, off;
  off.cpu_bias = false;
  const auto caps = at::cpu::get_cpu_capabilities();
  auto has = [&](const char* k) { return caps.count(k) && caps.at(k).isBool() && caps.at(k).toBool(); };
  const bool onednn = at::hasMKLDNN() && has("avx512_bw") && has("avx512_vl") && has("avx512_dq");
  torch::manual_seed(21);
  for (const auto& shape : std::vector<std::vector<int64_t>>{{3, 37, 64}, {50, 64}, {1, 200, 64}})
    for (const int64_t out : {int64_t{3072}, int64_t{96}, int64_t{7}}) {
      SCOPED_TRACE(fmt::format("x {} out {}", shape, out));
      auto x = torch::randn(shape), w = 0.1 * torch::randn({out, 64}), b = torch::randn({out});
      auto dy_shape = shape;
      dy_shape.back() = out;
      auto dy = torch::randn(dy_shape).to(torch::kBFloat16);
      std::vector<torch::Tensor> got[2];
      for (const bool fused : {false, true}) {
        set_fusions(fused ? on : off);
        auto xr = x.clone().requires_grad_(), wr = w.clone().requires_grad_(), br = b.clone().requires_grad_();
        torch::Tensor y;
        {
          Autocast autocast(true);
          EXPECT_EQ(cpu_bias_linear_takes(xr, wr, br), fused && onednn);
          y = affine(xr, wr, br);
          torch::NoGradGuard no_grad;  // inference: the same output without a graph
          EXPECT_TRUE(torch::equal(affine(xr, wr, br), y));
        }
        ASSERT_EQ(y.scalar_type(), torch::kBFloat16);
        y.backward(dy);
        got[fused] = {y.detach(), xr.grad(), wr.grad(), br.grad()};
      }
      for (size_t i = 0; i < got[0].size(); ++i)
        EXPECT_TRUE(torch::equal(got[1][i], got[0][i])) << "output, x, weight, bias: " << i;
    }
  set_fusions(on);
  auto x = torch::randn({4, 9, 64}), w = torch::randn({96, 64}), b = torch::randn({96});
  EXPECT_FALSE(cpu_bias_linear_takes(x, w, b));  // fp32, no autocast
  {
    Autocast autocast(true);
    EXPECT_EQ(cpu_bias_linear_takes(x, w, b), onednn);
    EXPECT_FALSE(cpu_bias_linear_takes(x.transpose(0, 1), w, b));  // ATen's linear adds the bias apart
    EXPECT_FALSE(cpu_bias_linear_takes(x.slice(1, 0, 1).slice(0, 0, 1).slice(2, 0, 8), w.slice(1, 0, 8), b));
    EXPECT_FALSE(cpu_bias_linear_takes(x, w, {}));
    EXPECT_FALSE(cpu_bias_linear_takes(x, w, b.slice(0, 0, 95)));
    set_fusions(off);
    EXPECT_FALSE(cpu_bias_linear_takes(x, w, b));
  }
  expect_cpu_step_unchanged(off, on);
  set_fusions(saved);
  if (!onednn) GTEST_SKIP() << "this CPU's bf16 products do not run through oneDNN: the fused path is not taken here";
}

// The bf16 copy of the residual LayerNorm's output (fusions.hpp's ln-bf16). On the CPU (and
// wherever the fused node is not taken) the copy is y.to(bf16), the cast autocast would make
// for the next product: the MLM loss and every gradient under bf16 autocast are bit-identical
// with the copy on and off; the copy is made only under bf16 autocast, when asked and in
// force; the products read it. On a GPU: the fused node's y is the one-output node's and its
// copy is y.to(bf16), bit for bit; its input gradients, from y's gradient, the copy's or both,
// equal the eager composition's; the MLM model with the copy on matches it off.
TEST(ResidualLayerNorm, Bf16CopyIsTheCastAutocastWouldMake) {
  const Fusions saved = fusions();
  {  // the copy: when it is made, what it holds, and that the products read it
    auto cfg = genemask::test::small_bert_config(32, 64);
    torch::manual_seed(3);
    BertResidualOutput out(64, cfg);
    BertIntermediate inter(cfg);
    BertSelfAttention self(cfg);
    out->eval();
    self->eval();
    auto h = torch::randn({2, 5, 64}), res = torch::randn({2, 5, 32});
    for (const bool on : {false, true}) {
      set_fusions(first_switches(true, true, on, false));
      {
        Autocast autocast(true);
        const Hidden made = out->forward_hidden(h, res, true);
        EXPECT_EQ(made.low.defined(), on);
        if (on) {
          EXPECT_EQ(made.low.scalar_type(), torch::kBFloat16);
          EXPECT_TRUE(torch::equal(made.low, made.x.to(torch::kBFloat16)));
        }
        EXPECT_TRUE(torch::equal(made.x, out(h, res)));  // forward: the same y, never a copy
        EXPECT_FALSE(out->forward_hidden(h, res, false).low.defined());
      }
      EXPECT_FALSE(out->forward_hidden(h, res, true).low.defined());  // no autocast: no copy
    }
    auto x = torch::randn({2, 5, 32}), other = torch::randn({2, 5, 32});
    EXPECT_TRUE(torch::equal(inter->forward(Hidden(x, other)), inter->forward(Hidden(other))));
    EXPECT_FALSE(torch::equal(inter->forward(Hidden(x, other)), inter->forward(Hidden(x))));
    EXPECT_TRUE(torch::equal(self->forward(Hidden(x, other), {}), self->forward(Hidden(other), {})));
  }
  expect_cpu_step_unchanged(first_switches(true, true, false), first_switches(true, true, true));  // the model on the CPU
  set_fusions(saved);
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no GPU: the fused copy's assertions need one";
  const torch::Device gpu(torch::kCUDA, 0);
  auto gen = at::globalContext().defaultGenerator(gpu);
  auto state = [&] { return generator_state(gen); };
  auto set_state = [&](const torch::Tensor& s) { set_generator_state(gen, s); };
  for (const int64_t H : {768, 256, 520, 100})
    for (const double p : {0.0, 0.1}) {
      SCOPED_TRACE(testing::Message() << "H " << H << " p " << p);
      torch::manual_seed(static_cast<uint64_t>(H) + 7 * (p > 0));
      const auto f32 = torch::TensorOptions().device(gpu);
      auto h = torch::randn({4, 37, H}, f32.dtype(torch::kBFloat16)).requires_grad_();
      auto res = torch::randn({4, 37, H}, f32).requires_grad_();
      auto gamma = (1 + 0.1 * torch::randn({H}, f32)).requires_grad_();
      auto beta = (0.1 * torch::randn({H}, f32)).requires_grad_();
      const double eps = 1e-12;
      const auto before = state();
      auto [y, y_low] = fused_residual_layer_norm_with_copy(h, res, gamma, beta, p, eps);
      set_state(before);
      auto y_one = fused_residual_layer_norm(h.detach(), res.detach(), gamma.detach(), beta.detach(), p, eps);
      ASSERT_EQ(y_low.scalar_type(), torch::kBFloat16);
      EXPECT_TRUE(torch::equal(y, y_one));  // the same draws and values as the one-output node
      EXPECT_TRUE(torch::equal(y_low, y.detach().to(torch::kBFloat16)));
      auto dy = torch::randn_like(y), dy_low = torch::randn_like(y_low);
      const std::vector<torch::Tensor> inputs = {h, res, gamma, beta};
      auto both = torch::autograd::grad({y, y_low}, inputs, {dy, dy_low}, /*retain_graph=*/true);
      auto keep = p > 0 ? (both[0] != 0) : torch::ones_like(h, torch::kBool);
      for (const int which : {0, 1, 2}) {  // both gradients, y's only, the copy's only
        SCOPED_TRACE(which == 0 ? "both" : which == 1 ? "y only" : "copy only");
        auto g = which == 0 ? both
                 : which == 1 ? torch::autograd::grad({y}, inputs, {dy}, /*retain_graph=*/true)
                              : torch::autograd::grad({y_low}, inputs, {dy_low}, /*retain_graph=*/true);
        auto hr = h.detach().clone().requires_grad_(), rr = res.detach().clone().requires_grad_();
        auto gr = gamma.detach().clone().requires_grad_(), br = beta.detach().clone().requires_grad_();
        auto yr = eager_residual_ln(hr, rr, keep, gr, br, p, eps);
        auto yr_low = yr.to(torch::kBFloat16);
        const std::vector<torch::Tensor> ref_inputs = {hr, rr, gr, br};
        auto ge = which == 0   ? torch::autograd::grad({yr, yr_low}, ref_inputs, {dy, dy_low})
                  : which == 1 ? torch::autograd::grad({yr}, ref_inputs, {dy})
                               : torch::autograd::grad({yr_low}, ref_inputs, {dy_low});
        EXPECT_LT(max_abs_diff(g[0].to(torch::kFloat32), ge[0].to(torch::kFloat32)),
                  2e-2 * std::max(1.0, ge[0].abs().max().item<double>()));  // bf16 dh: 8 bits
        EXPECT_LT(max_abs_diff(g[1], ge[1]), 1e-4 * std::max(1.0, ge[1].abs().max().item<double>()));
        EXPECT_LT(max_abs_diff(g[2], ge[2]), 1e-3 * std::max(1.0, ge[2].abs().max().item<double>()));
        EXPECT_LT(max_abs_diff(g[3], ge[3]), 1e-3 * std::max(1.0, ge[3].abs().max().item<double>()));
      }
    }
  {  // the model on the GPU: the copy on against off (the same draws; attention's backward
     // may sum in another order, hence a tolerance)
    const auto [loss_off, grads_off] = bf16_loss_and_grads(gpu, first_switches(true, true, false));
    const auto [loss_on, grads_on] = bf16_loss_and_grads(gpu, first_switches(true, true, true));
    set_fusions(saved);
    EXPECT_NEAR(loss_on.item<double>(), loss_off.item<double>(), 1e-4 * std::abs(loss_off.item<double>()));
    ASSERT_EQ(grads_on.size(), grads_off.size());
    for (size_t i = 0; i < grads_on.size(); ++i)
      EXPECT_LT(max_abs_diff(grads_on[i], grads_off[i]), 1e-2 * std::max(1e-3, grads_off[i].abs().max().item<double>()))
          << "parameter " << i;
  }
}

// The fused bias + erf-GELU (fusions.hpp's gelu) against the eager composition GELU(z + bias):
// values and the gradients of z and bias, fp32 and bf16 z, the feed-forward widths of both
// configs, an odd one, one row, and z at an address that rules the 8-wide loads out; the
// backward twice gives the same bits (the bias's sum has a fixed order). On the CPU the node
// is never taken: BERT's intermediate layer is the product with its bias and LibTorch's GELU,
// bit for bit with gelu on and off, and the MLM loss and gradients under bf16 autocast too.
// On a GPU, the MLM model with gelu on against off.
TEST(FusedBiasGelu, MatchesTheEagerComposition) {
  const Fusions saved = fusions();
  const torch::Device cpu(torch::kCPU);
  EXPECT_FALSE(fused_bias_gelu_runs_on(cpu));
  EXPECT_FALSE(fused_bias_gelu_takes(torch::randn({3, 8}), torch::randn({8})));
  EXPECT_THROW(fused_bias_gelu(torch::randn({3, 8}), torch::randn({8})), std::invalid_argument);
  {  // the layer on the CPU: the eager composition whatever the switch says
    auto cfg = genemask::test::small_bert_config(32, 64);
    torch::manual_seed(4);
    BertIntermediate inter(cfg);
    const auto x = torch::randn({2, 5, 32});
    const auto want = torch::gelu(torch::nn::functional::linear(x, inter->dense->weight, inter->dense->bias));
    for (const bool on : {false, true}) {
      set_fusions(first_switches(true, true, false, on));
      EXPECT_TRUE(torch::equal(inter->forward(Hidden(x)), want)) << "gelu " << on;
    }
    const auto [grads_on, grads_off] = expect_cpu_step_unchanged(first_switches(true, true, false, false), first_switches(true, true, false, true));
    expect_grads_close(grads_on, grads_off, 3e-2);  // the GPU's comparison below, and its premise
  }
  set_fusions(saved);
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no GPU: the fused kernel's assertions need one";
  const torch::Device gpu(torch::kCUDA, 0);
  const auto on_gpu = torch::TensorOptions().device(gpu);
  EXPECT_TRUE(fused_bias_gelu_runs_on(gpu));
  EXPECT_FALSE(fused_bias_gelu_takes(torch::randn({3, 8}, on_gpu), torch::randn({7}, on_gpu)));
  EXPECT_FALSE(fused_bias_gelu_takes(torch::randn({3, 8}, on_gpu.dtype(torch::kHalf)), torch::randn({8}, on_gpu)));
  for (const auto dtype : {torch::kFloat32, torch::kBFloat16})
    for (const int64_t H : {3072, 1024, 520, 100})
      for (const int64_t rows : {int64_t{1}, int64_t{148}})
        for (const bool misaligned : {false, true}) {
          if (misaligned && rows == 1) continue;
          SCOPED_TRACE(testing::Message() << "dtype " << dtype << " H " << H << " rows " << rows << " misaligned "
                                          << misaligned);
          torch::manual_seed(static_cast<uint64_t>(H + rows));
          // Misaligned: a contiguous view one element into its storage (no 16-byte loads).
          auto storage = torch::randn({rows * H + 1}, on_gpu.dtype(dtype));
          auto z = storage.narrow(0, misaligned ? 1 : 0, rows * H).view({rows, H}).requires_grad_();
          auto bias = (0.5 * torch::randn({H}, on_gpu)).requires_grad_();
          auto y = fused_bias_gelu(z, bias);
          ASSERT_EQ(y.scalar_type(), dtype);
          ASSERT_EQ(y.sizes(), z.sizes());
          auto dy = torch::randn_like(y);
          auto g = torch::autograd::grad({y}, {z, bias}, {dy}, /*retain_graph=*/true);
          // The eager composition in fp32 from the same values.
          auto zr = z.detach().to(torch::kFloat32).requires_grad_(), br = bias.detach().clone().requires_grad_();
          auto yr = torch::gelu(zr + br);
          auto ge = torch::autograd::grad({yr}, {zr, br}, {dy.to(torch::kFloat32)});
          const bool low = dtype == torch::kBFloat16;
          const double tol = low ? 1e-2 : 1e-5;  // bf16 y and dz: rounded to 8 bits
          EXPECT_LT(max_abs_diff(y.to(torch::kFloat32), yr), tol * std::max(1.0, yr.abs().max().item<double>()));
          if (low) {  // each value GELU's fp32 result rounded: within half a bf16 step, which is
                      // 2^-9 to 2^-8 of the value (8 significant bits), so 2^-8 bounds it
            const auto err = (y.to(torch::kFloat32) - yr).abs(), bound = yr.abs() * (1.0 / 256) * 1.01 + 1e-30;
            EXPECT_TRUE((err <= bound).all().item<bool>()) << "worst error / bound " << (err / bound).max().item<double>();
          }
          EXPECT_LT(max_abs_diff(g[0].to(torch::kFloat32), ge[0]), tol * std::max(1.0, ge[0].abs().max().item<double>()));
          // The bias's gradient is summed from the fp32 gradient before it is rounded: close
          // to the fp32 reference for bf16 z too.
          EXPECT_LT(max_abs_diff(g[1], ge[1]), 1e-4 * std::max(1.0, ge[1].abs().max().item<double>()));
          auto again = torch::autograd::grad({y}, {z, bias}, {dy});
          EXPECT_TRUE(torch::equal(again[0], g[0]));
          EXPECT_TRUE(torch::equal(again[1], g[1]));
        }
  {  // the model on the GPU: gelu on against off (the same draws; the bias added in fp32
     // rather than rounded in the product's epilogue, hence a tolerance)
    const auto [loss_off, grads_off] = bf16_loss_and_grads(gpu, first_switches(true, true, false, false));
    const auto [loss_on, grads_on] = bf16_loss_and_grads(gpu, first_switches(true, true, false, true));
    set_fusions(saved);
    EXPECT_NEAR(loss_on.item<double>(), loss_off.item<double>(), 2e-3 * std::abs(loss_off.item<double>()));
    expect_grads_close(grads_on, grads_off, 3e-2);
  }
}

// The fused bias + GELU's rows in flight (cuda/rows_in_flight.hpp): 2 and 4 of a thread's
// rows loaded at once give the very bits of one at a time, forward and backward (the output,
// z's gradient and the bias's, whose sums each thread adds in the same order), for row counts
// that leave a thread no row, one, and a last group short of 4, widths on the 16-byte and the
// one-element path, fp32 and bf16; other counts are refused before any launch.
TEST(FusedBiasGelu, RowsInFlightGiveTheSameBits) {
  using genemask::model::cuda::bias_gelu_rows_in_flight_supported;
  using genemask::model::cuda::kBiasGeluRowsInFlight;
  std::vector<int> supported;
  for (int r = -1; r <= 8; ++r)
    if (bias_gelu_rows_in_flight_supported(r)) supported.push_back(r);
  EXPECT_EQ(supported, (std::vector<int>{1, 2, 4}));
  EXPECT_TRUE(bias_gelu_rows_in_flight_supported(kBiasGeluRowsInFlight));
  EXPECT_THROW(fused_bias_gelu(torch::randn({3, 8}), torch::randn({8}), 3), std::invalid_argument);
  // The process-wide choice (fusions.hpp; train_bench's --gelu-rows): the kernels' default
  // until set, another count refused and the choice kept.
  EXPECT_EQ(gelu_rows_in_flight(), kBiasGeluRowsInFlight);
  EXPECT_THROW(set_gelu_rows_in_flight(3), std::invalid_argument);
  EXPECT_THROW(set_gelu_rows_in_flight(0), std::invalid_argument);
  EXPECT_EQ(gelu_rows_in_flight(), kBiasGeluRowsInFlight);
  set_gelu_rows_in_flight(4);
  EXPECT_EQ(gelu_rows_in_flight(), 4);
  set_gelu_rows_in_flight(kBiasGeluRowsInFlight);
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no GPU: the kernels' assertions need one";
  const auto on_gpu = torch::TensorOptions().device(torch::kCUDA, 0);
  try {
    fused_bias_gelu(torch::randn({3, 8}, on_gpu), torch::randn({8}, on_gpu), 3);
    ADD_FAILURE() << "3 rows in flight taken";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("rows in flight"), std::string::npos) << e.what();
  }
  for (const auto dtype : {torch::kFloat32, torch::kBFloat16})
    for (const int64_t H : {3072, 520, 100})
      for (const int64_t rows : {int64_t{1}, int64_t{148}, int64_t{2053}, int64_t{5000}}) {
        SCOPED_TRACE(testing::Message() << "dtype " << dtype << " H " << H << " rows " << rows);
        torch::manual_seed(static_cast<uint64_t>(H * rows));
        auto z = torch::randn({rows, H}, on_gpu.dtype(dtype)).requires_grad_();
        auto bias = (0.5 * torch::randn({H}, on_gpu)).requires_grad_();
        const auto dy = torch::randn({rows, H}, on_gpu.dtype(dtype));
        auto run = [&](int r) {
          auto y = fused_bias_gelu(z, bias, r);
          auto g = torch::autograd::grad({y}, {z, bias}, {dy});
          return std::make_tuple(y.detach(), g[0], g[1]);
        };
        const auto [y1, dz1, db1] = run(1);
        for (const int r : {0, 2, 4}) {  // 0: the process-wide choice, set to 2 here
          if (r == 0) set_gelu_rows_in_flight(2);
          const auto [y, dz, db] = run(r);
          EXPECT_TRUE(torch::equal(y, y1)) << r << " rows in flight: the output";
          EXPECT_TRUE(torch::equal(dz, dz1)) << r << " rows in flight: z's gradient";
          EXPECT_TRUE(torch::equal(db, db1)) << r << " rows in flight: the bias's gradient";
          set_gelu_rows_in_flight(kBiasGeluRowsInFlight);
        }
      }
}

// The feed-forward with the bias + GELU and its derivative + the bias gradient in its products'
// epilogues (fusions.hpp's gemm-gelu, feed_forward.hpp; CUTLASS kernels for Hopper). Anywhere:
// the shapes the kernels take, CUTLASS's own check of them, the node not taken on the CPU (it
// throws if called there), and the MLM step on the CPU the same bits with the switch on and
// off. On a Hopper GPU in a build with CUTLASS: the output and the five gradients against the
// fp32 composition from the same bf16 operands (LOGO's and DNABERT's widths, a narrow one;
// rows that fill no tile, one row), each within bf16 rounding of its largest value; the same
// bits on a repeat; what the node does not take (no autocast, a width not a multiple of 8)
// refused; an x not 16-byte aligned copied (the same bits); and the model's bf16 loss and
// gradients with the switch on against off (the node counted on, so it ran).
TEST(FusedFeedForward, MatchesTheComposition) {
  using genemask::model::cuda::gemm_gelu_shape_supported;
  EXPECT_TRUE(gemm_gelu_shape_supported(1, 3072, 256));
  EXPECT_TRUE(gemm_gelu_shape_supported(131072, 3072, 768));
  EXPECT_FALSE(gemm_gelu_shape_supported(0, 3072, 256));
  EXPECT_FALSE(gemm_gelu_shape_supported(16, 3076, 256));
  EXPECT_FALSE(gemm_gelu_shape_supported(16, 3072, 260));
  EXPECT_FALSE(gemm_gelu_shape_supported(16, 0, 256));
  EXPECT_FALSE(gemm_gelu_shape_supported(int64_t{1} << 31, 3072, 256));
  // CUTLASS's own check of the two products (host code, so it runs here): the models' sizes,
  // rows that fill no tile, one row, the test's narrow model; not a width off the rule.
  if (fused_feed_forward_built()) {
    EXPECT_TRUE(fused_feed_forward_can_implement(131072, 3072, 256, 256));  // logo, 256 x 512
    EXPECT_TRUE(fused_feed_forward_can_implement(32768, 3072, 768, 768));   // dnabert, 64 x 512
    EXPECT_TRUE(fused_feed_forward_can_implement(2053, 3072, 256, 256));
    EXPECT_TRUE(fused_feed_forward_can_implement(1, 3072, 768, 768));
    EXPECT_TRUE(fused_feed_forward_can_implement(42, 64, 32, 32));
  }
  EXPECT_FALSE(fused_feed_forward_can_implement(16, 3076, 256, 256));
  EXPECT_FALSE(fused_feed_forward_can_implement(16, 3072, 256, 260));
  const Fusions saved = fusions();
  EXPECT_FALSE(fused_feed_forward_runs_on(torch::Device(torch::kCPU)));
  {
    Autocast autocast(true);
    auto x = torch::randn({4, 16}).requires_grad_();
    const auto w1 = torch::randn({32, 16}), b1 = torch::randn({32}), w2 = torch::randn({16, 32}), b2 = torch::randn({16});
    EXPECT_FALSE(fused_feed_forward_takes(x, w1, b1, w2, b2));
    EXPECT_THROW(fused_feed_forward(x, w1, b1, w2, b2), std::invalid_argument);
  }
  Fusions on = first_switches(true, true, true, true), off = on;
  on.gemm_gelu = true;
  expect_cpu_step_unchanged(off, on);
  set_fusions(saved);
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no GPU: the fused products' assertions need one";
  const torch::Device gpu(torch::kCUDA, 0);
  if (!fused_feed_forward_runs_on(gpu))
    GTEST_SKIP() << "the fused products need a GPU of compute capability 9.0 and a build with CUTLASS";
  const auto on_gpu = torch::TensorOptions().device(gpu);
  struct Widths {
    int64_t K, N;
  };
  for (const Widths w : {Widths{256, 3072}, Widths{768, 3072}, Widths{32, 64}})
    for (const int64_t rows : {int64_t{1}, int64_t{148}, int64_t{2053}})
      for (const auto x_dtype : {torch::kBFloat16, torch::kFloat32}) {
        SCOPED_TRACE(testing::Message() << "K " << w.K << " N " << w.N << " rows " << rows << " x " << x_dtype);
        torch::manual_seed(static_cast<uint64_t>(w.K + w.N + rows));
        auto x = torch::randn({rows, w.K}, on_gpu.dtype(x_dtype)).requires_grad_();
        auto w1 = (torch::randn({w.N, w.K}, on_gpu) / std::sqrt(static_cast<double>(w.K))).requires_grad_();
        auto b1 = (0.5 * torch::randn({w.N}, on_gpu)).requires_grad_();
        auto w2 = (torch::randn({w.K, w.N}, on_gpu) / std::sqrt(static_cast<double>(w.N))).requires_grad_();
        auto b2 = (0.1 * torch::randn({w.K}, on_gpu)).requires_grad_();
        torch::Tensor out;
        {
          Autocast autocast(true);
          ASSERT_TRUE(fused_feed_forward_takes(x, w1, b1, w2, b2));
          EXPECT_FALSE(fused_feed_forward_takes(x, w1.narrow(0, 0, w.N - 4), b1.narrow(0, 0, w.N - 4),
                                                w2.narrow(1, 0, w.N - 4), b2));
          out = fused_feed_forward(x, w1, b1, w2, b2);
        }
        EXPECT_FALSE(fused_feed_forward_takes(x, w1, b1, w2, b2));  // without autocast
        ASSERT_EQ(out.scalar_type(), torch::kBFloat16);
        ASSERT_EQ(out.sizes(), (std::vector<int64_t>{rows, w.K}));
        const auto dout = torch::randn_like(out);
        const std::vector<torch::Tensor> params{x, w1, b1, w2, b2};
        auto g = torch::autograd::grad({out}, params, {dout}, /*retain_graph=*/true);
        // The composition in fp32 from the operands the products read (the bf16 casts).
        auto bf = [](const torch::Tensor& t) { return t.detach().to(torch::kBFloat16).to(torch::kFloat32); };
        auto xr = bf(x).requires_grad_(), w1r = bf(w1).requires_grad_(), b1r = b1.detach().clone().requires_grad_();
        auto w2r = bf(w2).requires_grad_(), b2r = bf(b2).requires_grad_();
        namespace F = torch::nn::functional;
        const auto outr = F::linear(torch::gelu(F::linear(xr, w1r, b1r)), w2r, b2r);
        const auto gr = torch::autograd::grad({outr}, {xr, w1r, b1r, w2r, b2r}, {dout.to(torch::kFloat32)});
        auto scale = [](const torch::Tensor& t) { return std::max(1e-6, t.abs().max().item<double>()); };
        // bf16 rounds y, z and dz to 8 significant bits (2^-8 relative) before the next product.
        EXPECT_LT(max_abs_diff(out.to(torch::kFloat32), outr), 2e-2 * scale(outr));
        const char* names[] = {"x", "w1", "b1", "w2", "b2"};
        for (size_t i = 0; i < 5; ++i) {
          ASSERT_EQ(g[i].scalar_type(), params[i].scalar_type()) << names[i];
          EXPECT_LT(max_abs_diff(g[i].to(torch::kFloat32), gr[i]), 3e-2 * scale(gr[i])) << names[i];
        }
        auto again = torch::autograd::grad({out}, params, {dout});
        for (size_t i = 0; i < 5; ++i) EXPECT_TRUE(torch::equal(again[i], g[i])) << names[i] << ": not the same bits";
        torch::Tensor out2;
        {
          Autocast autocast(true);
          out2 = fused_feed_forward(x, w1, b1, w2, b2);
        }
        EXPECT_TRUE(torch::equal(out2, out)) << "the output: not the same bits";
      }
  {  // an x that is no 16-byte aligned view (TMA's rule): copied by the node, the same bits
    torch::manual_seed(12);
    auto storage = torch::randn({148 * 256 + 1}, on_gpu.dtype(torch::kBFloat16));
    const auto x_off = storage.narrow(0, 1, 148 * 256).view({148, 256});
    const auto x_on = x_off.clone();
    const auto w1 = torch::randn({3072, 256}, on_gpu) / 16, b1 = torch::randn({3072}, on_gpu);
    const auto w2 = torch::randn({256, 3072}, on_gpu) / 55, b2 = torch::randn({256}, on_gpu);
    Autocast autocast(true);
    ASSERT_TRUE(fused_feed_forward_takes(x_off, w1, b1, w2, b2));
    EXPECT_TRUE(torch::equal(fused_feed_forward(x_off, w1, b1, w2, b2), fused_feed_forward(x_on, w1, b1, w2, b2)));
  }
  {  // the model: gemm-gelu on against off, the node counted
    const auto before = fused_feed_forward_counts();
    const auto [loss_off, grads_off] = bf16_loss_and_grads(gpu, off);
    EXPECT_EQ(fused_feed_forward_counts().forward, before.forward);
    const auto [loss_on, grads_on] = bf16_loss_and_grads(gpu, on);
    set_fusions(saved);
    const auto after = fused_feed_forward_counts();
    EXPECT_EQ(after.forward - before.forward, genemask::test::small_bert_config(32, 64).num_hidden_layers);
    EXPECT_EQ(after.backward - before.backward, after.forward - before.forward);
    EXPECT_NEAR(loss_on.item<double>(), loss_off.item<double>(), 2e-3 * std::abs(loss_off.item<double>()));
    expect_grads_close(grads_on, grads_off, 3e-2);
  }
}

// The linear layers' bias gradient in the weight-gradient product's epilogue (fusions.hpp's
// bgrad) against the eager linear under bf16 autocast: the forward bit for bit (the same
// product), the input's gradient within bf16 rounding of it (the same bf16 product, cast to
// the input's dtype), and the weight's and bias's gradients against double-precision sums
// of the same bf16 operands, for the products of both configs, a narrow one, one row, and
// an fp32 and a bf16 input; twice the same bits; the fused product ran (cuBLASLt had an
// algorithm for it). What the node does not take falls to at::linear: no autocast, sizes
// not multiples of 8, the CPU. On the CPU the MLM loss and gradients under bf16 autocast are
// bit for bit the same with bgrad on and off; on a GPU, close.
TEST(FusedLinearBgrad, MatchesTheEagerComposition) {
  const Fusions saved = fusions();
  const torch::Device cpu(torch::kCPU);
  EXPECT_FALSE(linear_bgrad_runs_on(cpu));
  {
    Autocast autocast(true);
    auto x = torch::randn({4, 16}).requires_grad_();
    EXPECT_FALSE(linear_bgrad_takes(x, torch::randn({8, 16}), torch::randn({8})));
    EXPECT_THROW(linear_bgrad(x, torch::randn({8, 16}), torch::randn({8})), std::invalid_argument);
  }
  expect_cpu_step_unchanged(first_switches(true, true, false, false, false), first_switches(true, true, false, false, true));
  set_fusions(saved);
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no GPU: the fused product's assertions need one";
  const torch::Device gpu(torch::kCUDA, 0);
  const auto on_gpu = torch::TensorOptions().device(gpu);
  EXPECT_TRUE(linear_bgrad_runs_on(gpu));
  {
    auto x = torch::randn({4, 16}, on_gpu).requires_grad_();
    const auto w = torch::randn({8, 16}, on_gpu), b = torch::randn({8}, on_gpu);
    EXPECT_FALSE(linear_bgrad_takes(x, w, b));  // no autocast
    Autocast autocast(true);
    EXPECT_TRUE(linear_bgrad_takes(x, w, b));
    EXPECT_FALSE(linear_bgrad_takes(x, torch::randn({12, 16}, on_gpu), torch::randn({12}, on_gpu)));  // N % 8
    EXPECT_FALSE(linear_bgrad_takes(torch::randn({4, 12}, on_gpu), torch::randn({8, 12}, on_gpu), b));  // K % 8
    EXPECT_FALSE(linear_bgrad_takes(x.detach(), w, b));  // nothing needs a gradient
  }
  const LinearBgradCounts before = linear_bgrad_counts();
  int64_t calls = 0;
  struct Shape {
    int64_t M, K, N;
  };
  for (const auto dtype : {torch::kFloat32, torch::kBFloat16})
    for (const Shape sh : {Shape{1, 64, 32}, Shape{148, 768, 2304}, Shape{333, 256, 3072}, Shape{1000, 3072, 768},
                           Shape{2048, 768, 768}}) {
      SCOPED_TRACE(testing::Message() << "dtype " << dtype << " M " << sh.M << " K " << sh.K << " N " << sh.N);
      torch::manual_seed(static_cast<uint64_t>(sh.M + sh.N));
      auto x = torch::randn({sh.M, sh.K}, on_gpu.dtype(dtype)).requires_grad_();
      auto w = (0.05 * torch::randn({sh.N, sh.K}, on_gpu)).requires_grad_();
      auto b = torch::randn({sh.N}, on_gpu).requires_grad_();
      torch::Tensor y, yr;
      {
        Autocast autocast(true);
        ASSERT_TRUE(linear_bgrad_takes(x, w, b));
        y = linear_bgrad(x, w, b);
        yr = at::linear(x, w, b);
      }
      ASSERT_EQ(y.scalar_type(), torch::kBFloat16);
      EXPECT_TRUE(torch::equal(y, yr));
      const auto dy = torch::randn_like(y);
      const auto g = torch::autograd::grad({y}, {x, w, b}, {dy}, /*retain_graph=*/true);
      const auto ge = torch::autograd::grad({yr}, {x, w, b}, {dy});
      ++calls;
      ASSERT_EQ(g[0].scalar_type(), dtype);
      ASSERT_EQ(g[1].scalar_type(), torch::kFloat32);
      ASSERT_EQ(g[2].scalar_type(), torch::kFloat32);
      const double dx_scale = ge[0].abs().max().item<double>();
      EXPECT_LE(max_abs_diff(g[0].to(torch::kFloat32), ge[0].to(torch::kFloat32)), dx_scale / 128)
          << "bit for bit: " << torch::equal(g[0], ge[0]);
      // The reference sums in double on the CPU, from the bf16 operands the product read.
      const auto dyd = dy.cpu().to(torch::kDouble), xd = x.detach().to(torch::kBFloat16).cpu().to(torch::kDouble);
      const auto dw_ref = dyd.t().mm(xd), db_ref = dyd.sum(0);
      const double dw_scale = dw_ref.abs().max().item<double>(), db_scale = db_ref.abs().max().item<double>();
      const double dw_err = max_abs_diff(g[1].cpu().to(torch::kDouble), dw_ref);
      const double db_err = max_abs_diff(g[2].cpu().to(torch::kDouble), db_ref);
      // fp32 outputs: sums of M bf16 products in fp32 (far within 1e-4 of the largest); bf16
      // outputs (cuBLASLt without the fp32 product): within the eager path's rounding.
      EXPECT_LE(dw_err, 4e-3 * dw_scale);
      EXPECT_LE(db_err, 4e-3 * std::max(1.0, db_scale));
      std::printf("[ bgrad ] %s M %lld K %lld N %lld: weight gradient off by %.3g of its largest, bias %.3g; eager "
                  "weight gradient off by %.3g\n",
                  dtype == torch::kFloat32 ? "fp32" : "bf16", static_cast<long long>(sh.M),
                  static_cast<long long>(sh.K), static_cast<long long>(sh.N), dw_err / dw_scale,
                  db_err / std::max(1.0, db_scale), max_abs_diff(ge[1].cpu().to(torch::kDouble), dw_ref) / dw_scale);
      const auto again = torch::autograd::grad({y}, {x, w, b}, {dy});
      ++calls;
      for (size_t i = 0; i < 3; ++i) EXPECT_TRUE(torch::equal(again[i], g[i])) << "gradient " << i;
      if (sh.M > 1) {  // with the weights' bf16 copies given (weight_copies.hpp): the same bits
        torch::Tensor yc;
        {
          Autocast autocast(true);
          yc = linear_bgrad(x, w, b, BiasGrad::epilogue, w.detach().to(torch::kBFloat16),
                            b.detach().to(torch::kBFloat16));
        }
        EXPECT_TRUE(torch::equal(yc, y));
        const auto gc = torch::autograd::grad({yc}, {x, w, b}, {dy});
        ++calls;
        for (size_t i = 0; i < 3; ++i) EXPECT_TRUE(torch::equal(gc[i], g[i])) << "with copies, gradient " << i;
      }
    }
  const LinearBgradCounts after = linear_bgrad_counts();
  const int64_t fused = after.fused - before.fused, fused_bf16 = after.fused_bf16 - before.fused_bf16,
                fallback = after.fallback - before.fallback;
  std::printf("[ bgrad ] products: %lld fused with fp32 outputs, %lld with bf16 outputs, %lld fell back\n",
              static_cast<long long>(fused), static_cast<long long>(fused_bf16), static_cast<long long>(fallback));
  EXPECT_EQ(fused + fused_bf16 + fallback, calls);
  EXPECT_GE(fused + fused_bf16, calls - 2);  // every shape but perhaps the one-row one
  {  // the model on the GPU: bgrad on against off (the same draws; fp32 gradients of the products)
    const auto [loss_off, grads_off] = bf16_loss_and_grads(gpu, first_switches(true, true, false, false, false));
    const auto [loss_on, grads_on] = bf16_loss_and_grads(gpu, first_switches(true, true, false, false, true));
    set_fusions(saved);
    EXPECT_TRUE(torch::equal(loss_on, loss_off));  // the forward is the eager one
    expect_grads_close(grads_on, grads_off, 3e-2);
  }
}

// The linear layers' bias gradients by the column-sum kernel (fusions.hpp's bias-sum,
// linear_bgrad.hpp's column_sums): on the CPU it is refused and the step is unchanged; on a
// GPU its sums equal fp64 sums of the same values within fp32 rounding, for BERT's widths and
// row counts, widths the 16-byte loads do not take, a misaligned input, no rows and one row,
// with the same bits each time; and the MLM model's gradients with it on are those with it off
// within bf16 rounding, with every bias gradient of the encoder's products summed by it.
TEST(ColumnSums, MatchFp64SumsAndTheModelsGradients) {
  const Fusions saved = fusions();
  EXPECT_THROW(column_sums(torch::randn({4, 8})), std::invalid_argument);
  Fusions off = first_switches(true, true, false, false, false), on = off;
  on.bias_sum = true;
  expect_cpu_step_unchanged(off, on);
  set_fusions(saved);
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no GPU: the column-sum kernel's assertions need one";
  const torch::Device gpu(torch::kCUDA, 0);
  const auto on_gpu = torch::TensorOptions().device(gpu);
  EXPECT_THROW(column_sums(torch::randn({4, 8, 2}, on_gpu)), std::invalid_argument);
  EXPECT_THROW(column_sums(torch::randn({4, 8}, on_gpu.dtype(torch::kFloat64))), std::invalid_argument);
  struct Shape {
    int64_t rows, N;
  };
  for (const auto dtype : {torch::kFloat32, torch::kBFloat16})
    for (const Shape sh : {Shape{0, 768}, Shape{1, 768}, Shape{37, 2304}, Shape{32768, 768}, Shape{32768, 2304},
                           Shape{1000, 100}, Shape{513, 4101}, Shape{77, 8}})
      for (const bool misaligned : {false, true}) {
        SCOPED_TRACE(testing::Message() << "dtype " << dtype << " rows " << sh.rows << " N " << sh.N << " misaligned "
                                        << misaligned);
        torch::manual_seed(static_cast<uint64_t>(sh.rows + sh.N));
        const int64_t n = sh.rows * sh.N;
        auto flat = torch::randn({n + 1}, on_gpu).to(dtype);
        auto g = flat.narrow(0, misaligned ? 1 : 0, n).view({sh.rows, sh.N});
        ASSERT_TRUE(g.is_contiguous());
        const auto got = column_sums(g);
        ASSERT_EQ(got.scalar_type(), torch::kFloat32);
        ASSERT_EQ(got.numel(), sh.N);
        const auto gd = g.cpu().to(torch::kDouble);
        const auto want = gd.sum(0), scale = gd.abs().sum(0);  // fp32 sums of at most a few hundred terms each
        EXPECT_LE(((got.cpu().to(torch::kDouble) - want).abs() - scale * 2e-6).max().item<double>(), 0.0);
        EXPECT_TRUE(torch::equal(column_sums(g), got));  // the same bits again
      }
  {  // the model on the GPU: bias-sum on against off (the same draws)
    const LinearBgradCounts before = linear_bgrad_counts();
    const auto [loss_off, grads_off] = bf16_loss_and_grads(gpu, off);
    const auto [loss_on, grads_on] = bf16_loss_and_grads(gpu, on);
    const LinearBgradCounts after = linear_bgrad_counts();
    set_fusions(saved);
    EXPECT_TRUE(torch::equal(loss_on, loss_off));  // the forward is the eager one
    expect_grads_close(grads_on, grads_off, 3e-2);
    // small_bert_config's 2 layers: the attention's output and the feed-forward's two products
    // each (gelu off), and the prediction head's transform; each layer's Q/K/V through the
    // stacking node (qkv_linear.hpp). The decoder (4101 columns, not a multiple of 8) is
    // at::linear's.
    EXPECT_EQ(after.column_sums - before.column_sums, 2 * 3 + 1);
    EXPECT_EQ(after.stacked - before.stacked, 2);
    EXPECT_EQ(after.fused + after.fused_bf16 + after.fallback, before.fused + before.fused_bf16 + before.fallback);
  }
}

// The Q/K/V product's node (qkv_linear.hpp). On the CPU, where BERT's layers do not take it:
// its views and gradients against the product in bf16 and unbind, and against fp64 sums of the
// same bf16 operands (a Q, K or V gradient left undefined counts as zeros). On a GPU: the
// stacking kernel's stack and sums against LibTorch's stack and column_sums of it, bit for bit,
// for the attention backward's layouts (contiguous, heads before positions, thirds of one
// tensor), misaligned parts (one column per thread), fp32, no rows; and the node against the
// bias-sum path it replaces (linear_bgrad with column_sum, then unbind) under bf16 autocast:
// every gradient the same bits.
// The stacking kernel's row index r / L (cuda/int_divider.hpp: a multiply-high and a shift),
// with the device's very arithmetic, against the division: every divisor's edge cases and
// random rows up to 2^31 - 1.
TEST(ColumnSums, RowDividerIsTheDivisionBelowTwoToThe31) {
  std::mt19937 gen(7);
  std::uniform_int_distribution<uint32_t> any(0, (1u << 31) - 1);
  std::vector<uint32_t> divisors = {1, 2, 3, 5, 7, 64, 100, 128, 255, 509, 510, 512, 513, 1000, 4096, 65535, 65537,
                                    (1u << 20) + 1, (1u << 30), (1u << 30) + 1, (1u << 31) - 1};
  for (int i = 0; i < 200; ++i) divisors.push_back(1 + any(gen) % 2048);
  for (int i = 0; i < 50; ++i) divisors.push_back(std::max<uint32_t>(1, any(gen)));
  for (const uint32_t d : divisors) {
    const genemask::model::cuda::IntDivider by(d);
    EXPECT_EQ(by.d, d);
    std::vector<uint32_t> ns = {0, 1, (1u << 31) - 1, (1u << 31) - 2};
    for (uint64_t k : {1ull, 2ull, 3ull, 64ull, 1000ull})
      for (const int64_t delta : {-1, 0, 1}) {
        const int64_t n = static_cast<int64_t>(k * d) + delta;
        if (n >= 0 && n < (int64_t{1} << 31)) ns.push_back(static_cast<uint32_t>(n));
      }
    for (int i = 0; i < 2000; ++i) ns.push_back(any(gen));
    for (const uint32_t n : ns) ASSERT_EQ(by.div(n), n / d) << n << " / " << d;
  }
}

TEST(QkvLinear, StacksTheGradientsAsTheUnboundProduct) {
  EXPECT_FALSE(qkv_linear_takes(torch::randn({2, 3, 8}), torch::randn({24, 8}), torch::randn({24}), 2));
  EXPECT_THROW(qkv_linear(torch::randn({6, 8}), torch::randn({24, 8}), torch::randn({24}), 2), std::invalid_argument);
  EXPECT_THROW(qkv_linear(torch::randn({2, 3, 8}), torch::randn({20, 8}), torch::randn({20}), 2), std::invalid_argument);
  EXPECT_THROW(qkv_linear(torch::randn({2, 3, 8}), torch::randn({24, 8}), torch::randn({24}), 5), std::invalid_argument);
  EXPECT_THROW(qkv_linear(torch::randn({2, 3, 8}), torch::randn({24, 8}), torch::randn({21}), 2), std::invalid_argument);
  EXPECT_THROW(stack_column_sums(torch::randn({2, 3, 2, 4}), torch::randn({2, 3, 2, 4}), torch::randn({2, 3, 2, 4})),
               std::invalid_argument);
  const int64_t B = 3, L = 5, K = 32, heads = 4, H = 48, d = H / heads;
  for (const bool all_used : {true, false}) {
    SCOPED_TRACE(all_used ? "Q, K and V used" : "K unused");
    torch::manual_seed(7);
    auto x = torch::randn({B, L, K}).requires_grad_(), w = (torch::randn({3 * H, K}) * 0.2).requires_grad_(),
         b = torch::randn({3 * H}).requires_grad_();
    const auto gq = torch::randn({B, L, heads, d}), gk = torch::randn({B, L, heads, d}), gv = torch::randn({B, L, heads, d});
    auto loss_of = [&](const std::vector<torch::Tensor>& qkv) {
      auto l = (qkv[0].to(torch::kFloat32) * gq).sum() + (qkv[2].to(torch::kFloat32) * gv).sum();
      return all_used ? l + (qkv[1].to(torch::kFloat32) * gk).sum() : l;
    };
    const auto got = qkv_linear(x, w, b, heads);
    ASSERT_EQ(got.size(), 3u);
    const auto want = at::linear(x.to(torch::kBFloat16), w.to(torch::kBFloat16), b.to(torch::kBFloat16))
                          .view({B, L, 3, heads, d})
                          .unbind(2);
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(got[i].sizes(), (std::vector<int64_t>{B, L, heads, d}));
      EXPECT_EQ(got[i].scalar_type(), torch::kBFloat16);
      EXPECT_TRUE(torch::equal(got[i], want[i])) << i;  // the same product
    }
    const auto grads = torch::autograd::grad({loss_of(got)}, {x, w, b});
    const auto ref = torch::autograd::grad({loss_of(want)}, {x, w, b});
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(grads[i].scalar_type(), torch::kFloat32) << i;
      EXPECT_EQ(grads[i].sizes(), ref[i].sizes()) << i;
    }
    // fp64 references from the same bf16 operands: the output gradient (rounded to bf16 as the
    // products' gradients are), x and w as cast.
    const auto dy = torch::stack({gq, all_used ? gk : torch::zeros_like(gk), gv}, 2)
                        .to(torch::kBFloat16)
                        .to(torch::kDouble)
                        .view({B * L, 3 * H});
    const auto xd = x.detach().to(torch::kBFloat16).to(torch::kDouble).view({B * L, K});
    const auto wd = w.detach().to(torch::kBFloat16).to(torch::kDouble);
    auto within = [](const torch::Tensor& got_t, const torch::Tensor& want_t, double rel) {
      const auto diff = (got_t.to(torch::kDouble) - want_t).abs().max().item<double>();
      return diff <= rel * want_t.abs().max().item<double>();
    };
    EXPECT_TRUE(within(grads[2], dy.sum(0), 1e-6));  // the bias's: fp32 sums of 15 rows
    EXPECT_TRUE(within(grads[0].view({B * L, K}), dy.mm(wd), 1e-2));  // bf16 products' rounding
    EXPECT_TRUE(within(grads[1], dy.t().mm(xd), 1e-2));
    for (int i = 0; i < 3; ++i) EXPECT_TRUE(within(grads[i], ref[i].to(torch::kDouble), 2e-2)) << i;
    // With the weights' bf16 copies given (weight_copies.hpp's low_stack), the node reads them
    // instead of casting: the same product and gradients, bit for bit; a copy of another shape
    // is refused.
    const auto with_copies = qkv_linear(x, w, b, heads, w.detach().to(torch::kBFloat16), b.detach().to(torch::kBFloat16));
    for (int i = 0; i < 3; ++i) EXPECT_TRUE(torch::equal(with_copies[i], got[i])) << i;
    const auto grads_copies = torch::autograd::grad({loss_of(with_copies)}, {x, w, b});
    for (int i = 0; i < 3; ++i) EXPECT_TRUE(torch::equal(grads_copies[i], grads[i])) << i;
    EXPECT_THROW(qkv_linear(x, w, b, heads, w.detach().to(torch::kBFloat16).narrow(0, 0, H)), std::invalid_argument);
  }
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no GPU: the stacking kernel's assertions need one";
  const torch::Device gpu(torch::kCUDA, 0);
  const auto on_gpu = torch::TensorOptions().device(gpu);
  struct Shape {
    int64_t B, L, heads, d;
  };
  for (const auto dtype : {torch::kBFloat16, torch::kFloat32})
    for (const Shape sh : {Shape{64, 512, 12, 64}, Shape{3, 7, 2, 8}, Shape{0, 512, 12, 64}, Shape{5, 130, 4, 64},
                           Shape{2, 9, 3, 5}})
      for (const int layout : {0, 1, 2, 3}) {
        SCOPED_TRACE(testing::Message() << "dtype " << dtype << " B " << sh.B << " L " << sh.L << " heads " << sh.heads
                                        << " d " << sh.d << " layout " << layout);
        torch::manual_seed(static_cast<uint64_t>(sh.B * 7 + sh.L + layout));
        const auto o = on_gpu.dtype(dtype);
        std::vector<torch::Tensor> parts;
        if (layout == 0) {  // each contiguous [B, L, heads, d]
          for (int i = 0; i < 3; ++i) parts.push_back(torch::randn({sh.B, sh.L, sh.heads, sh.d}, o));
        } else if (layout == 1) {  // heads before positions, as [B, heads, L, d] memory
          for (int i = 0; i < 3; ++i) parts.push_back(torch::randn({sh.B, sh.heads, sh.L, sh.d}, o).transpose(1, 2));
        } else if (layout == 2) {  // thirds of one [B, L, 3, heads, d] tensor
          parts = torch::randn({sh.B, sh.L, 3, sh.heads, sh.d}, o).unbind(2);
        } else {  // misaligned by one element: one column per thread
          const int64_t n = sh.B * sh.L * sh.heads * sh.d;
          for (int i = 0; i < 3; ++i)
            parts.push_back(torch::randn({n + 1}, o).narrow(0, 1, n).view({sh.B, sh.L, sh.heads, sh.d}));
        }
        const auto [stack, sums] = stack_column_sums(parts[0], parts[1], parts[2]);
        const auto want = torch::stack(parts, 2).view({sh.B * sh.L, 3 * sh.heads * sh.d});
        EXPECT_TRUE(torch::equal(stack, want));
        EXPECT_EQ(sums.scalar_type(), torch::kFloat32);
        EXPECT_TRUE(torch::equal(sums, column_sums(want)));  // the same bits as bias-sum's sums
        if (sh.B > 0) {
          const auto wd = want.cpu().to(torch::kDouble);
          EXPECT_LE(((sums.cpu().to(torch::kDouble) - wd.sum(0)).abs() - wd.abs().sum(0) * 2e-6).max().item<double>(), 0.0);
        } else {
          EXPECT_EQ(sums.abs().sum().item<double>(), 0.0);
        }
      }
  EXPECT_THROW(stack_column_sums(torch::randn({2, 3, 2, 8}, on_gpu), torch::randn({2, 3, 2, 8}, on_gpu),
                                 torch::randn({2, 3, 2, 4}, on_gpu)),
               std::invalid_argument);
  {  // the node against the bias-sum path it replaces, under bf16 autocast: the same bits
    torch::manual_seed(11);
    const int64_t Bg = 4, Lg = 128, Kg = 768, Hg = 768, hg = 12;
    auto x = torch::randn({Bg, Lg, Kg}, on_gpu).requires_grad_(), w = (torch::randn({3 * Hg, Kg}, on_gpu) * 0.05).requires_grad_(),
         b = torch::randn({3 * Hg}, on_gpu).requires_grad_();
    const auto g = torch::randn({3, Bg, Lg, hg, Hg / hg}, on_gpu);
    const auto g0 = torch::randn({Bg, hg, Lg, Hg / hg}, on_gpu);  // Q's: [B, heads, L, d] memory
    Autocast autocast(true);
    ASSERT_TRUE(qkv_linear_takes(x, w, b, hg));
    const LinearBgradCounts before = linear_bgrad_counts();
    auto run = [&](bool node) {
      const auto qkv = node ? qkv_linear(x, w, b, hg)
                            : linear_bgrad(x, w, b, BiasGrad::column_sum).view({Bg, Lg, 3, hg, Hg / hg}).unbind(2);
      // Q's gradient reaches the node heads before positions ([B, heads, L, d] memory, as the
      // attention's backward leaves it), K's and V's as [B, L, heads, d].
      const auto l = (qkv[0].transpose(1, 2).to(torch::kFloat32) * g0).sum() +
                     (qkv[1].to(torch::kFloat32) * g[1]).sum() + (qkv[2].to(torch::kFloat32) * g[2]).sum();
      return torch::autograd::grad({l}, {x, w, b});
    };
    const auto with_node = run(true), without = run(false);
    const LinearBgradCounts after = linear_bgrad_counts();
    for (int i = 0; i < 3; ++i) EXPECT_TRUE(torch::equal(with_node[i], without[i])) << i;
    EXPECT_EQ(after.stacked - before.stacked, 1);
    EXPECT_EQ(after.column_sums - before.column_sums, 1);  // the unbound path's
  }
}

// The MLM loss as one kernel each way (fusions.hpp's ce, cross_entropy.hpp): on the CPU it is
// refused and the step is unchanged; on a GPU the summed loss and the logits' gradient equal
// LibTorch's composition (the logits cast to fp32, cross_entropy with the sum) within fp32
// rounding, for the vocabulary's 4101 columns and others, bf16 and fp32 logits, targets of
// -100 among them, one row and none; a target outside the vocabulary gives NaN, never a
// number; the gradient scales with the loss's own gradient, read on the device; the same bits
// again; and the MLM model's loss and gradients with it on are those with it off.
TEST(FusedCrossEntropy, MatchesTheEagerComposition) {
  const Fusions saved = fusions();
  EXPECT_FALSE(fused_cross_entropy_takes(torch::randn({3, 8}), torch::zeros({3}, torch::kLong)));
  EXPECT_THROW(fused_cross_entropy_sum(torch::randn({3, 8}), torch::zeros({3}, torch::kLong)), std::invalid_argument);
  Fusions off = first_switches(true, true, false, false, false), on = off;
  on.ce = true;
  expect_cpu_step_unchanged(off, on);
  set_fusions(saved);
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no GPU: the fused cross-entropy's assertions need one";
  const torch::Device gpu(torch::kCUDA, 0);
  const auto on_gpu = torch::TensorOptions().device(gpu);
  const auto long_gpu = on_gpu.dtype(torch::kLong);
  EXPECT_FALSE(fused_cross_entropy_takes(torch::randn({3, 8}, on_gpu), torch::zeros({3}, on_gpu.dtype(torch::kInt))));
  EXPECT_FALSE(fused_cross_entropy_takes(torch::randn({3, 8}, on_gpu), torch::zeros({4}, long_gpu)));
  EXPECT_FALSE(fused_cross_entropy_takes(torch::randn({3, 8, 2}, on_gpu), torch::zeros({3}, long_gpu)));
  EXPECT_FALSE(fused_cross_entropy_takes(torch::randn({3, 8}, on_gpu.dtype(torch::kHalf)), torch::zeros({3}, long_gpu)));
  struct Shape {
    int64_t rows, V;
  };
  for (const auto dtype : {torch::kFloat32, torch::kBFloat16})
    for (const Shape sh : {Shape{0, 4101}, Shape{1, 4101}, Shape{333, 4101}, Shape{64, 7}, Shape{50, 1000},
                           Shape{9, 300}})
      for (const double g : {1.0, 1.0 / 333}) {
        SCOPED_TRACE(testing::Message() << "dtype " << dtype << " rows " << sh.rows << " V " << sh.V << " g " << g);
        torch::manual_seed(static_cast<uint64_t>(sh.rows * 7 + sh.V));
        auto logits = (3 * torch::randn({sh.rows, sh.V}, on_gpu)).to(dtype).requires_grad_();
        auto targets = torch::randint(0, sh.V, {sh.rows}, long_gpu);
        if (sh.rows > 2) targets.narrow(0, 1, sh.rows / 3).fill_(-100);  // rows that add nothing
        auto loss = fused_cross_entropy_sum(logits, targets);
        ASSERT_EQ(loss.scalar_type(), torch::kFloat32);
        ASSERT_EQ(loss.dim(), 0);
        const auto up = torch::full({}, g, on_gpu);  // the summed loss's gradient, on the device
        const auto grad = torch::autograd::grad({loss}, {logits}, {up})[0];
        ASSERT_EQ(grad.scalar_type(), dtype);
        // LibTorch's composition in fp32 from the same logits.
        auto ref_logits = logits.detach().to(torch::kFloat32).requires_grad_();
        auto ref = torch::nn::functional::cross_entropy(
            ref_logits, targets, torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum));
        const auto ref_grad = torch::autograd::grad({ref}, {ref_logits}, {up})[0];
        const double ref_loss = ref.item<double>();
        EXPECT_NEAR(loss.item<double>(), ref_loss, 1e-5 * std::max(1.0, std::abs(ref_loss)));
        // The gradient: each value g * (softmax - onehot) in fp32, rounded once to the logits'
        // dtype (bf16: within half a step, 2^-9 to 2^-8 of the value; fp32: a few ulps).
        const auto err = (grad.to(torch::kFloat32) - ref_grad).abs();
        const double rel = dtype == torch::kBFloat16 ? 1.0 / 256 : 1e-5;
        // At the target, g (p - 1) cancels where p is near 1: there each side's fp32 rounding of
        // the exponent (x - max) - log(sum), a few ulps of log(sum) <= log V, is absolute.
        auto at_target = torch::zeros_like(ref_grad);
        if (sh.rows > 0)
          at_target.scatter_(1, targets.clamp_min(0).unsqueeze(1),
                             g * std::ldexp(1.0, -22) * (2 + std::log(static_cast<double>(sh.V))));
        const auto bound = ref_grad.abs() * rel * 1.01 + 1e-7 * g + at_target;
        EXPECT_TRUE((err <= bound).all().item<bool>()) << "worst error / bound " << (err / bound).max().item<double>();
        if (sh.rows > 2) {  // the ignored rows: no gradient at all
          EXPECT_EQ(grad.narrow(0, 1, sh.rows / 3).abs().max().item<double>(), 0.0);
        }
        auto again = fused_cross_entropy_sum(logits, targets);
        EXPECT_TRUE(torch::equal(again, loss));  // the same bits again
        EXPECT_TRUE(torch::equal(torch::autograd::grad({again}, {logits}, {up})[0], grad));
        // The same logits as the first V columns of wider rows (ce-pad's padded product), the
        // rest huge: not read (the same bits of loss and gradient), their gradient 0.
        const int64_t wide = padded_classes(sh.V) + 8;
        auto padded = torch::cat({logits.detach(), torch::full({sh.rows, wide - sh.V}, 1e4, on_gpu).to(dtype)}, 1)
                          .requires_grad_();
        ASSERT_TRUE(fused_cross_entropy_takes(padded, targets, sh.V));
        auto loss_padded = fused_cross_entropy_sum(padded, targets, sh.V);
        EXPECT_TRUE(torch::equal(loss_padded, loss));
        const auto grad_padded = torch::autograd::grad({loss_padded}, {padded}, {up})[0];
        EXPECT_TRUE(torch::equal(grad_padded.narrow(1, 0, sh.V), grad));
        if (sh.rows > 0) {
          EXPECT_EQ(grad_padded.narrow(1, sh.V, wide - sh.V).abs().max().item<double>(), 0.0);
        }
      }
  // classes beyond the row, or none: refused
  EXPECT_FALSE(fused_cross_entropy_takes(torch::randn({3, 8}, on_gpu), torch::zeros({3}, long_gpu), 9));
  EXPECT_FALSE(fused_cross_entropy_takes(torch::randn({3, 8}, on_gpu), torch::zeros({3}, long_gpu), 0));
  EXPECT_THROW(fused_cross_entropy_sum(torch::randn({3, 8}, on_gpu), torch::zeros({3}, long_gpu), 9),
               std::invalid_argument);
  {  // a target outside the vocabulary: NaN, not a number that looks right, and its gradient too
    auto logits = torch::randn({4, 10}, on_gpu).requires_grad_();
    auto targets = torch::tensor({1, 2, 10, 3}, long_gpu);
    auto bad = fused_cross_entropy_sum(logits, targets);
    EXPECT_TRUE(std::isnan(bad.item<double>()));
    const auto gbad = torch::autograd::grad({bad}, {logits})[0];
    EXPECT_TRUE(gbad[2].isnan().all().item<bool>());
    EXPECT_FALSE(gbad.narrow(0, 0, 2).isnan().any().item<bool>());
    targets = torch::tensor({1, -1, 2, 3}, long_gpu);
    EXPECT_TRUE(std::isnan(fused_cross_entropy_sum(logits, targets).item<double>()));
  }
  {  // the model on the GPU: ce on against off (the same draws)
    const auto [loss_off, grads_off] = bf16_loss_and_grads(gpu, off);
    const auto [loss_on, grads_on] = bf16_loss_and_grads(gpu, on);
    set_fusions(saved);
    EXPECT_NEAR(loss_on.item<double>(), loss_off.item<double>(), 1e-5 * std::abs(loss_off.item<double>()));
    expect_grads_close(grads_on, grads_off, 3e-2);
  }
}

// The decoder's product over padded classes (fusions.hpp's ce-pad, bert.hpp's decoder_logits):
// its first V columns are the unpadded product's, the others exactly 0, and the gradients of
// weight and bias through those columns are the unpadded ones (fp32 on the CPU: within the
// products' rounding, as another width may block the sums otherwise); under bf16 autocast with
// the weights' copies in force the padded copies are read, with the bits of autocast's casts;
// fewer columns than classes are refused. In a step ce-pad applies on a GPU only: on the CPU
// the step is unchanged; on a GPU the model's loss and gradients with it on are those with it
// off (another product kernel: within rounding), with the fused cross-entropy and without.
TEST(DecoderLogits, PaddedColumnsAreTheProductAndNoClass) {
  EXPECT_EQ(padded_classes(4101), 4104);
  EXPECT_EQ(padded_classes(4104), 4104);
  EXPECT_EQ(padded_classes(1), 8);
  torch::manual_seed(31);
  const int64_t N = 37, H = 24, V = 4101, P = padded_classes(V);
  const auto t = torch::randn({N, H});
  auto w = torch::randn({V, H}).requires_grad_(), b = torch::randn({V}).requires_grad_();
  const auto up = torch::randn({N, V});  // an arbitrary gradient of the real columns
  const auto plain = decoder_logits(t, w, b, V);
  const auto [gw, gb] = [&] {
    auto g = torch::autograd::grad({plain}, {w, b}, {up});
    return std::make_pair(g[0], g[1]);
  }();
  const auto wide = decoder_logits(t, w, b, P);
  ASSERT_EQ(wide.sizes(), (std::vector<int64_t>{N, P}));
  EXPECT_LT(max_abs_diff(wide.narrow(1, 0, V), plain), 1e-5 * plain.abs().max().item<double>());
  EXPECT_EQ(wide.narrow(1, V, P - V).abs().max().item<double>(), 0.0);
  // The padding's columns get a gradient too (as a product over them would): it reaches
  // neither the weight nor the bias.
  const auto up_wide = torch::cat({up, torch::randn({N, P - V})}, 1);
  const auto g_wide = torch::autograd::grad({wide}, {w, b}, {up_wide});
  EXPECT_EQ(g_wide[0].sizes(), w.sizes());
  EXPECT_EQ(g_wide[1].sizes(), b.sizes());
  EXPECT_LT(max_abs_diff(g_wide[0], gw), 1e-5 * gw.abs().max().item<double>());
  EXPECT_LT(max_abs_diff(g_wide[1], gb), 1e-5 * gb.abs().max().item<double>());
  EXPECT_THROW(decoder_logits(t, w, b, V - 1), std::invalid_argument);
  {  // bf16 autocast on the CPU, with the weights' copies and without: the same bits
    const WeightCopies copies({w, b}, {});
    torch::Tensor cast, read, g_cast_w, g_read_w;
    {
      Autocast autocast(true);
      cast = decoder_logits(t, w, b, P);
      g_cast_w = torch::autograd::grad({cast}, {w}, {up_wide.to(cast.dtype())})[0];
      const UseWeightCopies in_force(&copies);
      ASSERT_NE(weight_copies_for(t.device()), nullptr);
      read = decoder_logits(t, w, b, P);
      g_read_w = torch::autograd::grad({read}, {w}, {up_wide.to(read.dtype())})[0];
    }
    EXPECT_EQ(read.scalar_type(), torch::kBFloat16);
    EXPECT_TRUE(torch::equal(read, cast));
    EXPECT_TRUE(torch::equal(g_read_w, g_cast_w));
    EXPECT_EQ(g_read_w.scalar_type(), torch::kFloat32);  // reached the fp32 weight
    EXPECT_EQ(g_read_w.sizes(), w.sizes());
  }
  // A step: on the CPU ce-pad changes nothing (it applies on a GPU).
  const Fusions saved = fusions();
  Fusions off = saved, on = saved;
  off.ce_pad = false;
  on.ce_pad = true;
  expect_cpu_step_unchanged(off, on);
  set_fusions(saved);
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no GPU: ce-pad's step assertions need one";
  const torch::Device gpu(torch::kCUDA, 0);
  for (const bool ce : {true, false}) {
    SCOPED_TRACE(testing::Message() << "fused cross-entropy " << ce);
    off.ce = on.ce = ce;
    const auto [loss_off, grads_off] = bf16_loss_and_grads(gpu, off);
    const auto [loss_on, grads_on] = bf16_loss_and_grads(gpu, on);
    set_fusions(saved);
    EXPECT_NEAR(loss_on.item<double>(), loss_off.item<double>(), 1e-4 * std::abs(loss_off.item<double>()));
    expect_grads_close(grads_on, grads_off, 3e-2);
  }
}

// The encoder in fp32 on the GPU against the CPU, with padding, for every combination of the
// fusions (fusions.hpp): what `embed` relies on (the GPU tests compare its output within
// 1e-4). The CPU runs the same combinations against the unfused CPU forward.
TEST(Fusions, EncoderOnEachDeviceMatchesTheCpuWithPadding) {
  BertConfig cfg = genemask::test::small_bert_config(64, 128);
  cfg.num_attention_heads = 4;
  torch::manual_seed(21);
  BertModel ref(cfg);
  ref->eval();
  auto ids = torch::randint(5, 4101, {6, 40});
  auto mask = torch::ones({6, 40}, torch::kLong);
  for (int64_t r = 1; r < 6; ++r) mask[r].slice(0, 40 - 6 * r).fill_(0);
  const Fusions saved = fusions();
  set_fusions(first_switches(false, false, false, false));
  BertModel plain(cfg);
  {
    torch::NoGradGuard ng;
    auto src = ref->named_parameters();
    for (auto& p : plain->named_parameters()) p.value().copy_(src[p.key()]);
  }
  plain->eval();
  const auto want = plain(ids, mask);
  auto real = mask.unsqueeze(-1).to(torch::kFloat32);  // compare real tokens only
  std::vector<torch::Device> devices = {torch::Device(torch::kCPU)};
  if (torch::cuda::is_available()) devices.emplace_back(torch::kCUDA, 0);
  for (const auto& dev : devices)
    for (const bool qkv : {false, true})
      for (const bool ln : {false, true})
        for (const bool gelu : {false, true}) {
        set_fusions(first_switches(qkv, ln, false, gelu));
        BertModel m(cfg);
        {
          torch::NoGradGuard ng;
          auto src = ref->named_parameters();
          for (auto& p : m->named_parameters()) p.value().copy_(src[p.key()]);
        }
        m->to(dev);
        m->eval();
        auto got = m(ids.to(dev), mask.to(dev)).cpu();
        const double diff = ((got - want) * real).abs().max().item<double>();
        std::printf("[ fusions ] %s qkv=%d ln=%d gelu=%d: max |diff| on real tokens %.3g\n", dev.str().c_str(), qkv, ln,
                    gelu, diff);
        EXPECT_LT(diff, dev.is_cuda() ? 2e-5 : 1e-5) << dev << " qkv " << qkv << " ln " << ln << " gelu " << gelu;
      }
  set_fusions(saved);
}

namespace {
/// The masked rows and targets padded to `capacity` as stage_static (model/graph_step.hpp)
/// lays them: position 0 and target -100 after the real ones.
std::pair<torch::Tensor, torch::Tensor> padded_rows(const torch::Tensor& rows, const torch::Tensor& targets,
                                                    int64_t capacity) {
  auto r = torch::zeros({capacity}, rows.options());
  auto t = torch::full({capacity}, -100, targets.options());
  r.narrow(0, 0, rows.numel()).copy_(rows);
  t.narrow(0, 0, rows.numel()).copy_(targets);
  return {r, t};
}
}  // namespace

// The static-shape decoder: the masked rows padded to a fixed buffer (padding rows: position
// 0, target -100) give the same summed loss and the same gradients as the unpadded rows, on
// the CPU (where the arithmetic is the same code the GPU path runs through LibTorch): what the
// fixed shapes' buffer rests on.
TEST(StaticRows, PaddedRowsGiveTheSameLossAndGradients) {
  auto cfg = genemask::test::small_bert_config(32, 64);
  torch::manual_seed(13);
  BertForMaskedLM m(cfg);
  init_weights(*m, cfg);
  m->eval();  // no dropout: two passes must see the same function
  auto ids = torch::randint(5, 4101, {3, 20});
  auto labels = torch::where(torch::rand({3, 20}) < 0.15, ids, torch::full({3, 20}, -100, torch::kLong));
  labels[0][3] = ids[0][3];  // at least one masked position
  auto flat = labels.reshape({-1});
  auto rows = (flat != -100).nonzero().reshape({-1});
  auto targets = flat.index_select(0, rows);
  const int64_t cap = 30;  // half the positions
  ASSERT_GE(cap, rows.numel());
  auto grads_of = [&](const torch::Tensor& r, const torch::Tensor& t) {
    m->zero_grad();
    auto loss = m->masked_lm_loss_sum(ids, torch::Tensor(), r, t);
    loss.backward();
    std::vector<torch::Tensor> g;
    for (const auto& p : m->parameters()) g.push_back(p.grad().clone());
    return std::make_pair(loss.item<double>(), g);
  };
  const auto [loss, g] = grads_of(rows, targets);
  const auto [pr, pt] = padded_rows(rows, targets, cap);
  EXPECT_EQ(pr.numel(), cap);
  EXPECT_EQ((pt == -100).sum().item<int64_t>(), cap - rows.numel());
  const auto [loss_p, g_p] = grads_of(pr, pt);
  EXPECT_NEAR(loss_p, loss, 1e-6 * std::abs(loss));
  double worst = 0;
  for (size_t i = 0; i < g.size(); ++i) worst = std::max(worst, max_abs_diff(g[i], g_p[i]));
  EXPECT_LT(worst, 1e-6);
}

// ln-lean in the model: the MLM loss and every gradient under bf16 autocast, with dropout, the
// same bits with it and without (on the CPU, where the fused LayerNorm is not taken, as a
// check that the switch changes nothing there; on a GPU, through the fused kernels, with the
// register sums and with ln-smem's).
TEST(ResidualLayerNorm, LeanStepComputesTheSameBits) {
  const Fusions saved = fusions();
  Fusions plain, lean;
  plain.ln_lean = false;
  lean.ln_lean = true;
  expect_cpu_step_unchanged(plain, lean);
  if (torch::cuda::is_available()) {
    const torch::Device gpu(torch::kCUDA, 0);
    for (const bool smem : {false, true}) {
      SCOPED_TRACE(smem ? "ln-smem" : "register sums");
      Fusions off, on;
      off.ln_smem = on.ln_smem = smem;
      off.ln_lean = false;
      on.ln_lean = true;
      const auto [loss_off, grads_off] = bf16_loss_and_grads(gpu, off);
      const auto [loss_on, grads_on] = bf16_loss_and_grads(gpu, on);
      EXPECT_TRUE(std::isfinite(loss_on.item<double>()));
      EXPECT_TRUE(torch::equal(loss_on.cpu(), loss_off.cpu()));
      ASSERT_EQ(grads_on.size(), grads_off.size());
      for (size_t i = 0; i < grads_on.size(); ++i) EXPECT_TRUE(torch::equal(grads_on[i], grads_off[i])) << i;
    }
  }
  set_fusions(saved);
}
