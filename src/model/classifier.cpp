#include "model/classifier.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <filesystem>
#include <fstream>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>
#include <map>
#include <set>

#include "genemask/corpus/tokenizer.hpp"
#include "io/atomic_file.hpp"
#include "io/error.hpp"
#include "io/output_guard.hpp"
#include "io/json.hpp"
#include "io/safetensors.hpp"
#include "model/hf_io.hpp"
#include "model/optim.hpp"
#include "model/runtime.hpp"

namespace genemask::model {
namespace {

bool starts_with(const std::string& s, const char* p) { return s.rfind(p, 0) == 0; }

BertConfig config_for(const std::string& model, const std::string& config, std::string* dir) {
  if (model == "random") {
    *dir = "random";
    return config.find(".json") != std::string::npos ? BertConfig::from_json_file(config) : BertConfig::named(config);
  }
  if (!std::filesystem::is_directory(model))
    throw io::InputError(model, "--model must be \"random\", a model directory or a `genemask pretrain` run");
  *dir = resolve_model_dir(model);
  check_vocab(*dir);
  return BertConfig::from_json_file(*dir + "/config.json");
}

/// Copies the encoder (and the pooler when present) of a checkpoint into m.
bool load_encoder(BertForSequenceClassification& m, const std::string& dir) {
  const bool bin = !std::filesystem::exists(dir + "/model.safetensors");
  const std::string file = dir + (bin ? "/pytorch_model.bin" : "/model.safetensors");
  auto tensors = read_hf_tensors(dir);
  add_bert_prefix(tensors);  // a bare BertModel checkpoint stores its names without "bert."
  torch::NoGradGuard ng;
  auto params = m->named_parameters();
  std::set<std::string> loaded;
  bool pooler = false;
  for (auto& [name, t] : tensors) {
    if (is_head_tensor(name) || name.find("position_ids") != std::string::npos)
      continue;  // pretraining heads, an earlier fine-tuned head, HF's buffer
    auto* p = params.find(name);
    if (!p || !starts_with(name, "bert."))
      throw io::InputError(file, fmt::format("unexpected tensor '{}' (not a BERT encoder or pooler parameter)", name));
    if (p->sizes() != t.sizes())
      throw io::InputError(file, fmt::format("tensor '{}' has shape {}, the model expects {}", name,
                                             fmt::join(t.sizes().vec(), "x"), fmt::join(p->sizes().vec(), "x")));
    p->copy_(t.to(p->dtype()));
    loaded.insert(name);
    pooler = pooler || starts_with(name, "bert.pooler.");
  }
  for (const auto& p : params) {
    const std::string& n = p.key();
    if (starts_with(n, "classifier.") || (starts_with(n, "bert.pooler.") && !pooler)) continue;
    if (!loaded.count(n)) throw io::InputError(file, fmt::format("tensor '{}' is missing", n));
  }
  return pooler;
}

/// The last encoder layer for the [CLS] position only: the pooler reads nothing else, so
/// queries, attention output and the feed-forward block (the bulk of a layer's work) run
/// on one position instead of L. Keys and values still come from every position.
torch::Tensor last_layer_cls_only(BertLayerImpl& l, const Hidden& hidden, const torch::Tensor& key_mask) {
  auto& sa = *l.attention->self;
  const torch::Tensor& x = hidden.for_product();
  const int64_t B = x.size(0), L = x.size(1), h = sa.heads, d = sa.head_dim;
  auto q = affine(sa.query, x.narrow(1, 0, 1)).view({B, 1, h, d}).transpose(1, 2);
  auto k = affine(sa.key, x).view({B, L, h, d}).transpose(1, 2);
  auto v = affine(sa.value, x).view({B, L, h, d}).transpose(1, 2);
  auto ctx = attention(q, k, v, key_mask, sa.is_training() ? sa.dropout_p : 0.0).transpose(1, 2).reshape({B, 1, h * d});
  auto a = l.attention->output->forward_hidden(ctx, hidden.x.narrow(1, 0, 1), true);
  return l.output(l.intermediate(a), a.x);  // [B, 1, H]
}

}  // namespace

BertPoolerImpl::BertPoolerImpl(const BertConfig& c) {
  dense = register_module("dense", torch::nn::Linear(c.hidden_size, c.hidden_size));
}

torch::Tensor BertPoolerImpl::forward(const torch::Tensor& hidden) { return torch::tanh(dense(hidden.select(1, 0))); }

BertForSequenceClassificationImpl::BertForSequenceClassificationImpl(const BertConfig& c, int64_t n)
    : config(c), num_labels(n) {
  config.validate();
  if (n < 2) throw std::invalid_argument(fmt::format("a classifier needs 2 or more classes, got {}", n));
  bert = register_module("bert", BertModel(c));
  pooler = bert->register_module("pooler", BertPooler(c));
  dropout = register_module("dropout", torch::nn::Dropout(c.hidden_dropout_prob));
  classifier = register_module("classifier", torch::nn::Linear(c.hidden_size, n));
}

torch::Tensor BertForSequenceClassificationImpl::forward(const torch::Tensor& input_ids,
                                                         const torch::Tensor& attention_mask) {
  // BertModel::forward, with the last layer restricted to [CLS] (same logits).
  Hidden x = bert->embeddings(input_ids, torch::zeros_like(input_ids));
  const auto key_mask = key_mask_of(attention_mask);
  auto& layers = *bert->encoder->layer;
  const size_t n = layers.size();
  for (size_t i = 0; i + 1 < n; ++i) x = layers.ptr(i)->as<BertLayerImpl>()->forward_hidden(x, key_mask, true);
  return head(last_layer_cls_only(*layers.ptr(n - 1)->as<BertLayerImpl>(), x, key_mask));
}

torch::Tensor BertForSequenceClassificationImpl::forward_full(const torch::Tensor& input_ids,
                                                              const torch::Tensor& attention_mask) {
  return head(bert(input_ids, attention_mask));
}

torch::Tensor BertForSequenceClassificationImpl::head(const torch::Tensor& hidden) {
  // Pooler and classifier in fp32, outside autocast: under bf16 the logits would carry an
  // 8-bit mantissa, and the test set's scores would tie often enough to lower its AUC
  // (measured: -0.012 at 50 shots, docs/benchmarks.md). Two small products; no-ops in fp32.
  NoAutocast no_autocast;
  return classifier(dropout(pooler(hidden.slice(1, 0, 1).to(torch::kFloat32))));
}

BertForSequenceClassification build_classifier(const std::string& model, const std::string& config, int64_t num_labels,
                                               double dropout, uint64_t seed, ClassifierSource* source) {
  ClassifierSource src;
  BertConfig c = config_for(model, config, &src.dir);
  if (dropout < 0 || dropout >= 1) throw std::invalid_argument(fmt::format("--dropout {} must be in [0, 1)", dropout));
  c.hidden_dropout_prob = c.attention_probs_dropout_prob = dropout;
  torch::manual_seed(seed);
  BertForSequenceClassification m(c, num_labels);
  init_weights(*m, c);  // HF: normal(0, initializer_range), zero biases, LayerNorm 1/0
  if (model != "random") src.pooler_loaded = load_encoder(m, src.dir);
  if (source) *source = src;
  return m;
}

std::unique_ptr<torch::optim::AdamW> make_adamw(BertForSequenceClassification& m, double lr, double weight_decay) {
  AdamWSettings s;
  s.lr = lr;
  s.weight_decay = weight_decay;
  return model::make_adamw(m->named_parameters(), s);
}

double linear_warmup_lr(double peak, int64_t step, int64_t warmup, int64_t steps) {
  if (step < warmup) return peak * static_cast<double>(step) / static_cast<double>(std::max<int64_t>(1, warmup));
  return peak * std::max(0.0, static_cast<double>(steps - step) / static_cast<double>(std::max<int64_t>(1, steps - warmup)));
}

double train_step(BertForSequenceClassification& m, torch::optim::AdamW& opt, const torch::Tensor& ids,
                  const torch::Tensor& mask, const torch::Tensor& labels, double lr, double clip, bool bf16) {
  opt.zero_grad();
  torch::Tensor logits;
  {
    Autocast autocast(bf16);
    logits = m->forward(ids, mask);
  }
  auto loss = torch::nn::functional::cross_entropy(logits.to(torch::kFloat32), labels);
  loss.backward();
  if (clip > 0) torch::nn::utils::clip_grad_norm_(m->parameters(), clip);
  for (auto& g : opt.param_groups()) static_cast<torch::optim::AdamWOptions&>(g.options()).lr(lr);
  opt.step();
  return loss.item<double>();
}

void save_classifier_hf(BertForSequenceClassification& m, const std::vector<std::string>& class_names,
                        const std::string& dir) {
  std::filesystem::create_directories(dir);
  auto j = nlohmann::ordered_json::parse(m->config.to_json());
  j["architectures"] = {"BertForSequenceClassification"};
  nlohmann::ordered_json id2label = nlohmann::ordered_json::object(), label2id = nlohmann::ordered_json::object();
  for (size_t i = 0; i < class_names.size(); ++i) {
    id2label[std::to_string(i)] = class_names[i];
    label2id[class_names[i]] = i;
  }
  j["id2label"] = id2label;
  j["label2id"] = label2id;
  j["problem_type"] = "single_label_classification";
  {
    io::AtomicFile f(dir + "/config.json");
    f.stream() << io::json_text(j, 2) << '\n';
    f.commit();
  }
  write_vocab_and_weights(*m, m->config, dir);
}

BertForSequenceClassification load_classifier_hf(const std::string& dir, std::vector<std::string>* class_names) {
  io::check_output_complete(dir);
  io::verify_output_files(dir);  // a classifier `finetune --save-model` wrote: its files as it wrote them
  const std::string cfg_path = dir + "/config.json";
  if (!std::filesystem::exists(cfg_path))
    throw io::InputError(dir, "has no config.json: give the directory written by `genemask finetune --save-model`");
  nlohmann::json j = io::read_json_file(cfg_path);
  check_config_object(j, cfg_path);
  check_vocab(dir);
  auto tensors = read_hf_tensors(dir);
  std::vector<std::string> names;
  const auto head = std::find_if(tensors.begin(), tensors.end(), [](const auto& t) { return t.first == "classifier.weight"; });
  if (j.contains("id2label") && j["id2label"].is_object() && !j["id2label"].empty()) {
    const size_t n = j["id2label"].size();
    names.resize(n);
    for (size_t i = 0; i < n; ++i) {
      const std::string key = std::to_string(i);
      if (!j["id2label"].contains(key))
        throw io::InputError(cfg_path, fmt::format("id2label lacks id {} (ids must be 0..{})", i, n - 1));
      names[i] = j["id2label"][key].is_string() ? j["id2label"][key].get<std::string>() : j["id2label"][key].dump();
    }
  } else if (j.contains("num_labels") && j["num_labels"].is_number_integer()) {
    for (int64_t i = 0; i < j["num_labels"].get<int64_t>(); ++i) names.push_back(std::to_string(i));
  } else if (head != tensors.end() && head->second.dim() == 2) {
    // transformers leaves the default two labels out of config.json: the head says how many.
    for (int64_t i = 0; i < head->second.size(0); ++i) names.push_back(std::to_string(i));
  } else {
    throw io::InputError(cfg_path, "has neither id2label nor num_labels, and the weights no classifier.weight: not a "
                                   "sequence classifier");
  }
  // What the probabilities mean: a softmax over classes that exclude each other. A multi-label
  // head (a sigmoid per label) or a regression head read as that would publish numbers
  // transformers does not give for the same model.
  if (j.contains("problem_type") && !j["problem_type"].is_null() &&
      j["problem_type"] != nlohmann::json("single_label_classification"))
    throw io::InputError(cfg_path, fmt::format("problem_type is {}: genemask scores single-label classifiers (a softmax "
                                               "over classes), as `genemask finetune --save-model` writes them",
                                               io::json_excerpt(j["problem_type"])));
  if (names.size() < 2)
    throw io::InputError(cfg_path, fmt::format("has {} label(s): a classifier has at least 2 classes (one label is a "
                                               "regression head)",
                                               names.size()));
  {
    std::map<std::string, size_t> id_of;
    for (size_t i = 0; i < names.size(); ++i)
      if (auto [it, fresh] = id_of.emplace(names[i], i); !fresh)
        throw io::InputError(cfg_path, fmt::format("id2label names class '{}' for ids {} and {}: each class has one "
                                                   "name, or predictions cannot say which was meant",
                                                   names[i], it->second, i));
    // label2id, when given, must not contradict id2label: a class it names must have
    // id2label's id. (Names id2label lacks, such as transformers' default LABEL_0 left beside
    // an edited id2label, are not read: predictions take id2label's names, as transformers does.)
    if (j.contains("label2id") && j["label2id"].is_object() && j.contains("id2label"))
      for (const auto& [name, id] : j["label2id"].items()) {
        auto it = id_of.find(name);
        if (it == id_of.end()) continue;
        if (!id.is_number_integer() || static_cast<int64_t>(it->second) != id.get<int64_t>())
          throw io::InputError(cfg_path, fmt::format("label2id maps '{}' to {}, but id2label gives it id {}: the two "
                                                     "contradict each other; correct one of them",
                                                     name, io::json_excerpt(id), it->second));
      }
  }
  BertConfig c = BertConfig::from_json_file(cfg_path);
  c.hidden_dropout_prob = c.attention_probs_dropout_prob = 0.0;
  BertForSequenceClassification m(c, static_cast<int64_t>(names.size()));
  const std::string file = dir + (std::filesystem::exists(dir + "/model.safetensors") ? "/model.safetensors" : "/pytorch_model.bin");
  torch::NoGradGuard ng;
  auto params = m->named_parameters();
  std::set<std::string> loaded;
  for (auto& [name, t] : tensors) {
    if (starts_with(name, "cls.") || name.find("position_ids") != std::string::npos) continue;
    auto* p = params.find(name);
    if (!p) throw io::InputError(file, fmt::format("unexpected tensor '{}' (not a BertForSequenceClassification parameter)", name));
    if (p->sizes() != t.sizes())
      throw io::InputError(file, fmt::format("tensor '{}' has shape {}, the model expects {}", name,
                                             fmt::join(t.sizes().vec(), "x"), fmt::join(p->sizes().vec(), "x")));
    p->copy_(t.to(p->dtype()));
    loaded.insert(name);
  }
  for (const auto& p : params)
    if (!loaded.count(p.key()))
      throw io::InputError(file, fmt::format("tensor '{}' is missing{}", p.key(),
                                             starts_with(p.key(), "classifier.") || starts_with(p.key(), "bert.pooler.")
                                                 ? ": not a fine-tuned classifier (use `genemask finetune --save-model`)"
                                                 : ""));
  m->eval();
  if (class_names) *class_names = names;
  return m;
}

}  // namespace genemask::model
