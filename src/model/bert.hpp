#pragma once
// BERT encoder + masked-LM head in LibTorch, laid out like Hugging Face's BertForMaskedLM so
// that named_parameters() are HF's names ("bert.embeddings.word_embeddings.weight",
// "bert.encoder.layer.0.attention.self.query.weight", "cls.predictions.bias", ...).
// erf-GELU, LayerNorm eps from the config (1e-12), decoder tied to the word embeddings.
// Attention runs through at::scaled_dot_product_attention with a boolean key mask (padding
// keys get no weight), so a GPU uses its flash, memory-efficient or cuDNN kernels; its
// outputs equal HF's eager attention ((1 - mask) * lowest float added to the scores) within
// float rounding, which the tests check against `attention_reference`.
#include <torch/torch.h>

#include <nlohmann/json_fwd.hpp>
#include <string>

namespace genemask::model {

struct PackedBatch;  // model/packing.hpp

struct BertConfig {
  int64_t vocab_size = 4101, hidden_size = 768, num_hidden_layers = 12, num_attention_heads = 12;
  int64_t intermediate_size = 3072, max_position_embeddings = 512, type_vocab_size = 2, pad_token_id = 0;
  double hidden_dropout_prob = 0.1, attention_probs_dropout_prob = 0.1, layer_norm_eps = 1e-12;
  double initializer_range = 0.02;
  std::string hidden_act = "gelu";
  /// As the config.json says (transformers' default true). genemask's BERT always ties its MLM
  /// decoder; false is kept so that `pretrain --model CONFIG.json` can refuse it. Not written.
  bool tie_word_embeddings = true;

  /// "dnabert" (12 x 768, 12 heads, FFN 3072, dropout 0.1) or "logo" (2 x 256, 8 heads,
  /// FFN 3072, dropout 0), as in the paper's appendix.
  static BertConfig named(const std::string& name);
  /// An HF-style config.json. Errors name the file and the field.
  static BertConfig from_json_file(const std::string& path);
  std::string to_json() const;  // HF config.json text
  void validate() const;
  /// The 6-mer tokens one input can hold between [CLS] and [SEP]: 510 (the 512 positions of
  /// DNABERT and LOGO), or fewer when max_position_embeddings is smaller.
  int64_t max_tokens() const;
};

/// Throws InputError naming `path` when `j` (its parsed text) is not a JSON object: a
/// config.json of `[]` or `42` is named as such, not as a config without fields.
void check_config_object(const nlohmann::json& j, const std::string& path);

/// softmax(q k^T / sqrt(d)) v over keys where `key_mask` is true, for q [B, heads, Lq, d] and
/// k, v [B, heads, L, d]. key_mask: bool, broadcastable to [B, 1, 1, L] (true = a real token),
/// or undefined for "no padding" (which lets a GPU use its flash kernel). dropout_p applies
/// to the attention probabilities. Runs at::scaled_dot_product_attention, except with dropout
/// on the CPU, where the fused attention_dropout_cpu (attention_cpu.hpp) runs instead.
/// A batch of packed rows (model/packing.hpp) on the model's device: several samples per row,
/// each attending to itself only, positions restarting at 0 per sample.
struct PackedLayout {
  torch::Tensor position_ids;  // [R, L] int64, on the device
  /// [S + 1] int32 on the device: the segments' boundaries over R x L. A fixed-shape layout
  /// (model/graph_step.hpp) ends them in zero-length segments, which hold no position.
  torch::Tensor cu_seqlens;
  torch::Tensor segments;      // the same as int64 on the CPU (the CPU kernel's tasks)
  int64_t max_seqlen = 0;      // the longest segment (or more)
  /// [R, 1, L, L] bool, true where query and key lie in one segment: for the devices and
  /// dtypes without a varlen kernel (scaled_dot_product_attention with this mask). Made on
  /// first use.
  const torch::Tensor& block_mask() const;
  mutable torch::Tensor block_mask_;
  /// cu_seqlens for cuDNN's attention over ragged segments: followed by zero-length segments
  /// up to the next power of two of segments (at least 64), so that batches of nearly the
  /// same segment count share one cuDNN graph (one per segment count, longest segment and
  /// layout: cudnn_attention.hpp). Made on first use, on the device.
  const torch::Tensor& cudnn_cu_seqlens() const;
  mutable torch::Tensor cudnn_cu_seqlens_;
  /// After cu_seqlens was written in place (a fixed-shape step's next micro-batch): the block
  /// mask and cuDNN's boundaries are made again on their next use (inside a CUDA graph's
  /// capture, then, from the buffer that each replay's micro-batch fills).
  void boundaries_changed() const {
    block_mask_ = torch::Tensor();
    cudnn_cu_seqlens_ = torch::Tensor();
  }
};

/// The layout of a packed batch (model/packing.hpp) on `dev`.
PackedLayout packed_layout(const PackedBatch& p, const torch::Device& dev);

/// How attention is masked: a key mask of a padded batch (or none), or a packed layout.
struct AttentionMask {
  AttentionMask() = default;
  AttentionMask(torch::Tensor keys) : key_mask(std::move(keys)) {}  // NOLINT: implicit, the padded case
  explicit AttentionMask(const PackedLayout* layout) : packed(layout) {}
  torch::Tensor key_mask;
  const PackedLayout* packed = nullptr;
};

/// Attention over a packed layout: the CPU kernel with segments (attention_cpu.hpp); on a
/// GPU of compute capability 8.0+ in bf16 or fp16 with head size a multiple of 8 up to 256,
/// flash attention over variable-length segments (at::_flash_attention_forward with
/// cu_seqlens), or with fusions.hpp's cudnn-varlen cuDNN's attention over the same ragged
/// segments where cudnn_attention.hpp takes the inputs (head size up to 128, Q, K and V in
/// [R, L, h, d] storage, cuDNN enabled; the segments padded to a power of two and the longest
/// rounded up so that cuDNN's graphs, one per shape, are few); else
/// scaled_dot_product_attention with the block-diagonal mask.
torch::Tensor packed_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                               const PackedLayout& layout, double dropout_p);
enum class PackedAttentionPath { CpuSegments, FlashVarlen, CudnnRagged, BlockMask };
/// Which of those packed_attention takes for these inputs (tests and the GPU check).
PackedAttentionPath packed_attention_path(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v);
/// "cpu-segments", "flash-varlen", "cudnn-ragged" or "block-mask".
std::string to_string(PackedAttentionPath path);
/// The paths packed_attention has run in this process, in the enum's order (cudnn-varlen's
/// only where cuDNN ran it, not where it fell back): what a run reports it ran.
std::vector<std::string> packed_attention_paths_taken();

