#include "model/bert.hpp"
#include "model/packing.hpp"

#include "model/attention_cpu.hpp"
#include "model/bias_gelu.hpp"
#include "model/feed_forward.hpp"
#include "model/cross_entropy.hpp"
#include "model/cudnn_attention.hpp"
#include "model/linear_bgrad.hpp"
#include "model/qkv_linear.hpp"
#include "model/weight_copies.hpp"
#include "model/linear_cpu.hpp"
#include "model/fusions.hpp"
#include "model/grad_sync.hpp"
#include "model/residual_layer_norm.hpp"

#include <ATen/autocast_mode.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <fmt/format.h>
#include <fstream>
#include <limits>
#include <optional>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "genemask/corpus/tokenizer.hpp"
#include "io/error.hpp"
#include "io/json.hpp"

namespace genemask::model {

BertConfig BertConfig::named(const std::string& name) {
  BertConfig c;
  if (name == "dnabert") return c;
  if (name == "logo") {
    c.hidden_size = 256;
    c.num_hidden_layers = 2;
    c.num_attention_heads = 8;
    c.intermediate_size = 3072;
    c.hidden_dropout_prob = 0.0;
    c.attention_probs_dropout_prob = 0.0;
    return c;
  }
  throw std::invalid_argument(fmt::format("unknown model '{}' (expected dnabert, logo or a config.json)", name));
}

int64_t BertConfig::max_tokens() const { return std::min<int64_t>(kMaxTokens, max_position_embeddings - 2); }

void BertConfig::validate() const {
  if (hidden_size <= 0 || num_attention_heads <= 0 || hidden_size % num_attention_heads != 0)
    throw std::invalid_argument(fmt::format("hidden_size {} must be a positive multiple of num_attention_heads {}",
                                            hidden_size, num_attention_heads));
  if (hidden_act != "gelu")
    throw std::invalid_argument(fmt::format("hidden_act '{}' is not supported (only erf-GELU, \"gelu\")", hidden_act));
  if (vocab_size <= 0 || num_hidden_layers <= 0 || intermediate_size <= 0 || max_position_embeddings <= 0 ||
      type_vocab_size <= 0)
    throw std::invalid_argument("config sizes must be positive");
  if (max_position_embeddings < 3)
    throw std::invalid_argument(fmt::format(
        "max_position_embeddings is {}: an input needs at least 3 positions ([CLS], one 6-mer, [SEP])",
        max_position_embeddings));
  // Bounds before anything is allocated: a config is a file a user may have got anywhere.
  const std::pair<const char*, int64_t> limits[] = {
      {"hidden_size", 65536}, {"num_hidden_layers", 1024}, {"num_attention_heads", 1024},
      {"intermediate_size", 262144}, {"max_position_embeddings", 1 << 20}, {"type_vocab_size", 1024}};
  const int64_t values[] = {hidden_size, num_hidden_layers, num_attention_heads, intermediate_size,
                            max_position_embeddings, type_vocab_size};
  for (size_t i = 0; i < std::size(values); ++i)
    if (values[i] > limits[i].second)
      throw std::invalid_argument(
          fmt::format("{} is {}, more than genemask accepts ({})", limits[i].first, values[i], limits[i].second));
  if (vocab_size != kVocabSize)
    throw std::invalid_argument(fmt::format(
        "vocab_size is {}, but genemask's tokenizer (DNABERT-6) has {} tokens", vocab_size, kVocabSize));
  if (pad_token_id < 0 || pad_token_id >= vocab_size)
    throw std::invalid_argument(fmt::format("pad_token_id {} is not a token id (0..{})", pad_token_id, vocab_size - 1));
  if (!(hidden_dropout_prob >= 0 && hidden_dropout_prob < 1 && attention_probs_dropout_prob >= 0 &&
        attention_probs_dropout_prob < 1))
    throw std::invalid_argument("hidden_dropout_prob and attention_probs_dropout_prob must be in [0, 1)");
  if (!(layer_norm_eps > 0 && std::isfinite(layer_norm_eps)))
    throw std::invalid_argument(fmt::format("layer_norm_eps must be positive, got {}", layer_norm_eps));
  // The weights alone (fp32) must fit in this machine's memory.
  const double H = static_cast<double>(hidden_size), F = static_cast<double>(intermediate_size);
  const double params = (static_cast<double>(vocab_size + max_position_embeddings + type_vocab_size) + 2) * H +
                        static_cast<double>(num_hidden_layers) * (4 * H * H + 2 * H * F + F + 9 * H) + H * H +
                        static_cast<double>(vocab_size);
  const double bytes = 4 * params;
  const double ram = static_cast<double>(::sysconf(_SC_PHYS_PAGES)) * static_cast<double>(::sysconf(_SC_PAGESIZE));
  if (ram > 0 && bytes > ram)
    throw std::invalid_argument(fmt::format("the model would have {:.3g} parameters ({:.1f} GiB of fp32 weights alone), "
                                            "more than this machine's memory ({:.1f} GiB)",
                                            params, bytes / (1 << 30), ram / (1 << 30)));
}

void check_config_object(const nlohmann::json& j, const std::string& path) {
  if (!j.is_object())
    throw io::InputError(path, fmt::format("holds a JSON {} ({}), not an object of model settings: a model's "
                                           "config.json is {{\"vocab_size\": ..., \"hidden_size\": ..., ...}} as "
                                           "transformers writes it",
                                           j.type_name(), io::excerpt(j.dump(), 40)));
}

namespace {
/// Edits (insertions, deletions, substitutions) between a and b.
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

/// The boolean `key` of a config (`fallback` when absent or null); anything else is an error.
bool json_flag(const nlohmann::json& j, const char* key, const std::string& path, bool fallback) {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  if (!j[key].is_boolean())
    throw io::InputError(path, fmt::format("{} is {}, not true or false", key, io::json_excerpt(j[key])));
  return j[key].get<bool>();
}

/// A config.json's settings that genemask's BERT does not implement (other position
/// embeddings, a decoder's causal attention, cross-attention, pruned heads), and keys that
/// look like a misspelt BERT key ("max_position_embedding", "hidden_dropout") when that key
/// itself is absent: each would otherwise be dropped without a word, and another model run
/// than the config describes. Keys of transformers' other settings (architectures, id2label,
/// torch_dtype, ...) are left alone. (tie_word_embeddings false is read into the config and
/// judged by the weights: an untied decoder matters only to what trains or exports the MLM
/// head, hf_io.hpp require_tied_decoder; `pretrain --model CONFIG.json`, with no weights,
/// refuses it.)
void check_unsupported_keys(const nlohmann::json& j, const std::string& path) {
  if (j.contains("position_embedding_type") && !j["position_embedding_type"].is_null() &&
      j["position_embedding_type"] != nlohmann::json("absolute"))
    throw io::InputError(path, fmt::format("position_embedding_type is {}: genemask's BERT has absolute position "
                                           "embeddings only",
                                           io::json_excerpt(j["position_embedding_type"])));
  // transformers' settings that make another model of the same weights: a decoder (causal
  // attention), cross-attention layers, pruned heads.
  const auto flag = [&](const char* key) { return json_flag(j, key, path, false); };
  if (flag("is_decoder"))
    throw io::InputError(path, fmt::format("is_decoder is {}: transformers runs this BERT as a decoder (each position "
                                           "attends to those before it only); genemask's BERT is an encoder (every "
                                           "position attends to all), so its outputs would be another model's",
                                           io::json_excerpt(j["is_decoder"])));
  if (flag("add_cross_attention"))
    throw io::InputError(path, fmt::format("add_cross_attention is {}: genemask's BERT has no cross-attention layers",
                                           io::json_excerpt(j["add_cross_attention"])));
  if (j.contains("pruned_heads") && !j["pruned_heads"].is_null() &&
      !(j["pruned_heads"].is_object() && j["pruned_heads"].empty()))
    throw io::InputError(path, fmt::format("pruned_heads is {}: transformers prunes those attention heads; genemask's "
                                           "BERT has every head of every layer",
                                           io::json_excerpt(j["pruned_heads"])));
  static const char* const kKeys[] = {"vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                                      "intermediate_size", "max_position_embeddings", "type_vocab_size", "pad_token_id",
                                      "hidden_dropout_prob", "attention_probs_dropout_prob", "layer_norm_eps",
                                      "initializer_range", "hidden_act", "position_embedding_type",
                                      "tie_word_embeddings", "model_type", "is_decoder", "add_cross_attention",
                                      "pruned_heads"};
  for (const auto& [key, value] : j.items()) {
    (void)value;
    if (std::any_of(std::begin(kKeys), std::end(kKeys), [&](const char* k) { return key == k; })) continue;
    for (const char* k : kKeys) {
      const std::string known = k;
      if (j.contains(known)) continue;  // the key it resembles is there itself: nothing is ignored
      const bool prefix = key.size() >= 6 && (known.rfind(key, 0) == 0 || key.rfind(known, 0) == 0);
      if (prefix || edit_distance(key, known) <= 2)
        throw io::InputError(path, fmt::format("has a key '{}', which is no BERT setting: is it a misspelt '{}'? "
                                               "(it would be ignored and {}'s default used)",
                                               io::excerpt(key, 60), known, known));
    }
  }
}
}  // namespace

BertConfig BertConfig::from_json_file(const std::string& path) {
  nlohmann::json j = io::read_json_file(path);
  check_config_object(j, path);
  BertConfig c;
  try {
    if (j.contains("model_type") && j["model_type"] != "bert")
      throw io::InputError(path, fmt::format("model_type is {}, only \"bert\" is supported", j["model_type"].dump()));
    check_unsupported_keys(j, path);
    // Integers (1e9 written as a float is accepted; 1e30 or 2.5 are not): a float out of
    // int64's range would be undefined behaviour to convert.
    auto integer = [&](const char* key, std::optional<int64_t> fallback) -> int64_t {
      if (!j.contains(key) || j[key].is_null()) {
        if (fallback) return *fallback;
        throw io::InputError(path, fmt::format("field '{}' is missing", key));
      }
      const auto& v = j[key];
      if (v.is_number_integer()) return v.get<int64_t>();
      if (v.is_number_float()) {
        const double d = v.get<double>();
        if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9e15) return static_cast<int64_t>(d);
      }
      throw io::InputError(path, fmt::format("field '{}' must be an integer, got {}", key, v.dump()));
    };
    c.vocab_size = integer("vocab_size", std::nullopt);
    c.hidden_size = integer("hidden_size", std::nullopt);
    c.num_hidden_layers = integer("num_hidden_layers", std::nullopt);
    c.num_attention_heads = integer("num_attention_heads", std::nullopt);
    c.intermediate_size = integer("intermediate_size", std::nullopt);
    c.max_position_embeddings = integer("max_position_embeddings", 512);
    c.type_vocab_size = integer("type_vocab_size", 2);
    c.pad_token_id = integer("pad_token_id", 0);
    c.hidden_dropout_prob = j.value("hidden_dropout_prob", 0.1);
    c.attention_probs_dropout_prob = j.value("attention_probs_dropout_prob", 0.1);
    c.layer_norm_eps = j.value("layer_norm_eps", 1e-12);
    c.initializer_range = j.value("initializer_range", 0.02);
    c.hidden_act = j.value("hidden_act", std::string("gelu"));
    c.tie_word_embeddings = json_flag(j, "tie_word_embeddings", path, true);
  } catch (const nlohmann::json::exception& e) {
    throw io::InputError(path, fmt::format("missing or malformed field: {}", e.what()));
  }
  try {
    c.validate();
  } catch (const std::invalid_argument& e) {
    throw io::InputError(path, e.what());
  }
  return c;
}

