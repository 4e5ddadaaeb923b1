// cuDNN's SDPA over ragged segments (cudnn_attention.hpp), through cuDNN's frontend
// (header-only, from PyPI's nvidia-cudnn-frontend; scripts/requirements.txt pins it). The
// frontend reaches cuDNN through dlopen of the library LibTorch already loaded
// (libcudnn.so.9), so this file and LibTorch drive one cuDNN, on LibTorch's handle and
// stream, and the model library needs no cuDNN at link time.
#define NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING 1
#define CUDNN_FRONTEND_SKIP_JSON_LIB 1
#include "model/cudnn_attention.hpp"

#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAGeneratorImpl.h>
#include <ATen/cudnn/Handle.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <c10/cuda/CUDAStream.h>
#include <dlfcn.h>
#include <fmt/format.h>

#include <atomic>
#include <climits>
#include <cmath>
#include <functional>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "model/cuda/launch.hpp"
#include "model/cuda/philox_seed_kernels.hpp"

// The frontend's symbols stay inside the model library: LibTorch carries its own copy of the
// same header-only frontend (perhaps another version), and neither may take the other's.
#pragma GCC visibility push(hidden)
#include <cudnn_frontend.h>
namespace cudnn_frontend {
// The frontend's handle of the cuDNN library (its dynamic loading): set once, below.
void* cudnn_dlhandle = nullptr;
}  // namespace cudnn_frontend
#pragma GCC visibility pop