torch::Tensor attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                        const AttentionMask& mask, double dropout_p);
/// The same as HF's eager BertSelfAttention computes it: explicit matmuls, (1 - mask) * the
/// lowest float added to the scores, softmax, dropout. The reference for `attention`.
torch::Tensor attention_reference(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                  const torch::Tensor& key_mask, double dropout_p, bool training);
/// The key mask `attention` takes, from a [B, L] attention_mask (1 = real token, 0 = padding);
/// undefined in, undefined out.
torch::Tensor key_mask_of(const torch::Tensor& attention_mask);

/// x W^T + b as ATen's `linear`: one autocast op and, for a contiguous input, one addmm with
/// the bias added inside the product. Every linear layer of the model and the classifier runs
/// through it, not through the C++ frontend's torch::nn::functional::linear (Linear's
/// forward), which for inputs of more than 2 dimensions runs a matmul and then `+= bias`, an
/// add that is no autocast op: under bf16 a separate mixed bf16 + fp32 kernel over the whole
/// output (16% of the DNABERT step on an H100).
/// `weight_low` and `bias_low`: their bf16 copies, or undefined; where bf16 copies of the
/// weights are in force (weight_copies.hpp) a parameter's own copy is found without them. The
/// product then reads the copies instead of autocast's casts (the same values and gradients).
torch::Tensor affine(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                     const torch::Tensor& weight_low = {}, const torch::Tensor& bias_low = {});
torch::Tensor affine(const torch::nn::Linear& m, const torch::Tensor& x);

/// The hidden states between BERT's sublayers: `x`, what the next residual add reads (fp32
/// under autocast), and `low`, where the residual LayerNorm that made x also wrote x in bf16
/// (fusions.hpp's ln-bf16 under bf16 autocast): the copy the next matrix products read
/// instead of autocast's cast of x. Undefined `low`: the products read x.
struct Hidden {
  Hidden(torch::Tensor x_ = {}, torch::Tensor low_ = {}) : x(std::move(x_)), low(std::move(low_)) {}  // NOLINT: implicit
  const torch::Tensor& for_product() const { return low.defined() ? low : x; }
  torch::Tensor x, low;
};

struct BertEmbeddingsImpl : torch::nn::Module {
  explicit BertEmbeddingsImpl(const BertConfig& c);
  /// position_ids: [B, L] (packed rows), or undefined for 0 .. L - 1 in every row.
  torch::Tensor forward(const torch::Tensor& input_ids, const torch::Tensor& token_type_ids,
                        const torch::Tensor& position_ids = {});
  torch::nn::Embedding word_embeddings{nullptr}, position_embeddings{nullptr}, token_type_embeddings{nullptr};
  torch::nn::LayerNorm LayerNorm{nullptr};
  torch::nn::Dropout dropout{nullptr};
};
TORCH_MODULE(BertEmbeddings);