std::string BertConfig::to_json() const {
  nlohmann::ordered_json j;
  j["architectures"] = {"BertForMaskedLM"};
  j["model_type"] = "bert";
  j["vocab_size"] = vocab_size;
  j["hidden_size"] = hidden_size;
  j["num_hidden_layers"] = num_hidden_layers;
  j["num_attention_heads"] = num_attention_heads;
  j["intermediate_size"] = intermediate_size;
  j["hidden_act"] = hidden_act;
  j["hidden_dropout_prob"] = hidden_dropout_prob;
  j["attention_probs_dropout_prob"] = attention_probs_dropout_prob;
  j["max_position_embeddings"] = max_position_embeddings;
  j["type_vocab_size"] = type_vocab_size;
  j["layer_norm_eps"] = layer_norm_eps;
  j["initializer_range"] = initializer_range;
  j["pad_token_id"] = pad_token_id;
  return j.dump(2) + "\n";
}

namespace {
torch::nn::LayerNorm layer_norm(const BertConfig& c) {
  return torch::nn::LayerNorm(torch::nn::LayerNormOptions({c.hidden_size}).eps(c.layer_norm_eps));
}

/// Whether the residual LayerNorms on `dev` make the bf16 copy of their output: ln-bf16 in
/// force (of `f`) and bf16 autocast on for the device (otherwise the products read x as it is).
bool copies_for_products(const Fusions& f, const torch::Device& dev) {
  return f.ln_bf16 && at::autocast::is_autocast_enabled(dev.type()) &&
         at::autocast::get_autocast_dtype(dev.type()) == at::kBFloat16;
}
}  // namespace

