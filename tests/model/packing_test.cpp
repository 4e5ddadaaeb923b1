// Packed sequences (model/packing.hpp, PackedLayout in model/bert.hpp): the host packing
// against brute-force checks of what it must keep; the CPU attention kernel over segments
// against a block-diagonal reference in double with the same keep mask; the block-mask path
// (the GPU's fallback) against the kernel; and a packed batch's loss and every gradient
// against the same samples unpacked. On a GPU also flash attention over segments against
// the block mask, and the packed loss on the GPU against the CPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <nlohmann/json.hpp>
#include <set>

#include "genemask/corpus/loader.hpp"
#include "model/attention_cpu.hpp"
#include "model/bert.hpp"
#include "model/cudnn_attention.hpp"
#include "model/cuda_graph.hpp"
#include "model/flops.hpp"
#include "model/fusions.hpp"
#include "model/grad_sync.hpp"
#include "model/graph_step.hpp"
#include "model/optim.hpp"
#include "model/packing.hpp"
#include "model/runtime.hpp"
#include "model/step_profile.hpp"
#include "model/weight_copies.hpp"
#include "model_test_util.hpp"

using namespace genemask::model;
using genemask::Batch;

namespace {

double max_abs_diff(const torch::Tensor& a, const torch::Tensor& b) { return (a - b).abs().max().item<double>(); }

/// A batch as the loader makes it: rows of [CLS] tokens [SEP] of the given lengths (real
/// positions), padded to the longest; about 15% of the real tokens masked.
Batch make_batch(const std::vector<int64_t>& lengths, uint32_t seed) {
  std::mt19937 rng(seed);
  Batch b;
  b.rows = static_cast<int64_t>(lengths.size());
  b.cols = *std::max_element(lengths.begin(), lengths.end());
  const auto n = static_cast<size_t>(b.rows * b.cols);
  b.input_ids.assign(n, 0);
  b.labels.assign(n, genemask::kIgnoreLabel);
  b.attention_mask.assign(n, 0);
  for (int64_t r = 0; r < b.rows; ++r) {
    const int64_t len = lengths[static_cast<size_t>(r)];
    for (int64_t c = 0; c < len; ++c) {
      const auto i = static_cast<size_t>(r * b.cols + c);
      b.attention_mask[i] = 1;
      b.input_ids[i] = c == 0 ? 2 : c == len - 1 ? 3 : 5 + static_cast<int64_t>(rng() % 4096);
      if (c > 0 && c < len - 1 && rng() % 100 < 15) {
        b.labels[i] = b.input_ids[i];
        b.input_ids[i] = 4;  // [MASK]
      }
    }
    b.sample_index.push_back(static_cast<uint64_t>(100 + r));
  }
  return b;
}

/// The layout of a packed batch on `dev`, as the trainer builds it.
torch::Tensor ids_of(const std::vector<int64_t>& v, int64_t rows, int64_t cols) {
  return torch::tensor(v, torch::kLong).view({rows, cols});
}

/// Masked positions and targets of labels (-100 elsewhere), flat.
std::pair<torch::Tensor, torch::Tensor> masked_of(const std::vector<int64_t>& labels) {
  std::vector<int64_t> rows, targets;
  for (size_t i = 0; i < labels.size(); ++i)
    if (labels[i] != genemask::kIgnoreLabel) {
      rows.push_back(static_cast<int64_t>(i));
      targets.push_back(labels[i]);
    }
  return {torch::tensor(rows, torch::kLong), torch::tensor(targets, torch::kLong)};
}

/// The [B, 1, L, L] block-diagonal mask of segment boundaries `cu` over B x L, built here
/// element by element.
torch::Tensor block_mask_reference(const std::vector<int64_t>& cu, int64_t B, int64_t L) {
  auto m = torch::zeros({B, 1, L, L}, torch::kBool);
  auto a = m.accessor<bool, 4>();
  for (size_t s = 0; s + 1 < cu.size(); ++s)
    for (int64_t i = cu[s]; i < cu[s + 1]; ++i)
      for (int64_t j = cu[s]; j < cu[s + 1]; ++j) a[i / L][0][i % L][j % L] = true;
  return m;
}

/// Whether attention_dropout_cpu gives the same bits at one thread and at two or more (the
/// thread count restored).
bool same_at_any_thread_count(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, double p,
                              uint64_t seed, const torch::Tensor& segments) {
  const int threads = at::get_num_threads();
  at::set_num_threads(1);
  auto one = attention_dropout_cpu(q, k, v, {}, p, seed, segments);
  at::set_num_threads(std::max(2, threads));
  auto many = attention_dropout_cpu(q, k, v, {}, p, seed, segments);
  at::set_num_threads(threads);
  return torch::equal(one, many);
}

}  // namespace

TEST(Packing, KeepsEverySampleWholeAndInItsOwnSegment) {
  const std::vector<int64_t> lengths = {7, 30, 3, 12, 25, 30, 5, 9, 18, 1};
  const int64_t width = 32;
  const Batch b = make_batch(lengths, 3);
  const PackedBatch p = pack_batch(b, width);
  // Fewer rows than samples, none wider than the width, and no more rows than the lower
  // bound plus what first fit may lose (here: within one row of it).
  const int64_t total = std::accumulate(lengths.begin(), lengths.end(), int64_t{0});
  EXPECT_LE(p.cols, width);
  EXPECT_GE(p.rows, (total + width - 1) / width);
  EXPECT_LE(p.rows, (total + width - 1) / width + 1);
  EXPECT_EQ(p.real_tokens, static_cast<uint64_t>(total));
  ASSERT_EQ(p.cu_seqlens.front(), 0);
  ASSERT_EQ(p.cu_seqlens.back(), p.rows * p.cols);
  ASSERT_EQ(p.segment_sample.size() + 1, p.cu_seqlens.size());
  std::set<int64_t> seen;
  int64_t longest = 0;
  for (size_t s = 0; s + 1 < p.cu_seqlens.size(); ++s) {
    const int64_t a = p.cu_seqlens[s], e = p.cu_seqlens[s + 1];
    ASSERT_LT(a, e);
    EXPECT_EQ(a / p.cols, (e - 1) / p.cols) << "segment " << s << " spans two rows";
    longest = std::max(longest, e - a);
    for (int64_t i = a; i < e; ++i) EXPECT_EQ(p.position_ids[static_cast<size_t>(i)], i - a);
    const int64_t smp = p.segment_sample[s];
    if (smp < 0) {  // a row's padding: [PAD], no label, at the row's end
      EXPECT_EQ(e % p.cols, 0);
      for (int64_t i = a; i < e; ++i) {
        EXPECT_EQ(p.input_ids[static_cast<size_t>(i)], 0);
        EXPECT_EQ(p.labels[static_cast<size_t>(i)], genemask::kIgnoreLabel);
      }
      continue;
    }
    EXPECT_TRUE(seen.insert(smp).second) << "sample " << smp << " packed twice";
    ASSERT_EQ(e - a, lengths[static_cast<size_t>(smp)]);
    for (int64_t j = 0; j < e - a; ++j) {
      const auto src = static_cast<size_t>(smp * b.cols + j), dst = static_cast<size_t>(a + j);
      EXPECT_EQ(p.input_ids[dst], b.input_ids[src]);
      EXPECT_EQ(p.labels[dst], b.labels[src]);
      EXPECT_EQ(p.packed_index[src], a + j);
    }
    for (int64_t j = e - a; j < b.cols; ++j) EXPECT_EQ(p.packed_index[static_cast<size_t>(smp * b.cols + j)], -1);
  }
  EXPECT_EQ(seen.size(), lengths.size());
  EXPECT_EQ(p.max_seqlen, longest);
  // The same batch packs the same way.
  const PackedBatch again = pack_batch(b, width);
  EXPECT_EQ(again.input_ids, p.input_ids);
  EXPECT_EQ(again.cu_seqlens, p.cu_seqlens);
}

