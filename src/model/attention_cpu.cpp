#include "model/attention_cpu.hpp"

#include "model/runtime.hpp"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <ATen/OpMathType.h>
#include <ATen/autocast_mode.h>

#include <cmath>
#include <limits>
#include <optional>
#include <mutex>
#include <stdexcept>

namespace genemask::model {
namespace {

constexpr double kResolution = 16777216.0;  // 2^24 levels for the keep decision

/// Dropped below this 24-bit level: round(p * 2^24).
uint32_t drop_threshold(double p) {
  if (!(p >= 0 && p < 1)) throw std::invalid_argument("attention dropout: p must be in [0, 1)");
  return static_cast<uint32_t>(std::llround(p * kResolution));
}

/// 24 uniform bits for element i of the call with `seed` (SplitMix64's finaliser).
inline uint32_t level24(uint64_t seed, uint64_t i) {
  uint64_t z = seed + (i + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<uint32_t>(z >> 40);
}

/// Whether element i of the call with `seed` is kept: the one keep rule of the kernels and of
/// attention_dropout_keep_mask.
inline bool kept(uint64_t seed, uint64_t i, uint32_t thr) { return level24(seed, i) >= thr; }

/// Rows per task of at::parallel_for: about 32k elements each.
int64_t grain(int64_t row_len) { return std::max<int64_t>(1, 32768 / std::max<int64_t>(1, row_len)); }

/// P = y * keep * scale, row by row (y: the softmax in acc_t; P: scalar_t).
template <typename scalar_t, typename acc_t>
void dropout_forward(const acc_t* y, scalar_t* out, int64_t rows, int64_t L, uint32_t thr, acc_t scale,
                     uint64_t seed) {
  at::parallel_for(0, rows, grain(L), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const acc_t* yr = y + r * L;
      scalar_t* o = out + r * L;
      const uint64_t base = static_cast<uint64_t>(r * L);
      for (int64_t j = 0; j < L; ++j)
        o[j] = static_cast<scalar_t>(kept(seed, base + static_cast<uint64_t>(j), thr) ? yr[j] * scale : acc_t(0));
    }
  });
}

/// dS = y * (g - sum(g * y)) with g = dP * keep * scale: the dropout's and the softmax's
/// backward in one pass over each row.
template <typename scalar_t, typename acc_t>
void dropout_softmax_backward(const scalar_t* dp, const acc_t* y, scalar_t* ds, int64_t rows, int64_t L,
                              uint32_t thr, acc_t scale, uint64_t seed) {
  at::parallel_for(0, rows, grain(L), [&](int64_t r0, int64_t r1) {
    std::vector<acc_t> g(static_cast<size_t>(L));
    for (int64_t r = r0; r < r1; ++r) {
      const scalar_t* d = dp + r * L;
      const acc_t* yr = y + r * L;
      scalar_t* o = ds + r * L;
      const uint64_t base = static_cast<uint64_t>(r * L);
      acc_t dot = 0;
      for (int64_t j = 0; j < L; ++j) {
        const acc_t gj =
            kept(seed, base + static_cast<uint64_t>(j), thr) ? static_cast<acc_t>(d[j]) * scale : acc_t(0);
        g[static_cast<size_t>(j)] = gj;
        dot += gj * yr[j];
      }
      for (int64_t j = 0; j < L; ++j) o[j] = static_cast<scalar_t>(yr[j] * (g[static_cast<size_t>(j)] - dot));
    }
  });
}

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct AttentionDropout : torch::autograd::Function<AttentionDropout> {
  // Autocast off inside (NoAutocast): the dtypes are chosen here (the products in q's dtype,
  // the softmax and its backward accumulated in fp32 or wider).
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& q_in, const torch::Tensor& k_in,
                               const torch::Tensor& v_in, const std::optional<torch::Tensor>& key_mask, double p,
                               int64_t seed_bits) {
    NoAutocast no_autocast;
    const auto type = q_in.scalar_type();
    const auto acc = at::toOpMathType(type);
    const double scale = 1.0 / std::sqrt(static_cast<double>(q_in.size(-1)));
    auto qs = q_in * scale;
    auto k = k_in.to(type), v = v_in.to(type);
    auto s = at::matmul(qs, k.transpose(-1, -2));  // [B, h, Lq, L]
    if (key_mask) s.masked_fill_(key_mask->logical_not(), -std::numeric_limits<double>::infinity());
    auto y = at::softmax(s, -1, acc).contiguous();
    s = torch::Tensor();
    auto probs = at::empty(y.sizes(), y.options().dtype(type));
    const uint64_t seed = static_cast<uint64_t>(seed_bits);
    const uint32_t thr = drop_threshold(p);
    const int64_t L = y.size(-1), rows = y.numel() / std::max<int64_t>(1, L);
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, type, "attention_dropout_forward", [&] {
      using acc_t = at::opmath_type<scalar_t>;
      dropout_forward<scalar_t, acc_t>(y.data_ptr<acc_t>(), probs.data_ptr<scalar_t>(), rows, L, thr,
                                       static_cast<acc_t>(attention_dropout_scale(p)), seed);
    });
    auto out = at::matmul(probs, v);
    ctx->save_for_backward({qs, k, v, y, probs});
    ctx->saved_data["p"] = p;
    ctx->saved_data["seed"] = seed_bits;
    ctx->saved_data["scale"] = scale;
    ctx->saved_data["k_type"] = static_cast<int64_t>(k_in.scalar_type());
    ctx->saved_data["v_type"] = static_cast<int64_t>(v_in.scalar_type());
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    NoAutocast no_autocast;
    auto saved = ctx->get_saved_variables();
    const auto &qs = saved[0], &k = saved[1], &v = saved[2], &y = saved[3], &probs = saved[4];
    const double p = ctx->saved_data["p"].toDouble(), scale = ctx->saved_data["scale"].toDouble();
    const uint64_t seed = static_cast<uint64_t>(ctx->saved_data["seed"].toInt());
    const auto type = qs.scalar_type();
    auto dout = grads[0].to(type);
    auto dv = at::matmul(probs.transpose(-1, -2), dout);
    auto dp = at::matmul(dout, v.transpose(-1, -2)).contiguous();
    auto ds = at::empty(dp.sizes(), dp.options());
    const uint32_t thr = drop_threshold(p);
    const int64_t L = dp.size(-1), rows = dp.numel() / std::max<int64_t>(1, L);
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, type, "attention_dropout_backward", [&] {
      using acc_t = at::opmath_type<scalar_t>;
      dropout_softmax_backward<scalar_t, acc_t>(dp.data_ptr<scalar_t>(), y.data_ptr<acc_t>(),
                                                ds.data_ptr<scalar_t>(), rows, L, thr,
                                                static_cast<acc_t>(attention_dropout_scale(p)), seed);
    });
    dp = torch::Tensor();
    auto dq = at::matmul(ds, k) * scale;
    auto dk = at::matmul(ds.transpose(-1, -2), qs);
    return {dq, dk.to(static_cast<at::ScalarType>(ctx->saved_data["k_type"].toInt())),
            dv.to(static_cast<at::ScalarType>(ctx->saved_data["v_type"].toInt())), torch::Tensor(), torch::Tensor(),
            torch::Tensor()};
  }
};

}  // namespace