struct BertSelfAttentionImpl : torch::nn::Module {
  explicit BertSelfAttentionImpl(const BertConfig& c);
  torch::Tensor forward(const Hidden& x, const AttentionMask& mask);
  torch::nn::Linear query{nullptr}, key{nullptr}, value{nullptr};
  /// Q, K and V in one product of the stacked weights (the default), or three (the same
  /// values within float rounding; train_bench --unfused-qkv measures the difference).
  bool fused_qkv = true;
  double dropout_p;
  int64_t heads, head_dim;
};
TORCH_MODULE(BertSelfAttention);

/// dense + dropout + LayerNorm(residual): HF's BertSelfOutput and BertOutput.
struct BertResidualOutputImpl : torch::nn::Module {
  BertResidualOutputImpl(int64_t in, const BertConfig& c);
  torch::Tensor forward(const torch::Tensor& h, const torch::Tensor& residual);
  /// The same output with, when `copy` and the copy is in force (ln-bf16 under bf16
  /// autocast), its bf16 copy for the next products.
  Hidden forward_hidden(const torch::Tensor& h, const torch::Tensor& residual, bool copy);
  /// The same from `dense`'s output d (its product and bias already applied: the fused
  /// feed-forward's, feed_forward.hpp): dropout, the residual add and the LayerNorm.
  Hidden forward_residual(const torch::Tensor& d, const torch::Tensor& residual, bool copy);
  torch::nn::Linear dense{nullptr};
  torch::nn::LayerNorm LayerNorm{nullptr};
  torch::nn::Dropout dropout{nullptr};
};
TORCH_MODULE(BertResidualOutput);

struct BertAttentionImpl : torch::nn::Module {
  explicit BertAttentionImpl(const BertConfig& c);
  /// Its output always feeds the feed-forward block's product: with its copy where in force.
  Hidden forward(const Hidden& x, const AttentionMask& mask);
  BertSelfAttention self{nullptr};
  BertResidualOutput output{nullptr};
};
TORCH_MODULE(BertAttention);

struct BertIntermediateImpl : torch::nn::Module {
  explicit BertIntermediateImpl(const BertConfig& c);
  torch::Tensor forward(const Hidden& x);
  torch::nn::Linear dense{nullptr};
};
TORCH_MODULE(BertIntermediate);

struct BertLayerImpl : torch::nn::Module {
  explicit BertLayerImpl(const BertConfig& c);
  torch::Tensor forward(const torch::Tensor& x, const AttentionMask& mask);
  /// The same, from and to hidden states with their copies: `copy` when another layer's
  /// products read the output (every layer but the last).
  Hidden forward_hidden(const Hidden& x, const AttentionMask& mask, bool copy);
  BertAttention attention{nullptr};
  BertIntermediate intermediate{nullptr};
  BertResidualOutput output{nullptr};
};
TORCH_MODULE(BertLayer);

struct BertEncoderImpl : torch::nn::Module {
  explicit BertEncoderImpl(const BertConfig& c);
  torch::Tensor forward(torch::Tensor x, const AttentionMask& mask);
  torch::nn::ModuleList layer{nullptr};
};
TORCH_MODULE(BertEncoder);

struct BertModelImpl : torch::nn::Module {
  explicit BertModelImpl(const BertConfig& c);
  /// Last hidden states [B, L, H]. attention_mask: 1 = real token, 0 = padding; an undefined
  /// tensor means no padding.
  torch::Tensor forward(const torch::Tensor& input_ids, const torch::Tensor& attention_mask);
  /// Last hidden states [R, L, H] of packed rows.
  torch::Tensor forward_packed(const torch::Tensor& input_ids, const PackedLayout& layout);
  /// Hidden states after the first `layers` encoder layers (0: the embeddings' output), as
  /// HF's hidden_states[layers].
  torch::Tensor forward_layers(const torch::Tensor& input_ids, const torch::Tensor& attention_mask, int64_t layers);
  BertEmbeddings embeddings{nullptr};
  BertEncoder encoder{nullptr};
};
TORCH_MODULE(BertModel);

struct BertPredictionTransformImpl : torch::nn::Module {
  explicit BertPredictionTransformImpl(const BertConfig& c);
  torch::Tensor forward(const torch::Tensor& x);
  torch::nn::Linear dense{nullptr};
  torch::nn::LayerNorm LayerNorm{nullptr};
};
TORCH_MODULE(BertPredictionTransform);

struct BertLMPredictionHeadImpl : torch::nn::Module {
  explicit BertLMPredictionHeadImpl(const BertConfig& c);
  BertPredictionTransform transform{nullptr};
  torch::Tensor bias;
};
TORCH_MODULE(BertLMPredictionHead);

