// Packed sequences (model/packing.hpp, PackedLayout in model/bert.hpp): the host packing
// against brute-force checks of what it must keep; the CPU attention kernel over segments
// against a block-diagonal reference in double with the same keep mask; the block-mask path
// (the GPU's fallback) against the kernel; and a packed batch's loss and every gradient
// against the same samples unpacked. On a GPU also flash attention over segments against
// the block mask, and the packed loss on the GPU against the CPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <set>

#include "genemask/corpus/loader.hpp"
#include "model/attention_cpu.hpp"
#include "model/bert.hpp"
#include "model/packing.hpp"
#include "model/runtime.hpp"
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
PackedLayout layout_of(const PackedBatch& p, const torch::Device& dev) {
  PackedLayout l;
  l.position_ids = torch::tensor(p.position_ids, torch::kLong).view({p.rows, p.cols}).to(dev);
  l.segments = torch::tensor(p.cu_seqlens, torch::kLong);
  l.cu_seqlens = l.segments.to(dev, torch::kInt);
  l.max_seqlen = p.max_seqlen;
  return l;
}

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
  const int threads = at::get_num_threads();
  at::set_num_threads(1);
  auto one = attention_dropout_cpu(q, k, v, {}, 0.2, 9, segments);
  at::set_num_threads(std::max(2, threads));
  auto many = attention_dropout_cpu(q, k, v, {}, 0.2, 9, segments);
  at::set_num_threads(threads);
  EXPECT_TRUE(torch::equal(one, many));
  // Boundaries that do not cover B x L, or cross a row, are refused.
  EXPECT_THROW(attention_dropout_cpu(q, k, v, {}, 0.0, 1, torch::tensor({0, 7, 59}, torch::kLong)), std::invalid_argument);
  EXPECT_THROW(attention_dropout_cpu(q, k, v, {}, 0.0, 1, torch::tensor({0, 25, 60}, torch::kLong)), std::invalid_argument);
}

TEST(Packing, BlockMaskPathEqualsTheSegmentKernel) {
  // The GPU's fallback (scaled_dot_product_attention with PackedLayout::block_mask) run on the
  // CPU: the mask equals the one built element by element, and the attention the kernel's.
  const std::vector<int64_t> lengths = {9, 4, 17, 6, 11, 3};
  const PackedBatch p = pack_batch(make_batch(lengths, 2), 20);
  const PackedLayout l = layout_of(p, torch::kCPU);
  EXPECT_TRUE(torch::equal(l.block_mask(), block_mask_reference(p.cu_seqlens, p.rows, p.cols)));
  torch::manual_seed(8);
  auto q = torch::randn({p.rows, 2, p.cols, 8}), k = torch::randn({p.rows, 2, p.cols, 8}),
       v = torch::randn({p.rows, 2, p.cols, 8});
  EXPECT_EQ(packed_attention_path(q, k, v), "cpu-segments");
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
    const PackedLayout l = layout_of(p, dev);
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

TEST(Packing, GpuVarlenFlashMatchesTheBlockMaskAndTheCpu) {
  // On a GPU: flash attention over segments (bf16) against the block-diagonal mask in fp32,
  // values and gradients, and the packed model on the GPU against the CPU. Without a GPU the
  // same body runs on the CPU (its per-segment path against the mask); only the assertion
  // that the GPU took flash is the GPU's.
  const bool gpu = torch::cuda::is_available();
  const torch::Device dev = gpu ? torch::Device(torch::kCUDA, 0) : torch::Device(torch::kCPU);
  const PackedBatch p = pack_batch(make_batch({40, 12, 62, 3, 25, 33, 8, 50, 19}, 4), 64);
  const PackedLayout l = layout_of(p, dev);
  torch::manual_seed(8);
  auto q = torch::randn({p.rows, 4, p.cols, 32}, dev).to(torch::kBFloat16).requires_grad_();
  auto k = torch::randn({p.rows, 4, p.cols, 32}, dev).to(torch::kBFloat16).requires_grad_();
  auto v = torch::randn({p.rows, 4, p.cols, 32}, dev).to(torch::kBFloat16).requires_grad_();
  const std::string path = packed_attention_path(q, k, v);
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
  const Batch b = make_batch({40, 12, 62, 3, 25, 33, 8, 50, 19}, 4);
  auto m = quiet_model(21);
  m->train();
  const auto cpu = loss_and_grads(m, b, true, false, torch::kCPU);
  m->to(dev);
  expect_close(loss_and_grads(m, b, true, false, dev), cpu, 1e-4);
  expect_close(loss_and_grads(m, b, true, true, dev), cpu, 3e-2);
}