TEST(Packing, RefusesWhatItCannotPack) {
  const Batch b = make_batch({10, 40}, 1);
  EXPECT_THROW(pack_batch(b, 32), std::invalid_argument);
  Batch holes = make_batch({6, 6}, 1);
  holes.attention_mask[2] = 0;  // padding inside a row
  EXPECT_THROW(pack_batch(holes, 32), std::invalid_argument);
  EXPECT_THROW(one_per_row(holes), std::invalid_argument);  // the same check, laid out unpacked
  EXPECT_TRUE(parse_packing("on"));
  EXPECT_FALSE(parse_packing("off"));
  EXPECT_THROW(parse_packing("yes"), std::invalid_argument);
}

TEST(Packing, CpuKernelOverSegmentsMatchesTheBlockDiagonalReference) {
  // Output and gradients of q, k, v against autograd through the eager computation in double
  // with the block-diagonal mask and the kernel's keep mask (that of the whole [B, h, L, L]):
  // with and without dropout, in double (tight), fp32 and bf16 under autocast (loose).
  const int64_t B = 3, h = 4, L = 20, d = 8;
  const std::vector<int64_t> cu = {0, 7, 20, 21, 33, 40, 52, 60};  // row 0: 7 + 13; row 1: 1 + 12 + 7; row 2: 12 + 8
  const auto segments = torch::tensor(cu, torch::kLong);
  const auto block = block_mask_reference(cu, B, L);
  for (double p : {0.0, 0.3}) {
    for (auto type : {torch::kFloat64, torch::kFloat32, torch::kBFloat16}) {
      SCOPED_TRACE(::testing::Message() << "p " << p << " dtype " << type);
      torch::manual_seed(5);
      auto q0 = torch::randn({B, h, L, d}, torch::kFloat64), k0 = torch::randn({B, h, L, d}, torch::kFloat64),
           v0 = torch::randn({B, h, L, d}, torch::kFloat64);
      const auto leaf = type == torch::kBFloat16 ? torch::kFloat32 : type;
      auto q = q0.to(leaf).clone().requires_grad_(), k = k0.to(leaf).clone().requires_grad_(),
           v = v0.to(leaf).clone().requires_grad_();
      torch::Tensor out;
      {
        Autocast autocast(type == torch::kBFloat16);
        out = attention_dropout_cpu(q, k, v, {}, p, 77, segments);
      }
      EXPECT_EQ(out.scalar_type(), type);
      auto go = torch::randn(out.sizes(), torch::kFloat64);
      (out.to(torch::kFloat64) * go).sum().backward();
      auto qd = q0.clone().requires_grad_(), kd = k0.clone().requires_grad_(), vd = v0.clone().requires_grad_();
      auto scores = torch::matmul(qd, kd.transpose(-1, -2)) / std::sqrt(static_cast<double>(d));
      scores = scores.masked_fill(block.logical_not(), -std::numeric_limits<double>::infinity());
      auto keep = attention_dropout_keep_mask({B, h, L, L}, p, 77).to(torch::kFloat64);
      auto ref = torch::matmul(torch::softmax(scores, -1) * keep * attention_dropout_scale(p), vd);
      (ref * go).sum().backward();
      const double tol = type == torch::kFloat64 ? 1e-10 : type == torch::kFloat32 ? 2e-5 : 6e-2;
      EXPECT_LT(max_abs_diff(out.to(torch::kFloat64), ref), tol * std::max(1.0, ref.abs().max().item<double>()));
      for (auto [got, want] : {std::pair{q.grad(), qd.grad()}, std::pair{k.grad(), kd.grad()}, std::pair{v.grad(), vd.grad()}})
        EXPECT_LT(max_abs_diff(got.to(torch::kFloat64), want), tol * std::max(1.0, want.abs().max().item<double>()));
    }
  }
  // Thread-count invariance, bit for bit.
  torch::manual_seed(6);
  auto q = torch::randn({B, h, L, d}), k = torch::randn({B, h, L, d}), v = torch::randn({B, h, L, d});
  EXPECT_TRUE(same_at_any_thread_count(q, k, v, 0.2, 9, segments));
  // Boundaries that do not cover B x L, or cross a row, are refused.
  EXPECT_THROW(attention_dropout_cpu(q, k, v, {}, 0.0, 1, torch::tensor({0, 7, 59}, torch::kLong)), std::invalid_argument);
  EXPECT_THROW(attention_dropout_cpu(q, k, v, {}, 0.0, 1, torch::tensor({0, 25, 60}, torch::kLong)), std::invalid_argument);
}

// The CPU attention's tasks run on every intra-op thread (its file is compiled with OpenMP:
// at::parallel_for is an inline template, serial in a file compiled without it), each task
// once, and on one thread when LibTorch has one or there is one task.
TEST(Packing, AttentionTasksRunOnEveryThread) {
  const int threads = at::get_num_threads();
  at::set_num_threads(2);
  EXPECT_EQ(attention_cpu_threads_for(16), 2);
  EXPECT_EQ(attention_cpu_threads_for(2), 2);
  EXPECT_EQ(attention_cpu_threads_for(1), 1);
  EXPECT_EQ(attention_cpu_threads_for(0), 0);
  at::set_num_threads(1);
  EXPECT_EQ(attention_cpu_threads_for(16), 1);
  at::set_num_threads(threads);
}

TEST(Packing, LongSegmentsSplitTheirHeadsAcrossTasks) {
  // A segment's heads go to one task while their scores fit 2^20 elements: at 390 positions
  // 6 of 8 heads fit, so its heads are split 6 + 2 (and the 10-position segment takes all 8).
  // Against the block-diagonal reference in double, with dropout, and bit for bit at any
  // thread count.
  const int64_t B = 1, h = 8, L = 400, d = 4;
  const std::vector<int64_t> cu = {0, 390, 400};
  const auto segments = torch::tensor(cu, torch::kLong);
  torch::manual_seed(8);
  auto q0 = torch::randn({B, h, L, d}, torch::kFloat64), k0 = torch::randn({B, h, L, d}, torch::kFloat64),
       v0 = torch::randn({B, h, L, d}, torch::kFloat64);
  auto q = q0.clone().requires_grad_(), k = k0.clone().requires_grad_(), v = v0.clone().requires_grad_();
  auto out = attention_dropout_cpu(q, k, v, {}, 0.1, 21, segments);
  auto go = torch::randn(out.sizes(), torch::kFloat64);
  (out * go).sum().backward();
  auto qd = q0.clone().requires_grad_(), kd = k0.clone().requires_grad_(), vd = v0.clone().requires_grad_();
  auto scores = torch::matmul(qd, kd.transpose(-1, -2)) / std::sqrt(static_cast<double>(d));
  scores = scores.masked_fill(block_mask_reference(cu, B, L).logical_not(), -std::numeric_limits<double>::infinity());
  auto keep = attention_dropout_keep_mask({B, h, L, L}, 0.1, 21).to(torch::kFloat64);
  auto ref = torch::matmul(torch::softmax(scores, -1) * keep * attention_dropout_scale(0.1), vd);
  (ref * go).sum().backward();
  EXPECT_LT(max_abs_diff(out, ref), 1e-10);
  for (auto [got, want] : {std::pair{q.grad(), qd.grad()}, std::pair{k.grad(), kd.grad()}, std::pair{v.grad(), vd.grad()}})
    EXPECT_LT(max_abs_diff(got, want), 1e-10);
  EXPECT_TRUE(same_at_any_thread_count(q0.to(torch::kFloat32), k0.to(torch::kFloat32), v0.to(torch::kFloat32), 0.1, 21,
                                       segments));
}

