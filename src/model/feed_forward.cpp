// The fused feed-forward's autograd node on a CUDA LibTorch (feed_forward_none.cpp
// elsewhere); the kernels are in cuda/gemm_gelu.cu.
#include "model/feed_forward.hpp"

#include <ATen/autocast_mode.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <atomic>
#include <cstdio>
#include <mutex>
#include <optional>
#include <stdexcept>

#include "model/cuda/gemm_gelu_kernels.hpp"
#include "model/cuda/launch.hpp"
#include "model/linear_bgrad.hpp"
#include "model/weight_copies.hpp"

namespace genemask::model {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

std::atomic<int64_t> g_forward{0}, g_backward{0};

/// A device buffer of `bytes` for a kernel's workspace (the caching allocator's: no
/// synchronisation, and inside a CUDA graph's capture its pool).
torch::Tensor workspace(size_t bytes, const torch::Device& device) {
  return torch::empty({static_cast<int64_t>(bytes)}, torch::TensorOptions().dtype(torch::kUInt8).device(device));
}

int sm_count() { return at::cuda::getCurrentDeviceProperties()->multiProcessorCount; }

/// t as the kernels read it: contiguous, and 16-byte aligned (TMA's rule; a view into another
/// tensor may not be), copied where it is not.
torch::Tensor for_kernel(const torch::Tensor& t) {
  auto c = t.contiguous();
  return cuda::aligned16(c.data_ptr()) ? c : c.clone();
}

struct FeedForward : torch::autograd::Function<FeedForward> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& w1,
                               const torch::Tensor& b1, const torch::Tensor& w2, const torch::Tensor& b2,
                               const std::optional<torch::Tensor>& w1_low, const std::optional<torch::Tensor>& w2_low,
                               const std::optional<torch::Tensor>& b2_low) {
    const c10::cuda::CUDAGuard on_device(x.device());
    const auto xb = for_kernel(x.to(torch::kBFloat16));
    const auto w1b = for_kernel(bf16_operand(w1, w1_low.value_or(torch::Tensor())));
    const auto w2b = for_kernel(bf16_operand(w2, w2_low.value_or(torch::Tensor())));
    const auto b2b = bf16_operand(b2, b2_low.value_or(torch::Tensor()));
    const auto b1f = for_kernel(b1);
    const int64_t K = xb.size(-1), N = w1b.size(0), M = xb.numel() / K;
    auto sizes = xb.sizes().vec();
    sizes.back() = N;
    auto y = torch::empty(sizes, xb.options()), z = torch::empty(sizes, xb.options());
    const int sms = sm_count();
    auto ws = workspace(cuda::gemm_bias_gelu_workspace(M, N, K, sms), x.device());
    // fused_feed_forward_takes held (the shapes); every operand is aligned, y and z fresh.
    if (!cuda::gemm_bias_gelu(xb.data_ptr(), w1b.data_ptr(), b1f.data_ptr<float>(), y.data_ptr(), z.data_ptr(), M, N,
                              K, ws.numel() ? ws.data_ptr() : nullptr, sms, c10::cuda::getCurrentCUDAStream()))
      throw std::runtime_error("fused feed-forward: the CUTLASS product refused [" + std::to_string(M) + ", " +
                               std::to_string(K) + "] x [" + std::to_string(N) + ", " + std::to_string(K) +
                               "]ᵀ (GENEMASK_FUSED without gemm-gelu runs the separate kernels)");
    cuda::check_launch("fused feed-forward", "forward product");
    // The output product as the eager path makes it (at::linear on bf16 operands).
    auto out = at::linear(y, w2b, b2b);
    ctx->save_for_backward({xb, w1b, w2b, y, z});
    ctx->saved_data["x_dtype"] = static_cast<int64_t>(x.scalar_type());
    g_forward.fetch_add(1, std::memory_order_relaxed);
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &xb = saved[0], &w1b = saved[1], &w2b = saved[2], &y = saved[3], &z = saved[4];
    const c10::cuda::CUDAGuard on_device(xb.device());
    const int64_t K = xb.size(-1), N = w1b.size(0), H = w2b.size(0), M = xb.numel() / K;
    const auto dout = for_kernel(grads[0].to(torch::kBFloat16)).view({M, H});
    torch::Tensor dx, dw1, db1, dw2, db2;
    if (ctx->needs_input_grad(4)) db2 = column_sums(dout);
    if (ctx->needs_input_grad(3)) dw2 = at::mm(dout.t(), y.view({M, N})).to(torch::kFloat32);
    if (ctx->needs_input_grad(0) || ctx->needs_input_grad(1) || ctx->needs_input_grad(2)) {
      auto dz = torch::empty({M, N}, xb.options());
      auto dbias = torch::empty({N}, xb.options().dtype(torch::kFloat32));
      const int sms = sm_count();
      auto ws = workspace(cuda::gemm_dgelu_workspace(M, N, H, sms), xb.device());
      if (!cuda::gemm_dgelu(dout.data_ptr(), w2b.data_ptr(), z.data_ptr(), dz.data_ptr(), dbias.data_ptr<float>(), M,
                            N, H, ws.numel() ? ws.data_ptr() : nullptr, sms, c10::cuda::getCurrentCUDAStream()))
        throw std::runtime_error("fused feed-forward: the CUTLASS input-gradient product refused [" +
                                 std::to_string(M) + ", " + std::to_string(H) + "] x [" + std::to_string(H) + ", " +
                                 std::to_string(N) + "]");
      cuda::check_launch("fused feed-forward", "backward product");
      if (ctx->needs_input_grad(2)) db1 = dbias;
      if (ctx->needs_input_grad(1)) dw1 = at::mm(dz.t(), xb.view({M, K})).to(torch::kFloat32);
      if (ctx->needs_input_grad(0)) {
        const auto x_dtype = static_cast<torch::ScalarType>(ctx->saved_data["x_dtype"].toInt());
        dx = at::mm(dz, w1b).view(xb.sizes()).to(x_dtype);
      }
    }
    g_backward.fetch_add(1, std::memory_order_relaxed);
    return {dx, dw1, db1, dw2, db2, torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

bool fp32_on(const torch::Tensor& t, const torch::Device& device, int64_t dim) {
  return t.defined() && t.scalar_type() == torch::kFloat32 && t.device() == device && t.dim() == dim;
}

}  // namespace

bool fused_feed_forward_built() { return cuda::gemm_gelu_built(); }

bool fused_feed_forward_can_implement(int64_t rows, int64_t N, int64_t K, int64_t H) {
  return cuda::gemm_gelu_can_implement(rows, N, K, H);
}

bool fused_feed_forward_runs_on(const torch::Device& device) {
  if (!cuda::gemm_gelu_built() || !device.is_cuda() || !torch::cuda::is_available()) return false;
  const auto* p = at::cuda::getDeviceProperties(device.index() < 0 ? c10::cuda::current_device() : device.index());
  return p->major == 9 && p->minor == 0;
}

bool fused_feed_forward_takes(const torch::Tensor& x, const torch::Tensor& w1, const torch::Tensor& b1,
                              const torch::Tensor& w2, const torch::Tensor& b2) {
  if (!x.defined() || x.dim() < 1 || !fused_feed_forward_runs_on(x.device())) return false;
  if (!at::autocast::is_autocast_enabled(at::kCUDA) || at::autocast::get_autocast_dtype(at::kCUDA) != torch::kBFloat16)
    return false;
  if (x.scalar_type() != torch::kBFloat16 && x.scalar_type() != torch::kFloat32) return false;
  const auto dev = x.device();
  if (!fp32_on(w1, dev, 2) || !fp32_on(b1, dev, 1) || !fp32_on(w2, dev, 2) || !fp32_on(b2, dev, 1)) return false;
  const int64_t K = w1.size(1), N = w1.size(0), H = w2.size(0);
  if (x.size(-1) != K || b1.numel() != N || w2.size(1) != N || b2.numel() != H) return false;
  const int64_t M = K > 0 ? x.numel() / K : 0;
  if (!cuda::gemm_gelu_shape_supported(M, N, K) || !cuda::gemm_gelu_shape_supported(M, N, H)) return false;
  if (!cuda::gemm_gelu_can_implement(M, N, K, H)) {
    static std::once_flag said;
    std::call_once(said, [&] {
      std::fprintf(stderr,
                   "note: gemm-gelu: CUTLASS cannot take the feed-forward's products at %lld rows x %lld -> %lld -> "
                   "%lld; the separate kernels run\n",
                   static_cast<long long>(M), static_cast<long long>(K), static_cast<long long>(N),
                   static_cast<long long>(H));
    });
    return false;
  }
  return true;
}

torch::Tensor fused_feed_forward(const torch::Tensor& x, const torch::Tensor& w1, const torch::Tensor& b1,
                                 const torch::Tensor& w2, const torch::Tensor& b2, const torch::Tensor& w1_low,
                                 const torch::Tensor& w2_low, const torch::Tensor& b2_low) {
  if (!fused_feed_forward_takes(x, w1, b1, w2, b2))
    throw std::invalid_argument("fused feed-forward: inputs it does not take (see fused_feed_forward_takes)");
  auto opt = [](const torch::Tensor& t) { return t.defined() ? std::optional<torch::Tensor>(t) : std::nullopt; };
  return FeedForward::apply(x, w1, b1, w2, b2, opt(w1_low), opt(w2_low), opt(b2_low));
}

FeedForwardCounts fused_feed_forward_counts() {
  return {g_forward.load(std::memory_order_relaxed), g_backward.load(std::memory_order_relaxed)};
}

}  // namespace genemask::model
