// The parts of a training step that the GPU path relies on, checked on the CPU: SDPA
// attention against HF's eager attention, the fused AdamW step against torch::optim::AdamW,
// gradients in flat buckets (views, zeroing, clipping against clip_grad_norm_), and the
// all-reduce choice.
#include <gtest/gtest.h>

#include <chrono>
#include <malloc.h>

#include <cstdlib>
#include <cstring>
#include <mpi.h>

#include "model/attention_cpu.hpp"
#include "model/bert.hpp"
#include "model/grad_sync.hpp"
#include "model/optim.hpp"
#include "model/runtime.hpp"
#include "model_test_util.hpp"

using namespace genemask::model;

namespace {

double max_abs_diff(const torch::Tensor& a, const torch::Tensor& b) { return (a - b).abs().max().item<double>(); }

/// q, k, v [B, heads, L, d] and a key mask with row r padded after L - 5r positions.
struct Qkv {
  torch::Tensor q, k, v, mask;
};
Qkv random_qkv(int64_t B, int64_t h, int64_t Lq, int64_t L, int64_t d) {
  torch::manual_seed(11);
  Qkv x{torch::randn({B, h, Lq, d}), torch::randn({B, h, L, d}), torch::randn({B, h, L, d}),
        torch::ones({B, L}, torch::kLong)};
  for (int64_t r = 0; r < B; ++r) x.mask[r].slice(0, std::max<int64_t>(1, L - 5 * r)).fill_(0);
  return x;
}

/// A small MLM model with a loss whose gradients reach every parameter.
BertForMaskedLM model_with_grads(uint64_t seed) {
  auto cfg = genemask::test::small_bert_config(32, 64);
  torch::manual_seed(seed);
  BertForMaskedLM m(cfg);
  init_weights(*m, cfg);
  return m;
}
torch::Tensor loss_of(BertForMaskedLM& m, uint64_t seed) {
  torch::manual_seed(seed);
  auto ids = torch::randint(5, 4101, {3, 20}, torch::kLong);
  auto labels = torch::where(torch::rand({3, 20}) < 0.3, ids, torch::full({3, 20}, -100, torch::kLong));
  labels[0][1] = ids[0][1];
  return m->masked_lm_loss_sum(ids, torch::ones({3, 20}, torch::kLong), labels);
}

}  // namespace

TEST(Attention, SdpaMatchesEagerWithPadding) {
  for (int64_t Lq : {24, 1}) {  // every query, and the classifier's [CLS]-only last layer
    auto x = random_qkv(4, 3, Lq, 24, 8);
    const auto km = key_mask_of(x.mask);
    auto fast = attention(x.q, x.k, x.v, km, 0.0);
    auto ref = attention_reference(x.q, x.k, x.v, km, 0.0, false);
    EXPECT_EQ(fast.sizes(), ref.sizes());
    EXPECT_LT(max_abs_diff(fast, ref), 1e-5) << "Lq " << Lq;
    // Padded keys get no weight: changing their values changes nothing.
    auto v2 = x.v.clone();
    v2[3].slice(1, 24 - 15).fill_(1e3);
    EXPECT_LT(max_abs_diff(attention(x.q, x.k, v2, km, 0.0), fast), 1e-5);
  }
}

/// The devices a device test runs on: the CPU always, the first GPU where one is visible.
/// A GPU test's body thus runs in CI too; only what needs a GPU is checked on one alone.
std::vector<torch::Device> test_devices() {
  std::vector<torch::Device> d{torch::Device(torch::kCPU)};
  if (torch::cuda::is_available()) d.emplace_back(torch::kCUDA, 0);
  return d;
}

