#pragma once
// BERT sequence classifier laid out like Hugging Face's BertForSequenceClassification:
// `bert.*` (the encoder of bert.hpp) + `bert.pooler.dense` (tanh of a dense layer on the
// [CLS] state) + dropout + `classifier` (hidden -> classes). named_parameters() are HF's
// names, so a saved classifier loads in transformers and a checkpoint of either loads here.
#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

#include "model/bert.hpp"

namespace genemask::model {

struct BertPoolerImpl : torch::nn::Module {
  explicit BertPoolerImpl(const BertConfig& c);
  /// tanh(dense(h[:, 0])): [B, L, H] -> [B, H].
  torch::Tensor forward(const torch::Tensor& hidden);
  torch::nn::Linear dense{nullptr};
};
TORCH_MODULE(BertPooler);

struct BertForSequenceClassificationImpl : torch::nn::Module {
  /// Dropout before the classifier is c.hidden_dropout_prob, as HF's default.
  BertForSequenceClassificationImpl(const BertConfig& c, int64_t num_labels);
  /// Logits [B, num_labels]. attention_mask: 1 = real token, 0 = padding. The last encoder
  /// layer is computed for the [CLS] position only (all the pooler reads).
  torch::Tensor forward(const torch::Tensor& input_ids, const torch::Tensor& attention_mask);
  /// The same logits through the whole BertModel (every position of every layer): tests.
  torch::Tensor forward_full(const torch::Tensor& input_ids, const torch::Tensor& attention_mask);
  /// Pooler, dropout and classifier on the [CLS] position of `hidden` [B, L, H], in fp32
  /// also under autocast (the logits rank the test set).
  torch::Tensor head(const torch::Tensor& hidden);
  BertConfig config;
  int64_t num_labels;
  BertModel bert{nullptr};
  BertPooler pooler{nullptr};  // registered inside `bert` (HF's name: bert.pooler.dense.*)
  torch::nn::Dropout dropout{nullptr};
  torch::nn::Linear classifier{nullptr};
};
TORCH_MODULE(BertForSequenceClassification);

struct ClassifierSource {
  std::string dir;              // the model directory used ("random" for a random model)
  bool pooler_loaded = false;   // bert.pooler.* came from the checkpoint
};

/// A classifier for `num_labels` classes. model: "random" (architecture from `config`:
/// logo, dnabert or a config.json), an HF-format directory (config.json + model.safetensors
/// or pytorch_model.bin) or a `genemask pretrain` run (newest checkpoint). Everything is
/// first initialised as HF does from torch::manual_seed(seed); then the encoder, and the
/// pooler when the checkpoint has one, are loaded. MLM/NSP heads (cls.*) and a previous
/// classifier head are ignored: the head is always new, from the seed. Hidden and attention
/// dropout are set to `dropout`.
BertForSequenceClassification build_classifier(const std::string& model, const std::string& config, int64_t num_labels,
                                               double dropout, uint64_t seed, ClassifierSource* source);

/// AdamW of the paper's fine-tuning: betas (0.9, 0.999), eps 1e-8, `weight_decay` on every
/// parameter except biases and LayerNorm weights.
std::unique_ptr<torch::optim::AdamW> make_adamw(BertForSequenceClassification& m, double lr, double weight_decay);

/// Learning rate of optimiser step `step` (0-based) of `steps`: Hugging Face's
/// get_linear_schedule_with_warmup, as DNABERT's fine-tuning script uses it:
/// peak * step / warmup during the warm-up (so the first step has lr 0 when warmup > 0),
/// then linear decay, peak * (steps - step) / (steps - warmup).
double linear_warmup_lr(double peak, int64_t step, int64_t warmup, int64_t steps);

/// One optimiser step on a batch at learning rate `lr` (gradient norm clipped to `clip`
/// when clip > 0); returns the batch's mean cross-entropy before the step. bf16: the forward
/// pass under bf16 autocast on CUDA (the loss in fp32).
double train_step(BertForSequenceClassification& m, torch::optim::AdamW& opt, const torch::Tensor& ids,
                  const torch::Tensor& mask, const torch::Tensor& labels, double lr, double clip, bool bf16 = false);

/// DIR/config.json (BertForSequenceClassification, id2label/label2id), vocab.txt and
/// model.safetensors (float32, HF names).
void save_classifier_hf(BertForSequenceClassification& m, const std::vector<std::string>& class_names,
                        const std::string& dir);

/// A fine-tuned classifier WITH its head, as save_classifier_hf writes it (or HF's
/// BertForSequenceClassification): config.json (num_labels from id2label, else
/// num_labels), every bert.* tensor, the pooler and classifier.*. Missing or misshapen
/// tensors are errors naming them. Returned in eval mode (no dropout); class_names from
/// id2label in id order ("0", "1", ... when the config has none).
BertForSequenceClassification load_classifier_hf(const std::string& dir, std::vector<std::string>* class_names);

}  // namespace genemask::model