torch::Tensor affine(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                     const torch::Tensor& weight_low, const torch::Tensor& bias_low) {
  // The bf16 copies of weight and bias kept between steps (weight_copies.hpp), where in force:
  // given, or found for parameters that have one; undefined otherwise (autocast casts).
  const WeightCopies* copies = weight_copies_for(x.device());
  const torch::Tensor wl = weight_low.defined() ? weight_low : low_copy(copies, weight);
  const torch::Tensor bl = bias_low.defined() ? bias_low : low_copy(copies, bias);
  // On a GPU under bf16 with bgrad in force, the node whose backward sums the bias's gradient
  // in the weight-gradient product (linear_bgrad.hpp); with bias-sum (and not bgrad), the
  // same node summing it with the column-sum kernel; on the CPU under bf16, the bias in
  // oneDNN's epilogue (linear_cpu.hpp, the same numbers); elsewhere ATen's linear. Each reads
  // the copies where there are some.
  if (bias.defined() && x.is_cuda()) {
    const Fusions f = fusions();
    if ((f.bgrad || f.bias_sum) && linear_bgrad_takes(x, weight, bias))
      return linear_bgrad(x, weight, bias, f.bgrad ? BiasGrad::epilogue : BiasGrad::column_sum, wl, bl);
  }
  const torch::Tensor w = low_operand(wl, weight), b = bias.defined() ? low_operand(bl, bias) : bias;
  if (cpu_bias_linear_takes(x, w, b)) return cpu_bias_linear(x, w, b);
  return at::linear(x, w, b);
}
torch::Tensor affine(const torch::nn::Linear& m, const torch::Tensor& x) { return affine(x, m->weight, m->bias); }

BertEmbeddingsImpl::BertEmbeddingsImpl(const BertConfig& c) {
  word_embeddings = register_module("word_embeddings", torch::nn::Embedding(c.vocab_size, c.hidden_size));
  position_embeddings =
      register_module("position_embeddings", torch::nn::Embedding(c.max_position_embeddings, c.hidden_size));
  token_type_embeddings = register_module("token_type_embeddings", torch::nn::Embedding(c.type_vocab_size, c.hidden_size));
  LayerNorm = register_module("LayerNorm", layer_norm(c));
  dropout = register_module("dropout", torch::nn::Dropout(c.hidden_dropout_prob));
}

torch::Tensor BertEmbeddingsImpl::forward(const torch::Tensor& input_ids, const torch::Tensor& token_type_ids,
                                          const torch::Tensor& position_ids) {
  const int64_t L = input_ids.size(1);
  // Checked on the host (a size, no synchronisation): past the table, the lookup is an index
  // error on the CPU and a device-side assert that poisons the CUDA context on a GPU.
  const int64_t max_pos = position_embeddings->options.num_embeddings();
  if (L > max_pos)
    throw std::invalid_argument(fmt::format(
        "an input of {} positions is longer than the model's max_position_embeddings ({})", L, max_pos));
  auto pos = position_ids.defined() ? position_ids : torch::arange(L, input_ids.options().dtype(torch::kLong)).unsqueeze(0);
  auto e = word_embeddings(input_ids) + position_embeddings(pos) + token_type_embeddings(token_type_ids);
  return dropout(LayerNorm(e));
}