TEST(Attention, FusedKernelsMatchEagerOnEveryDevice) {
  // SDPA's fused kernels (on a GPU flash without a mask, memory-efficient or cuDNN with one;
  // on the CPU its flash kernel) against the eager computation on the same device, fp32 and
  // bf16.
  auto x = random_qkv(4, 4, 64, 64, 32);
  for (const auto& dev : test_devices()) {
    for (auto dtype : {torch::kFloat32, torch::kBFloat16}) {
      auto q = x.q.to(dev, dtype), k = x.k.to(dev, dtype), v = x.v.to(dev, dtype);
      const double tol = dtype == torch::kFloat32 ? 1e-4 : 3e-2;  // bf16: 8-bit mantissa
      for (const auto& km : {torch::Tensor(), key_mask_of(x.mask.to(dev))}) {
        auto fast = attention(q, k, v, km, 0.0).to(torch::kFloat32);
        EXPECT_EQ(fast.device(), dev);
        auto ref = attention_reference(q.to(torch::kFloat32), k.to(torch::kFloat32), v.to(torch::kFloat32), km, 0.0,
                                       false);
        EXPECT_LT(max_abs_diff(fast, ref), tol) << dev << (km.defined() ? " masked " : " no mask ") << dtype;
      }
    }
  }
}

TEST(Runtime, Tf32SettingKeepsLibTorchsTwoRecordsInStep) {
  // LibTorch keeps the TF32 choice twice (the legacy flag and the per-backend precision);
  // setting only the newer record makes allowTF32CuBLAS(), which cuBLASLt, TunableOp and
  // SDPA call on a GPU, throw. Shown here on the newer API alone, then set_tf32 both ways.
  auto& ctx = at::globalContext();
  ctx.setFloat32Precision(at::Float32Backend::CUDA, at::Float32Op::MATMUL, at::Float32Precision::TF32);
  EXPECT_THROW((void)ctx.allowTF32CuBLAS(), c10::Error) << "LibTorch no longer checks the two records";
  for (bool on : {true, false, true}) {
    set_tf32(on);
    bool cublas = !on, cudnn = !on;
    EXPECT_NO_THROW(cublas = ctx.allowTF32CuBLAS());
    EXPECT_NO_THROW(cudnn = ctx.allowTF32CuDNN());
    EXPECT_NO_THROW((void)ctx.float32MatmulPrecision());
    EXPECT_EQ(cublas, on);
    EXPECT_EQ(cudnn, on);
    EXPECT_EQ(ctx.float32Precision(at::Float32Backend::CUDA, at::Float32Op::MATMUL),
              on ? at::Float32Precision::TF32 : at::Float32Precision::IEEE);
  }
  set_tf32(false);
}

TEST(Runtime, PrecisionAutoIsBf16OnlyOnBf16Hardware) {
  // The table of --precision auto: bf16 on a GPU of compute capability 8.0+ and on a CPU with
  // AMX-BF16 or AVX512-BF16; fp32 elsewhere. fp32 and bf16 are kept as asked.
  EXPECT_EQ(resolve_precision("auto", "cuda", true, ""), "bf16");
  EXPECT_EQ(resolve_precision("auto", "cuda", false, "AMX-BF16"), "fp32");  // an older GPU: the CPU does not count
  EXPECT_EQ(resolve_precision("auto", "cpu", true, ""), "fp32");           // nor the GPU for a CPU run
  EXPECT_EQ(resolve_precision("auto", "cpu", false, "AMX-BF16, AVX512-BF16"), "bf16");
  EXPECT_EQ(resolve_precision("auto", "cpu", false, "AVX512-BF16"), "bf16");
  for (const char* dev : {"cpu", "cuda"})
    for (const char* p : {"fp32", "bf16"}) {
      EXPECT_EQ(resolve_precision(p, dev, false, ""), p);
      EXPECT_EQ(resolve_precision(p, dev, true, "AMX-BF16"), p);
    }
  try {
    resolve_precision("fp16", "cpu", false, "");
    ADD_FAILURE() << "fp16 accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("--precision must be fp32, bf16 or auto, got 'fp16'"), std::string::npos)
        << e.what();
  }
  // This machine: auto on the CPU follows what --version reports.
  EXPECT_EQ(wants_bf16("auto", "cpu", false), !cpu_bf16().instructions.empty());
}