TEST(Packing, BlockMaskPathEqualsTheSegmentKernel) {
  // The GPU's fallback (scaled_dot_product_attention with PackedLayout::block_mask) run on the
  // CPU: the mask equals the one built element by element, and the attention the kernel's.
  const std::vector<int64_t> lengths = {9, 4, 17, 6, 11, 3};
  const PackedBatch p = pack_batch(make_batch(lengths, 2), 20);
  const PackedLayout l = packed_layout(p, torch::kCPU);
  EXPECT_TRUE(torch::equal(l.block_mask(), block_mask_reference(p.cu_seqlens, p.rows, p.cols)));
  torch::manual_seed(8);
  auto q = torch::randn({p.rows, 2, p.cols, 8}), k = torch::randn({p.rows, 2, p.cols, 8}),
       v = torch::randn({p.rows, 2, p.cols, 8});
  EXPECT_EQ(packed_attention_path(q, k, v), PackedAttentionPath::CpuSegments);
  EXPECT_EQ(to_string(PackedAttentionPath::CpuSegments), "cpu-segments");
  std::optional<torch::Tensor> mask = l.block_mask();
  auto sdpa = at::scaled_dot_product_attention(q, k, v, mask, 0.0);
  EXPECT_LT(max_abs_diff(packed_attention(q, k, v, l, 0.0), sdpa), 1e-5);
}

namespace {

/// A dropout-free small MLM model (its training-mode loss is deterministic).
BertForMaskedLM quiet_model(uint64_t seed) {
  auto cfg = genemask::test::small_bert_config(32, 64);
  cfg.hidden_dropout_prob = 0;
  cfg.attention_probs_dropout_prob = 0;
  torch::manual_seed(seed);
  BertForMaskedLM m(cfg);
  init_weights(*m, cfg);
  return m;
}

struct LossAndGrads {
  double loss;
  std::vector<torch::Tensor> grads;
};

LossAndGrads loss_and_grads(BertForMaskedLM& m, const Batch& b, bool packed, bool bf16, const torch::Device& dev) {
  m->zero_grad();
  torch::Tensor loss;
  if (packed) {
    const PackedBatch p = pack_batch(b, m->config.max_tokens() + 2);
    const PackedLayout l = packed_layout(p, dev);
    auto [rows, targets] = masked_of(p.labels);
    Autocast autocast(bf16);
    loss = m->masked_lm_loss_sum(ids_of(p.input_ids, p.rows, p.cols).to(dev), l, rows.to(dev), targets.to(dev));
  } else {
    auto [rows, targets] = masked_of(b.labels);
    Autocast autocast(bf16);
    loss = m->masked_lm_loss_sum(ids_of(b.input_ids, b.rows, b.cols).to(dev),
                                 ids_of(b.attention_mask, b.rows, b.cols).to(dev), rows.to(dev), targets.to(dev));
  }
  loss.backward();
  LossAndGrads r{loss.item<double>(), {}};
  for (const auto& p : m->parameters()) r.grads.push_back(p.grad().defined() ? p.grad().cpu() : torch::zeros_like(p).cpu());
  return r;
}

void expect_close(const LossAndGrads& a, const LossAndGrads& b, double tol) {
  EXPECT_NEAR(a.loss, b.loss, tol * std::abs(b.loss));
  double worst = 0;
  for (size_t i = 0; i < a.grads.size(); ++i) {
    const double scale = std::max(1e-3, b.grads[i].abs().max().item<double>());
    worst = std::max(worst, max_abs_diff(a.grads[i], b.grads[i]) / scale);
  }
  EXPECT_LT(worst, 10 * tol) << "largest gradient difference, relative to the gradient's largest value";
}

}  // namespace

TEST(Packing, PackedLossAndGradientsEqualTheSamplesUnpacked) {
  // The same samples (lengths 3-62 of the model's 64 positions) packed and padded: the summed
  // loss within 1e-5 relative in fp32 (2e-2 in bf16) and every parameter's gradient with it.
  const Batch b = make_batch({40, 12, 62, 3, 25, 33, 8, 50, 19}, 4);
  for (bool bf16 : {false, true}) {
    SCOPED_TRACE(bf16 ? "bf16" : "fp32");
    auto m = quiet_model(21);
    m->train();
    const auto unpacked = loss_and_grads(m, b, false, bf16, torch::kCPU);
    const auto packed = loss_and_grads(m, b, true, bf16, torch::kCPU);
    expect_close(packed, unpacked, bf16 ? 2e-2 : 1e-5);
  }
  // Fewer positions than the padded batch: the point of packing.
  const PackedBatch p = pack_batch(b, 64);
  EXPECT_LT(p.rows * p.cols, b.rows * b.cols);
}

TEST(Packing, DropoutOverPackedRowsFollowsTheGenerator) {
  // With dropout, two steps from the same generator state draw the same masks (equal loss
  // and gradients), and the loss differs from the dropout-free one.
  auto cfg = genemask::test::small_bert_config(32, 64);
  torch::manual_seed(3);
  BertForMaskedLM m(cfg);
  init_weights(*m, cfg);
  m->train();
  const Batch b = make_batch({40, 12, 62, 3, 25}, 9);
  torch::manual_seed(100);
  const auto a = loss_and_grads(m, b, true, false, torch::kCPU);
  torch::manual_seed(100);
  const auto again = loss_and_grads(m, b, true, false, torch::kCPU);
  EXPECT_EQ(a.loss, again.loss);
  for (size_t i = 0; i < a.grads.size(); ++i) EXPECT_TRUE(torch::equal(a.grads[i], again.grads[i]));
  m->eval();
  const auto quiet = loss_and_grads(m, b, true, false, torch::kCPU);
  EXPECT_GT(std::abs(a.loss - quiet.loss), 1e-6 * std::abs(quiet.loss));
}

namespace {
/// Q, K and V of 4 heads of 32 over the packed rows of `p`, bf16 leaves (seed 8).
std::array<torch::Tensor, 3> random_qkv(const PackedBatch& p, const torch::Device& dev) {
  torch::manual_seed(8);
  std::array<torch::Tensor, 3> qkv;
  for (auto& t : qkv) t = torch::randn({p.rows, 4, p.cols, 32}, dev).to(torch::kBFloat16).requires_grad_();
  return qkv;
}

/// The packed model (quiet_model(21) on these tests' batch) on `dev` against the CPU in fp32:
/// in bf16 within 3e-2 and, when `fp32_too`, in fp32 within 1e-4.
void expect_packed_model_matches_cpu(const torch::Device& dev, bool fp32_too) {
  const Batch b = make_batch({40, 12, 62, 3, 25, 33, 8, 50, 19}, 4);
  auto m = quiet_model(21);
  m->train();
  const auto cpu = loss_and_grads(m, b, true, false, torch::kCPU);
  m->to(dev);
  if (fp32_too) expect_close(loss_and_grads(m, b, true, false, dev), cpu, 1e-4);
  expect_close(loss_and_grads(m, b, true, true, dev), cpu, 3e-2);
}
}  // namespace