const torch::Tensor& PackedLayout::block_mask() const {
  if (!block_mask_.defined()) {
    // On the device from cu_seqlens alone (no host data: a CUDA graph can capture it): each
    // position's segment is the number of boundaries at or before it; zero-length segments
    // (a fixed-shape layout's padding, model/graph_step.hpp) hold no position.
    const int64_t R = position_ids.size(0), L = position_ids.size(1);
    const auto cu = cu_seqlens.to(torch::kLong);
    const auto seg = torch::searchsorted(cu, torch::arange(R * L, cu.options()), /*out_int32=*/false, /*right=*/true)
                         .view({R, L});
    block_mask_ = (seg.unsqueeze(2) == seg.unsqueeze(1)).unsqueeze(1);
  }
  return block_mask_;
}

const torch::Tensor& PackedLayout::cudnn_cu_seqlens() const {
  if (!cudnn_cu_seqlens_.defined()) {
    const int64_t S = cu_seqlens.numel() - 1;
    int64_t padded = 64;
    while (padded < S) padded *= 2;
    // The appended boundaries repeat the last one (on the device: no host data).
    cudnn_cu_seqlens_ = padded == S ? cu_seqlens
                                    : torch::cat({cu_seqlens, cu_seqlens.narrow(0, S, 1).expand({padded - S})});
  }
  return cudnn_cu_seqlens_;
}

PackedLayout packed_layout(const PackedBatch& p, const torch::Device& dev) {
  PackedLayout l;
  l.position_ids = torch::tensor(p.position_ids, torch::kLong).view({p.rows, p.cols}).to(dev);
  l.segments = torch::tensor(p.cu_seqlens, torch::kLong);
  l.cu_seqlens = l.segments.to(dev, torch::kInt);
  l.max_seqlen = p.max_seqlen;
  return l;
}

std::string to_string(PackedAttentionPath path) {
  switch (path) {
    case PackedAttentionPath::CpuSegments: return "cpu-segments";
    case PackedAttentionPath::FlashVarlen: return "flash-varlen";
    case PackedAttentionPath::CudnnRagged: return "cudnn-ragged";
    case PackedAttentionPath::BlockMask: return "block-mask";
  }
  return "unknown";
}

namespace {
/// cuDNN could not build its ragged attention's graph in this process (said once): packed
/// attention takes flash attention's varlen kernels from then on.
std::atomic<bool> g_cudnn_ragged_failed{false};
/// The paths packed_attention ran (a bit per PackedAttentionPath).
std::atomic<unsigned> g_packed_paths_taken{0};
void note_taken(PackedAttentionPath path) { g_packed_paths_taken.fetch_or(1u << static_cast<unsigned>(path)); }
}  // namespace

std::vector<std::string> packed_attention_paths_taken() {
  std::vector<std::string> names;
  const unsigned taken = g_packed_paths_taken.load();
  for (auto p : {PackedAttentionPath::CpuSegments, PackedAttentionPath::FlashVarlen, PackedAttentionPath::CudnnRagged,
                 PackedAttentionPath::BlockMask})
    if (taken & (1u << static_cast<unsigned>(p))) names.push_back(to_string(p));
  return names;
}

PackedAttentionPath packed_attention_path(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) {
  if (q.device().is_cpu()) return PackedAttentionPath::CpuSegments;
  const auto t = q.scalar_type();
  const int64_t d = q.size(-1);
  // Flash attention's conditions: Ampere or newer, 16-bit floats, a head size it was built for.
  if (q.device().is_cuda() && (t == torch::kBFloat16 || t == torch::kHalf) && k.scalar_type() == t &&
      v.scalar_type() == t && d % 8 == 0 && d <= 256 && v.size(-1) == d && gpu_bf16_native(q.device().index())) {
    // cudnn-varlen: cuDNN's SDPA over the ragged segments, where it takes the inputs (and
    // cuDNN could build its graphs so far in this process).
    if (fusions().cudnn_varlen && at::globalContext().userEnabledCuDNN() && !g_cudnn_ragged_failed.load() &&
        cudnn_ragged_attention_refusal(q, k, v).empty())
      return PackedAttentionPath::CudnnRagged;
    return PackedAttentionPath::FlashVarlen;
  }
  return PackedAttentionPath::BlockMask;
}