TEST(Runtime, AllocatorKeepsLargeBlocksInTheHeap) {
  // After tune_cpu_allocator, a 64 MiB block comes from the heap (mallinfo2's arena), not
  // from its own mmap (hblkhd), and stays there when freed: the next step reuses its pages.
  if (!tune_cpu_allocator()) GTEST_SKIP() << "MALLOC_* or GLIBC_TUNABLES set: the user's allocator settings stand";
  const size_t mapped_before = mallinfo2().hblkhd;
  void* p = std::malloc(size_t{64} << 20);
  ASSERT_NE(p, nullptr);
  std::memset(p, 1, size_t{64} << 20);
  EXPECT_LT(mallinfo2().hblkhd, mapped_before + (size_t{64} << 20));
  std::free(p);
  EXPECT_GE(mallinfo2().fordblks, size_t{64} << 20);  // kept, free, for the next allocation
}

TEST(Runtime, OneDnnPrimitiveCacheWidenedUnlessTheUserChose) {
  // oneDNN reads ONEDNN_PRIMITIVE_CACHE_CAPACITY once, at its first primitive: the variable
  // is what is checked here (its effect, shapes no longer compiled again, is measured in
  // docs/benchmarks.md). ctest also runs this test with the user's own value set
  // (GENEMASK_TEST_USER_ONEDNN names it), which must then stand.
  const bool widened = widen_onednn_primitive_cache();
  const char* now = std::getenv("ONEDNN_PRIMITIVE_CACHE_CAPACITY");
  if (const char* user = std::getenv("GENEMASK_TEST_USER_ONEDNN")) {
    EXPECT_FALSE(widened);
    if (std::getenv("DNNL_PRIMITIVE_CACHE_CAPACITY") == nullptr) {
      ASSERT_NE(now, nullptr);
      EXPECT_STREQ(now, user);
    } else {
      EXPECT_EQ(now, nullptr) << "set beside the user's DNNL_PRIMITIVE_CACHE_CAPACITY";
    }
  } else if (widened) {
    ASSERT_NE(now, nullptr);
    EXPECT_STREQ(now, "16384");
  } else {
    EXPECT_TRUE(now != nullptr || std::getenv("DNNL_PRIMITIVE_CACHE_CAPACITY") != nullptr);
  }
  EXPECT_EQ(widen_onednn_primitive_cache(), widened);  // decided once per process
}

TEST(Attention, NoMaskEqualsAllOnesMask) {
  auto x = random_qkv(2, 2, 16, 16, 8);
  auto none = attention(x.q, x.k, x.v, torch::Tensor(), 0.0);
  auto ones = attention(x.q, x.k, x.v, key_mask_of(torch::ones({2, 16}, torch::kLong)), 0.0);
  EXPECT_LT(max_abs_diff(none, ones), 1e-6);
  EXPECT_LT(max_abs_diff(none, attention_reference(x.q, x.k, x.v, torch::Tensor(), 0.0, false)), 1e-5);
}

TEST(Attention, DropoutOnlyInTraining) {
  auto x = random_qkv(2, 2, 16, 16, 8);
  const auto km = key_mask_of(x.mask);
  auto cfg = genemask::test::small_bert_config(32, 64);
  cfg.attention_probs_dropout_prob = 0.5;
  BertSelfAttention sa(cfg);
  auto h = torch::randn({2, 16, 32});
  sa->eval();
  auto a = sa->forward(h, km), b = sa->forward(h, km);
  EXPECT_TRUE(torch::equal(a, b));
  sa->train();
  EXPECT_GT(max_abs_diff(sa->forward(h, km), a), 1e-3);
}