struct BertOnlyMLMHeadImpl : torch::nn::Module {
  explicit BertOnlyMLMHeadImpl(const BertConfig& c);
  BertLMPredictionHead predictions{nullptr};
};
TORCH_MODULE(BertOnlyMLMHead);

/// `classes` rounded up to a multiple of 8: the width of the decoder's product under
/// fusions.hpp's ce-pad, whose rows of bf16 logits are then 16-byte aligned.
int64_t padded_classes(int64_t classes);

/// The MLM decoder's logits [N, columns] of transformed hidden states `t` [N, H]: t W^T + b for
/// the decoder's weight W [V, H] and bias b [V] (under bf16 with the weights' copies in force,
/// their copies), the columns from V on (columns >= V) made by zero rows of weight and bias
/// appended to both: logits 0 that are no class, whose gradients reach neither W nor b.
torch::Tensor decoder_logits(const torch::Tensor& t, const torch::Tensor& weight, const torch::Tensor& bias,
                             int64_t columns);

struct BertForMaskedLMImpl : torch::nn::Module {
  explicit BertForMaskedLMImpl(const BertConfig& c);
  /// MLM logits [B, L, V]; the decoder is the word-embedding matrix (tied) plus a bias.
  torch::Tensor forward(const torch::Tensor& input_ids, const torch::Tensor& attention_mask);
  /// MLM logits [N, V] at the N flat positions `rows` (indices into B*L) only: the same values
  /// as forward(...).view({-1, V}).index_select(0, rows), without the decoder's cost elsewhere.
  torch::Tensor forward_rows(const torch::Tensor& input_ids, const torch::Tensor& attention_mask,
                             const torch::Tensor& rows);
  /// Summed cross-entropy over the positions whose label is not -100 (what training uses): the
  /// decoder runs on those positions only (forward_rows), so loss and gradients equal the full
  /// head's with ignore_index -100, at a fraction of its cost. Logits are cast to fp32.
  torch::Tensor masked_lm_loss_sum(const torch::Tensor& input_ids, const torch::Tensor& attention_mask,
                                   const torch::Tensor& labels);
  /// The same with the masked positions given: `rows` (flat indices into B*L) and their target
  /// ids. The trainer finds them on the host, which spares a GPU the synchronisation that
  /// finding them on the device (nonzero) costs.
  torch::Tensor masked_lm_loss_sum(const torch::Tensor& input_ids, const torch::Tensor& attention_mask,
                                   const torch::Tensor& rows, const torch::Tensor& targets);
  /// The same over packed rows: `rows` index the packed R x L positions. Equal to the loss
  /// of the same samples unpacked within float rounding (the tests check it), dropout aside.
  torch::Tensor masked_lm_loss_sum(const torch::Tensor& input_ids, const PackedLayout& layout,
                                   const torch::Tensor& rows, const torch::Tensor& targets);
  /// The MLM head on the flat hidden states' positions `rows`, summed cross-entropy. With
  /// fusions.hpp's ce-pad in force (on a GPU), the decoder's product is made over
  /// padded_classes(V) columns and the loss reads the first V of each row.
  torch::Tensor head_loss_sum(const torch::Tensor& hidden, const torch::Tensor& rows, const torch::Tensor& targets);
  /// Mean cross-entropy over positions whose label is not -100.
  static torch::Tensor mlm_loss(const torch::Tensor& logits, const torch::Tensor& labels);
  /// bert.pooler.dense.{weight,bias}: carried, not trained. MLM never reads the pooler, but
  /// a checkpoint may have one (DNABERT's released weights do), which BertModel and
  /// BertForSequenceClassification then load. Buffers, so the optimizer never sees them;
  /// exported only when loaded (`has_pooler`), so that an export of a model without one
  /// is what transformers' own BertForMaskedLM saves.
  torch::Tensor pooler_weight, pooler_bias;
  bool has_pooler = false;
  /// The weights loaded had an MLM decoder of their own (transformers' tie_word_embeddings
  /// false): this model's decoder (tied to the word embeddings) is not theirs. The encoder is
  /// theirs whole, so embeddings and classifiers built on it are; what trains or exports the
  /// MLM head refuses it (require_tied_decoder).
  std::string untied_decoder;  // the weights file, or "" when tied
  BertConfig config;
  BertModel bert{nullptr};
  BertOnlyMLMHead cls{nullptr};
};
TORCH_MODULE(BertForMaskedLM);

/// HF initialisation: normal(0, initializer_range) weights, zero biases and padding row,
/// LayerNorm 1/0. Deterministic for a given torch::manual_seed.
void init_weights(torch::nn::Module& m, const BertConfig& c);

}  // namespace genemask::model
