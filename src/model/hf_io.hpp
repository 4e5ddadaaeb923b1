#pragma once
// The Hugging Face layout users already have: config.json + vocab.txt + model.safetensors.
#include <string>

#include "model/bert.hpp"

namespace genemask::model {

/// Writes DIR/config.json, DIR/vocab.txt and DIR/model.safetensors (float32, HF names;
/// the decoder weight is tied to the word embeddings and not stored, as HF does).
void export_hf(BertForMaskedLM& model, const std::string& dir);

/// Writes DIR/vocab.txt, the tokenizer files of HF's BertTokenizer (tokenizer_config.json,
/// special_tokens_map.json: no lower-casing, so `AutoTokenizer` maps upper-case 6-mer text
/// to genemask's ids) and DIR/model.safetensors (every parameter and buffer of `m` by its
/// name, float32; buffers too when `with_buffers`).
void write_vocab_and_weights(torch::nn::Module& m, const BertConfig& config, const std::string& dir,
                             bool with_buffers = false);

/// When DIR has a vocab.txt, checks that it is genemask's (DNABERT-6's) vocabulary, line for
/// line: a model trained on other ids would silently give wrong outputs. An error names the
/// file, the line and the token.
void check_vocab(const std::string& dir);

/// How many elements of `t` are NaN or infinite (0 for an integer tensor).
int64_t non_finite_count(const torch::Tensor& t);

/// Loads DIR (config.json + model.safetensors, or + pytorch_model.bin as DNABERT ships it)
/// into a new model. Missing or unexpected
/// tensors and shape mismatches are errors that name the tensor.
BertForMaskedLM import_hf(const std::string& dir);
/// The encoder of DIR, for what reads no MLM head (`embed`): any BERT checkpoint's, a
/// BertForMaskedLM's, a BertForSequenceClassification's (from `finetune --save-model` or
/// transformers; its classifier is not read) or a bare BertModel's. The MLM head is left as
/// initialised.
BertForMaskedLM import_hf_encoder(const std::string& dir);
/// A head's tensor ("cls.*": the MLM and NSP heads; "classifier.*": a sequence classifier's),
/// as opposed to the encoder's and the pooler's.
bool is_head_tensor(const std::string& name);
/// A bare BertModel's tensor names ("embeddings.*", "encoder.*", "pooler.*") under "bert.",
/// as BertFor* models name them; tensors of a checkpoint that has any "bert." name are kept
/// as they are.
void add_bert_prefix(std::vector<std::pair<std::string, torch::Tensor>>& tensors);

/// A checkpoint's tensors made ready for continued MLM pretraining (`pretrain --init`):
/// a bare BertModel's names put under "bert.", and a BertForPreTraining's next-sentence head
/// ("cls.seq_relationship.*", which genemask does not train) left out. A sequence classifier
/// ("classifier.*") is refused: it is no language model. Returns whether the MLM head is in
/// the checkpoint; when it is not (a bare BertModel), the caller loads the encoder only and
/// the head keeps its initialisation. `notes` receives what was left out or started anew.
bool prepare_mlm_init(std::vector<std::pair<std::string, torch::Tensor>>& tensors, const std::string& source,
                      std::vector<std::string>& notes);

/// The named tensors of DIR/model.safetensors, or of DIR/pytorch_model.bin when there is no
/// safetensors file, as stored (any BERT head: the fine-tuning code picks what it needs).
std::vector<std::pair<std::string, torch::Tensor>> read_hf_tensors(const std::string& dir);

/// A model directory (has model.safetensors) as is, or the newest complete checkpoint of
/// a run directory (io::resolve_model; the run's layout is in io/run_dir.hpp), its files
/// checked against its state.json. Throws InputError when there is neither. A checkpoint's
/// run stays held (its pretrain does not rotate checkpoints away) until this process ends or
/// calls release_model_holds().
std::string resolve_model_dir(const std::string& run_or_dir);
void release_model_holds();

/// Copies named tensors into the model's parameters by HF name (and the pooler, when the
/// tensors have one); missing or unexpected tensors are errors that name them.
/// Throws io::InputError when the weights model was loaded from had an MLM decoder of their
/// own (BertForMaskedLMImpl::untied_decoder); `what` names the use ("an export").
void require_tied_decoder(const BertForMaskedLM& model, const std::string& what);

/// encoder_only: the heads' tensors ("cls.*", "classifier.*") are not read, and the MLM
/// head's parameters need not be there.
void load_state(BertForMaskedLM& model, const std::string& source,
                const std::vector<std::pair<std::string, torch::Tensor>>& tensors, bool encoder_only = false);

}  // namespace genemask::model