namespace {
/// HF's eager attention with a given keep mask, in double: the reference for the fused CPU
/// dropout kernel.
torch::Tensor attention_with_mask(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                  const torch::Tensor& key_mask, const torch::Tensor& keep, double scale) {
  auto scores = torch::matmul(q, k.transpose(-1, -2)) / std::sqrt(static_cast<double>(q.size(-1)));
  if (key_mask.defined()) scores = scores.masked_fill(key_mask.logical_not(), -std::numeric_limits<double>::infinity());
  return torch::matmul(torch::softmax(scores, -1) * keep.to(scores.dtype()) * scale, v);
}
}  // namespace

TEST(Attention, CpuDropoutKernelMatchesTheReferenceWithItsMask) {
  // Output and the gradients of q, k and v against autograd through the eager computation in
  // double with the same keep mask: every query and the [CLS]-only last layer, with and
  // without padding, in fp32 (tight), bf16 under autocast (loose: bf16 products) and double.
  const double p = 0.3;
  const uint64_t seed = 0x5eed;
  for (int64_t Lq : {24, 1}) {
    for (bool padded : {true, false}) {
      for (auto type : {torch::kFloat64, torch::kFloat32, torch::kBFloat16}) {
        auto x = random_qkv(4, 3, Lq, 24, 8);
        const auto km = padded ? key_mask_of(x.mask) : torch::Tensor();
        // Leaves in the dtype under test; fp32 leaves for bf16, which autocast casts.
        const auto leaf = type == torch::kBFloat16 ? torch::kFloat32 : type;
        auto q = x.q.to(leaf).clone().requires_grad_(), k = x.k.to(leaf).clone().requires_grad_(),
             v = x.v.to(leaf).clone().requires_grad_();
        torch::Tensor out;
        {
          Autocast autocast(type == torch::kBFloat16);  // as in training: the kernel takes autocast's dtype
          out = attention_dropout_cpu(q, k, v, km, p, seed);
        }
        EXPECT_EQ(out.scalar_type(), type);
        auto go = torch::randn(out.sizes(), torch::kFloat64);
        (out.to(torch::kFloat64) * go).sum().backward();
        auto qd = x.q.to(torch::kFloat64).requires_grad_(), kd = x.k.to(torch::kFloat64).requires_grad_(),
             vd = x.v.to(torch::kFloat64).requires_grad_();
        auto keep = attention_dropout_keep_mask({4, 3, Lq, 24}, p, seed);
        auto ref = attention_with_mask(qd, kd, vd, km, keep, attention_dropout_scale(p));
        (ref * go).sum().backward();
        const double tol = type == torch::kFloat64 ? 1e-10 : type == torch::kFloat32 ? 2e-5 : 6e-2;
        const double rel = ref.abs().max().item<double>();
        SCOPED_TRACE(::testing::Message() << "Lq " << Lq << " padded " << padded << " dtype " << type);
        EXPECT_LT(max_abs_diff(out.to(torch::kFloat64), ref), tol * std::max(1.0, rel));
        for (auto [got, want] : {std::pair{q.grad(), qd.grad()}, std::pair{k.grad(), kd.grad()}, std::pair{v.grad(), vd.grad()}})
          EXPECT_LT(max_abs_diff(got.to(torch::kFloat64), want),
                    tol * std::max(1.0, want.abs().max().item<double>()));
      }
    }
  }
}

TEST(Attention, CpuDropoutMaskRateSeedsAndThreads) {
  // The drop rate within 5 standard deviations of p over 2^22 draws; another seed, another
  // mask; the same seed, the same mask at any thread count.
  const int64_t n = int64_t{1} << 22;
  for (double p : {0.1, 0.5}) {
    auto keep = attention_dropout_keep_mask({n}, p, 7);
    const double dropped = 1.0 - keep.to(torch::kFloat64).mean().item<double>();
    EXPECT_NEAR(dropped, p, 5 * std::sqrt(p * (1 - p) / static_cast<double>(n))) << "p " << p;
    EXPECT_NEAR(attention_dropout_scale(p), 1 / (1 - p), 1e-6);
  }
  auto a = attention_dropout_keep_mask({64, 64}, 0.1, 7), b = attention_dropout_keep_mask({64, 64}, 0.1, 8);
  EXPECT_FALSE(torch::equal(a, b));
  const int threads = at::get_num_threads();
  at::set_num_threads(1);
  auto one = attention_dropout_keep_mask({1000, 333}, 0.1, 9);
  at::set_num_threads(std::max(2, threads));
  auto many = attention_dropout_keep_mask({1000, 333}, 0.1, 9);
  at::set_num_threads(threads);
  EXPECT_TRUE(torch::equal(one, many));
}

