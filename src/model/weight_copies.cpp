#include "model/weight_copies.hpp"

#include <ATen/autocast_mode.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <set>
#include <stdexcept>

#include "model/bert.hpp"

namespace genemask::model {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

thread_local const WeightCopies* g_in_force = nullptr;

/// A parameter's bf16 copy as a product's operand: the copy forward, the gradient cast to the
/// parameter's dtype backward (what autocast's cast of the parameter, _to_copy, does).
struct LowOperand : torch::autograd::Function<LowOperand> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& low, const torch::Tensor& param) {
    ctx->saved_data["dtype"] = static_cast<int64_t>(param.scalar_type());
    return low;  // returned as a view of itself that carries this node (autograd's rule for inputs)
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto dtype = static_cast<torch::ScalarType>(ctx->saved_data["dtype"].toInt());
    torch::Tensor g;
    if (ctx->needs_input_grad(1) && grads[0].defined()) g = grads[0].to(dtype);
    return {torch::Tensor(), g};
  }
};

std::string shape_of(const torch::Tensor& t) { return fmt::format("{}", fmt::join(t.sizes(), " x ")); }

/// A given copy of `param`: of its shape, and bf16 where `bf16` asks it.
void check_copy(const torch::Tensor& low, const torch::Tensor& param, bool bf16) {
  if (low.sizes() != param.sizes() || (bf16 && low.scalar_type() != torch::kBFloat16))
    throw std::invalid_argument("a bf16 weight copy of shape " + shape_of(low) + " for a weight of shape " +
                                shape_of(param));
}

}  // namespace

torch::Tensor low_operand(const torch::Tensor& low, const torch::Tensor& param) {
  if (!low.defined()) return param;
  check_copy(low, param, false);
  return LowOperand::apply(low, param);
}

torch::Tensor bf16_operand(const torch::Tensor& param, const torch::Tensor& low) {
  if (!low.defined()) return param.to(torch::kBFloat16);
  check_copy(low, param, true);
  return low;
}

WeightCopies::WeightCopies(const std::vector<torch::Tensor>& params,
                           const std::vector<std::array<torch::Tensor, 3>>& stacks) {
  torch::NoGradGuard ng;
  auto add = [&](const torch::Tensor& p, torch::Tensor copy) {
    if (!p.defined() || !p.is_floating_point())
      throw std::invalid_argument("bf16 weight copies: a parameter that is not a floating tensor");
    if (!index_.emplace(p.unsafeGetTensorImpl(), entries_.size()).second)
      throw std::invalid_argument("bf16 weight copies: a parameter of shape " + shape_of(p) + " named twice");
    entries_.push_back({p, std::move(copy), 0});
    make(entries_.back());
    return entries_.size() - 1;
  };
  for (const auto& s : stacks) {
    for (const auto& p : s)
      if (!p.defined() || p.dim() < 1 || p.sizes() != s[0].sizes() || p.device() != s[0].device())
        throw std::invalid_argument("bf16 weight copies: a stack of three parameters of unlike shapes or devices");
    const int64_t n = s[0].size(0);
    std::vector<int64_t> shape = s[0].sizes().vec();
    shape[0] = 3 * n;
    Stack st;
    st.buffer = torch::empty(shape, s[0].options().dtype(torch::kBFloat16).requires_grad(false));
    for (size_t i = 0; i < 3; ++i) {
      st.parts[i] = add(s[i], st.buffer.narrow(0, static_cast<int64_t>(i) * n, n));
      entries_[st.parts[i]].stack = static_cast<int64_t>(stacks_.size());
    }
    stacks_.push_back(std::move(st));
  }
  for (const auto& p : params)
    add(p, torch::empty(p.sizes(), p.options().dtype(torch::kBFloat16).requires_grad(false)));
}

void WeightCopies::make(const Entry& e) const {
  torch::NoGradGuard ng;
  e.copy.copy_(e.param.detach());  // bf16 rounding, as autocast's cast (_to_copy) makes it
  e.version = static_cast<int64_t>(e.param._version());
}

