#include "model/attention_cpu.hpp"

#include "model/runtime.hpp"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <ATen/OpMathType.h>
#include <ATen/autocast_mode.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <mutex>
#include <stdexcept>
#include <vector>

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

// ---- Row kernels on fp32 buffers: built for x86-64-v4 (AVX-512), v3 (AVX2) and the
// baseline, the best one chosen at load time (GCC's target_clones); the file is compiled with
// -fopenmp-simd for the reductions' pragmas and -fno-trapping-math, without which GCC keeps
// the selects below (the clamps, a masked key's 0) as branches where AVX2 has no masked
// operations, and the v3 clone of the exp loops stayed scalar (objdump: no ymm register).
// Everything a row of scores needs: widen bf16, mask, max, exp and sum, the dropout factors,
// the softmax backward, narrow to bf16.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define GENEMASK_ROW_KERNEL __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define GENEMASK_ROW_KERNEL
#endif

/// e^x in fp32 (Cephes' expf: x = n ln2 + r with |r| <= ln2 / 2, a degree-6 polynomial in r;
/// within 2 ulp), exactly 0 below -87.34 (so a masked key's -inf gives 0). Branch-free, so
/// that the loops calling it vectorise.
inline float exp_f32(float x) {
  const bool under = x < -87.33654475f;
  x = x < -87.33654475f ? -87.33654475f : x;
  x = x > 88.37626266f ? 88.37626266f : x;
  const float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;  // round(x log2 e)
  const float r = x - n * 0.693359375f + n * 2.12194440e-4f;
  float y = 1.9875691500e-4f;
  y = y * r + 1.3981999507e-3f;
  y = y * r + 8.3334519073e-3f;
  y = y * r + 4.1665795894e-2f;
  y = y * r + 1.6666665459e-1f;
  y = y * r + 5.0000001201e-1f;
  y = y * r * r + r + 1.0f;
  const float pow2 = __builtin_bit_cast(float, (static_cast<int32_t>(n) + 127) << 23);
  return under ? 0.0f : y * pow2;
}

GENEMASK_ROW_KERNEL void f32_from_bf16(const uint16_t* in, float* out, int64_t n) {
  for (int64_t j = 0; j < n; ++j) out[j] = __builtin_bit_cast(float, static_cast<uint32_t>(in[j]) << 16);
}
/// Rounds to nearest even, as c10::BFloat16 does for finite values (these are all finite).
GENEMASK_ROW_KERNEL void f32_to_bf16(const float* in, uint16_t* out, int64_t n) {
  for (int64_t j = 0; j < n; ++j) {
    const uint32_t b = __builtin_bit_cast(uint32_t, in[j]);
    out[j] = static_cast<uint16_t>((b + 0x7FFFu + ((b >> 16) & 1u)) >> 16);
  }
}
/// x += bias (0 or -inf per key; nothing when bias is null); returns max(x).
GENEMASK_ROW_KERNEL float f32_add_max(float* x, const float* bias, int64_t n) {
  float m = -std::numeric_limits<float>::infinity();
  if (bias) {
#pragma omp simd reduction(max : m)
    for (int64_t j = 0; j < n; ++j) {
      x[j] += bias[j];
      m = x[j] > m ? x[j] : m;
    }
  } else {
#pragma omp simd reduction(max : m)
    for (int64_t j = 0; j < n; ++j) m = x[j] > m ? x[j] : m;
  }
  return m;
}
/// x = e^(x - shift); returns the sum.
GENEMASK_ROW_KERNEL float f32_exp_sum(float* x, float shift, int64_t n) {
  float s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t j = 0; j < n; ++j) {
    x[j] = exp_f32(x[j] - shift);
    s += x[j];
  }
  return s;
}
/// f[j] = factor where element base + j is kept (kept()), else 0 (as a product, so that it vectorises).
GENEMASK_ROW_KERNEL void f32_keep_factors(uint64_t seed, uint64_t base, uint32_t thr, float factor, float* f,
                                          int64_t n) {
  for (int64_t j = 0; j < n; ++j)
    f[j] = static_cast<float>(static_cast<int32_t>(kept(seed, base + static_cast<uint64_t>(j), thr))) * factor;
}
/// out = x * a, times f where given.
GENEMASK_ROW_KERNEL void f32_scale(const float* x, float a, const float* f, float* out, int64_t n) {
  if (f) {
    for (int64_t j = 0; j < n; ++j) out[j] = x[j] * a * f[j];
  } else {
    for (int64_t j = 0; j < n; ++j) out[j] = x[j] * a;
  }
}
/// g *= f where given; returns sum(g * p).
GENEMASK_ROW_KERNEL float f32_grad_dot(float* g, const float* f, const float* p, int64_t n) {
  float s = 0;
  if (f) {
#pragma omp simd reduction(+ : s)
    for (int64_t j = 0; j < n; ++j) {
      g[j] *= f[j];
      s += g[j] * p[j];
    }
  } else {
#pragma omp simd reduction(+ : s)
    for (int64_t j = 0; j < n; ++j) s += g[j] * p[j];
  }
  return s;
}
/// out = p * (g - dot): the softmax's backward.
GENEMASK_ROW_KERNEL void f32_softmax_grad(const float* p, const float* g, float dot, float* out, int64_t n) {
  for (int64_t j = 0; j < n; ++j) out[j] = p[j] * (g[j] - dot);
}