TEST(Attention, CpuDropoutKernelIsThreadCountInvariantAndPZeroIsPlainAttention) {
  // The kernel's output and gradients, bit for bit, at 1 and at 2+ threads (each (batch row,
  // head) is one thread's work); with p = 0 it is attention without dropout, against the eager
  // computation in double (every key kept).
  auto x = random_qkv(3, 3, 40, 40, 16);  // 9 heads: tasks of 2 and a last one of 1
  const auto km = key_mask_of(x.mask);
  auto run = [&](int threads, double p, torch::ScalarType type) {
    const int before = at::get_num_threads();
    at::set_num_threads(threads);
    auto q = x.q.to(type).clone().requires_grad_(), k = x.k.to(type).clone().requires_grad_(),
         v = x.v.to(type).clone().requires_grad_();
    auto out = attention_dropout_cpu(q, k, v, km, p, 11);
    (out.to(torch::kFloat64) * torch::linspace(-1, 1, out.numel(), torch::kFloat64).view(out.sizes())).sum().backward();
    at::set_num_threads(before);
    return std::vector<torch::Tensor>{out, q.grad(), k.grad(), v.grad()};
  };
  for (auto type : {torch::kFloat32, torch::kBFloat16}) {
    auto one = run(1, 0.2, type), many = run(std::max(2, at::get_num_threads()), 0.2, type);
    for (size_t i = 0; i < one.size(); ++i) EXPECT_TRUE(torch::equal(one[i], many[i])) << "tensor " << i << " " << type;
  }
  auto got = run(2, 0.0, torch::kFloat64);
  auto keep = torch::ones({3, 3, 40, 40}, torch::kBool);
  auto qd = x.q.to(torch::kFloat64).requires_grad_(), kd = x.k.to(torch::kFloat64).requires_grad_(),
       vd = x.v.to(torch::kFloat64).requires_grad_();
  auto ref = attention_with_mask(qd, kd, vd, km, keep, 1.0);
  (ref * torch::linspace(-1, 1, ref.numel(), torch::kFloat64).view(ref.sizes())).sum().backward();
  EXPECT_LT(max_abs_diff(got[0], ref), 1e-12);
  EXPECT_LT(max_abs_diff(got[1], qd.grad()), 1e-12);
  EXPECT_LT(max_abs_diff(got[2], kd.grad()), 1e-12);
  EXPECT_LT(max_abs_diff(got[3], vd.grad()), 1e-12);
  EXPECT_EQ(attention_dropout_scale(0.0), 1.0);
}

TEST(Attention, CpuDropoutFollowsTheTorchGenerator) {
  // `attention` with dropout on the CPU draws its seed from LibTorch's generator: the same
  // manual seed (or restored generator state) repeats the output, a further call differs,
  // and dropped probabilities make it differ from the no-dropout result.
  auto x = random_qkv(2, 2, 16, 16, 8);
  const auto km = key_mask_of(x.mask);
  torch::manual_seed(3);
  auto a = attention(x.q, x.k, x.v, km, 0.2);
  at::Generator gen = at::detail::getDefaultCPUGenerator();
  auto state = gen.get_state();
  auto b = attention(x.q, x.k, x.v, km, 0.2);
  gen.set_state(state);
  auto c = attention(x.q, x.k, x.v, km, 0.2);
  torch::manual_seed(3);
  auto d = attention(x.q, x.k, x.v, km, 0.2);
  EXPECT_TRUE(torch::equal(a, d));
  EXPECT_TRUE(torch::equal(b, c));
  EXPECT_FALSE(torch::equal(a, b));
  EXPECT_GT(max_abs_diff(a, attention(x.q, x.k, x.v, km, 0.0)), 1e-3);
}

