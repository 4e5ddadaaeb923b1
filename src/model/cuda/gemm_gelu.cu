// The feed-forward's products with the bias + erf-GELU (forward) and GELU's derivative + the
// bias gradient (backward) in their epilogues: CUTLASS 3 warp-specialised TMA kernels for
// Hopper (gemm_gelu_kernels.hpp). Compiled for sm_90a only (wgmma); the host functions exist
// in every build and say false where the kernels are not compiled in (GENEMASK_HAVE_CUTLASS).
//
// Both products are laid out as CUTLASS's D [M', N'] = A [M', K'] · B [N', K']ᵀ with M' the
// intermediate width N and N' the rows: a row-major [rows, N] matrix is a column-major
// [N, rows] one, so the bias (or its gradient) is a per-row vector of D (CUTLASS's PerRowBias
// and DePerRowBias, whose gradient is reduced within the epilogue).
//   forward:  D = yᵀ [N, rows] = w [N, K] (K-major) · x [rows, K]ᵀ (K-major); aux = zᵀ.
//   backward: D = dzᵀ [N, rows] = w2ᵀ [N, H] (N-major: w2 is [H, N] row-major) · dy [rows, H]ᵀ.
#include "model/cuda/gemm_gelu_kernels.hpp"
#include "model/cuda/launch.hpp"

#include <cstdint>

#if defined(GENEMASK_HAVE_CUTLASS)
#include <cute/tensor.hpp>
#include <cutlass/cutlass.h>
#include <cutlass/epilogue/collective/collective_builder.hpp>
#include <cutlass/epilogue/fusion/operations.hpp>
#include <cutlass/gemm/collective/collective_builder.hpp>
#include <cutlass/gemm/device/gemm_universal_adapter.h>
#include <cutlass/gemm/kernel/gemm_universal.hpp>
#include <cutlass/numeric_types.h>
#include <cutlass/util/packed_stride.hpp>
#endif

namespace genemask::model::cuda {

#if defined(GENEMASK_HAVE_CUTLASS)
namespace {

using namespace cute;

// ATen's erf-GELU and its derivative in fp32 (the constants and formulas of bias_gelu.cu,
// so the epilogue computes what the separate kernel computes from the same z).
constexpr float kAlpha = static_cast<float>(0.70710678118654752440);
constexpr float kBeta = static_cast<float>(1.12837916709551257390 * 0.70710678118654752440 * 0.5);

template <class T>
struct GeluErf {
  CUTLASS_HOST_DEVICE T operator()(T const& x) const {
    const float v = static_cast<float>(x);
    return T(v * 0.5f * (1.f + erff(v * kAlpha)));
  }
};
template <class T, int N>
struct GeluErf<cutlass::Array<T, N>> {
  CUTLASS_HOST_DEVICE cutlass::Array<T, N> operator()(cutlass::Array<T, N> const& x) const {
    cutlass::Array<T, N> y;
    GeluErf<T> f;
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < N; ++i) y[i] = f(x[i]);
    return y;
  }
};

// d · GELU'(z): CUTLASS's own dGELU is the tanh form's derivative.
template <class T>
struct GeluErfGrad {
  CUTLASS_HOST_DEVICE T operator()(T const& d, T const& z) const {
    const float x = static_cast<float>(z);
    const float cdf = 0.5f * (1.f + erff(x * kAlpha));
    const float pdf = expf(-0.5f * x * x) * kBeta;
    return T(static_cast<float>(d) * (cdf + x * pdf));
  }
};
template <class T, int N>
struct GeluErfGrad<cutlass::Array<T, N>> {
  CUTLASS_HOST_DEVICE cutlass::Array<T, N> operator()(cutlass::Array<T, N> const& d,
                                                      cutlass::Array<T, N> const& z) const {
    cutlass::Array<T, N> y;
    GeluErfGrad<T> f;
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < N; ++i) y[i] = f(d[i], z[i]);
    return y;
  }
};

using Bf16 = cutlass::bfloat16_t;
using ColumnMajor = cutlass::layout::ColumnMajor;
using RowMajor = cutlass::layout::RowMajor;
constexpr int kAlign = 8;  // 16 bytes of bf16

/// The kernels' schedules (gemm_gelu_kernels.hpp's GemmGeluKernel): the step's, two
/// consumer warp groups sharing each 128 x 128 tile (cooperative); and, for kernel_bench, two
/// warp groups on alternate 64 x 128 tiles (ping-pong: one's epilogue overlaps the other's
/// products, which may suit `logo`'s short products, K = 256).
struct Cooperative {
  using Tile = Shape<_128, _128, _64>;
  using Cluster = Shape<_2, _1, _1>;
  using Mainloop = cutlass::gemm::KernelTmaWarpSpecializedCooperative;
  using Epilogue = cutlass::epilogue::TmaWarpSpecializedCooperative;
};
struct Pingpong {
  using Tile = Shape<_64, _128, _64>;
  using Cluster = Shape<_2, _1, _1>;
  using Mainloop = cutlass::gemm::KernelTmaWarpSpecializedPingpong;
  using Epilogue = cutlass::epilogue::TmaWarpSpecialized;
};