TEST(Packing, GpuVarlenFlashMatchesTheBlockMaskAndTheCpu) {
  // On a GPU: flash attention over segments (bf16) against the block-diagonal mask in fp32,
  // values and gradients, and the packed model on the GPU against the CPU. Without a GPU the
  // same body runs on the CPU (its per-segment path against the mask); only the assertion
  // that the GPU took flash is the GPU's.
  const bool gpu = torch::cuda::is_available();
  const torch::Device dev = gpu ? torch::Device(torch::kCUDA, 0) : torch::Device(torch::kCPU);
  const PackedBatch p = pack_batch(make_batch({40, 12, 62, 3, 25, 33, 8, 50, 19}, 4), 64);
  const PackedLayout l = packed_layout(p, dev);
  auto [q, k, v] = random_qkv(p, dev);
  const std::string path = to_string(packed_attention_path(q, k, v));
  EXPECT_EQ(path, gpu ? "flash-varlen" : "cpu-segments");  // (a GPU older than sm80 would take the block mask)
  auto fast = packed_attention(q, k, v, l, 0.0);
  auto go = torch::randn(fast.sizes(), dev).to(torch::kBFloat16);
  const auto g = torch::autograd::grad({fast}, {q, k, v}, {go});
  std::optional<torch::Tensor> mask = l.block_mask();
  auto ref = at::scaled_dot_product_attention(q.to(torch::kFloat32), k.to(torch::kFloat32), v.to(torch::kFloat32), mask, 0.0);
  const auto rg = torch::autograd::grad({ref}, {q, k, v}, {go.to(torch::kFloat32)});
  // bf16 inputs, fp32 reference: bf16 rounding of the output and of the gradients.
  EXPECT_LT(max_abs_diff(fast.to(torch::kFloat32), ref), 2e-2);
  for (size_t i = 0; i < 3; ++i)
    EXPECT_LT(max_abs_diff(g[i].to(torch::kFloat32), rg[i].to(torch::kFloat32)), 5e-2) << "gradient " << i;
  // The packed model on the device (on a GPU flash in bf16, the block mask in fp32) against
  // the CPU in fp32.
  expect_packed_model_matches_cpu(dev, true);
}

namespace {

/// q, k and v as the model's fused Q/K/V product lays them out: [R, h, L, d] views of one
/// [R, L, 3, h, d] tensor (`fused`), a token's q, k and v side by side.
std::array<torch::Tensor, 3> fused_qkv_views(const PackedBatch& p, const torch::Device& dev, torch::Tensor& fused) {
  torch::manual_seed(8);
  fused = torch::randn({p.rows, p.cols, 3, 4, 32}, dev).to(torch::kBFloat16).requires_grad_();
  return {fused.select(2, 0).transpose(1, 2), fused.select(2, 1).transpose(1, 2), fused.select(2, 2).transpose(1, 2)};
}

}  // namespace

TEST(Packing, CudnnRaggedTakesTheProductsLayout) {
  // cudnn_attention.hpp reads Q, K and V where the product wrote them: tokens equally spaced,
  // rows L tokens apart ([R, L, h, d] storage, or the fused product's views a third of a
  // token apart); heads outermost ([R, h, L, d] contiguous) it refuses (packed attention then
  // takes flash attention's kernels). The layout's checks run on the CPU too.
  const PackedBatch p = pack_batch(make_batch({40, 12, 62, 3, 25}, 4), 64);
  torch::Tensor fused;
  const auto views = fused_qkv_views(p, torch::kCPU, fused);
  const auto own = torch::randn({p.rows, p.cols, 4, 32}).to(torch::kBFloat16).transpose(1, 2);
  const auto heads_outer = torch::randn({p.rows, 4, p.cols, 32}).to(torch::kBFloat16);
  EXPECT_EQ(cudnn_ragged_attention_built(), static_cast<bool>(GENEMASK_EXPECT_CUDNN_FRONTEND));
  if (cudnn_ragged_attention_built()) {
    EXPECT_EQ(cudnn_ragged_attention_refusal(views[0], views[1], views[2]), "not on a GPU");
    EXPECT_EQ(cudnn_ragged_attention_refusal(own, own, own), "not on a GPU");
    EXPECT_EQ(cudnn_ragged_attention_refusal(heads_outer, heads_outer, heads_outer),
              "a view whose tokens are not equally spaced ([R, L, h, d] storage)");
    EXPECT_EQ(cudnn_ragged_attention_refusal(own.to(torch::kFloat32), own.to(torch::kFloat32), own.to(torch::kFloat32)),
              "not bf16 or fp16 alike");
    const auto wide = torch::randn({2, 3, 5, 136}).to(torch::kBFloat16);
    EXPECT_EQ(cudnn_ragged_attention_refusal(wide, wide, wide), "head size 136 (cuDNN's kernels: a multiple of 8 up to 128)");
    EXPECT_EQ(cudnn_ragged_attention_refusal(own, own, heads_outer), "a view whose tokens are not equally spaced ([R, L, h, d] storage)");
  } else {
    EXPECT_NE(cudnn_ragged_attention_refusal(own, own, own).find("no cuDNN frontend"), std::string::npos);
  }
  EXPECT_THROW(cudnn_ragged_attention(own, own, own, torch::zeros({2}, torch::kInt), 64, 0.0), std::invalid_argument);
  // The longest segment a graph is built for: rounded up to 64, so that batches share graphs.
  EXPECT_EQ(cudnn_ragged_seqlen_bound(1), 64);
  EXPECT_EQ(cudnn_ragged_seqlen_bound(64), 64);
  EXPECT_EQ(cudnn_ragged_seqlen_bound(65), 128);
  EXPECT_EQ(cudnn_ragged_seqlen_bound(510), 512);
}