TEST(FusedAdamW, MatchesTorchAdamWAndKeepsItsState) {
  auto a = model_with_grads(1), b = model_with_grads(1);
  AdamWSettings s;
  s.lr = 1e-2;
  s.beta2 = 0.98;
  s.eps = 1e-6;
  auto oa = make_adamw(a->named_parameters(), s), ob = make_adamw(b->named_parameters(), s);
  FusedAdamW fused(*ob);
  for (int step = 0; step < 4; ++step) {
    const double lr = 1e-2 * (step + 1) / 4;
    for (auto* o : {oa.get(), ob.get()})
      for (auto& g : o->param_groups()) static_cast<torch::optim::AdamWOptions&>(g.options()).lr(lr);
    oa->zero_grad();
    loss_of(a, 100 + step).backward();
    {  // the same gradients for both: the test is of the update alone
      torch::NoGradGuard ng;
      auto ga = a->named_parameters();
      for (auto& p : b->named_parameters()) p.value().mutable_grad() = ga[p.key()].grad().clone();
    }
    oa->step();
    fused.step(lr);
  }
  auto pa = a->named_parameters(), pb = b->named_parameters();
  double worst = 0;
  for (const auto& p : pa) worst = std::max(worst, max_abs_diff(p.value(), pb[p.key()]));
  EXPECT_LT(worst, 1e-6);
  EXPECT_GT(max_abs_diff(pa["bert.encoder.layer.0.output.dense.weight"],
                         model_with_grads(1)->named_parameters()["bert.encoder.layer.0.output.dense.weight"]),
            1e-3);  // it did move
  // The state a checkpoint saves: the same step counts and moments as AdamW's own.
  for (size_t i = 0; i < pa.size(); ++i) {
    auto& sa = static_cast<torch::optim::AdamWParamState&>(*oa->state().at(pa[i].value().unsafeGetTensorImpl()));
    auto& sb = static_cast<torch::optim::AdamWParamState&>(*ob->state().at(pb[i].value().unsafeGetTensorImpl()));
    EXPECT_EQ(sa.step(), sb.step());
    // The same gradients in: the moments agree to float rounding of the tensor's largest
    // entries (the two kernels order their multiply-adds differently).
    const auto near = [](const torch::Tensor& x, const torch::Tensor& y) {
      return max_abs_diff(x, y) <= 1e-6 * x.abs().max().item<double>() + 1e-12;
    };
    EXPECT_TRUE(near(sa.exp_avg(), sb.exp_avg())) << pa[i].key();
    EXPECT_TRUE(near(sa.exp_avg_sq(), sb.exp_avg_sq())) << pa[i].key();
  }
}

TEST(FusedAdamW, NoDecayGroupIsHfs) {
  auto m = model_with_grads(1);
  auto opt = make_adamw(m->named_parameters(), AdamWSettings{});
  ASSERT_EQ(opt->param_groups().size(), 2u);
  size_t decayed = 0;
  for (const auto& p : m->named_parameters())
    decayed += p.key().find("bias") == std::string::npos && p.key().find("LayerNorm") == std::string::npos;
  EXPECT_EQ(opt->param_groups()[0].params().size(), decayed);
  EXPECT_EQ(static_cast<torch::optim::AdamWOptions&>(opt->param_groups()[1].options()).weight_decay(), 0.0);
}

