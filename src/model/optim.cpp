#include "model/optim.hpp"

#include <ATen/ops/_fused_adamw.h>
#include <ATen/ops/_foreach_add.h>
#include <fmt/format.h>

#include "model/weight_copies.hpp"

namespace genemask::model {

std::unique_ptr<torch::optim::AdamW> make_adamw(const torch::OrderedDict<std::string, torch::Tensor>& named,
                                                const AdamWSettings& s) {
  std::vector<torch::Tensor> decay, no_decay;
  for (const auto& p : named) {
    const bool nd = p.key().find("bias") != std::string::npos || p.key().find("LayerNorm") != std::string::npos;
    (nd ? no_decay : decay).push_back(p.value());
  }
  torch::optim::AdamWOptions dopt(s.lr);
  dopt.betas({s.beta1, s.beta2}).eps(s.eps).weight_decay(s.weight_decay);
  torch::optim::AdamWOptions nopt = dopt;
  nopt.weight_decay(0.0);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(decay, std::make_unique<torch::optim::AdamWOptions>(dopt));
  groups.emplace_back(no_decay, std::make_unique<torch::optim::AdamWOptions>(nopt));
  return std::make_unique<torch::optim::AdamW>(groups, dopt);
}

void FusedAdamW::prepare() {
  // The moments live in opt's state (created here as AdamW creates them on its first
  // step); step counts are mirrored in one float tensor per parameter on its device, as
  // the fused kernel reads them.
  for (auto& g : opt_.param_groups()) {
    Group fg;
    for (auto& p : g.params()) {
      auto& slot = opt_.state()[p.unsafeGetTensorImpl()];
      if (!slot) {
        auto st = std::make_unique<torch::optim::AdamWParamState>();
        st->step(0);
        st->exp_avg(torch::zeros_like(p, torch::MemoryFormat::Preserve));
        st->exp_avg_sq(torch::zeros_like(p, torch::MemoryFormat::Preserve));
        slot = std::move(st);
      }
      auto* st = static_cast<torch::optim::AdamWParamState*>(slot.get());
      if (st->exp_avg().device() != p.device()) {  // a checkpoint from another device
        st->exp_avg(st->exp_avg().to(p.device()));
        st->exp_avg_sq(st->exp_avg_sq().to(p.device()));
      }
      if (static_cast<const torch::optim::AdamWOptions&>(g.options()).amsgrad())
        throw std::invalid_argument("FusedAdamW: amsgrad is not supported");
      fg.params.push_back(p);
      fg.exp_avgs.push_back(st->exp_avg());
      fg.exp_avg_sqs.push_back(st->exp_avg_sq());
      fg.steps.push_back(torch::full({}, static_cast<double>(st->step()), p.options().dtype(torch::kFloat32)));
      fg.states.push_back(st);
    }
    groups_.push_back(std::move(fg));
  }
  prepared_ = true;
}

template <typename Lr>
void FusedAdamW::update(const torch::optim::AdamWOptions& o, at::TensorList params, at::TensorList grads,
                        at::TensorList m, at::TensorList v, at::TensorList steps, const Lr& lr) {
  at::_foreach_add_(steps, 1.0);
  at::_fused_adamw_(params, grads, m, v, /*max_exp_avg_sqs=*/{}, steps, lr, std::get<0>(o.betas()),
                    std::get<1>(o.betas()), o.weight_decay(), o.eps(), /*amsgrad=*/false, /*maximize=*/false);
}

void FusedAdamW::step(double lr) {
  torch::NoGradGuard ng;
  if (!prepared_) prepare();
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    const auto& o = static_cast<const torch::optim::AdamWOptions&>(opt_.param_groups()[gi].options());
    Group& g = groups_[gi];
    std::vector<torch::Tensor> params, grads, m, v, steps;
    for (size_t i = 0; i < g.params.size(); ++i) {
      const auto& grad = g.params[i].grad();
      if (!grad.defined()) continue;
      params.push_back(g.params[i]);
      grads.push_back(grad);
      m.push_back(g.exp_avgs[i]);
      v.push_back(g.exp_avg_sqs[i]);
      steps.push_back(g.steps[i]);
      g.states[i]->step(g.states[i]->step() + 1);
    }
    if (params.empty()) continue;
    update(o, params, grads, m, v, steps, lr);
  }
  if (copies_) copies_->refresh();
}

void FusedAdamW::step(const torch::Tensor& lr) {
  torch::NoGradGuard ng;
  if (!prepared_) prepare();
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    const auto& o = static_cast<const torch::optim::AdamWOptions&>(opt_.param_groups()[gi].options());
    Group& g = groups_[gi];
    if (g.params.empty()) continue;
    std::vector<torch::Tensor> grads;
    for (const auto& p : g.params) {
      if (!p.grad().defined()) throw std::logic_error("FusedAdamW::step(lr tensor): a parameter has no gradient");
      grads.push_back(p.grad());
    }
    update(o, g.params, grads, g.exp_avgs, g.exp_avg_sqs, g.steps, lr);
  }
  if (copies_) copies_->refresh();
}

void FusedAdamW::advance_host_steps() {
  for (auto& g : groups_)
    for (auto* st : g.states) st->step(st->step() + 1);
}

std::vector<torch::Tensor> FusedAdamW::state_tensors() {
  if (!prepared_) prepare();
  std::vector<torch::Tensor> out;
  for (auto& g : groups_) {
    out.insert(out.end(), g.exp_avgs.begin(), g.exp_avgs.end());
    out.insert(out.end(), g.exp_avg_sqs.begin(), g.exp_avg_sqs.end());
    out.insert(out.end(), g.steps.begin(), g.steps.end());
  }
  return out;
}

}  // namespace genemask::model
