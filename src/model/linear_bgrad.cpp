// The fused bias gradient's autograd node on a CUDA LibTorch (linear_bgrad_none.cpp
// elsewhere): the weight's gradient and the bias's in one cuBLASLt product (BGRADB epilogue).
#include "model/linear_bgrad.hpp"
#include "model/weight_copies.hpp"

#include <ATen/autocast_mode.h>
#include <optional>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAStream.h>
#include <cublasLt.h>

#include "model/cuda/column_sum_kernels.hpp"

#include <atomic>
#include <limits>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>

namespace genemask::model {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

std::atomic<int64_t> g_fused{0}, g_fused_bf16{0}, g_fallback{0}, g_column_sums{0}, g_stacked{0};

void check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(std::string("fused bias gradient: cuBLASLt ") + what + " failed (status " +
                             std::to_string(static_cast<int>(s)) + ")");
}

/// The descriptors of one product, destroyed with it.
struct Descriptors {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  Descriptors() = default;
  Descriptors(const Descriptors&) = delete;
  Descriptors& operator=(const Descriptors&) = delete;
  ~Descriptors() {
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};

/// dw [N, K] = dyᵀ·x and db [N] = the sum of dy's rows, from dy [M, N] and x [M, K] (bf16,
/// row-major, contiguous), as one product with the BGRADB epilogue, dw and db of `type`
/// (fp32 or bf16). In cuBLASLt's column-major terms: D (K x N, ld K) = x (K x M, ld K) ·
/// op(dy), dy stored N x M (ld N) and transposed; the bias gradient sums op(dy) over the
/// product's k (= M), one value per column of D (= N). False when cuBLASLt offers no
/// algorithm for it (nothing written). The chosen algorithm is kept per shape and type: the
/// same one every step, so the same sums in the same order.
bool wgrad_bgrad(const torch::Tensor& dy, const torch::Tensor& x, cudaDataType_t type, void* dw, void* db) {
  const int64_t M = dy.size(0), N = dy.size(1), K = x.size(1);
  Descriptors d;
  check(cublasLtMatmulDescCreate(&d.op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "MatmulDescCreate");
  const cublasOperation_t no = CUBLAS_OP_N, yes = CUBLAS_OP_T;
  check(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_TRANSA, &no, sizeof(no)), "TRANSA");
  check(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_TRANSB, &yes, sizeof(yes)), "TRANSB");
  const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BGRADB;
  check(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)), "EPILOGUE");
  check(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &db, sizeof(db)), "BIAS_POINTER");
  check(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &type, sizeof(type)), "BIAS_DATA_TYPE");
  check(cublasLtMatrixLayoutCreate(&d.a, CUDA_R_16BF, static_cast<uint64_t>(K), static_cast<uint64_t>(M), K), "layout A");
  check(cublasLtMatrixLayoutCreate(&d.b, CUDA_R_16BF, static_cast<uint64_t>(N), static_cast<uint64_t>(M), N), "layout B");
  check(cublasLtMatrixLayoutCreate(&d.c, type, static_cast<uint64_t>(K), static_cast<uint64_t>(N), K), "layout C");

  cublasLtHandle_t handle = at::cuda::getCurrentCUDABlasLtHandle();
  const size_t workspace_size = at::cuda::getCUDABlasLtWorkspaceSize();
  static std::mutex mutex;
  static std::map<std::tuple<int64_t, int64_t, int64_t, int, int>, std::pair<bool, cublasLtMatmulHeuristicResult_t>>
      algos;
  cublasLtMatmulHeuristicResult_t result{};
  {
    std::lock_guard<std::mutex> lock(mutex);
    const auto key = std::make_tuple(M, N, K, static_cast<int>(dy.get_device()), static_cast<int>(type));
    auto it = algos.find(key);
    if (it == algos.end()) {
      check(cublasLtMatmulPreferenceCreate(&d.pref), "PreferenceCreate");
      check(cublasLtMatmulPreferenceSetAttribute(d.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_size,
                                                 sizeof(workspace_size)),
            "MAX_WORKSPACE_BYTES");
      int found = 0;
      const cublasStatus_t s =
          cublasLtMatmulAlgoGetHeuristic(handle, d.op, d.a, d.b, d.c, d.c, d.pref, 1, &result, &found);
      if (algos.size() >= 4096) algos.clear();  // bounded: the MLM head's row count varies per batch
      it = algos.emplace(key, std::make_pair(s == CUBLAS_STATUS_SUCCESS && found > 0, result)).first;
    }
    if (!it->second.first) return false;
    result = it->second.second;
  }
  const float alpha = 1.f, beta = 0.f;
  check(cublasLtMatmul(handle, d.op, &alpha, x.data_ptr(), d.a, dy.data_ptr(), d.b, &beta, dw, d.c, dw, d.c,
                       &result.algo, at::cuda::getCUDABlasLtWorkspace(), result.workspaceSize,
                       c10::cuda::getCurrentCUDAStream()),
        "Matmul");
  return true;
}