torch::Tensor packed_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                               const PackedLayout& layout, double dropout_p) {
  const PackedAttentionPath path = packed_attention_path(q, k, v);
  if (path != PackedAttentionPath::CudnnRagged) note_taken(path);  // that one where cuDNN ran it
  if (path == PackedAttentionPath::CpuSegments) {
    // With dropout, and in bf16 (where the kernel's oneDNN products use the CPU's bf16
    // matrix units, and LibTorch's CPU flash kernel was measured no faster than in fp32 on
    // an AMX Xeon), the kernel over segments.
    const bool bf16 = q.scalar_type() == torch::kBFloat16 ||
                      (at::autocast::is_autocast_enabled(at::kCPU) &&
                       at::autocast::get_autocast_dtype(at::kCPU) == at::kBFloat16);
    if (dropout_p > 0 || bf16)
      return attention_dropout_cpu(q, k, v, {}, dropout_p, dropout_p > 0 ? next_cpu_dropout_seed() : 0,
                                   layout.segments);
    // Without dropout in fp32, LibTorch's CPU flash kernel is faster than the kernel over
    // segments (about 1.17x at uniform lengths, train_bench logo on a 2-core EPYC): one call
    // per segment on views, the row joined again.
    const int64_t L = q.size(2), S = layout.segments.numel() - 1;
    const int64_t* b = layout.segments.data_ptr<int64_t>();
    std::vector<torch::Tensor> rows, parts;
    for (int64_t s = 0; s < S; ++s) {
      const int64_t row = b[s] / L, start = b[s] % L, len = b[s + 1] - b[s];
      if (len == 0) continue;  // a fixed-shape layout's trailing zero-length segments
      auto seg = [&](const torch::Tensor& t) { return t.narrow(0, row, 1).narrow(2, start, len); };
      parts.push_back(at::scaled_dot_product_attention(seg(q), seg(k), seg(v)));
      if (b[s + 1] % L == 0) {
        rows.push_back(parts.size() == 1 ? parts[0] : torch::cat(parts, 2));
        parts.clear();
      }
    }
    return rows.size() == 1 ? rows[0] : torch::cat(rows, 0);
  }
  if (path == PackedAttentionPath::FlashVarlen) {
    const int64_t R = q.size(0), h = q.size(1), L = q.size(2), d = q.size(3);
    // [R, h, L, d] views of the [R, L, h, d] projections: back to those, then the R x L
    // positions as one run of tokens (a view: no copy).
    auto tokens = [&](const torch::Tensor& t) { return t.transpose(1, 2).reshape({R * L, h, d}); };
    auto out = std::get<0>(at::_flash_attention_forward(tokens(q), tokens(k), tokens(v), layout.cu_seqlens,
                                                        layout.cu_seqlens, layout.max_seqlen, layout.max_seqlen,
                                                        dropout_p, /*is_causal=*/false, /*return_debug_mask=*/false));
    return out.view({R, L, h, d}).transpose(1, 2);
  }
  if (path == PackedAttentionPath::CudnnRagged) {
    // Q, K and V where the product wrote them; a graph per shape, so the segments are padded
    // to a power of two (cudnn_cu_seqlens) and the longest rounded up (cudnn_attention.hpp).
    try {
      auto out = cudnn_ragged_attention(q, k, v, layout.cudnn_cu_seqlens(), layout.max_seqlen, dropout_p);
      note_taken(path);
      return out;
    } catch (const CudnnGraphUnsupported& e) {
      // Before anything ran: flash attention from now on, said once.
      if (!g_cudnn_ragged_failed.exchange(true))
        fmt::print(stderr, "note: cudnn-varlen: {}; packed attention takes flash attention's varlen kernels instead\n",
                   e.what());
      return packed_attention(q, k, v, layout, dropout_p);
    }
  }
  std::optional<torch::Tensor> mask = layout.block_mask();
  return at::scaled_dot_product_attention(q, k, v, mask, dropout_p);
}

torch::Tensor attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                        const AttentionMask& m, double dropout_p) {
  if (m.packed) return packed_attention(q, k, v, *m.packed, dropout_p);
  const torch::Tensor& key_mask = m.key_mask;
  // With dropout, LibTorch's CPU SDPA leaves its flash kernel for the math path; the fused
  // CPU kernel (attention_cpu.hpp) is several times faster there.
  if (dropout_p > 0 && q.device().is_cpu()) return attention_dropout_cpu(q, k, v, key_mask, dropout_p, next_cpu_dropout_seed());
  std::optional<torch::Tensor> mask;
  if (key_mask.defined()) mask = key_mask;
  return at::scaled_dot_product_attention(q, k, v, mask, dropout_p);
}

torch::Tensor attention_reference(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                  const torch::Tensor& key_mask, double dropout_p, bool training) {
  auto scores = torch::matmul(q, k.transpose(-1, -2)) / std::sqrt(static_cast<double>(q.size(-1)));
  if (key_mask.defined()) scores = scores + (1.0 - key_mask.to(scores.dtype())) * std::numeric_limits<float>::lowest();
  auto probs = torch::dropout(torch::softmax(scores, -1), dropout_p, training);
  return torch::matmul(probs, v);
}

torch::Tensor key_mask_of(const torch::Tensor& attention_mask) {
  if (!attention_mask.defined()) return {};
  return attention_mask.to(torch::kBool).view({attention_mask.size(0), 1, 1, attention_mask.size(1)});
}

BertSelfAttentionImpl::BertSelfAttentionImpl(const BertConfig& c)
    : dropout_p(c.attention_probs_dropout_prob),
      heads(c.num_attention_heads),
      head_dim(c.hidden_size / c.num_attention_heads) {
  query = register_module("query", torch::nn::Linear(c.hidden_size, c.hidden_size));
  key = register_module("key", torch::nn::Linear(c.hidden_size, c.hidden_size));
  value = register_module("value", torch::nn::Linear(c.hidden_size, c.hidden_size));
  fused_qkv = fusions().qkv;
}