/// The row operations per dtype: fp32 and bf16 through the kernels above (fp32 buffers),
/// others (double for the tests, Half) in plain loops in their accumulation type.
template <typename T>
struct Rows {
  using acc_t = at::opmath_type<T>;
  static void load(const T* in, acc_t* out, int64_t n) {
    for (int64_t j = 0; j < n; ++j) out[j] = static_cast<acc_t>(in[j]);
  }
  static void store(const acc_t* in, T* out, int64_t n) {
    for (int64_t j = 0; j < n; ++j) out[j] = static_cast<T>(in[j]);
  }
  static acc_t add_max(acc_t* x, const acc_t* bias, int64_t n) {
    acc_t m = -std::numeric_limits<acc_t>::infinity();
    for (int64_t j = 0; j < n; ++j) m = std::max(m, x[j] += bias ? bias[j] : acc_t(0));
    return m;
  }
  static acc_t exp_sum(acc_t* x, acc_t shift, int64_t n) {
    acc_t s = 0;
    for (int64_t j = 0; j < n; ++j) s += (x[j] = std::exp(x[j] - shift));
    return s;
  }
  static void keep_factors(uint64_t seed, uint64_t base, uint32_t thr, acc_t factor, acc_t* f, int64_t n) {
    for (int64_t j = 0; j < n; ++j) f[j] = kept(seed, base + static_cast<uint64_t>(j), thr) ? factor : acc_t(0);
  }
  static void scale(const acc_t* x, acc_t a, const acc_t* f, acc_t* out, int64_t n) {
    for (int64_t j = 0; j < n; ++j) out[j] = x[j] * a * (f ? f[j] : acc_t(1));
  }
  static acc_t grad_dot(acc_t* g, const acc_t* f, const acc_t* p, int64_t n) {
    acc_t s = 0;
    for (int64_t j = 0; j < n; ++j) s += (g[j] *= f ? f[j] : acc_t(1)) * p[j];
    return s;
  }
  static void softmax_grad(const acc_t* p, const acc_t* g, acc_t dot, acc_t* out, int64_t n) {
    for (int64_t j = 0; j < n; ++j) out[j] = p[j] * (g[j] - dot);
  }
};
template <>
struct Rows<float> {
  static void load(const float* in, float* out, int64_t n) { std::memcpy(out, in, sizeof(float) * n); }
  static void store(const float* in, float* out, int64_t n) { std::memcpy(out, in, sizeof(float) * n); }
  static float add_max(float* x, const float* bias, int64_t n) { return f32_add_max(x, bias, n); }
  static float exp_sum(float* x, float shift, int64_t n) { return f32_exp_sum(x, shift, n); }
  static void keep_factors(uint64_t seed, uint64_t base, uint32_t thr, float factor, float* f, int64_t n) {
    f32_keep_factors(seed, base, thr, factor, f, n);
  }
  static void scale(const float* x, float a, const float* f, float* out, int64_t n) { f32_scale(x, a, f, out, n); }
  static float grad_dot(float* g, const float* f, const float* p, int64_t n) { return f32_grad_dot(g, f, p, n); }
  static void softmax_grad(const float* p, const float* g, float dot, float* out, int64_t n) {
    f32_softmax_grad(p, g, dot, out, n);
  }
};
template <>
struct Rows<c10::BFloat16> : Rows<float> {
  static void load(const c10::BFloat16* in, float* out, int64_t n) {
    f32_from_bf16(reinterpret_cast<const uint16_t*>(in), out, n);
  }
  static void store(const float* in, c10::BFloat16* out, int64_t n) {
    f32_to_bf16(in, reinterpret_cast<uint16_t*>(out), n);
  }
};

