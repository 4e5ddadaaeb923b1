#pragma once
// AdamW for every model command: HF's parameter groups (no weight decay on biases and
// LayerNorm weights), and a step through ATen's fused kernel.
#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

namespace genemask::model {

class WeightCopies;

struct AdamWSettings {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.01;
};

/// Two groups, as HF's Trainer makes them: parameters whose name holds "bias" or "LayerNorm"
/// without weight decay, the rest with it.
std::unique_ptr<torch::optim::AdamW> make_adamw(const torch::OrderedDict<std::string, torch::Tensor>& named,
                                                const AdamWSettings& s);

/// Steps a torch::optim::AdamW through at::_fused_adamw_ (one multi-tensor kernel per group
/// on a GPU, a vectorised loop on a CPU) instead of one small kernel per tensor and operation.
/// The update is AdamW's (tested against opt.step() within float rounding), and the moments
/// and step counts stay in `opt`'s state, so torch::save(opt) / torch::load(opt) checkpoints
/// are unchanged: make this after loading one.
class FusedAdamW {
 public:
  explicit FusedAdamW(torch::optim::AdamW& opt) : opt_(opt) {}
  /// One step of every group at learning rate `lr`, for parameters that have a gradient.
  void step(double lr);
  /// The same step with the learning rate in a one-element fp32 tensor on the parameters'
  /// device, and without touching the host's step counts: capturable in a CUDA graph
  /// (every parameter must have a gradient). advance_host_steps() then keeps the counts
  /// that checkpoints save in line, once per replayed step.
  void step(const torch::Tensor& lr);
  void advance_host_steps();
  /// The optimizer's device state (moments, step counts), prepared: what a caller saves and
  /// restores around a CUDA graph's warm-up.
  std::vector<torch::Tensor> state_tensors();
  /// bf16 copies of the weights (weight_copies.hpp) that each step makes again after its
  /// update (in a captured step too); nullptr: none. They must outlive this.
  void keep_weight_copies(WeightCopies* copies) { copies_ = copies; }
  WeightCopies* weight_copies() const { return copies_; }

 private:
  struct Group {
    std::vector<torch::Tensor> params, exp_avgs, exp_avg_sqs, steps;
    std::vector<torch::optim::AdamWParamState*> states;
  };
  void prepare();
  /// The step counts' increment and the fused kernel, for a learning rate given as a double
  /// or as a device tensor.
  template <typename Lr>
  static void update(const torch::optim::AdamWOptions& o, at::TensorList params, at::TensorList grads,
                     at::TensorList m, at::TensorList v, at::TensorList steps, const Lr& lr);
  torch::optim::AdamW& opt_;
  std::vector<Group> groups_;
  bool prepared_ = false;
  WeightCopies* copies_ = nullptr;
};

}  // namespace genemask::model