TEST(Packing, GpuCudnnRaggedMatchesTheBlockMaskAndTheCpu) {
  // fusions.hpp's cudnn-varlen: on a GPU, cuDNN's attention over the ragged segments (bf16,
  // cudnn_attention.hpp) against the block-diagonal mask in fp32, values and gradients, with
  // Q, K and V read where the fused product puts them (views a third of a token apart) and in
  // their own [R, L, h, d] storage, over a layout whose segments cudnn_cu_seqlens pads with
  // zero-length ones and one that ends in zero-length segments itself (as the fixed-shape
  // step's does); a second call of the same shapes builds no cuDNN graph; dropout draws the
  // same masks from the same generator state; and the packed model with it on the GPU
  // against the CPU. Heads outermost ([R, h, L, d] contiguous) take flash attention. Without a
  // GPU the same body runs on the CPU, where the switch changes nothing (the per-segment
  // kernel).
  const Fusions saved = fusions();
  Fusions f = saved;
  f.cudnn_varlen = true;
  set_fusions(f);
  const bool gpu = torch::cuda::is_available();
  const torch::Device dev = gpu ? torch::Device(torch::kCUDA, 0) : torch::Device(torch::kCPU);
  const PackedBatch p = pack_batch(make_batch({40, 12, 62, 3, 25, 33, 8, 50, 19}, 4), 64);
  PackedLayout l = packed_layout(p, dev);
  const int64_t S = l.cu_seqlens.numel() - 1;
  EXPECT_EQ(l.cudnn_cu_seqlens().numel(), 65);  // padded to 64 segments
  EXPECT_TRUE(torch::equal(l.cudnn_cu_seqlens().narrow(0, 0, S + 1), l.cu_seqlens));
  EXPECT_EQ(l.cudnn_cu_seqlens()[64].item<int64_t>(), p.rows * p.cols);
  PackedLayout fixed = l;  // 70 segments, the last 70 - S of none: padded to 128
  fixed.cu_seqlens = torch::cat({l.cu_seqlens, l.cu_seqlens.narrow(0, S, 1).expand({70 - S})});
  EXPECT_EQ(fixed.cudnn_cu_seqlens().numel(), 65);  // still the copy's: made on first use
  fixed.boundaries_changed();
  EXPECT_EQ(fixed.cudnn_cu_seqlens().numel(), 129);
  torch::Tensor fused;
  const auto views = fused_qkv_views(p, dev, fused);
  torch::manual_seed(9);
  const auto own_base = torch::randn({3, p.rows, p.cols, 4, 32}, dev).to(torch::kBFloat16).requires_grad_();
  const std::array<torch::Tensor, 3> own = {own_base[0].transpose(1, 2), own_base[1].transpose(1, 2),
                                            own_base[2].transpose(1, 2)};
  for (const auto* inputs : {&views, &own}) {
    for (const PackedLayout* layout : {&l, &fixed}) {
      const auto& [q, k, v] = *inputs;
      EXPECT_EQ(to_string(packed_attention_path(q, k, v)), gpu ? "cudnn-ragged" : "cpu-segments");
      auto fast = packed_attention(q, k, v, *layout, 0.0);
      auto go = torch::randn(fast.sizes(), dev).to(torch::kBFloat16);
      const auto g = torch::autograd::grad({fast}, {q, k, v}, {go});
      std::optional<torch::Tensor> mask = l.block_mask();
      auto ref = at::scaled_dot_product_attention(q.to(torch::kFloat32), k.to(torch::kFloat32), v.to(torch::kFloat32),
                                                  mask, 0.0);
      const auto rg = torch::autograd::grad({ref}, {q, k, v}, {go.to(torch::kFloat32)});
      EXPECT_LT(max_abs_diff(fast.to(torch::kFloat32), ref), 2e-2);
      for (size_t i = 0; i < 3; ++i)
        EXPECT_LT(max_abs_diff(g[i].to(torch::kFloat32), rg[i].to(torch::kFloat32)), 5e-2) << "gradient " << i;
      // The graphs of these shapes are built: the same call again builds none.
      const int64_t built = cudnn_ragged_attention_graphs_built();
      const auto again = torch::autograd::grad({packed_attention(q, k, v, *layout, 0.0)}, {q, k, v}, {go});
      EXPECT_EQ(cudnn_ragged_attention_graphs_built(), built);
      // (The backward's sums into dQ may meet in another order: not bit for bit.)
      EXPECT_LT(max_abs_diff(again[0].to(torch::kFloat32), g[0].to(torch::kFloat32)), 1e-2);
      if (gpu) {
        EXPECT_GT(built, 0);
      }
      // With dropout: the same draws again from the same generator state, finite, and others
      // than without.
      torch::manual_seed(77);
      if (gpu) torch::cuda::manual_seed_all(77);
      auto dropped = packed_attention(q, k, v, *layout, 0.5);
      const auto gd = torch::autograd::grad({dropped}, {q, k, v}, {go});
      torch::manual_seed(77);
      if (gpu) torch::cuda::manual_seed_all(77);
      auto dropped2 = packed_attention(q, k, v, *layout, 0.5);
      EXPECT_TRUE(torch::equal(dropped2, dropped));
      const auto gd2 = torch::autograd::grad({dropped2}, {q, k, v}, {go});
      for (size_t i = 0; i < 3; ++i)  // the same draws in the backward
        EXPECT_LT(max_abs_diff(gd2[i].to(torch::kFloat32), gd[i].to(torch::kFloat32)), 1e-2) << "gradient " << i;
      EXPECT_GT(max_abs_diff(dropped.to(torch::kFloat32), fast.to(torch::kFloat32)), 1e-2);
      EXPECT_TRUE(torch::isfinite(dropped).all().item<bool>());
      for (const auto& x : gd) EXPECT_TRUE(torch::isfinite(x).all().item<bool>());
    }
  }
  // What a run reports it ran (the summary's packed_attention): cuDNN's kernels, where it ran them.
  const auto taken = packed_attention_paths_taken();
  EXPECT_NE(std::find(taken.begin(), taken.end(), gpu ? "cudnn-ragged" : "cpu-segments"), taken.end());
  auto [bq, bk, bv] = random_qkv(p, dev);  // heads outermost
  EXPECT_EQ(to_string(packed_attention_path(bq, bk, bv)), gpu ? "flash-varlen" : "cpu-segments");
  expect_packed_model_matches_cpu(dev, false);
  set_fusions(saved);
}

// ---- The CUDA graphs' fixed-shape step (model/graph_step.hpp) ----

namespace {

/// Every sample of `b` whole and alone in a segment of `w`, in one row, ids and labels with
/// it; every segment non-empty and within a row; each row's end a boundary; padding [PAD].
void expect_segments_hold_the_batch(const Batch& b, const PackedBatch& w) {
  ASSERT_EQ(w.input_ids.size(), static_cast<size_t>(w.rows * w.cols));
  ASSERT_EQ(w.cu_seqlens.front(), 0);
  ASSERT_EQ(w.cu_seqlens.back(), w.rows * w.cols);
  ASSERT_EQ(w.segment_sample.size() + 1, w.cu_seqlens.size());
  std::set<int64_t> boundaries(w.cu_seqlens.begin(), w.cu_seqlens.end());
  for (int64_t r = 0; r <= w.rows; ++r) EXPECT_TRUE(boundaries.count(r * w.cols)) << "row " << r << " starts a segment";
  std::vector<int> seen(static_cast<size_t>(b.rows), 0);
  for (size_t s = 0; s + 1 < w.cu_seqlens.size(); ++s) {
    const int64_t start = w.cu_seqlens[s], end = w.cu_seqlens[s + 1], sample = w.segment_sample[s];
    ASSERT_LT(start, end) << "segment " << s << " is empty";
    ASSERT_EQ(start / w.cols, (end - 1) / w.cols) << "segment " << s << " crosses a row";
    for (int64_t i = start; i < end; ++i) {
      EXPECT_EQ(w.position_ids[static_cast<size_t>(i)], i - start);
      if (sample < 0) {
        EXPECT_EQ(w.input_ids[static_cast<size_t>(i)], 0);
        EXPECT_EQ(w.labels[static_cast<size_t>(i)], genemask::kIgnoreLabel);
      }
    }
    if (sample < 0) continue;
    ++seen[static_cast<size_t>(sample)];
    for (int64_t c = 0; c < end - start; ++c) {
      const auto src = static_cast<size_t>(sample * b.cols + c);
      EXPECT_EQ(b.attention_mask[src], 1);
      EXPECT_EQ(w.input_ids[static_cast<size_t>(start + c)], b.input_ids[src]);
      EXPECT_EQ(w.labels[static_cast<size_t>(start + c)], b.labels[src]);
      EXPECT_EQ(w.packed_index[src], start + c);
    }
    if (end - start < b.cols) {
      EXPECT_EQ(b.attention_mask[static_cast<size_t>(sample * b.cols + end - start)], 0);
    }
  }
  for (int64_t r = 0; r < b.rows; ++r) EXPECT_EQ(seen[static_cast<size_t>(r)], 1) << "sample " << r;
  EXPECT_LE(static_cast<int64_t>(w.segment_sample.size()), b.rows + w.rows);
}

}  // namespace

TEST(GraphStep, OnePerRowAndWidenKeepEverySampleInItsOwnSegment) {
  const Batch b = make_batch({40, 12, 62, 3, 64, 33, 8, 50, 19}, 5);
  const PackedBatch one = one_per_row(b);
  EXPECT_EQ(one.rows, b.rows);
  EXPECT_EQ(one.input_ids, b.input_ids);
  expect_segments_hold_the_batch(b, one);
  // Widened to a fixed 11 x 70 (two rows of padding, six more columns), packed or not.
  for (const PackedBatch& p : {one, pack_batch(b, 64)}) {
    const PackedBatch w = widen(p, 11, 70);
    EXPECT_EQ(w.rows, 11);
    EXPECT_EQ(w.cols, 70);
    expect_segments_hold_the_batch(b, w);
    EXPECT_EQ(w.real_tokens, p.real_tokens);
  }
  EXPECT_THROW(widen(one, 8, 70), std::invalid_argument);   // more rows than fit
  EXPECT_THROW(widen(one, 11, 63), std::invalid_argument);  // a row longer than fits
}