torch::Tensor BertSelfAttentionImpl::forward(const Hidden& hidden, const AttentionMask& key_mask) {
  const torch::Tensor& x = hidden.for_product();
  const int64_t B = x.size(0), L = x.size(1), H = heads * head_dim;
  if (!fused_qkv) {
    auto split = [&](const torch::Tensor& t) { return t.view({B, L, heads, head_dim}).transpose(1, 2); };
    auto ctx = attention(split(affine(query, x)), split(affine(key, x)), split(affine(value, x)), key_mask, is_training() ? dropout_p : 0.0);
    return ctx.transpose(1, 2).reshape({B, L, H});
  }
  // One product for Q, K and V: the three weights stacked (HF's separate parameters stay
  // the trained ones; the stack is a copy of 3 H^2 floats per call). Under autocast x is
  // cast to bf16 once instead of three times, and in the backward pass the gradient of x
  // comes out of one product instead of three that are then cast and summed.
  const std::array<torch::Tensor, 3> ws{query->weight, key->weight, value->weight}, bs{query->bias, key->bias, value->bias};
  auto w = torch::cat({ws[0], ws[1], ws[2]}, 0);
  auto b = torch::cat({bs[0], bs[1], bs[2]}, 0);
  // Under bf16 with the weights' copies in force (weight_copies.hpp), the product reads the
  // stacked bf16 copies instead of autocast's cast of the concatenations (the same values).
  const WeightCopies* copies = weight_copies_for(x.device());
  const torch::Tensor wl = copies ? copies->low_stack(ws) : torch::Tensor();
  const torch::Tensor bl = copies ? copies->low_stack(bs) : torch::Tensor();
  // With bias-sum (and not bgrad) on a GPU, the node whose backward stacks the three
  // gradients and sums the bias's in one pass (qkv_linear.hpp: the same numbers as the
  // product and unbind below with bias-sum). Otherwise unbind, not three selects: its
  // backward stacks the three gradients in one pass, where each select's backward would fill
  // a zero tensor of the whole product and add into it.
  const Fusions f = fusions();
  const auto parts = f.bias_sum && !f.bgrad && qkv_linear_takes(x, w, b, heads)
                         ? qkv_linear(x, w, b, heads, wl, bl)
                         : affine(x, w, b, wl, bl).view({B, L, 3, heads, head_dim}).unbind(2);
  auto part = [&](size_t i) { return parts[i].transpose(1, 2); };  // [B, heads, L, head_dim]
  auto ctx = attention(part(0), part(1), part(2), key_mask, is_training() ? dropout_p : 0.0);
  return ctx.transpose(1, 2).reshape({B, L, H});
}

BertResidualOutputImpl::BertResidualOutputImpl(int64_t in, const BertConfig& c) {
  dense = register_module("dense", torch::nn::Linear(in, c.hidden_size));
  LayerNorm = register_module("LayerNorm", layer_norm(c));
  dropout = register_module("dropout", torch::nn::Dropout(c.hidden_dropout_prob));
}

torch::Tensor BertResidualOutputImpl::forward(const torch::Tensor& h, const torch::Tensor& residual) {
  return forward_hidden(h, residual, false).x;
}

Hidden BertResidualOutputImpl::forward_hidden(const torch::Tensor& h, const torch::Tensor& residual, bool copy) {
  return forward_residual(affine(dense, h), residual, copy);
}

Hidden BertResidualOutputImpl::forward_residual(const torch::Tensor& d, const torch::Tensor& residual, bool copy) {
  const Fusions f = fusions();
  copy = copy && copies_for_products(f, residual.device());
  // On a GPU, dropout, the add and the LayerNorm as one kernel each way (residual_layer_norm.hpp).
  if (f.ln && fused_residual_layer_norm_takes(d, residual, LayerNorm->weight)) {
    const double p = is_training() ? dropout->options.p() : 0.0, eps = LayerNorm->options.eps();
    if (!copy) return fused_residual_layer_norm(d, residual, LayerNorm->weight, LayerNorm->bias, p, eps);
    auto [y, y_low] = fused_residual_layer_norm_with_copy(d, residual, LayerNorm->weight, LayerNorm->bias, p, eps);
    return {y, y_low};
  }
  auto y = LayerNorm(dropout(d) + residual);
  // Elsewhere the copy is the cast autocast would make of y for the next product (the same
  // values and gradients), made here.
  if (copy) return {y, y.to(torch::kBFloat16)};
  return y;
}

BertAttentionImpl::BertAttentionImpl(const BertConfig& c) {
  self = register_module("self", BertSelfAttention(c));
  output = register_module("output", BertResidualOutput(c.hidden_size, c));
}

Hidden BertAttentionImpl::forward(const Hidden& x, const AttentionMask& key_mask) {
  return output->forward_hidden(self->forward(x, key_mask), x.x, true);
}

BertIntermediateImpl::BertIntermediateImpl(const BertConfig& c) {
  dense = register_module("dense", torch::nn::Linear(c.hidden_size, c.intermediate_size));
}

torch::Tensor BertIntermediateImpl::forward(const Hidden& x) {
  const torch::Tensor& in = x.for_product();
  // On a GPU with gelu in force, the product without its bias, then the bias add and GELU as
  // one kernel each way (bias_gelu.hpp); elsewhere the product with its bias and LibTorch's.
  if (fusions().gelu && fused_bias_gelu_runs_on(in.device())) {
    auto z = affine(in, dense->weight, {});
    if (fused_bias_gelu_takes(z, dense->bias)) return fused_bias_gelu(z, dense->bias);
    return torch::gelu(z + dense->bias);  // a product dtype the kernel does not take (fp16)
  }
  return torch::gelu(affine(dense, in));  // erf GELU
}

BertLayerImpl::BertLayerImpl(const BertConfig& c) {
  attention = register_module("attention", BertAttention(c));
  intermediate = register_module("intermediate", BertIntermediate(c));
  output = register_module("output", BertResidualOutput(c.intermediate_size, c));
}