double attention_dropout_scale(double p) { return kResolution / (kResolution - drop_threshold(p)); }

torch::Tensor attention_dropout_keep_mask(at::IntArrayRef sizes, double p, uint64_t seed) {
  const uint32_t thr = drop_threshold(p);
  auto m = torch::empty(sizes, torch::kBool);
  bool* d = m.data_ptr<bool>();
  const int64_t n = m.numel();
  at::parallel_for(0, n, 32768, [&](int64_t a, int64_t b) {
    for (int64_t i = a; i < b; ++i) d[i] = kept(seed, static_cast<uint64_t>(i), thr);
  });
  return m;
}

uint64_t next_cpu_dropout_seed() {
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get<at::CPUGeneratorImpl>()->random64();
}

torch::Tensor attention_dropout_cpu(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                    const torch::Tensor& key_mask, double p, uint64_t seed) {
  if (!q.device().is_cpu() || !k.device().is_cpu() || !v.device().is_cpu())
    throw std::invalid_argument("attention_dropout_cpu: CPU tensors only");
  if (q.dim() != 4 || k.dim() != 4 || v.dim() != 4)
    throw std::invalid_argument("attention_dropout_cpu: q, k, v must be [B, heads, L, d]");
  // Under autocast the inputs come as the projections left them (bf16); otherwise q's dtype.
  auto type = q.scalar_type();
  if (at::autocast::is_autocast_enabled(at::kCPU) && at::isFloatingType(type))
    type = at::autocast::get_autocast_dtype(at::kCPU);
  // (An optional, not an undefined tensor: autograd functions take no undefined inputs.)
  std::optional<torch::Tensor> mask;
  if (key_mask.defined()) mask = key_mask;
  return AttentionDropout::apply(q.to(type), k, v, mask, p, static_cast<int64_t>(seed));
}

}  // namespace genemask::model