/// bias[j] = 0 for the keys of batch row b that are attended to, -inf for the others.
template <typename acc_t>
void key_bias(const torch::Tensor& mask, int64_t b, std::vector<acc_t>& bias) {
  const int64_t L = static_cast<int64_t>(bias.size());
  const bool* m = mask.data_ptr<bool>() + b * L;
  for (int64_t j = 0; j < L; ++j) bias[static_cast<size_t>(j)] = m[j] ? acc_t(0) : -std::numeric_limits<acc_t>::infinity();
}

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

/// (Batch row, head) pairs per task: as many as keep a task's [G, Lq, L] scores within
/// kChunkElements (in cache), and at most an eighth of them, so that there are tasks for
/// every thread. Never from the thread count: the batched products, and so the results, are
/// the same at any thread count.
constexpr int64_t kChunkElements = int64_t{1} << 16;
int64_t heads_per_task(int64_t heads, int64_t Lq, int64_t L) {
  const int64_t by_cache = kChunkElements / std::max<int64_t>(1, Lq * L);
  return std::max<int64_t>(1, std::min(by_cache, (heads + 7) / 8));
}

/// Packed rows: the heads of one segment per task, as many as keep a task's [G, len, len]
/// scores within kSegmentChunkElements (4 MiB in fp32), all of them for segments of up to 362
/// positions at 8 heads. Each product is a oneDNN call, and in bf16 a call costs about 20 us
/// whatever its size (fp32's BLAS about 2; measured on an AMX Xeon: a [1, 100, 32] x [1, 32,
/// 100] product 25 us, eight heads at once 38 us), so one head per call left the packed bf16
/// logo step a third slower (docs/benchmarks.md). The segments give the threads their tasks.
/// Never from the thread count, as above.
constexpr int64_t kSegmentChunkElements = int64_t{1} << 20;
int64_t heads_per_segment_task(int64_t heads, int64_t len) {
  return std::max<int64_t>(1, std::min(heads, kSegmentChunkElements / std::max<int64_t>(1, len * len)));
}

/// One task: n consecutive (batch row, head) pairs from bh, their queries q0 .. q0 + ql and
/// keys k0 .. k0 + kl. Unpacked, every task spans all queries and keys; packed, a task is one
/// segment (a sample) of one row and up to G of its heads.
struct Task {
  int64_t bh, n, q0, ql, k0, kl;
};
struct Tasks {
  std::vector<Task> list;
  std::vector<size_t> order;  // the tasks costliest first (their score elements), the order threads take them in
  int64_t scores = 0;  // the most score elements (n x ql x kl) of any task: each thread's buffers
  int64_t rows = 0;    // the most query or key rows (n x max(ql, kl)) of any task
};

/// The tasks costliest first: threads take them in that order, so that a long segment taken
/// last does not leave the other threads waiting (which thread takes a task never changes
/// what it computes).
void order_by_cost(Tasks& t) {
  t.order.resize(t.list.size());
  for (size_t i = 0; i < t.order.size(); ++i) t.order[i] = i;
  std::stable_sort(t.order.begin(), t.order.end(), [&](size_t a, size_t b) {
    const Task &x = t.list[a], &y = t.list[b];
    return x.n * x.ql * x.kl > y.n * y.ql * y.kl;
  });
}