/// A GEMM of this file: A [M', K'] with layout LayoutA, B K-major, D and aux column-major bf16,
/// no C, the fusion `Fusion`, the schedule S.
template <class S, class LayoutA, class Fusion>
struct Product {
  using TileShape = typename S::Tile;
  using ClusterShape = typename S::Cluster;
  using MainloopSchedule = typename S::Mainloop;
  using EpilogueSchedule = typename S::Epilogue;
  using Epilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float, void, ColumnMajor, kAlign, Bf16, ColumnMajor,
      kAlign, EpilogueSchedule, Fusion>::CollectiveOp;
  using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Bf16, LayoutA, kAlign, Bf16, ColumnMajor, kAlign, float,
      TileShape, ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(sizeof(typename Epilogue::SharedStorage))>,
      MainloopSchedule>::CollectiveOp;
  using Kernel = cutlass::gemm::kernel::GemmUniversal<Shape<int, int, int, int>, Mainloop, Epilogue>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;
};

using ForwardFusion =
    cutlass::epilogue::fusion::LinCombPerRowBiasEltActAux<ColumnMajor, GeluErf, Bf16, float, Bf16, float, Bf16>;
using BackwardFusion =
    cutlass::epilogue::fusion::LinCombDeEltActDePerRowBias<ColumnMajor, GeluErfGrad, Bf16, float, Bf16, float, Bf16>;
template <class S>
using Forward = Product<S, RowMajor, ForwardFusion>;
template <class S>
using Backward = Product<S, ColumnMajor, BackwardFusion>;

/// What a shape check needs of the GPU: nothing (CUTLASS's can_implement reads no device).
cutlass::KernelHardwareInfo no_device() {
  cutlass::KernelHardwareInfo hw;
  hw.sm_count = 1;
  return hw;
}

/// The current GPU with `sm_count` multiprocessors (the persistent tile scheduler's grid).
cutlass::KernelHardwareInfo hardware(int sm_count) {
  cutlass::KernelHardwareInfo hw;
  int device = 0;
  if (cudaGetDevice(&device) == cudaSuccess) hw.device_id = device;
  hw.sm_count = sm_count;
  return hw;
}

/// A product's arguments: D [N, rows] = A [N, K'] · B [rows, K']ᵀ, packed operands in P's
/// layouts, D and aux in D's layout, alpha 1, no C; the fusion's own pointers left to set.
template <class P>
typename P::Gemm::Arguments product_arguments(const void* a, const void* b, void* d, int rows, int N, int K,
                                              const cutlass::KernelHardwareInfo& hw) {
  using G = typename P::Gemm;
  using K_ = typename P::Kernel;
  const auto sA = cutlass::make_cute_packed_stride(typename K_::StrideA{}, make_shape(N, K, 1));
  const auto sB = cutlass::make_cute_packed_stride(typename K_::StrideB{}, make_shape(rows, K, 1));
  const auto sD = cutlass::make_cute_packed_stride(typename K_::StrideD{}, make_shape(N, rows, 1));
  typename G::Arguments args{cutlass::gemm::GemmUniversalMode::kGemm,
                             {N, rows, K, 1},
                             {static_cast<const Bf16*>(a), sA, static_cast<const Bf16*>(b), sB},
                             {{}, nullptr, sD, static_cast<Bf16*>(d), sD},
                             hw};
  auto& fusion = args.epilogue.thread;
  fusion.alpha = 1.f;
  fusion.beta = 0.f;
  fusion.dAux = sD;
  return args;
}

template <class S>
typename Forward<S>::Gemm::Arguments forward_arguments(const void* x, const void* w, const float* bias, void* y,
                                                       void* aux, int rows, int N, int K,
                                                       const cutlass::KernelHardwareInfo& hw) {
  auto args = product_arguments<Forward<S>>(w, x, y, rows, N, K, hw);
  args.epilogue.thread.bias_ptr = bias;
  args.epilogue.thread.aux_ptr = static_cast<Bf16*>(aux);
  return args;
}

template <class S>
typename Backward<S>::Gemm::Arguments backward_arguments(const void* dy, const void* w2, const void* aux, void* dz,
                                                         float* dbias, int rows, int N, int H,
                                                         const cutlass::KernelHardwareInfo& hw) {
  auto args = product_arguments<Backward<S>>(w2, dy, dz, rows, N, H, hw);
  args.epilogue.thread.aux_ptr = static_cast<const Bf16*>(aux);
  args.epilogue.thread.dbias_ptr = dbias;
  return args;
}

/// Runs `args` on `stream`: false (nothing launched) where CUTLASS cannot take them.
template <class G>
bool run(const typename G::Arguments& args, void* workspace, cudaStream_t stream) {
  G gemm;
  if (G::can_implement(args) != cutlass::Status::kSuccess) return false;
  if (gemm.initialize(args, workspace, stream) != cutlass::Status::kSuccess) return false;
  return gemm.run(stream) == cutlass::Status::kSuccess;
}