torch::Tensor BertLayerImpl::forward(const torch::Tensor& x, const AttentionMask& key_mask) {
  return forward_hidden(x, key_mask, false).x;
}

Hidden BertLayerImpl::forward_hidden(const Hidden& x, const AttentionMask& key_mask, bool copy) {
  auto a = attention->forward(x, key_mask);
  // On a Hopper GPU with gemm-gelu in force, the feed-forward as one node whose products carry
  // the bias, GELU and its derivative in their epilogues (feed_forward.hpp).
  const torch::Tensor& in = a.for_product();
  const auto &w1 = intermediate->dense->weight, &b1 = intermediate->dense->bias;
  const auto &w2 = output->dense->weight, &b2 = output->dense->bias;
  if (fusions().gemm_gelu && fused_feed_forward_takes(in, w1, b1, w2, b2)) {
    const WeightCopies* copies = weight_copies_for(in.device());
    return output->forward_residual(
        fused_feed_forward(in, w1, b1, w2, b2, low_copy(copies, w1), low_copy(copies, w2), low_copy(copies, b2)), a.x,
        copy);
  }
  return output->forward_hidden(intermediate->forward(a), a.x, copy);
}

BertEncoderImpl::BertEncoderImpl(const BertConfig& c) {
  layer = register_module("layer", torch::nn::ModuleList());
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) layer->push_back(BertLayer(c));
}

torch::Tensor BertEncoderImpl::forward(torch::Tensor x, const AttentionMask& key_mask) {
  Hidden h(std::move(x));
  const size_t n = layer->size();
  for (size_t i = 0; i < n; ++i) h = layer->ptr(i)->as<BertLayerImpl>()->forward_hidden(h, key_mask, i + 1 < n);
  return h.x;
}

BertModelImpl::BertModelImpl(const BertConfig& c) {
  embeddings = register_module("embeddings", BertEmbeddings(c));
  encoder = register_module("encoder", BertEncoder(c));
}

torch::Tensor BertModelImpl::forward(const torch::Tensor& input_ids, const torch::Tensor& attention_mask) {
  auto x = embeddings(input_ids, torch::zeros_like(input_ids));
  return encoder(x, key_mask_of(attention_mask));
}

torch::Tensor BertModelImpl::forward_packed(const torch::Tensor& input_ids, const PackedLayout& layout) {
  auto x = embeddings(input_ids, torch::zeros_like(input_ids), layout.position_ids);
  return encoder(x, AttentionMask(&layout));
}

torch::Tensor BertModelImpl::forward_layers(const torch::Tensor& input_ids, const torch::Tensor& attention_mask,
                                            int64_t layers) {
  auto x = embeddings(input_ids, torch::zeros_like(input_ids));
  const auto key_mask = key_mask_of(attention_mask);
  auto& all = *encoder->layer;
  const int64_t n = std::min<int64_t>(layers, static_cast<int64_t>(all.size()));
  Hidden h(std::move(x));
  for (int64_t i = 0; i < n; ++i)
    h = all.ptr(static_cast<size_t>(i))->as<BertLayerImpl>()->forward_hidden(h, key_mask, i + 1 < n);
  return h.x;
}

BertPredictionTransformImpl::BertPredictionTransformImpl(const BertConfig& c) {
  dense = register_module("dense", torch::nn::Linear(c.hidden_size, c.hidden_size));
  LayerNorm = register_module("LayerNorm", layer_norm(c));
}

torch::Tensor BertPredictionTransformImpl::forward(const torch::Tensor& x) { return LayerNorm(torch::gelu(affine(dense, x))); }

BertLMPredictionHeadImpl::BertLMPredictionHeadImpl(const BertConfig& c) {
  transform = register_module("transform", BertPredictionTransform(c));
  bias = register_parameter("bias", torch::zeros({c.vocab_size}));
}

BertOnlyMLMHeadImpl::BertOnlyMLMHeadImpl(const BertConfig& c) {
  predictions = register_module("predictions", BertLMPredictionHead(c));
}

BertForMaskedLMImpl::BertForMaskedLMImpl(const BertConfig& c) : config(c) {
  config.validate();
  bert = register_module("bert", BertModel(c));
  cls = register_module("cls", BertOnlyMLMHead(c));
  auto pooler = bert->register_module("pooler", std::make_shared<torch::nn::Module>());
  auto dense = pooler->register_module("dense", std::make_shared<torch::nn::Module>());
  pooler_weight = dense->register_buffer("weight", torch::zeros({c.hidden_size, c.hidden_size}));
  pooler_bias = dense->register_buffer("bias", torch::zeros({c.hidden_size}));
}

torch::Tensor BertForMaskedLMImpl::forward(const torch::Tensor& input_ids, const torch::Tensor& attention_mask) {
  auto h = bert(input_ids, attention_mask);
  auto t = cls->predictions->transform(h);
  return affine(t, bert->embeddings->word_embeddings->weight, cls->predictions->bias);
}

int64_t padded_classes(int64_t classes) { return (classes + 7) / 8 * 8; }