/// The tasks of B x H (batch row, head) pairs of Lq queries and L keys: unpacked, chunks of
/// heads_per_task pairs; packed (`cu`: segment boundaries over the B x L flat positions, every
/// row's start among them), per row, per segment, chunks of that row's heads.
Tasks make_tasks(int64_t B, int64_t H, int64_t Lq, int64_t L, const torch::Tensor& cu) {
  Tasks t;
  auto add = [&](const Task& k) {
    t.list.push_back(k);
    t.scores = std::max(t.scores, k.n * k.ql * k.kl);
    t.rows = std::max(t.rows, k.n * std::max(k.ql, k.kl));
  };
  if (!cu.defined()) {
    const int64_t BH = B * H, G = heads_per_task(BH, Lq, L);
    for (int64_t h0 = 0; h0 < BH; h0 += G) add({h0, std::min(G, BH - h0), 0, Lq, 0, L});
    order_by_cost(t);
    return t;
  }
  const auto c = cu.to(torch::kLong).contiguous();
  const int64_t* b = c.data_ptr<int64_t>();
  const int64_t S = c.numel() - 1;
  if (S < 1 || b[0] != 0 || b[S] != B * L || Lq != L)
    throw std::invalid_argument("attention_dropout_cpu: segment boundaries must run from 0 to B x L (self-attention)");
  for (int64_t s = 0; s < S; ++s) {
    const int64_t start = b[s], end = b[s + 1], row = start / L;
    if (end == start) continue;  // zero-length (a fixed-shape layout pads its boundaries so)
    if (end < start || (end - 1) / L != row)
      throw std::invalid_argument("attention_dropout_cpu: segment boundaries must not decrease, and a segment must lie within one row");
    const int64_t len = end - start, G = heads_per_segment_task(H, len);
    for (int64_t h0 = 0; h0 < H; h0 += G) add({row * H + h0, std::min(G, H - h0), start % L, len, start % L, len});
  }
  order_by_cost(t);
  return t;
}

/// Runs the tasks on LibTorch's intra-op threads (at most one thread per task): each thread
/// calls `per_thread(take)` once, which makes its buffers and then runs take()'s tasks, the
/// next one in `order` at each call, until take() gives nullptr. Inside, LibTorch's own
/// operations (and oneDNN's products) run on the calling thread. What a task computes never
/// depends on the thread that runs it, so the results are the same at any thread count.
/// (at::parallel_for is an inline template: parallel only in a file compiled with OpenMP,
/// as this one is; src/model/CMakeLists.txt.)
template <typename PerThread>
void run_tasks(const Tasks& tasks, const PerThread& per_thread) {
  const auto n = static_cast<int64_t>(tasks.list.size());
  std::atomic<int64_t> next{0};
  at::parallel_for(0, std::min<int64_t>(n, at::get_num_threads()), 1, [&](int64_t, int64_t) {
    per_thread([&]() -> const Task* {
      const int64_t i = next.fetch_add(1);
      return i < n ? &tasks.list[tasks.order[static_cast<size_t>(i)]] : nullptr;
    });
  });
}

/// A [n, rows, cols] view of the front of a flat buffer.
torch::Tensor front(const torch::Tensor& buf, int64_t n, int64_t rows, int64_t cols) {
  return buf.narrow(0, 0, n * rows * cols).view({n, rows, cols});
}

/// out = a @ b into a view of a larger tensor: directly where the view is contiguous, else
/// through `tmp` (oneDNN writes contiguous outputs).
void bmm_into(torch::Tensor out, const torch::Tensor& a, const torch::Tensor& b, const torch::Tensor& tmp) {
  if (out.is_contiguous()) {
    at::bmm_out(out, a, b);
    return;
  }
  auto t = front(tmp, out.size(0), out.size(1), out.size(2));
  at::bmm_out(t, a, b);
  out.copy_(t);
}