struct LinearBgrad : torch::autograd::Function<LinearBgrad> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& weight,
                               const torch::Tensor& bias, int64_t how, const std::optional<torch::Tensor>& weight_low,
                               const std::optional<torch::Tensor>& bias_low) {
    // The operands autocast would make (or their copies kept between steps), and its product
    // (the same kernel as at::linear's).
    const auto xb = x.to(torch::kBFloat16).contiguous();
    const auto wb = bf16_operand(weight, weight_low.value_or(torch::Tensor()));
    const auto bb = bf16_operand(bias, bias_low.value_or(torch::Tensor()));
    auto y = at::linear(xb, wb, bb);
    ctx->save_for_backward({xb, wb});
    ctx->saved_data["x_dtype"] = static_cast<int64_t>(x.scalar_type());
    ctx->saved_data["how"] = how;
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &xb = saved[0], &wb = saved[1];
    const int64_t K = xb.size(-1), N = wb.size(0), M = xb.numel() / K;
    const auto dy = grads[0].to(torch::kBFloat16).contiguous().view({M, N});
    torch::Tensor dx, dw, db;
    if (ctx->needs_input_grad(0)) {
      const auto x_dtype = static_cast<torch::ScalarType>(ctx->saved_data["x_dtype"].toInt());
      dx = at::mm(dy, wb).view(xb.sizes()).to(x_dtype);
    }
    if (static_cast<BiasGrad>(ctx->saved_data["how"].toInt()) == BiasGrad::column_sum) {
      // The weight's gradient as the eager path makes it (a bf16 product, then the fp32
      // weight's dtype), the bias's by the column-sum kernel in fp32.
      if (ctx->needs_input_grad(1)) dw = at::mm(dy.t(), xb.view({M, K})).to(torch::kFloat32);
      if (ctx->needs_input_grad(2)) {
        db = column_sums(dy);
        g_column_sums.fetch_add(1, std::memory_order_relaxed);
      }
      return {dx, dw, db, torch::Tensor(), torch::Tensor(), torch::Tensor()};
    }
    if (ctx->needs_input_grad(1) || ctx->needs_input_grad(2)) {
      const auto x2 = xb.view({M, K});
      dw = torch::empty({N, K}, dy.options().dtype(torch::kFloat32));
      db = torch::empty({N}, dy.options().dtype(torch::kFloat32));
      // The gradients in fp32 where cuBLASLt has the product for it, else in bf16 (as the
      // eager path rounds the weight's), else the eager composition.
      if (M > 0 && wgrad_bgrad(dy, x2, CUDA_R_32F, dw.data_ptr(), db.data_ptr())) {
        g_fused.fetch_add(1, std::memory_order_relaxed);
      } else {
        auto dw16 = torch::empty({N, K}, dy.options()), db16 = torch::empty({N}, dy.options());
        if (M > 0 && wgrad_bgrad(dy, x2, CUDA_R_16BF, dw16.data_ptr(), db16.data_ptr())) {
          g_fused_bf16.fetch_add(1, std::memory_order_relaxed);
          dw.copy_(dw16);
          db.copy_(db16);
        } else {
          g_fallback.fetch_add(1, std::memory_order_relaxed);
          dw = at::mm(dy.t(), x2).to(torch::kFloat32);
          db = dy.sum(0, /*keepdim=*/false, torch::kFloat32);
        }
      }
    }
    return {dx, dw, db, torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

bool linear_bgrad_runs_on(const torch::Device& device) { return device.is_cuda(); }

bool linear_bgrad_takes(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias) {
  if (!x.defined() || !weight.defined() || !bias.defined() || !x.is_cuda()) return false;
  if (!at::autocast::is_autocast_enabled(at::kCUDA) || at::autocast::get_autocast_dtype(at::kCUDA) != torch::kBFloat16)
    return false;
  if (!torch::GradMode::is_enabled() || !(x.requires_grad() || weight.requires_grad() || bias.requires_grad()))
    return false;
  if (x.scalar_type() != torch::kBFloat16 && x.scalar_type() != torch::kFloat32) return false;
  if (weight.scalar_type() != torch::kFloat32 || bias.scalar_type() != torch::kFloat32) return false;
  if (weight.device() != x.device() || bias.device() != x.device() || weight.dim() != 2 || bias.dim() != 1 ||
      x.dim() < 1)
    return false;
  const int64_t K = weight.size(1), N = weight.size(0);
  return x.size(-1) == K && bias.numel() == N && K > 0 && N > 0 && K % 8 == 0 && N % 8 == 0 &&
         K <= (int64_t{1} << 31) - 1 && N <= (int64_t{1} << 31) - 1;
}

torch::Tensor linear_bgrad(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                           BiasGrad how, const torch::Tensor& weight_low, const torch::Tensor& bias_low) {
  if (!linear_bgrad_takes(x, weight, bias))
    throw std::invalid_argument("fused bias gradient: inputs it does not take (see linear_bgrad_takes)");
  // The copies as optional arguments: not inputs of the node when undefined.
  return LinearBgrad::apply(x, weight, bias, static_cast<int64_t>(how), std::optional<torch::Tensor>(weight_low),
                            std::optional<torch::Tensor>(bias_low));
}

torch::Tensor column_sums(const torch::Tensor& g) {
  if (!g.is_cuda() || g.dim() != 2 || (g.scalar_type() != torch::kBFloat16 && g.scalar_type() != torch::kFloat32) ||
      g.size(1) > std::numeric_limits<int>::max())
    throw std::invalid_argument("column sums: a 2-d bf16 or fp32 tensor on a GPU");
  const auto x = g.contiguous();
  const int64_t rows = x.size(0);
  const int N = static_cast<int>(x.size(1));
  if (rows == 0 || N == 0) return torch::zeros({N}, x.options().dtype(torch::kFloat32));
  auto partial = torch::empty({cuda::column_sum_row_blocks(rows, N), N}, x.options().dtype(torch::kFloat32));
  cuda::column_sum(x.scalar_type() == torch::kBFloat16, x.data_ptr(), partial.data_ptr<float>(), rows, N,
                   c10::cuda::getCurrentCUDAStream());
  cuda::check_launch("column sums", "bias gradient");
  return partial.sum(0);
}

std::pair<torch::Tensor, torch::Tensor> stack_column_sums(const torch::Tensor& q, const torch::Tensor& k,
                                                          const torch::Tensor& v) {
  const torch::Tensor* in[3] = {&q, &k, &v};
  for (const torch::Tensor* t : in)
    if (!t->defined() || !t->is_cuda() || t->dim() != 4 || t->sizes() != q.sizes() ||
        t->scalar_type() != q.scalar_type() || t->device() != q.device() ||
        (t->scalar_type() != torch::kBFloat16 && t->scalar_type() != torch::kFloat32))
      throw std::invalid_argument("stacked column sums: three [B, L, heads, head_dim] tensors of one dtype (bf16 or "
                                  "fp32) on one GPU");
  const int64_t B = q.size(0), L = q.size(1), heads = q.size(2), d = q.size(3), M = B * L, N = 3 * heads * d;
  if (N > std::numeric_limits<int>::max() || heads > std::numeric_limits<int>::max())
    throw std::invalid_argument("stacked column sums: rows wider than the kernel's int columns");
  if (M > std::numeric_limits<int32_t>::max())
    throw std::invalid_argument("stacked column sums: more than 2^31 - 1 rows (B x L)");
  auto out = torch::empty({M, N}, q.options());
  if (M == 0 || N == 0) return {out, torch::zeros({N}, q.options().dtype(torch::kFloat32))};
  // The kernel reads each part through its strides; only the last must be 1.
  torch::Tensor part[3];
  cuda::StackParts p{};
  for (int i = 0; i < 3; ++i) {
    part[i] = in[i]->stride(3) == 1 ? *in[i] : in[i]->contiguous();
    p.base[i] = part[i].data_ptr();
    p.batch_stride[i] = part[i].stride(0);
    p.row_stride[i] = part[i].stride(1);
    p.head_stride[i] = part[i].stride(2);
  }
  p.by_L = cuda::IntDivider(static_cast<uint32_t>(L > 0 ? L : 1));
  p.heads = static_cast<int>(heads);
  p.head_dim = static_cast<int>(d);
  auto partial = torch::empty({cuda::column_sum_row_blocks(M, static_cast<int>(N)), N}, q.options().dtype(torch::kFloat32));
  cuda::stack_column_sum(q.scalar_type() == torch::kBFloat16, p, out.data_ptr(), partial.data_ptr<float>(), M,
                         c10::cuda::getCurrentCUDAStream());
  cuda::check_launch("stacked column sums", "Q/K/V bias gradient");
  g_stacked.fetch_add(1, std::memory_order_relaxed);
  return {out, partial.sum(0)};
}

LinearBgradCounts linear_bgrad_counts() {
  return {g_fused.load(), g_fused_bf16.load(), g_fallback.load(), g_column_sums.load(), g_stacked.load()};
}

}  // namespace genemask::model