torch::Tensor decoder_logits(const torch::Tensor& t, const torch::Tensor& weight, const torch::Tensor& bias,
                             int64_t columns) {
  const int64_t V = weight.size(0);
  if (columns < V)
    throw std::invalid_argument(fmt::format("decoder_logits: {} columns for {} classes", columns, V));
  if (columns == V) return affine(t, weight, bias);
  // The copies are looked up by their parameters, before the padding makes new tensors; the
  // padded copy is the padded parameter's cast (zeros cast to zeros), so low_operand's
  // gradient reaches the padded parameter and, through the padding's backward, the first V
  // rows of the parameter itself.
  const WeightCopies* copies = weight_copies_for(t.device());
  const torch::Tensor wl = low_copy(copies, weight);
  const torch::Tensor bl = low_copy(copies, bias);
  auto rows = [&](const torch::Tensor& x) {
    return x.defined() ? at::constant_pad_nd(x, {0, 0, 0, columns - V}) : x;
  };
  auto tail = [&](const torch::Tensor& x) { return x.defined() ? at::constant_pad_nd(x, {0, columns - V}) : x; };
  return affine(t, rows(weight), tail(bias), rows(wl), tail(bl));
}

namespace {
/// The MLM head (transform, tied decoder, bias) on the flat positions `rows` of hidden states
/// [B, L, H], over `columns` classes (decoder_logits; -1: the vocabulary's): what forward_rows
/// returns and the losses take.
torch::Tensor head_at_rows(BertForMaskedLMImpl& m, const torch::Tensor& hidden, const torch::Tensor& rows,
                           int64_t columns = -1) {
  auto h = hidden.reshape({-1, hidden.size(-1)}).index_select(0, rows);
  auto t = m.cls->predictions->transform(h);
  const torch::Tensor& w = m.bert->embeddings->word_embeddings->weight;
  return decoder_logits(t, w, m.cls->predictions->bias, columns < 0 ? w.size(0) : columns);
}
}  // namespace

torch::Tensor BertForMaskedLMImpl::forward_rows(const torch::Tensor& input_ids, const torch::Tensor& attention_mask,
                                                const torch::Tensor& rows) {
  return head_at_rows(*this, bert(input_ids, attention_mask), rows);
}

torch::Tensor BertForMaskedLMImpl::masked_lm_loss_sum(const torch::Tensor& input_ids,
                                                      const torch::Tensor& attention_mask,
                                                      const torch::Tensor& labels) {
  auto flat = labels.reshape({-1});
  auto rows = (flat != -100).nonzero().reshape({-1});
  return masked_lm_loss_sum(input_ids, attention_mask, rows, flat.index_select(0, rows));
}

torch::Tensor BertForMaskedLMImpl::masked_lm_loss_sum(const torch::Tensor& input_ids,
                                                      const torch::Tensor& attention_mask, const torch::Tensor& rows,
                                                      const torch::Tensor& targets) {
  return head_loss_sum(bert(input_ids, attention_mask), rows, targets);
}

torch::Tensor BertForMaskedLMImpl::masked_lm_loss_sum(const torch::Tensor& input_ids, const PackedLayout& layout,
                                                      const torch::Tensor& rows, const torch::Tensor& targets) {
  return head_loss_sum(bert->forward_packed(input_ids, layout), rows, targets);
}

torch::Tensor BertForMaskedLMImpl::head_loss_sum(const torch::Tensor& hidden, const torch::Tensor& rows,
                                                 const torch::Tensor& targets) {
  // With ce-pad on a GPU, the decoder's product over the classes padded to a multiple of 8:
  // cuBLAS's aligned kernels instead of its unaligned ones for rows of 4101 bf16 values.
  const int64_t V = config.vocab_size;
  const Fusions f = fusions();
  auto logits = head_at_rows(*this, hidden, rows, f.ce_pad && hidden.is_cuda() ? padded_classes(V) : V);
  // On a GPU with ce in force, one kernel each way over the logits in their own dtype
  // (cross_entropy.hpp), reading the first V columns of each row; elsewhere LibTorch's
  // composition in fp32 on those columns.
  if (f.ce && fused_cross_entropy_takes(logits, targets, V)) return fused_cross_entropy_sum(logits, targets, V);
  if (logits.size(1) != V) logits = logits.narrow(1, 0, V);
  logits = logits.to(torch::kFloat32);
  return torch::nn::functional::cross_entropy(logits, targets,
                                              torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum));
}

torch::Tensor BertForMaskedLMImpl::mlm_loss(const torch::Tensor& logits, const torch::Tensor& labels) {
  return torch::nn::functional::cross_entropy(
      logits.view({-1, logits.size(-1)}), labels.view({-1}),
      torch::nn::functional::CrossEntropyFuncOptions().ignore_index(-100));
}

void init_weights(torch::nn::Module& m, const BertConfig& c) {
  torch::NoGradGuard ng;
  for (auto& b : m.named_buffers()) {  // the carried pooler of BertForMaskedLM
    if (b.key().find("pooler.dense.weight") != std::string::npos) b.value().normal_(0.0, c.initializer_range);
    if (b.key().find("pooler.dense.bias") != std::string::npos) b.value().zero_();
  }
  for (auto& p : m.named_parameters()) {
    const std::string& n = p.key();
    auto& t = p.value();
    if (n.find("LayerNorm.weight") != std::string::npos) {
      t.fill_(1.0);
    } else if (n.find("LayerNorm.bias") != std::string::npos || (n.size() >= 4 && n.compare(n.size() - 4, 4, "bias") == 0)) {
      t.zero_();
    } else {
      t.normal_(0.0, c.initializer_range);
      if (n.find("word_embeddings.weight") != std::string::npos && c.pad_token_id >= 0 && c.pad_token_id < c.vocab_size)
        t[c.pad_token_id].zero_();
    }
  }
}

}  // namespace genemask::model