/// A few (batch row, head) pairs at a time, each thread with its own [G, Lq, L] buffers, so
/// that the scores never leave the cache: S = (q / sqrt(d)) k^T by oneDNN in the inputs'
/// dtype (bf16 under autocast), the softmax, the dropout and (backward) the softmax's
/// gradient in fp32 row by row, the products with v (and, backward, with dO, k, q) by oneDNN
/// again. Saved for the backward: q (scaled), k, v and each row's log-sum-exp; the scores and
/// probabilities are computed again there, as flash attention does, so no [B, h, Lq, L]
/// tensor is kept. The same result at any thread count (heads_per_task). Packed (segment
/// boundaries given), each segment's queries attend to its own keys only, and the work is
/// the segments' sum of squared lengths. The keep decision of the probability of query i and
/// key j of pair bh is element (bh Lq + i) L + j either way: that of the [B, h, Lq, L] whole.
struct AttentionDropout : torch::autograd::Function<AttentionDropout> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& q_in, const torch::Tensor& k_in,
                               const torch::Tensor& v_in, const std::optional<torch::Tensor>& key_mask, double p,
                               int64_t seed_bits, const std::optional<torch::Tensor>& segments) {
    NoAutocast no_autocast;  // the dtypes are chosen here
    torch::NoGradGuard no_grad;
    const auto type = q_in.scalar_type();
    const double scale = 1.0 / std::sqrt(static_cast<double>(q_in.size(-1)));
    auto qs = (q_in.detach() * scale).contiguous();
    auto k = k_in.detach().to(type).contiguous(), v = v_in.detach().to(type).contiguous();
    const int64_t B = qs.size(0), H = qs.size(1), Lq = qs.size(2), L = k.size(2), BH = B * H, dv = v.size(3);
    auto out = at::empty({B, H, Lq, dv}, qs.options());
    auto lse = at::empty({B, H, Lq}, qs.options().dtype(at::toOpMathType(type)));
    torch::Tensor mask;
    if (key_mask) mask = key_mask->reshape({B, L}).to(torch::kBool).contiguous();
    const Tasks tasks = make_tasks(B, H, Lq, L, segments ? *segments : torch::Tensor());
    const uint64_t seed = static_cast<uint64_t>(seed_bits);
    const uint32_t thr = drop_threshold(p);
    auto q3 = qs.view({BH, Lq, -1}), k3 = k.view({BH, L, -1}), v3 = v.view({BH, L, -1}),
         out3 = out.view({BH, Lq, -1});
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, type, "attention_dropout_forward", [&] {
      using R = Rows<scalar_t>;
      using acc_t = at::opmath_type<scalar_t>;
      const auto keep_scale = static_cast<acc_t>(attention_dropout_scale(p));
      run_tasks(tasks, [&](const auto& take) {
        auto sbuf = at::empty({tasks.scores}, qs.options()), pbuf = at::empty({tasks.scores}, qs.options());
        auto obuf = at::empty({tasks.rows * dv}, qs.options());
        std::vector<acc_t> x(static_cast<size_t>(L)), f(static_cast<size_t>(L)), bias(static_cast<size_t>(L));
        int64_t bias_of = -1;
        for (const Task* next = take(); next; next = take()) {
          const Task& t = *next;
          auto s = front(sbuf, t.n, t.ql, t.kl), probs = front(pbuf, t.n, t.ql, t.kl);
          auto kc = k3.narrow(0, t.bh, t.n).narrow(1, t.k0, t.kl);
          at::bmm_out(s, q3.narrow(0, t.bh, t.n).narrow(1, t.q0, t.ql), kc.transpose(1, 2));
          const scalar_t* sp = s.data_ptr<scalar_t>();
          scalar_t* pp = probs.data_ptr<scalar_t>();
          for (int64_t r = 0; r < t.n * t.ql; ++r) {
            const int64_t bh = t.bh + r / t.ql, row = bh * Lq + t.q0 + r % t.ql, b = bh / H;  // row of [B, H, Lq]
            if (mask.defined() && bias_of != b) key_bias(mask, bias_of = b, bias);
            R::load(sp + r * t.kl, x.data(), t.kl);
            const acc_t mx = R::add_max(x.data(), mask.defined() ? bias.data() : nullptr, t.kl);
            const acc_t sum = R::exp_sum(x.data(), mx, t.kl);
            lse.data_ptr<acc_t>()[row] = mx + std::log(sum);
            if (thr > 0) R::keep_factors(seed, static_cast<uint64_t>(row * L + t.k0), thr, keep_scale, f.data(), t.kl);
            R::scale(x.data(), acc_t(1) / sum, thr > 0 ? f.data() : nullptr, x.data(), t.kl);
            R::store(x.data(), pp + r * t.kl, t.kl);
          }
          bmm_into(out3.narrow(0, t.bh, t.n).narrow(1, t.q0, t.ql), probs, v3.narrow(0, t.bh, t.n).narrow(1, t.k0, t.kl),
                   obuf);
        }
      });
    });
    ctx->save_for_backward({qs, k, v, lse});
    ctx->saved_data["mask"] = mask.defined() ? c10::IValue(mask) : c10::IValue();
    ctx->saved_data["segments"] = segments ? c10::IValue(*segments) : c10::IValue();
    ctx->saved_data["p"] = p;
    ctx->saved_data["seed"] = seed_bits;
    ctx->saved_data["scale"] = scale;
    ctx->saved_data["k_type"] = static_cast<int64_t>(k_in.scalar_type());
    ctx->saved_data["v_type"] = static_cast<int64_t>(v_in.scalar_type());
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    NoAutocast no_autocast;
    torch::NoGradGuard no_grad;
    auto saved = ctx->get_saved_variables();
    const auto &qs = saved[0], &k = saved[1], &v = saved[2], &lse = saved[3];
    torch::Tensor mask, segments;
    if (!ctx->saved_data["mask"].isNone()) mask = ctx->saved_data["mask"].toTensor();
    if (!ctx->saved_data["segments"].isNone()) segments = ctx->saved_data["segments"].toTensor();
    const double p = ctx->saved_data["p"].toDouble(), scale = ctx->saved_data["scale"].toDouble();
    const uint64_t seed = static_cast<uint64_t>(ctx->saved_data["seed"].toInt());
    const auto type = qs.scalar_type();
    auto dout = grads[0].to(type).contiguous();
    const int64_t B = qs.size(0), H = qs.size(1), Lq = qs.size(2), L = k.size(2), BH = B * H;
    const int64_t d = std::max(qs.size(3), v.size(3));
    auto dq = at::empty_like(qs), dk = at::empty_like(k), dv = at::empty_like(v);
    const uint32_t thr = drop_threshold(p);
    const Tasks tasks = make_tasks(B, H, Lq, L, segments);
    auto q3 = qs.view({BH, Lq, -1}), k3 = k.view({BH, L, -1}), v3 = v.view({BH, L, -1}),
         g3 = dout.view({BH, Lq, -1}), dq3 = dq.view({BH, Lq, -1}), dk3 = dk.view({BH, L, -1}),
         dv3 = dv.view({BH, L, -1});
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, type, "attention_dropout_backward", [&] {
      using R = Rows<scalar_t>;
      using acc_t = at::opmath_type<scalar_t>;
      const auto keep_scale = static_cast<acc_t>(attention_dropout_scale(p));
      run_tasks(tasks, [&](const auto& take) {
        auto sbuf = at::empty({tasks.scores}, qs.options());  // the scores, then dP
        auto pbuf = at::empty({tasks.scores}, qs.options());  // the dropped probabilities, then dS
        auto obuf = at::empty({tasks.rows * d}, qs.options());
        const auto cap = static_cast<size_t>(tasks.scores);
        std::vector<acc_t> prob(cap), f(thr > 0 ? cap : 0), g(static_cast<size_t>(L)), bias(static_cast<size_t>(L));
        int64_t bias_of = -1;
        for (const Task* next = take(); next; next = take()) {
          const Task& t = *next;
          auto s = front(sbuf, t.n, t.ql, t.kl), pd = front(pbuf, t.n, t.ql, t.kl);
          auto qc = q3.narrow(0, t.bh, t.n).narrow(1, t.q0, t.ql), kc = k3.narrow(0, t.bh, t.n).narrow(1, t.k0, t.kl),
               vc = v3.narrow(0, t.bh, t.n).narrow(1, t.k0, t.kl), gc = g3.narrow(0, t.bh, t.n).narrow(1, t.q0, t.ql);
          at::bmm_out(s, qc, kc.transpose(1, 2));
          const scalar_t* sp = s.data_ptr<scalar_t>();
          scalar_t* pp = pd.data_ptr<scalar_t>();
          for (int64_t r = 0; r < t.n * t.ql; ++r) {  // the probabilities again, from the saved log-sum-exp
            const int64_t bh = t.bh + r / t.ql, row = bh * Lq + t.q0 + r % t.ql, b = bh / H;
            if (mask.defined() && bias_of != b) key_bias(mask, bias_of = b, bias);
            acc_t* pr = prob.data() + r * t.kl;
            R::load(sp + r * t.kl, pr, t.kl);
            if (mask.defined()) R::add_max(pr, bias.data(), t.kl);  // (the max itself is not needed: lse is)
            R::exp_sum(pr, lse.data_ptr<acc_t>()[row], t.kl);
            if (thr > 0) {
              acc_t* fr = f.data() + r * t.kl;
              R::keep_factors(seed, static_cast<uint64_t>(row * L + t.k0), thr, keep_scale, fr, t.kl);
              R::scale(pr, acc_t(1), fr, g.data(), t.kl);
              R::store(g.data(), pp + r * t.kl, t.kl);
            } else {
              R::store(pr, pp + r * t.kl, t.kl);
            }
          }
          bmm_into(dv3.narrow(0, t.bh, t.n).narrow(1, t.k0, t.kl), pd.transpose(1, 2), gc, obuf);
          at::bmm_out(s, gc, vc.transpose(1, 2));  // the gradient of the dropped probabilities
          for (int64_t r = 0; r < t.n * t.ql; ++r) {
            const acc_t* pr = prob.data() + r * t.kl;
            R::load(sp + r * t.kl, g.data(), t.kl);
            const acc_t dot = R::grad_dot(g.data(), thr > 0 ? f.data() + r * t.kl : nullptr, pr, t.kl);
            R::softmax_grad(pr, g.data(), dot, g.data(), t.kl);
            R::store(g.data(), pp + r * t.kl, t.kl);
          }
          auto dqc = dq3.narrow(0, t.bh, t.n).narrow(1, t.q0, t.ql);
          bmm_into(dqc, pd, kc, obuf);
          dqc.mul_(scale);
          bmm_into(dk3.narrow(0, t.bh, t.n).narrow(1, t.k0, t.kl), pd.transpose(1, 2), qc, obuf);
        }
      });
    });
    return {dq,
            dk.to(static_cast<at::ScalarType>(ctx->saved_data["k_type"].toInt())),
            dv.to(static_cast<at::ScalarType>(ctx->saved_data["v_type"].toInt())),
            torch::Tensor(),
            torch::Tensor(),
            torch::Tensor(),
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

int attention_cpu_threads_for(int64_t tasks) {
  Tasks t;
  for (int64_t i = 0; i < tasks; ++i) t.list.push_back({i, 1, 0, 1 + i % 3, 0, 1});
  order_by_cost(t);
  std::atomic<int> threads{0};
  std::vector<std::atomic<int>> runs(static_cast<size_t>(tasks));
  run_tasks(t, [&](const auto& take) {
    threads.fetch_add(1);
    for (const Task* next = take(); next; next = take()) runs[static_cast<size_t>(next->bh)].fetch_add(1);
  });
  for (const auto& r : runs)
    if (r.load() != 1) return -1;
  return threads.load();
}

uint64_t next_cpu_dropout_seed() {
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get<at::CPUGeneratorImpl>()->random64();
}

torch::Tensor attention_dropout_cpu(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                    const torch::Tensor& key_mask, double p, uint64_t seed,
                                    const torch::Tensor& segments) {
  if (!q.device().is_cpu() || !k.device().is_cpu() || !v.device().is_cpu())
    throw std::invalid_argument("attention_dropout_cpu: CPU tensors only");
  if (q.dim() != 4 || k.dim() != 4 || v.dim() != 4)
    throw std::invalid_argument("attention_dropout_cpu: q, k, v must be [B, heads, L, d]");
  // Under autocast the inputs come as the projections left them (bf16); otherwise q's dtype.
  auto type = q.scalar_type();
  if (at::autocast::is_autocast_enabled(at::kCPU) && at::isFloatingType(type))
    type = at::autocast::get_autocast_dtype(at::kCPU);
  // (An optional, not an undefined tensor: autograd functions take no undefined inputs.)
  std::optional<torch::Tensor> mask, seg;
  if (key_mask.defined()) mask = key_mask;
  if (segments.defined()) {
    if (key_mask.defined()) throw std::invalid_argument("attention_dropout_cpu: a key mask or segments, not both");
    seg = segments.to(torch::kCPU, torch::kLong).contiguous();
  }
  return AttentionDropout::apply(q.to(type), k, v, mask, p, static_cast<int64_t>(seed), seg);
}

}  // namespace genemask::model