namespace genemask::model {
namespace {

namespace fe = cudnn_frontend;
using TensorAttr = std::shared_ptr<fe::graph::Tensor_attributes>;

/// The library LibTorch loaded (a second dlopen of the same soname returns it), else none.
void* cudnn_library() {
  static void* handle = [] {
    void* h = dlopen("libcudnn.so.9", RTLD_NOW | RTLD_NOLOAD);
    if (!h) h = dlopen("libcudnn.so.9", RTLD_NOW);
    cudnn_frontend::cudnn_dlhandle = h;
    return h;
  }();
  return handle;
}

/// The tensors of a graph, by uid.
enum Uid : int64_t {
  kQ = 1, kK, kV, kO, kStats, kDO, kDQ, kDK, kDV,
  kSeqQ, kSeqKV, kOffQ, kOffK, kOffV, kOffO, kOffStats, kSeed, kOffset
};

/// What a graph is built for. The token (ts) and head (hs) strides of q, k and v are the
/// inputs' own; o, its gradient and q's, k's and v's gradients are this file's [R, L, h, d].
struct GraphKey {
  int device = 0;
  bool backward = false, bf16 = true, stats = false;
  int64_t b = 0, h = 0, s = 0, d = 0;
  int64_t q_ts = 0, q_hs = 0, k_ts = 0, k_hs = 0, v_ts = 0, v_hs = 0;
  float p = 0;
  bool operator==(const GraphKey& o) const {
    return device == o.device && backward == o.backward && bf16 == o.bf16 && stats == o.stats && b == o.b &&
           h == o.h && s == o.s && d == o.d && q_ts == o.q_ts && q_hs == o.q_hs && k_ts == o.k_ts && k_hs == o.k_hs &&
           v_ts == o.v_ts && v_hs == o.v_hs && p == o.p;
  }
};
struct GraphKeyHash {
  size_t operator()(const GraphKey& k) const {
    size_t x = std::hash<int64_t>()(k.device * 8 + k.backward * 4 + k.bf16 * 2 + k.stats);
    for (int64_t v : {k.b, k.h, k.s, k.d, k.q_ts, k.q_hs, k.k_ts, k.k_hs, k.v_ts, k.v_hs})
      x = x * 1000003u ^ std::hash<int64_t>()(v);
    return x * 1000003u ^ std::hash<float>()(k.p);
  }
};

std::atomic<int64_t> g_graphs_built{0};

void check(fe::error_t e, const char* what) {
  if (!e.is_good())
    throw std::runtime_error(fmt::format("cuDNN's attention over ragged segments: {}: {}", what, e.get_message()));
}
/// The same for a graph's building: cuDNN cannot take it (nothing ran yet).
void check_build(fe::error_t e, const char* what) {
  if (!e.is_good())
    throw CudnnGraphUnsupported(fmt::format("cuDNN cannot build its attention over ragged segments ({}: {})", what,
                                            e.get_message()));
}

/// A new graph for `key`, planned on `handle`. The shapes are cuDNN's [b, h, s, d] of the
/// segments (b of them, each at most s long), every tensor ragged: segment i starts
/// cu[i] x (token stride) elements in; the statistics (log-sum-exp) [tokens, h] in fp32.
std::shared_ptr<fe::graph::Graph> build(const GraphKey& key, cudnnHandle_t handle) {
  auto g = std::make_shared<fe::graph::Graph>();
  g->set_io_data_type(key.bf16 ? fe::DataType_t::BFLOAT16 : fe::DataType_t::HALF)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  const int64_t b = key.b, h = key.h, s = key.s, d = key.d;
  auto column = [&](Uid uid, const char* name, int64_t n, fe::DataType_t type) {
    return g->tensor(fe::graph::Tensor_attributes()
                         .set_uid(uid)
                         .set_name(name)
                         .set_dim({n, 1, 1, 1})
                         .set_stride({1, 1, 1, 1})
                         .set_data_type(type));
  };
  const TensorAttr seq_q = column(kSeqQ, "seq_q", b, fe::DataType_t::INT32);
  const TensorAttr seq_kv = column(kSeqKV, "seq_kv", b, fe::DataType_t::INT32);
  const TensorAttr off_q = column(kOffQ, "off_q", b + 1, fe::DataType_t::INT32);
  const TensorAttr off_k = column(kOffK, "off_k", b + 1, fe::DataType_t::INT32);
  const TensorAttr off_v = column(kOffV, "off_v", b + 1, fe::DataType_t::INT32);
  const TensorAttr off_o = column(kOffO, "off_o", b + 1, fe::DataType_t::INT32);
  // The statistics' offsets where the graph has statistics (a tensor no operation reads is
  // no part of a graph).
  const TensorAttr off_stats =
      key.stats || key.backward ? column(kOffStats, "off_stats", b + 1, fe::DataType_t::INT32) : nullptr;
  auto tokens = [&](Uid uid, const char* name, int64_t ts, int64_t hs, const TensorAttr& off) {
    return g->tensor(fe::graph::Tensor_attributes()
                         .set_uid(uid)
                         .set_name(name)
                         .set_dim({b, h, s, d})
                         .set_stride({s * ts, hs, ts, 1})
                         .set_ragged_offset(off));
  };
  auto ours = [&](const TensorAttr& t, Uid uid) {  // an output in this file's [R, L, h, d]
    t->set_output(true).set_uid(uid).set_dim({b, h, s, d}).set_stride({s * h * d, d, h * d, 1}).set_ragged_offset(off_o);
  };
  const TensorAttr Q = tokens(kQ, "Q", key.q_ts, key.q_hs, off_q);
  const TensorAttr K = tokens(kK, "K", key.k_ts, key.k_hs, off_k);
  const TensorAttr V = tokens(kV, "V", key.v_ts, key.v_hs, off_v);
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  TensorAttr seed, offset;
  if (key.p > 0) {
    seed = column(kSeed, "seed", 1, fe::DataType_t::INT64);
    offset = column(kOffset, "offset", 1, fe::DataType_t::INT64);
  }
  if (!key.backward) {
    auto opts = fe::graph::SDPA_attributes()
                    .set_name("genemask_ragged_sdpa")
                    .set_generate_stats(key.stats)
                    .set_attn_scale(scale)
                    .set_padding_mask(true)
                    .set_seq_len_q(seq_q)
                    .set_seq_len_kv(seq_kv);
    if (key.p > 0) opts.set_dropout(key.p, seed, offset);
    auto [O, Stats] = g->sdpa(Q, K, V, opts);
    ours(O, kO);
    if (key.stats)
      Stats->set_output(true)
          .set_uid(kStats)
          .set_data_type(fe::DataType_t::FLOAT)
          .set_dim({b, h, s, 1})
          .set_stride({s * h, 1, h, 1})
          .set_ragged_offset(off_stats);
  } else {
    auto opts = fe::graph::SDPA_backward_attributes()
                    .set_name("genemask_ragged_sdpa_backward")
                    .set_attn_scale(scale)
                    .set_padding_mask(true)
                    .set_seq_len_q(seq_q)
                    .set_seq_len_kv(seq_kv);
    if (key.p > 0) opts.set_dropout(key.p, seed, offset);
    const TensorAttr O = tokens(kO, "O", h * d, d, off_o);
    const TensorAttr dO = tokens(kDO, "dO", h * d, d, off_o);
    const TensorAttr Stats = g->tensor(fe::graph::Tensor_attributes()
                                           .set_uid(kStats)
                                           .set_name("stats")
                                           .set_data_type(fe::DataType_t::FLOAT)
                                           .set_dim({b, h, s, 1})
                                           .set_stride({s * h, 1, h, 1})
                                           .set_ragged_offset(off_stats));
    auto [dQ, dK, dV] = g->sdpa_backward(Q, K, V, O, dO, Stats, opts);
    ours(dQ, kDQ);
    ours(dK, kDK);
    ours(dV, kDV);
  }
  check_build(g->validate(), "validate");
  check_build(g->build_operation_graph(handle), "build_operation_graph");
  check_build(g->create_execution_plans({fe::HeurMode_t::A}), "create_execution_plans");
  check_build(g->check_support(handle), "check_support");
  check_build(g->build_plans(handle), "build_plans");
  ++g_graphs_built;
  return g;
}

/// This thread's graph for `key` (built on first use). Per thread, as LibTorch keeps its own:
/// cuDNN's plans are not safe to share between threads, and the backward runs on autograd's
/// GPU thread, the forward on the caller's. Leaked at exit (cuDNN may be gone by then).
const fe::graph::Graph& graph_for(const GraphKey& key, cudnnHandle_t handle) {
  thread_local auto* graphs = new std::unordered_map<GraphKey, std::shared_ptr<fe::graph::Graph>, GraphKeyHash>();
  auto it = graphs->find(key);
  if (it == graphs->end()) it = graphs->emplace(key, build(key, handle)).first;
  return *it->second;
}

void execute(const fe::graph::Graph& g, cudnnHandle_t handle, std::unordered_map<int64_t, void*>& pack,
             const torch::Tensor& like) {
  int64_t bytes = 0;
  check(g.get_workspace_size(bytes), "get_workspace_size");
  auto workspace = torch::empty({std::max<int64_t>(bytes, 1)}, like.options().dtype(torch::kUInt8));
  check(g.execute(handle, pack, workspace.data_ptr()), "execute");
}

/// The segments' lengths and the ragged offsets of [tokens, ...] tensors whose tokens lie
/// `stride` elements apart (int32 on the device, as the graph's columns); the statistics'
/// offsets only for a graph with statistics (training).
struct Ragged {
  torch::Tensor seq, off_q, off_k, off_v, off_o, off_stats;
};
Ragged ragged(const torch::Tensor& cu, const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
              bool stats) {
  const int64_t b = cu.numel() - 1, h = q.size(1), d = q.size(3);
  Ragged r;
  r.seq = cu.narrow(0, 1, b) - cu.narrow(0, 0, b);
  r.off_q = cu * q.stride(2);
  r.off_k = cu * k.stride(2);
  r.off_v = cu * v.stride(2);
  r.off_o = cu * (h * d);
  if (stats) r.off_stats = cu * h;
  return r;
}

/// The segments' tensors of a graph's variant pack (the statistics' offsets where it has
/// statistics).
void put_ragged(std::unordered_map<int64_t, void*>& pack, Ragged& r, bool stats) {
  pack[kSeqQ] = r.seq.data_ptr();
  pack[kSeqKV] = r.seq.data_ptr();
  pack[kOffQ] = r.off_q.data_ptr();
  pack[kOffK] = r.off_k.data_ptr();
  pack[kOffV] = r.off_v.data_ptr();
  pack[kOffO] = r.off_o.data_ptr();
  if (stats) pack[kOffStats] = r.off_stats.data_ptr();
}

GraphKey key_of(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, int64_t b, int64_t s,
                double p, bool stats, bool backward) {
  GraphKey key;
  key.device = q.device().index();
  key.backward = backward;
  key.bf16 = q.scalar_type() == torch::kBFloat16;
  key.stats = stats;
  key.b = b;
  key.h = q.size(1);
  key.s = s;
  key.d = q.size(3);
  key.q_ts = q.stride(2), key.q_hs = q.stride(1);
  key.k_ts = k.stride(2), key.k_hs = k.stride(1);
  key.v_ts = v.stride(2), key.v_hs = v.stride(1);
  key.p = static_cast<float>(p);
  return key;
}

class CudnnRagged : public torch::autograd::Function<CudnnRagged> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, const torch::Tensor& cu, int64_t s, double p) {
    const int64_t R = q.size(0), h = q.size(1), L = q.size(2), d = q.size(3), b = cu.numel() - 1;
    const bool grad = q.requires_grad() || k.requires_grad() || v.requires_grad();
    cudnnHandle_t handle = at::native::getCudnnHandle();  // on the current stream
    const fe::graph::Graph& g = graph_for(key_of(q, k, v, b, s, p, grad, false), handle);
    // Where training: the backward's graph built now, so that a cuDNN without it fails here,
    // before anything ran (packed_attention then takes flash attention instead). Built in
    // this thread, and again in autograd's the first time its backward runs.
    if (grad) graph_for(key_of(q, k, v, b, s, p, false, true), handle);
    auto o = torch::empty({R, L, h, d}, q.options());
    auto stats = grad ? torch::empty({R * L, h}, q.options().dtype(torch::kFloat32)) : torch::Tensor();
    auto seeds = torch::zeros({2}, q.options().dtype(torch::kInt64));
    if (p > 0) {
      // The default generator of this GPU: the draws of b x h x s x s scores at most.
      auto gen = at::cuda::detail::getDefaultCUDAGenerator(q.device().index());
      at::PhiloxCudaState philox;
      {
        std::lock_guard<std::mutex> lock(gen.mutex());
        philox = gen.get<at::CUDAGeneratorImpl>()->philox_cuda_state(static_cast<uint64_t>(b * h * s * s));
      }
      int64_t* sp = seeds.data_ptr<int64_t>();
      cuda::write_philox_seed(philox, sp, sp + 1, c10::cuda::getCurrentCUDAStream());
      cuda::check_launch("cuDNN attention's dropout seed", "forward");
    }
    Ragged r = ragged(cu, q, k, v, grad);
    std::unordered_map<int64_t, void*> pack = {
        {kQ, q.data_ptr()}, {kK, k.data_ptr()}, {kV, v.data_ptr()}, {kO, o.data_ptr()}};
    put_ragged(pack, r, grad);
    if (grad) pack[kStats] = stats.data_ptr();
    if (p > 0) {
      pack[kSeed] = seeds.data_ptr<int64_t>();
      pack[kOffset] = seeds.data_ptr<int64_t>() + 1;
    }
    execute(g, handle, pack, q);
    ctx->save_for_backward({q, k, v, o, stats, cu, seeds});
    ctx->saved_data["s"] = s;
    ctx->saved_data["p"] = p;
    return o.transpose(1, 2);
  }

  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &q = saved[0], &k = saved[1], &v = saved[2], &o = saved[3], &stats = saved[4],
                        &cu = saved[5], &seeds = saved[6];
    const int64_t s = ctx->saved_data["s"].toInt();
    const double p = ctx->saved_data["p"].toDouble();
    const int64_t b = cu.numel() - 1;
    auto dout = grads[0].transpose(1, 2).contiguous();  // [R, L, h, d], as o
    auto dq = torch::empty_like(o), dk = torch::empty_like(o), dv = torch::empty_like(o);
    cudnnHandle_t handle = at::native::getCudnnHandle();
    const fe::graph::Graph& g = graph_for(key_of(q, k, v, b, s, p, false, true), handle);
    Ragged r = ragged(cu, q, k, v, true);
    std::unordered_map<int64_t, void*> pack = {{kQ, q.data_ptr()},       {kK, k.data_ptr()},   {kV, v.data_ptr()},
                                               {kO, o.data_ptr()},       {kDO, dout.data_ptr()}, {kStats, stats.data_ptr()},
                                               {kDQ, dq.data_ptr()},     {kDK, dk.data_ptr()}, {kDV, dv.data_ptr()}};
    put_ragged(pack, r, true);
    if (p > 0) {
      pack[kSeed] = seeds.data_ptr<int64_t>();
      pack[kOffset] = seeds.data_ptr<int64_t>() + 1;
    }
    execute(g, handle, pack, q);
    return {dq.transpose(1, 2), dk.transpose(1, 2), dv.transpose(1, 2), torch::Tensor(), torch::Tensor(),
            torch::Tensor()};
  }
};

}  // namespace