/// Calls f with the schedule type of `kernel`.
template <class F>
auto with_schedule(GemmGeluKernel kernel, F&& f) {
  return kernel == GemmGeluKernel::pingpong ? f(Pingpong{}) : f(Cooperative{});
}

}  // namespace

bool gemm_gelu_built() { return true; }

bool gemm_gelu_can_implement(int64_t rows, int64_t N, int64_t K, int64_t H) {
  if (!gemm_gelu_shape_supported(rows, N, K) || !gemm_gelu_shape_supported(rows, N, H)) return false;
  const int r = static_cast<int>(rows), n = static_cast<int>(N), k = static_cast<int>(K), h = static_cast<int>(H);
  using F = Forward<Cooperative>::Gemm;
  using B = Backward<Cooperative>::Gemm;
  const auto hw = no_device();
  return F::can_implement(forward_arguments<Cooperative>(nullptr, nullptr, nullptr, nullptr, nullptr, r, n, k, hw)) ==
             cutlass::Status::kSuccess &&
         B::can_implement(backward_arguments<Cooperative>(nullptr, nullptr, nullptr, nullptr, nullptr, r, n, h, hw)) ==
             cutlass::Status::kSuccess;
}

size_t gemm_bias_gelu_workspace(int64_t rows, int64_t N, int64_t K, int sm_count, GemmGeluKernel kernel) {
  if (!gemm_gelu_shape_supported(rows, N, K) || sm_count < 1) return 0;
  return with_schedule(kernel, [&](auto s) {
    using S = decltype(s);
    return Forward<S>::Gemm::get_workspace_size(forward_arguments<S>(nullptr, nullptr, nullptr, nullptr, nullptr,
                                                                     static_cast<int>(rows), static_cast<int>(N),
                                                                     static_cast<int>(K), hardware(sm_count)));
  });
}

bool gemm_bias_gelu(const void* x, const void* w, const float* bias, void* y, void* aux, int64_t rows, int64_t N,
                    int64_t K, void* workspace, int sm_count, cudaStream_t stream, GemmGeluKernel kernel) {
  if (!gemm_gelu_shape_supported(rows, N, K) || sm_count < 1) return false;
  for (const void* p : {x, w, static_cast<const void*>(bias), static_cast<const void*>(y), static_cast<const void*>(aux)})
    if (!aligned16(p)) return false;
  return with_schedule(kernel, [&](auto s) {
    using S = decltype(s);
    return run<typename Forward<S>::Gemm>(forward_arguments<S>(x, w, bias, y, aux, static_cast<int>(rows),
                                                               static_cast<int>(N), static_cast<int>(K),
                                                               hardware(sm_count)),
                                          workspace, stream);
  });
}

size_t gemm_dgelu_workspace(int64_t rows, int64_t N, int64_t H, int sm_count, GemmGeluKernel kernel) {
  if (!gemm_gelu_shape_supported(rows, N, H) || sm_count < 1) return 0;
  return with_schedule(kernel, [&](auto s) {
    using S = decltype(s);
    return Backward<S>::Gemm::get_workspace_size(backward_arguments<S>(nullptr, nullptr, nullptr, nullptr, nullptr,
                                                                       static_cast<int>(rows), static_cast<int>(N),
                                                                       static_cast<int>(H), hardware(sm_count)));
  });
}

bool gemm_dgelu(const void* dy, const void* w2, const void* aux, void* dz, float* dbias, int64_t rows, int64_t N,
                int64_t H, void* workspace, int sm_count, cudaStream_t stream, GemmGeluKernel kernel) {
  if (!gemm_gelu_shape_supported(rows, N, H) || sm_count < 1) return false;
  for (const void* p : {dy, w2, aux, static_cast<const void*>(dz), static_cast<const void*>(dbias)})
    if (!aligned16(p)) return false;
  return with_schedule(kernel, [&](auto s) {
    using S = decltype(s);
    return run<typename Backward<S>::Gemm>(backward_arguments<S>(dy, w2, aux, dz, dbias, static_cast<int>(rows),
                                                                 static_cast<int>(N), static_cast<int>(H),
                                                                 hardware(sm_count)),
                                           workspace, stream);
  });
}

#else  // no CUTLASS: the callers take the separate kernels

bool gemm_gelu_built() { return false; }
bool gemm_gelu_can_implement(int64_t, int64_t, int64_t, int64_t) { return false; }
size_t gemm_bias_gelu_workspace(int64_t, int64_t, int64_t, int, GemmGeluKernel) { return 0; }
bool gemm_bias_gelu(const void*, const void*, const float*, void*, void*, int64_t, int64_t, int64_t, void*, int,
                    cudaStream_t, GemmGeluKernel) {
  return false;
}
size_t gemm_dgelu_workspace(int64_t, int64_t, int64_t, int, GemmGeluKernel) { return 0; }
bool gemm_dgelu(const void*, const void*, const void*, void*, float*, int64_t, int64_t, int64_t, void*, int,
                cudaStream_t, GemmGeluKernel) {
  return false;
}

#endif

}  // namespace genemask::model::cuda