TEST(GraphStep, DecideCudaGraphs) {
  // The matrix-product FLOPs per token of the named models (flops.hpp): logo 2 x (4 x 256^2 +
  // 2 x 256 x 3072) x 6, dnabert 12 x (4 x 768^2 + 2 x 768 x 3072) x 6.
  const double kLogo = 6 * matrix_parameters({2, 256, 3072, 0}), kDnabert = 6 * matrix_parameters({12, 768, 3072, 0});
  EXPECT_DOUBLE_EQ(kLogo, 6.0 * 2 * (4 * 256 * 256 + 2 * 256 * 3072));
  EXPECT_DOUBLE_EQ(kDnabert, 6.0 * 12 * (4 * 768 * 768 + 2 * 768 * 3072));
  EXPECT_LT(kLogo, kGraphsMaxFlopsPerToken);
  // auto leaves a compute-bound model eager and says why; on captures it; the devices' and
  // the shared GPUs' reasons come first.
  const std::string big = decide_cuda_graphs("auto", "", "", kDnabert);
  EXPECT_NE(big.find("510 million FLOPs per token, above 100"), std::string::npos) << big;
  EXPECT_NE(big.find("--cuda-graphs on captures it"), std::string::npos) << big;
  EXPECT_EQ(decide_cuda_graphs("on", "", "", kDnabert), "");
  EXPECT_EQ(decide_cuda_graphs("off", "", "", kDnabert), "--cuda-graphs off");
  EXPECT_EQ(decide_cuda_graphs("auto", "the device is a CPU", "", kDnabert), "the device is a CPU");
  EXPECT_EQ(decide_cuda_graphs("auto", "", "", kGraphsMaxFlopsPerToken), "");  // the bound itself: captured
  EXPECT_EQ(decide_cuda_graphs("auto", "", "", kLogo), "");
  EXPECT_EQ(decide_cuda_graphs("on", "", "", kLogo), "");
  EXPECT_EQ(decide_cuda_graphs("off", "", "", kLogo), "--cuda-graphs off");
  EXPECT_EQ(decide_cuda_graphs("auto", "the device is a CPU", "", kLogo), "the device is a CPU");
  EXPECT_EQ(decide_cuda_graphs("auto", "", "ranks 0 and 1 on n1 share GPU g", kLogo), "ranks 0 and 1 on n1 share GPU g");
  try {
    decide_cuda_graphs("on", "the device is a CPU", "", kLogo);
    ADD_FAILURE() << "on a CPU, --cuda-graphs on must be refused";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("the device is a CPU; use --cuda-graphs auto"), std::string::npos) << e.what();
  }
  EXPECT_THROW(decide_cuda_graphs("on", "", "ranks 0 and 1 on n1 share GPU g", kLogo), std::invalid_argument);
  EXPECT_THROW(decide_cuda_graphs("yes", "", "", kLogo), std::invalid_argument);
  // Which ranks share a GPU: on one host only; ranks on the CPU share nothing.
  EXPECT_EQ(shared_gpu({{"n1", "GPU-a"}, {"n2", "GPU-a"}, {"n1", "GPU-b"}}), "");
  EXPECT_EQ(shared_gpu({{"n1", "GPU-a"}, {"n1", "GPU-b"}, {"n1", "GPU-a"}}), "ranks 0 and 2 on n1 share GPU GPU-a");
  EXPECT_EQ(shared_gpu({{"n1", ""}, {"n1", ""}}), "");
}

TEST(GraphStep, StageStaticWritesTheFixedLayout) {
  const Batch b = make_batch({40, 12, 62, 3, 25}, 6);
  const StaticLimits limits{5, 64, 0};
  for (bool packing : {false, true}) {
    int64_t masked = -1, rows_needed = -1;
    StaticShape s;
    const auto staged = stage_static(b, packing, limits, false, s, masked, rows_needed);
    ASSERT_TRUE(staged.has_value());
    const PackedBatch laid = packing ? pack_batch(b, 64) : one_per_row(b);
    EXPECT_EQ(rows_needed, laid.rows);
    EXPECT_EQ(s.rows, laid.rows);  // buckets of one row for 5 samples
    int64_t expect_masked = 0;
    for (int64_t l : b.labels) expect_masked += l != genemask::kIgnoreLabel;
    // The fewest twentieths of the positions that hold the masked ones (at least one).
    const int64_t level = (s.rows * 64 + 19) / 20;
    EXPECT_GE(s.capacity, expect_masked);
    EXPECT_EQ(s.capacity % level, 0);
    EXPECT_LT(s.capacity - level, std::max<int64_t>(expect_masked, 1));
    ASSERT_EQ(staged->numel(), s.cells());
    const PackedBatch w = widen(laid, s.rows, 64);
    const int64_t* p = staged->data_ptr<int64_t>();
    const int64_t n = s.rows * 64;
    EXPECT_TRUE(std::equal(w.input_ids.begin(), w.input_ids.end(), p));
    EXPECT_TRUE(std::equal(w.position_ids.begin(), w.position_ids.end(), p + n));
    const int64_t* cu = p + 2 * n;
    EXPECT_TRUE(std::equal(w.cu_seqlens.begin(), w.cu_seqlens.end(), cu));
    ASSERT_LE(static_cast<int64_t>(w.cu_seqlens.size()), s.boundaries());
    for (auto i = static_cast<int64_t>(w.cu_seqlens.size()); i < s.boundaries(); ++i) EXPECT_EQ(cu[i], n);
    const int64_t* rows = cu + s.boundaries();
    const int64_t* targets = rows + s.capacity;
    EXPECT_EQ(masked, expect_masked);
    for (int64_t i = 0; i < s.capacity; ++i) {
      if (i < masked) {
        EXPECT_EQ(targets[i], w.labels[static_cast<size_t>(rows[i])]);
        if (i > 0) {
          EXPECT_LT(rows[i - 1], rows[i]);
        }
      } else {
        EXPECT_EQ(rows[i], 0);
        EXPECT_EQ(targets[i], genemask::kIgnoreLabel);
      }
    }
  }
  // Every real position masked: a buffer of all 128 positions holds them. With a fixed
  // capacity (testing) that holds fewer: not staged, the count still given.
  Batch full = make_batch({60, 60}, 7);
  for (size_t i = 0; i < full.labels.size(); ++i)
    if (full.attention_mask[i]) full.labels[i] = full.input_ids[i];
  int64_t masked = 0, rows_needed = 0;
  StaticShape s;
  EXPECT_TRUE(stage_static(full, true, {2, 64, 0}, false, s, masked, rows_needed).has_value());
  EXPECT_EQ(masked, 120);
  EXPECT_EQ(s.capacity, 126);  // 2 rows of 64: 18 levels of 7 positions
  EXPECT_FALSE(stage_static(full, true, {2, 64, 119}, false, s, masked, rows_needed).has_value());
  EXPECT_EQ(masked, 120);
  EXPECT_TRUE(stage_static(full, true, {2, 64, 120}, false, s, masked, rows_needed).has_value());  // a fixed capacity
  // More samples or columns than the limits: not staged.
  const Batch long_ones = make_batch({40, 50, 45, 10}, 8);
  EXPECT_FALSE(stage_static(long_ones, true, {3, 64, 0}, false, s, masked, rows_needed).has_value());
  EXPECT_FALSE(stage_static(long_ones, false, {4, 48, 0}, false, s, masked, rows_needed).has_value());
  EXPECT_THROW(stage_static(long_ones, true, {4, 48, 0}, false, s, masked, rows_needed), std::invalid_argument);
  EXPECT_TRUE(stage_static(long_ones, true, {4, 64, 0}, false, s, masked, rows_needed).has_value());
  EXPECT_EQ(rows_needed, 3);  // first fit: 50 | 45 + 10 | 40
}

