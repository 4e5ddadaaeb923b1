#pragma once
// bf16 copies of the weights that the matrix products read under bf16 autocast, kept between
// steps and made again once per optimizer step (fusions.hpp's weight-bf16), instead of the
// casts autocast makes of every fp32 weight and bias in every micro-batch's forward pass (and,
// for the Q/K/V product, the concatenation of the three fp32 weights and biases before that).
//
// The copy of a weight is what autocast's cast makes of it (bf16 rounding), and its gradient
// goes to the fp32 weight cast to fp32, as the cast's backward sends it: a step computes the
// same bits with the copies as without (CI checks it on the CPU). The weights, their gradients
// and the optimizer's state stay fp32, as before.
//
// Who keeps them fresh: FusedAdamW makes them again after each update (optim.hpp: inside the
// update's CUDA graph too). Another change of a weight by an in-place ATen operation (a
// checkpoint copied into it, an in-place edit) moves its version counter; the copy is then
// made again when next read, so a product never reads a stale copy in an eager step. Changes
// that move no version counter are not seen: a parameter's tensor replaced (set_data,
// `.data =`, Module::to), or raw writes through its data pointer; after one of those, call
// refresh(). (None happens once the copies exist: resume and the ranks' broadcast copy_ into
// the weights before they are made.) A CUDA graph reads what its replay finds, so GraphStep
// makes every copy again after restoring the weights around a capture.
//
// The products find them through a thread-local pointer (UseWeightCopies) while bf16 autocast
// is on for the weights' device: BERT's `affine`, its Q/K/V product, and the linear_bgrad and
// qkv_linear nodes. Elsewhere (no copies in force, fp32, another model) they cast as before.
#include <torch/torch.h>

#include <array>
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

namespace genemask::model {

struct BertForMaskedLMImpl;

class WeightCopies {
 public:
  /// Copies of `params` (floating parameters that linear layers read: weights and biases) and
  /// of each triple of `stacks` (parameters of one shape whose concatenation along dimension 0
  /// is one product's operand: the Q/K/V weights, their biases), each triple one bf16 buffer
  /// whose thirds are its parts' copies. Made from the parameters' current values. A parameter
  /// named twice is refused (std::invalid_argument), as is a triple of unlike shapes.
  WeightCopies(const std::vector<torch::Tensor>& params, const std::vector<std::array<torch::Tensor, 3>>& stacks);

  /// Every copy made again from its parameter: after the optimizer changed the weights.
  /// Capturable in a CUDA graph (one multi-tensor copy, ATen's _foreach_copy_, that casts
  /// each parameter as copy_ does; no host synchronisation).
  void refresh();
  /// The copy of p (not differentiable), or an undefined tensor when p has none. A copy whose
  /// parameter changed since it was made (its version counter moved) is made again first; for
  /// a third of a stack, the other two thirds are checked and made again with it.
  /// low_operand(low(p), p) is the product's operand.
  torch::Tensor low(const torch::Tensor& p) const;
  /// The bf16 concatenation of one triple of `stacks` (its parts in that order, each third
  /// checked fresh as low() checks it), not differentiable; undefined when the three are no
  /// triple of this object. low_operand(low_stack(parts), torch::cat(parts)) is the operand.
  torch::Tensor low_stack(const std::array<torch::Tensor, 3>& parts) const;

  /// Parameters with a copy, and bytes the copies hold (for the log and the tests).
  size_t size() const { return entries_.size(); }
  int64_t bytes() const;
  /// Copies made again because their parameter had changed outside refresh() (tests).
  int64_t stale_refreshes() const { return stale_refreshes_; }

 private:
  struct Entry {
    torch::Tensor param, copy;
    mutable int64_t version = 0;  // the parameter's version counter when the copy was made
    int64_t stack = -1;           // its stack's index in stacks_, or -1
  };
  const Entry* find(const torch::Tensor& p) const;
  void make(const Entry& e) const;
  void make_if_stale(const Entry& e) const;

  std::vector<Entry> entries_;
  std::unordered_map<const c10::TensorImpl*, size_t> index_;
  struct Stack {
    std::array<size_t, 3> parts;  // entries_ indices
    torch::Tensor buffer;
  };
  std::vector<Stack> stacks_;
  mutable int64_t stale_refreshes_ = 0;
};

/// `low` (a bf16 copy of `param`, of its shape) as a product's operand, differentiable in
/// `param`: its gradient goes to `param` cast to param's dtype, as the gradient of autocast's
/// cast does. `param` itself when `low` is undefined. `param` may be any tensor (the Q/K/V
/// weights' concatenation, whose copy is low_stack's).
torch::Tensor low_operand(const torch::Tensor& low, const torch::Tensor& param);

/// The bf16 operand a product node reads for `param`: `low` (its copy) where defined, else
/// param cast to bf16 (what autocast makes). Throws std::invalid_argument for a copy of
/// another shape or dtype.
torch::Tensor bf16_operand(const torch::Tensor& param, const torch::Tensor& low);

/// The copies BERT's MLM step reads: every torch::nn::Linear's weight and bias, the decoder's
/// (the word embeddings, tied) and its bias, and per self-attention the Q/K/V weights and the
/// Q/K/V biases as triples.
std::unique_ptr<WeightCopies> bert_weight_copies(BertForMaskedLMImpl& model);

/// The copies the products of this thread read, when some are in force (UseWeightCopies) and
/// bf16 autocast is on for `device`'s type; nullptr otherwise.
const WeightCopies* weight_copies_for(const torch::Device& device);

/// copies->low(p), or undefined where `copies` is null (no copies in force: autocast casts).
inline torch::Tensor low_copy(const WeightCopies* copies, const torch::Tensor& p) {
  return copies ? copies->low(p) : torch::Tensor();
}

/// Puts `copies` in force on this thread while alive (nullptr: none), then what was before.
class UseWeightCopies {
 public:
  explicit UseWeightCopies(const WeightCopies* copies);
  ~UseWeightCopies();
  UseWeightCopies(const UseWeightCopies&) = delete;
  UseWeightCopies& operator=(const UseWeightCopies&) = delete;

 private:
  const WeightCopies* previous_;
};

}  // namespace genemask::model