void WeightCopies::refresh() {
  // Every copy in one multi-tensor copy: on a GPU a few kernels instead of one launch per
  // weight (about 75 for dnabert, inside the update's CUDA graph too), the same roundings as
  // make()'s copy_ (each element cast to bf16 to nearest).
  if (entries_.empty()) return;
  torch::NoGradGuard ng;
  std::vector<torch::Tensor> copies, params;
  copies.reserve(entries_.size());
  params.reserve(entries_.size());
  for (const auto& e : entries_) {
    copies.push_back(e.copy);
    params.push_back(e.param.detach());
  }
  at::_foreach_copy_(copies, params);
  for (const auto& e : entries_) e.version = static_cast<int64_t>(e.param._version());
}

const WeightCopies::Entry* WeightCopies::find(const torch::Tensor& p) const {
  if (!p.defined()) return nullptr;
  const auto it = index_.find(p.unsafeGetTensorImpl());
  return it == index_.end() ? nullptr : &entries_[it->second];
}

void WeightCopies::make_if_stale(const Entry& e) const {
  if (static_cast<int64_t>(e.param._version()) == e.version) return;
  make(e);
  ++stale_refreshes_;
}

torch::Tensor WeightCopies::low(const torch::Tensor& p) const {
  const Entry* e = find(p);
  if (!e) return {};
  // A third of a stacked buffer shares the buffer's version counter with the other two: all
  // three are made fresh before any is handed out, so that no later read of another third
  // writes into a buffer a product has already saved for its backward (autograd would refuse
  // it as modified in place: the three products of the unfused Q/K/V path read the thirds one
  // after another).
  if (e->stack >= 0)
    for (size_t i : stacks_[static_cast<size_t>(e->stack)].parts) make_if_stale(entries_[i]);
  else
    make_if_stale(*e);
  return e->copy;
}

torch::Tensor WeightCopies::low_stack(const std::array<torch::Tensor, 3>& parts) const {
  for (const auto& st : stacks_) {
    bool same = true;
    for (size_t i = 0; i < 3 && same; ++i) same = entries_[st.parts[i]].param.unsafeGetTensorImpl() == parts[i].unsafeGetTensorImpl();
    if (!same) continue;
    low(parts[0]);  // all three thirds fresh
    return st.buffer;
  }
  return {};
}

int64_t WeightCopies::bytes() const {
  int64_t b = 0;
  for (const auto& e : entries_) b += e.copy.numel() * static_cast<int64_t>(e.copy.element_size());
  return b;
}

std::unique_ptr<WeightCopies> bert_weight_copies(BertForMaskedLMImpl& model) {
  std::vector<std::array<torch::Tensor, 3>> stacks;
  std::set<const c10::TensorImpl*> stacked;
  for (const auto& m : model.modules(/*include_self=*/false)) {
    const auto* att = dynamic_cast<const BertSelfAttentionImpl*>(m.get());
    if (!att) continue;
    stacks.push_back({att->query->weight, att->key->weight, att->value->weight});
    stacks.push_back({att->query->bias, att->key->bias, att->value->bias});
    for (const auto& s : {stacks[stacks.size() - 2], stacks.back()})
      for (const auto& p : s) stacked.insert(p.unsafeGetTensorImpl());
  }
  std::vector<torch::Tensor> params;
  auto take = [&](const torch::Tensor& p) {
    if (p.defined() && !stacked.count(p.unsafeGetTensorImpl())) params.push_back(p);
  };
  for (const auto& m : model.modules(/*include_self=*/false)) {
    const auto* lin = dynamic_cast<const torch::nn::LinearImpl*>(m.get());
    if (!lin) continue;
    take(lin->weight);
    take(lin->bias);
  }
  take(model.bert->embeddings->word_embeddings->weight);  // the decoder's, tied
  take(model.cls->predictions->bias);
  return std::make_unique<WeightCopies>(params, stacks);
}

const WeightCopies* weight_copies_for(const torch::Device& device) {
  if (!g_in_force) return nullptr;
  const auto type = device.type();
  if (!at::autocast::is_autocast_enabled(type) || at::autocast::get_autocast_dtype(type) != at::kBFloat16)
    return nullptr;
  return g_in_force;
}

UseWeightCopies::UseWeightCopies(const WeightCopies* copies) : previous_(g_in_force) { g_in_force = copies; }
UseWeightCopies::~UseWeightCopies() { g_in_force = previous_; }

}  // namespace genemask::model