TEST(GradBuckets, BackwardAccumulatesIntoTheBuckets) {
  auto m = model_with_grads(2), ref = model_with_grads(2);
  std::vector<torch::Tensor> params = m->parameters();
  GradBuckets g(params, MPI_COMM_SELF, AllReduce::Local, /*bucket_floats=*/10000);
  EXPECT_GE(g.bucket_count(), 4u);  // small buckets: several, and the embeddings (131k) alone in one
  EXPECT_EQ(g.bucket_floats_max(), 4101 * 32);
  EXPECT_TRUE(g.intact());
  for (int micro = 0; micro < 2; ++micro) {  // accumulation over two micro-batches
    loss_of(m, 7 + micro).backward();
    loss_of(ref, 7 + micro).backward();
  }
  EXPECT_TRUE(g.intact());
  auto pm = m->named_parameters(), pr = ref->named_parameters();
  for (const auto& p : pm) EXPECT_LT(max_abs_diff(p.value().grad(), pr[p.key()].grad()), 1e-6) << p.key();
  // Clipping: the norm and the scaled gradients of clip_grad_norm_.
  const double want = torch::nn::utils::clip_grad_norm_(ref->parameters(), 0.5);
  const double got = g.clip(0.5).item<double>();
  EXPECT_NEAR(got, want, 1e-5 * want);
  for (const auto& p : pm) EXPECT_LT(max_abs_diff(p.value().grad(), pr[p.key()].grad()), 1e-6) << p.key();
  g.allreduce();  // one rank: nothing
  g.zero();
  EXPECT_TRUE(g.intact());
  for (const auto& p : pm) EXPECT_EQ(p.value().grad().abs().sum().item<double>(), 0.0);
}

TEST(GradBuckets, MpiSumOverOneRankIsTheIdentity) {
  auto m = model_with_grads(3);
  std::vector<torch::Tensor> params = m->parameters();
  GradBuckets g(params, MPI_COMM_SELF, AllReduce::Mpi);
  loss_of(m, 1).backward();
  std::vector<torch::Tensor> before;
  for (auto& p : params) before.push_back(p.grad().clone());
  g.allreduce();
  for (size_t i = 0; i < params.size(); ++i) EXPECT_TRUE(torch::equal(params[i].grad(), before[i]));
}

TEST(AllReduceChoice, CpuAndErrors) {
  // As the trainer decides: from the ranks' gathered identities (here one rank on the CPU).
  const torch::Device cpu(torch::kCPU);
  const auto ranks = gather_rank_gpus(cpu, MPI_COMM_SELF);
  ASSERT_EQ(ranks.size(), 1u);
  auto choose = [&](const std::string& requested) { return decide_allreduce(requested, ranks, nccl_built()); };
  EXPECT_EQ(choose("auto"), AllReduce::Local);
  EXPECT_EQ(choose("mpi"), AllReduce::Local);
  try {
    choose("nccl");
    FAIL() << "nccl on cpu accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("needs --device cuda"), std::string::npos) << e.what();
  }
  EXPECT_THROW(choose("gloo"), std::invalid_argument);
  EXPECT_EQ(gpu_identity(cpu), "");
}

// Whether a GPU has bf16 matrix units: false where there is no such GPU (a CPU machine, an
// index past the last GPU) in a build with the CUDA runtime (nccl_built(); without it the
// answer is true by design). On a GPU it is asked per layer and step by packed attention, so
// it must be cheap: 1000 questions well under the time of one training step.
TEST(AllReduceChoice, Bf16NativeAnsweredCheaply) {
  if (!nccl_built()) GTEST_SKIP() << "a build without the CUDA runtime answers true by design";
  EXPECT_FALSE(gpu_bf16_native(1 << 20));
  if (!torch::cuda::is_available()) {
    EXPECT_FALSE(gpu_bf16_native(0));
    return;
  }
  const bool first = gpu_bf16_native(0);
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(gpu_bf16_native(0), first);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(ms, 20.0) << "1000 questions took " << ms << " ms";
}