bool cudnn_ragged_attention_built() { return true; }

std::string cudnn_ragged_attention_refusal(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) {
  // The layout first (a CPU tensor shows it too: the tests'), then the device.
  if (q.dim() != 4 || k.sizes() != q.sizes() || v.sizes() != q.sizes()) return "q, k and v not [R, h, L, d] alike";
  const auto t = q.scalar_type();
  if ((t != torch::kBFloat16 && t != torch::kHalf) || k.scalar_type() != t || v.scalar_type() != t)
    return "not bf16 or fp16 alike";
  const int64_t R = q.size(0), h = q.size(1), L = q.size(2), d = q.size(3);
  if (d % 8 != 0 || d > 128) return fmt::format("head size {} (cuDNN's kernels: a multiple of 8 up to 128)", d);
  for (const torch::Tensor* x : {&q, &k, &v}) {
    const int64_t ts = x->stride(2), hs = x->stride(1);
    if (x->stride(3) != 1 || hs < d || ts < h * d || (R > 1 && x->stride(0) != L * ts))
      return "a view whose tokens are not equally spaced ([R, L, h, d] storage)";
    if ((R * L + 1) * ts > INT_MAX) return "offsets beyond 32 bits";
  }
  if (!q.is_cuda()) return "not on a GPU";
  if (k.device() != q.device() || v.device() != q.device()) return "q, k and v on different devices";
  if (at::cuda::getDeviceProperties(q.device().index())->major < 8) return "a GPU older than compute capability 8.0";
  if (at::detail::getCUDAHooks().versionCuDNN() < 90000) return "cuDNN older than 9";
  if (!cudnn_library()) return "libcudnn.so.9 not loaded";
  return "";
}

torch::Tensor cudnn_ragged_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                     const torch::Tensor& cu_seqlens, int64_t max_seqlen, double dropout_p) {
  const std::string why = cudnn_ragged_attention_refusal(q, k, v);
  if (!why.empty()) throw std::invalid_argument("cuDNN's attention over ragged segments does not take these inputs: " + why);
  if (cu_seqlens.scalar_type() != torch::kInt || cu_seqlens.device() != q.device() || cu_seqlens.dim() != 1 ||
      cu_seqlens.numel() < 2)
    throw std::invalid_argument("cuDNN's attention over ragged segments: cu_seqlens must be [S + 1] int32 on q's GPU");
  return CudnnRagged::apply(q, k, v, cu_seqlens, cudnn_ragged_seqlen_bound(max_seqlen), dropout_p);
}

int64_t cudnn_ragged_attention_graphs_built() { return g_graphs_built.load(); }

}  // namespace genemask::model