TEST(GraphStep, ShapesComeInBucketsOfRowsAndMaskedRows) {
  // Rows rounded up to a multiple of ceil(samples / 64), at most the samples: at most 64 row
  // counts. The masked rows' buffer: the fewest twentieths of the shape's positions that hold
  // the masked positions, at least one; a fixed capacity (testing) whatever they are.
  const StaticLimits l{64, 512, 0};
  EXPECT_EQ(static_shape(l, 1, 0).rows, 1);  // buckets of one row for 64 samples
  EXPECT_EQ(static_shape(l, 49, 0).rows, 49);
  EXPECT_EQ(static_shape(l, 64, 0).rows, 64);
  const StaticLimits big{500, 512, 0};  // buckets of 8 rows
  EXPECT_EQ(static_shape(big, 1, 0).rows, 8);
  EXPECT_EQ(static_shape(big, 377, 0).rows, 384);
  EXPECT_EQ(static_shape(big, 384, 0).rows, 384);
  EXPECT_EQ(static_shape(big, 385, 0).rows, 392);
  EXPECT_EQ(static_shape(big, 499, 0).rows, 500);  // capped at the samples
  EXPECT_EQ(static_shape(big, 377, 0).boundaries(), 500 + 384 + 1);
  // 384 rows x 512 = 196608 positions, a level of 9831 (the last one capped at the positions).
  EXPECT_EQ(static_shape(big, 384, 0).capacity, 9831);  // nothing masked: one level
  EXPECT_EQ(static_shape(big, 384, 9831).capacity, 9831);
  EXPECT_EQ(static_shape(big, 384, 9832).capacity, 2 * 9831);
  EXPECT_EQ(static_shape(big, 384, 27000).capacity, 3 * 9831);  // 13.7% masked: a buffer of 15%
  EXPECT_EQ(static_shape(big, 384, 196608).capacity, 196608);
  EXPECT_EQ(static_shape({10, 512, 7}, 3, 100).capacity, 7);
  std::set<int64_t> rows;
  for (int64_t r = 1; r <= 500; ++r) rows.insert(static_shape(big, r, 0).rows);
  EXPECT_EQ(rows.size(), 63u);  // 8, 16, ..., 496 and 500
  std::set<int64_t> levels;
  for (int64_t m = 0; m <= 196608; m += 97) levels.insert(static_shape(big, 384, m).capacity);
  EXPECT_EQ(levels.size(), 20u);
  EXPECT_THROW(static_shape(l, 65, 0), std::invalid_argument);
  EXPECT_THROW(static_shape(l, 0, 0), std::invalid_argument);
  EXPECT_THROW(static_shape(l, 1, -1), std::invalid_argument);
  // pack_batch's first fit, by hand: 300+212 | 300+200+12 | 5.
  const std::vector<std::vector<int64_t>> want = {{0, 6}, {3, 2, 4}, {1}};
  EXPECT_EQ(first_fit({300, 5, 200, 300, 12, 0, 212}, 512), want);
  EXPECT_THROW(first_fit({513}, 512), std::invalid_argument);
}

namespace {

/// A model of `cfg` initialised from seed 11, on `dev`, in training mode.
BertForMaskedLM model_to_train(const BertConfig& cfg, const torch::Device& dev) {
  torch::manual_seed(11);
  BertForMaskedLM m(cfg);
  init_weights(*m, cfg);
  m->to(dev);
  m->train();
  return m;
}

struct Trained {
  std::vector<double> losses, norms;
  std::vector<torch::Tensor> params;
  std::set<int64_t> shapes;  // the fixed shapes' row counts used
};

/// `steps` optimizer steps of two micro-batches each on `dev`: the trainer's eager step
/// (graph = nullptr), or GraphStep (capturing or not); with `copies` (under bf16) the products
/// read the weights' bf16 copies that each optimizer step makes again (weight_copies.hpp), as
/// the trainer's do, and after the steps every copy must be its weight's bf16 rounding, none
/// made again on reading (a stale copy, e.g. one a captured update did not refresh, fails).
Trained train_steps(const BertConfig& cfg, const std::vector<std::vector<Batch>>& steps, bool packing, bool bf16,
                    const torch::Device& dev, int fixed /* 0: eager, 1: fixed shapes, 2: captured */,
                    bool copies = false) {
  BertForMaskedLM m = model_to_train(cfg, dev);
  AdamWSettings a;
  a.lr = 1e-3;
  auto opt = make_adamw(m->named_parameters(), a);
  FusedAdamW fused(*opt);
  std::unique_ptr<WeightCopies> wc;
  if (copies) wc = bert_weight_copies(*m);
  fused.keep_weight_copies(wc.get());
  const UseWeightCopies use_copies(wc.get());
  GradBuckets grads(m->parameters(), MPI_COMM_SELF, AllReduce::Local);
  const int64_t width = cfg.max_tokens() + 2;
  std::unique_ptr<GraphStep> g;
  const StaticLimits limits{steps[0][0].rows, width, 0};
  if (fixed) g = std::make_unique<GraphStep>(m, grads, fused, dev, bf16, 1.0, fixed == 2);
  torch::manual_seed(12);
  if (dev.is_cuda()) torch::cuda::manual_seed(12);
  Trained t;
  for (const auto& micro : steps) {
    double total = 0;
    for (const auto& b : micro)
      for (int64_t l : b.labels) total += l != genemask::kIgnoreLabel;
    grads.zero();
    torch::Tensor norm, loss = torch::zeros({}, torch::TensorOptions().dtype(torch::kFloat64).device(dev));
    if (g) {
      g->begin(total);
      for (const auto& b : micro) {
        int64_t masked = 0, rows_needed = 0;
        StaticShape shape;
        auto staged = stage_static(b, packing, limits, false, shape, masked, rows_needed);
        EXPECT_TRUE(staged.has_value());
        g->micro(staged->to(dev), shape);
        t.shapes.insert(shape.rows);
      }
      loss = g->loss_sum();
      norm = g->finish(1e-3);
    } else {
      for (const auto& b : micro) {
        torch::Tensor l;
        {
          Autocast autocast(bf16);
          if (packing) {
            const PackedBatch p = pack_batch(b, width);
            const PackedLayout lay = packed_layout(p, dev);
            auto [rows, targets] = masked_of(p.labels);
            l = m->masked_lm_loss_sum(ids_of(p.input_ids, p.rows, p.cols).to(dev), lay, rows.to(dev), targets.to(dev));
          } else {
            auto [rows, targets] = masked_of(b.labels);
            l = m->masked_lm_loss_sum(ids_of(b.input_ids, b.rows, b.cols).to(dev),
                                      ids_of(b.attention_mask, b.rows, b.cols).to(dev), rows.to(dev), targets.to(dev));
          }
        }
        (l / std::max(1.0, total)).backward();
        loss += l.detach().to(torch::kFloat64);
      }
      norm = grads.clip(1.0);
      fused.step(1e-3);
    }
    t.losses.push_back(loss.item<double>() / total);
    t.norms.push_back(norm.item<double>());
  }
  for (const auto& p : m->parameters()) t.params.push_back(p.detach().cpu().to(torch::kFloat32));
  if (wc) {
    EXPECT_EQ(wc->stale_refreshes(), 0);
    size_t checked = 0;
    for (const auto& p : m->parameters()) {
      const torch::Tensor low = wc->low(p);
      if (!low.defined()) continue;
      ++checked;
      EXPECT_TRUE(torch::equal(low, p.detach().to(torch::kBFloat16))) << "a stale copy of a weight of " << p.numel();
    }
    EXPECT_EQ(checked, wc->size());
    EXPECT_EQ(wc->stale_refreshes(), 0);  // none was stale when read
  }
  if (g && fixed == 2) {
    EXPECT_EQ(g->graphs(), static_cast<int>(t.shapes.size()) + 1);
  }
  return t;
}

void expect_identical_training(const Trained& a, const Trained& b) {
  EXPECT_EQ(a.losses, b.losses);
  EXPECT_EQ(a.norms, b.norms);
  ASSERT_EQ(a.params.size(), b.params.size());
  for (size_t i = 0; i < a.params.size(); ++i) EXPECT_TRUE(torch::equal(a.params[i], b.params[i])) << "weight " << i;
}

void expect_same_training(const Trained& a, const Trained& b, double tol) {
  ASSERT_EQ(a.losses.size(), b.losses.size());
  for (size_t i = 0; i < a.losses.size(); ++i) {
    EXPECT_NEAR(a.losses[i], b.losses[i], tol * std::abs(b.losses[i])) << "loss of step " << i + 1;
    EXPECT_NEAR(a.norms[i], b.norms[i], 10 * tol * std::abs(b.norms[i])) << "gradient norm of step " << i + 1;
  }
  double worst = 0;
  for (size_t i = 0; i < a.params.size(); ++i) worst = std::max(worst, max_abs_diff(a.params[i], b.params[i]));
  EXPECT_LT(worst, 10 * tol) << "largest weight difference after the steps (lr 1e-3)";
}

}  // namespace