TEST(AllReduceChoice, DecidedFromEachRanksGpuIdentity) {
  const std::string a = "GPU-aaaa", b = "GPU-bbbb", c = "GPU-cccc", d = "GPU-dddd";
  // Per-task binding (--gpus-per-task=1): every rank sees one GPU, ordinal 0, and a GPU
  // count per node of 1 for 2 ranks, yet each has its own: NCCL.
  const std::vector<RankGpu> per_task{{"n1", a}, {"n1", b}, {"n2", c}, {"n2", d}};
  EXPECT_EQ(decide_allreduce("auto", per_task, true), AllReduce::Nccl);
  EXPECT_EQ(decide_allreduce("nccl", per_task, true), AllReduce::Nccl);
  EXPECT_EQ(decide_allreduce("mpi", per_task, true), AllReduce::Mpi);
  EXPECT_EQ(decide_allreduce("auto", per_task, false), AllReduce::Mpi);  // a build without NCCL
  // The same UUID on two hosts is two GPUs (identities are per host).
  EXPECT_EQ(decide_allreduce("auto", {{"n1", a}, {"n2", a}}, true), AllReduce::Nccl);
  // Two ranks on one GPU: MPI through host memory; nccl names the ranks and the GPU.
  const std::vector<RankGpu> shared{{"n1", a}, {"n1", a}};
  EXPECT_EQ(decide_allreduce("auto", shared, true), AllReduce::Mpi);
  try {
    decide_allreduce("nccl", shared, true);
    FAIL() << "nccl on a shared GPU accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("ranks 0 and 1 on n1 share GPU GPU-aaaa"), std::string::npos) << e.what();
  }
  // Mixed: one node binds per task, the other runs two ranks on one GPU: MPI for all.
  const std::vector<RankGpu> mixed{{"n1", a}, {"n1", b}, {"n2", c}, {"n2", c}};
  EXPECT_EQ(decide_allreduce("auto", mixed, true), AllReduce::Mpi);
  EXPECT_THROW(decide_allreduce("nccl", mixed, true), std::invalid_argument);
  // A rank on the CPU rules NCCL out; one rank needs no all-reduce.
  EXPECT_EQ(decide_allreduce("auto", {{"n1", a}, {"n1", ""}}, true), AllReduce::Mpi);
  EXPECT_EQ(decide_allreduce("auto", {{"n1", a}}, true), AllReduce::Local);
  EXPECT_EQ(decide_allreduce("nccl", {{"n1", a}}, true), AllReduce::Nccl);
  EXPECT_EQ(decide_allreduce("auto", {{"n1", ""}, {"n2", ""}}, true), AllReduce::Mpi);
}

namespace {
/// A stand-in NCCL communicator that records how it ended.
struct FakeNccl final : NcclComm {
  std::string* ended;
  explicit FakeNccl(std::string* e) : ended(e) {}
  ~FakeNccl() override {
    if (ended->empty()) *ended = "destroyed";
  }
  void allreduce_sum(torch::Tensor&) override {}
  void abort() override { *ended = "aborted"; }
};
}  // namespace

TEST(GradBuckets, NcclIsAbortedWhenUnwindingAndDestroyedOtherwise) {
  // A rank that throws (out of memory, an I/O error) must not wait in ncclCommDestroy for
  // peers stuck in an all-reduce: the job would hang until its walltime instead of reaching
  // MPI_Abort.
  auto m = model_with_grads(3);
  std::vector<torch::Tensor> params;
  for (auto& p : m->parameters()) params.push_back(p);
  std::string ended;
  {
    GradBuckets buckets(params, MPI_COMM_SELF, AllReduce::Local);
    buckets.set_nccl_for_test(std::make_unique<FakeNccl>(&ended));
  }
  EXPECT_EQ(ended, "destroyed");
  ended.clear();
  try {
    GradBuckets buckets(params, MPI_COMM_SELF, AllReduce::Local);
    buckets.set_nccl_for_test(std::make_unique<FakeNccl>(&ended));
    throw std::runtime_error("CUDA out of memory");
  } catch (const std::runtime_error&) {
  }
  EXPECT_EQ(ended, "aborted");
}