TEST(GraphStep, CapturedStepsNeverWaitForTheGpu) {
  // The trainer's step between logged steps, as CUDA graphs: each micro-batch staged in pinned
  // memory and copied without blocking, the graphs replayed, the update's graph replayed. Once
  // captured, the host never waits for the GPU (HostSyncCounter: LibTorch's own report of
  // every blocking copy, value read and synchronisation), so it queues step after step while
  // the GPU runs. On a CPU the counter counts nothing (-1) and the profile's count is null.
  const bool gpu = torch::cuda::is_available();
  const torch::Device dev = gpu ? torch::Device(torch::kCUDA, 0) : torch::Device(torch::kCPU);
  {
    const HostSyncCounter none(torch::kCPU);
    EXPECT_EQ(none.count(), -1);
    const auto p = profile_steps([] { torch::mm(torch::ones({8, 8}), torch::ones({8, 8})); }, 2, torch::kCPU);
    EXPECT_LT(p.host_syncs_per_step, 0);
    EXPECT_TRUE(nlohmann::json::parse(p.to_json())["host_syncs_per_step"].is_null());
  }
  auto cfg = genemask::test::small_bert_config(32, 64);  // dropout 0.1: the generator's offsets advance
  BertForMaskedLM m = model_to_train(cfg, dev);
  AdamWSettings a;
  auto opt = make_adamw(m->named_parameters(), a);
  FusedAdamW fused(*opt);
  GradBuckets grads(m->parameters(), MPI_COMM_SELF, AllReduce::Local);
  const std::vector<Batch> micro = {make_batch({40, 12, 62, 3, 25, 33, 8, 50, 19}, 20),
                                    make_batch({64, 64, 64, 64, 64, 64, 61, 30, 17}, 30)};
  const StaticLimits limits{micro[0].rows, cfg.max_tokens() + 2, 0};
  // Captured on a GPU; on a CPU the uncaptured fixed-shape step, so that the body runs in CI.
  GraphStep g(m, grads, fused, dev, false, 1.0, gpu);
  auto step = [&] {
    grads.zero();
    g.begin(100);
    for (const auto& b : micro) {
      int64_t masked = 0, rows = 0;
      StaticShape shape;
      const auto staged = stage_static(b, true, limits, /*pinned=*/gpu, shape, masked, rows);
      ASSERT_TRUE(staged.has_value());
      g.micro(*staged, shape);
    }
    grads.allreduce();
    g.finish(1e-3);
  };
  step();  // captures every graph the step needs
  const auto loss_before = g.loss_sum().item<double>();
  {
    const HostSyncCounter syncs(dev);
    for (int i = 0; i < 3; ++i) step();
    EXPECT_EQ(syncs.count(), gpu ? 0 : -1);
    if (gpu) {  // the counter sees a wait: a value read on the host
      (void)g.loss_sum().item<double>();
      EXPECT_EQ(syncs.count(), 1);
    }
  }
  EXPECT_TRUE(std::isfinite(loss_before));
  EXPECT_TRUE(std::isfinite(g.loss_sum().item<double>()));
  if (gpu) {  // and the profile's window counts the same: none a step
    const auto p = profile_steps(step, 2, dev);
    EXPECT_EQ(p.host_syncs_per_step, 0);
  }
}

TEST(GraphStep, FixedShapeStepTrainsAsTheEagerStep) {
  // Three optimizer steps of two micro-batches (lengths 3-64 of 64 positions): the fixed-shape
  // step (samples in rows of 64 positions: 9 one per row, or packed into as many rows as a
  // micro-batch needs, a shape per row count, boundaries padded with zero-length segments,
  // masked rows padded with ignored targets) gives the eager step's losses, gradient norms and
  // weights, packed and one sample per row, within float rounding (fp32: 1e-5 relative; the
  // learning rate is a float tensor there, a double in the eager step). On a GPU also in bf16
  // (2e-2), and the captured graphs replay the uncaptured fixed-shape step exactly, with dropout.
  auto cfg = genemask::test::small_bert_config(32, 64);
  cfg.hidden_dropout_prob = 0;
  cfg.attention_probs_dropout_prob = 0;
  std::vector<std::vector<Batch>> steps;
  for (uint32_t s = 0; s < 3; ++s)
    steps.push_back({make_batch({40, 12, 62, 3, 25, 33, 8, 50, 19}, 20 + s), make_batch({64, 64, 64, 64, 64, 64, 61, 30, 17}, 30 + s)});
  const bool gpu = torch::cuda::is_available();
  const torch::Device dev = gpu ? torch::Device(torch::kCUDA, 0) : torch::Device(torch::kCPU);
  for (bool packing : {true, false}) {
    SCOPED_TRACE(packing ? "packed" : "one per row");
    const Trained fixed = train_steps(cfg, steps, packing, false, dev, 1);
    expect_same_training(fixed, train_steps(cfg, steps, packing, false, dev, 0), 1e-5);
    // Packed, the micro-batches need different row counts: several shapes (graphs) in use.
    if (packing) EXPECT_GE(fixed.shapes.size(), 2u);
    else EXPECT_EQ(fixed.shapes, std::set<int64_t>{9});
    // In bf16 with the weights' bf16 copies (the trainer's default) the fixed-shape step
    // computes the same bits as without them, on the CPU in CI (a GPU's check is below).
    if (!gpu) {
      expect_identical_training(train_steps(cfg, steps, packing, true, dev, 1, true),
                                train_steps(cfg, steps, packing, true, dev, 1, false));
      continue;
    }
    expect_same_training(train_steps(cfg, steps, packing, true, dev, 1), train_steps(cfg, steps, packing, true, dev, 0),
                         2e-2);
    auto noisy = genemask::test::small_bert_config(32, 64);  // dropout 0.1
    for (bool bf16 : {false, true})
      expect_same_training(train_steps(noisy, steps, packing, bf16, dev, 2), train_steps(noisy, steps, packing, bf16, dev, 1),
                           1e-6);
    // The captured graphs with the weights' copies (the update's graph refreshing them) against
    // the uncaptured fixed-shape step that casts: the same training, and every copy fresh
    // after the replays (train_steps checks them).
    expect_same_training(train_steps(noisy, steps, packing, true, dev, 2, true),
                         train_steps(noisy, steps, packing, true, dev, 1, false), 1e-6);
  }
  // Without a GPU nothing can be captured, and GraphStep says so.
  if (!gpu) {
    BertForMaskedLM m(cfg);
    AdamWSettings a;
    auto opt = make_adamw(m->named_parameters(), a);
    FusedAdamW fused(*opt);
    GradBuckets grads(m->parameters(), MPI_COMM_SELF, AllReduce::Local);
    EXPECT_THROW(GraphStep(m, grads, fused, torch::kCPU, false, 1.0, true), std::invalid_argument);
  }
}
