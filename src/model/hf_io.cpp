#include "model/hf_io.hpp"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>
#include <set>
#include <unistd.h>

#include "genemask/corpus/tokenizer.hpp"
#include "io/atomic_file.hpp"
#include "io/error.hpp"
#include "io/json.hpp"
#include "io/output_guard.hpp"
#include "io/run_dir.hpp"
#include "io/safetensors.hpp"
#include "model/torch_bin.hpp"

namespace genemask::model {

void write_vocab_and_weights(torch::nn::Module& m, const BertConfig& config, const std::string& dir,
                             bool with_buffers) {
  write_hf_tokenizer(dir, static_cast<int>(config.max_position_embeddings));  // validate() bounds it by 2^20
  std::vector<io::StTensor> tensors;
  auto named = m.named_parameters();
  if (with_buffers)
    for (const auto& b : m.named_buffers()) named.insert(b.key(), b.value());
  for (const auto& p : named) {
    auto t = p.value().detach().to(torch::kCPU, torch::kFloat32).contiguous();
    // The last guard against a diverged model on disk (the trainer and export-hf say more
    // before they get here): a checkpoint of NaN weights would resume and export as garbage.
    if (const int64_t bad = non_finite_count(t))
      throw std::runtime_error(fmt::format("{}/model.safetensors not written: tensor '{}' holds {} non-finite values "
                                           "(NaN or infinity)",
                                           dir, p.key(), bad));
    io::StTensor s;
    s.name = p.key();
    s.dtype = "F32";
    s.shape = t.sizes().vec();
    s.data.resize(static_cast<size_t>(t.numel()) * sizeof(float));
    std::memcpy(s.data.data(), t.data_ptr<float>(), s.data.size());
    tensors.push_back(std::move(s));
  }
  io::write_safetensors(dir + "/model.safetensors", tensors);
}

int64_t non_finite_count(const torch::Tensor& t) {
  if (!t.is_floating_point()) return 0;
  return t.numel() - torch::isfinite(t).sum().item<int64_t>();
}

void export_hf(BertForMaskedLM& model, const std::string& dir) {
  std::filesystem::create_directories(dir);
  {
    io::AtomicFile f(dir + "/config.json");
    f.stream() << model->config.to_json();
    f.commit();
  }
  write_vocab_and_weights(*model, model->config, dir, /*with_buffers=*/model->has_pooler);
}

void require_tied_decoder(const BertForMaskedLM& model, const std::string& what) {
  if (model->untied_decoder.empty()) return;
  throw io::InputError(model->untied_decoder,
                       fmt::format("tensor 'cls.predictions.decoder.weight' differs from the word embeddings: this "
                                   "model's MLM decoder is its own (transformers' tie_word_embeddings false), and "
                                   "genemask's BERT ties it, so {} would not be of this model's decoder (embed, "
                                   "finetune, predict and the sweep read the encoder only, and take it)",
                                   what));
}

void load_state(BertForMaskedLM& model, const std::string& source,
                const std::vector<std::pair<std::string, torch::Tensor>>& tensors, bool encoder_only) {
  torch::NoGradGuard ng;
  auto params = model->named_parameters();
  std::set<std::string> loaded;
  const auto tensor = [&](const std::string& name) -> const torch::Tensor* {
    for (const auto& [n, t] : tensors)
      if (n == name) return &t;
    return nullptr;
  };
  for (const auto& [name, t] : tensors) {
    if (encoder_only && is_head_tensor(name)) continue;
    // Tied copies that HF checkpoints may carry: the same values as the word embeddings and
    // the prediction bias, which genemask's decoder reads. A decoder of its own (a model
    // saved untied) would be dropped here and its numbers lost.
    if (name == "cls.predictions.decoder.weight" || name == "cls.predictions.decoder.bias") {
      const torch::Tensor* tied = tensor(name == "cls.predictions.decoder.weight"
                                             ? "bert.embeddings.word_embeddings.weight"
                                             : "cls.predictions.bias");
      if (tied && (tied->sizes() != t.sizes() || !torch::equal(tied->to(torch::kFloat), t.to(torch::kFloat))))
        model->untied_decoder = source;
      continue;
    }
    if (name.find("position_ids") != std::string::npos) continue;
    if (name == "bert.pooler.dense.weight" || name == "bert.pooler.dense.bias") {  // carried as is
      auto& dst = name == "bert.pooler.dense.weight" ? model->pooler_weight : model->pooler_bias;
      if (dst.sizes() != t.sizes())
        throw io::InputError(source, fmt::format("tensor '{}' has shape {}, the model expects {}", name,
                                                 fmt::join(t.sizes().vec(), "x"), fmt::join(dst.sizes().vec(), "x")));
      dst.copy_(t.to(dst.dtype()));
      loaded.insert(name);
      continue;
    }
    auto* p = params.find(name);
    if (!p) throw io::InputError(source, fmt::format("unexpected tensor '{}' (not a BertForMaskedLM parameter)", name));
    if (p->sizes() != t.sizes())
      throw io::InputError(source, fmt::format("tensor '{}' has shape {}, the model expects {}", name,
                                               fmt::join(t.sizes().vec(), "x"), fmt::join(p->sizes().vec(), "x")));
    p->copy_(t.to(p->dtype()));
    loaded.insert(name);
  }
  for (const auto& p : params)
    if (!loaded.count(p.key()) && !(encoder_only && is_head_tensor(p.key())))
      throw io::InputError(source, fmt::format("tensor '{}' is missing", p.key()));
  model->has_pooler = loaded.count("bert.pooler.dense.weight") > 0;
  if (!model->has_pooler) {  // none in the file: HF's initialisation, not exported
    model->pooler_weight.normal_(0.0, model->config.initializer_range);
    model->pooler_bias.zero_();
  }
}

namespace {

/// HF stores a few integer buffers with the weights (BertEmbeddings' position_ids and,
/// in newer versions, token_type_ids); they are no parameters and are skipped on load.
bool is_integer_buffer(const std::string& name) {
  const auto ends_with = [&](const char* suffix) {
    const size_t n = std::strlen(suffix);
    return name.size() >= n && name.compare(name.size() - n, n, suffix) == 0;
  };
  return ends_with("position_ids") || ends_with("token_type_ids");
}

[[noreturn]] void refuse_dtype(const std::string& path, const std::string& name, const std::string& dtype) {
  throw io::InputError(path, fmt::format("tensor '{}' has dtype {}; model weights must be F32, F16 or BF16 (as "
                                         "transformers loads them): convert the file, e.g. with "
                                         "save_pretrained(..., torch_dtype=torch.float32)",
                                         name, dtype));
}

}  // namespace

std::vector<std::pair<std::string, torch::Tensor>> read_hf_tensors(const std::string& dir) {
  const std::string path = dir + "/model.safetensors";
  if (!std::filesystem::exists(path) && std::filesystem::exists(dir + "/pytorch_model.bin")) {
    const std::string bin = dir + "/pytorch_model.bin";
    auto tensors = read_pytorch_bin(bin);
    for (const auto& [name, t] : tensors)
      if (!t.is_floating_point() && !is_integer_buffer(name))
        refuse_dtype(bin, name, std::string(c10::toString(t.scalar_type())));
    return tensors;
  }
  std::vector<std::pair<std::string, torch::Tensor>> tensors;
  for (auto& s : io::read_safetensors(path)) {
    torch::ScalarType type;
    if (s.dtype == "F32") type = torch::kFloat32;
    else if (s.dtype == "F16") type = torch::kFloat16;
    else if (s.dtype == "BF16") type = torch::kBFloat16;
    else if (s.dtype == "I64" && is_integer_buffer(s.name)) type = torch::kInt64;
    else refuse_dtype(path, s.name, s.dtype);
    auto t = torch::empty(s.shape, torch::TensorOptions().dtype(type));
    std::memcpy(t.data_ptr(), s.data.data(), s.data.size());
    tensors.emplace_back(s.name, t);
  }
  return tensors;
}

namespace {
/// A tokenizer.json (the fast tokenizer's file, which transformers' save_pretrained writes in
/// place of vocab.txt): its WordPiece vocabulary must be DNABERT-6's, token for id.
void check_tokenizer_json(const std::string& path) {
  const io::JsonParse parsed = io::try_read_json_file(path);
  if (!parsed.ok())
    throw io::InputError(path, parsed.line, fmt::format("is not JSON ({}): the model's tokenizer cannot be read, so its "
                                                        "token ids cannot be checked against genemask's",
                                                        parsed.error));
  const nlohmann::json& j = parsed.value;
  const nlohmann::json* vocab = nullptr;
  if (j.is_object() && j.contains("model") && j["model"].is_object() && j["model"].contains("vocab") &&
      j["model"]["vocab"].is_object())
    vocab = &j["model"]["vocab"];
  if (!vocab)
    throw io::InputError(path, fmt::format("holds no WordPiece vocabulary (model.vocab, a token -> id object; model.type "
                                           "{}): this model's tokenizer is not DNABERT-6's; write its vocab.txt beside "
                                           "it if its ids are genemask's (genemask vocab --out DIR/vocab.txt)",
                                           j.is_object() && j.contains("model") && j["model"].is_object() &&
                                                   j["model"].contains("type")
                                               ? io::json_excerpt(j["model"]["type"], 40)
                                               : std::string("absent")));
  const auto want = vocab_tokens();
  for (size_t id = 0; id < want.size(); ++id) {
    const auto it = vocab->find(want[id]);
    if (it == vocab->end())
      throw io::InputError(path, fmt::format("its vocabulary (model.vocab) has no token '{}' (DNABERT-6's id {}): this "
                                             "model uses other token ids than genemask",
                                             want[id], id));
    if (!it->is_number_integer() || it->get<int64_t>() != static_cast<int64_t>(id))
      throw io::InputError(path, fmt::format("its vocabulary (model.vocab) gives '{}' the id {}, DNABERT-6 gives it {}: "
                                             "this model uses other token ids than genemask",
                                             want[id], io::json_excerpt(*it, 20), id));
  }
  if (vocab->size() != want.size())
    throw io::InputError(path, fmt::format("its vocabulary (model.vocab) has {} tokens; DNABERT-6's (genemask's ids) has "
                                           "{}",
                                           vocab->size(), want.size()));
}
}  // namespace

void check_vocab(const std::string& dir) {
  const std::string path = dir + "/vocab.txt";
  // Both files are held to DNABERT-6's ids where present: transformers' AutoTokenizer reads
  // tokenizer.json first, so a directory whose two disagree would tokenize otherwise there.
  const bool has_json = std::filesystem::exists(dir + "/tokenizer.json");
  if (has_json) check_tokenizer_json(dir + "/tokenizer.json");
  std::ifstream in(path);
  if (!in && has_json) return;
  if (!in) {
    // transformers' model.save_pretrained writes none (the tokenizer's does): the ids are
    // taken to be DNABERT-6's, said once per directory and process.
    static std::mutex m;
    static std::set<std::string> said;
    const std::lock_guard<std::mutex> lock(m);
    if (said.insert(dir).second)
      std::cerr << fmt::format("genemask: note: {} has no vocab.txt: its token ids are taken to be DNABERT-6's "
                               "(genemask's); a model trained with another vocabulary would read wrong ids (save its "
                               "tokenizer beside it, or write genemask vocab --out {}/vocab.txt)\n",
                               dir, dir);
    return;
  }
  const auto want = vocab_tokens();
  std::string line;
  size_t n = 0;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (n < want.size() && line != want[n])
      throw io::InputError(path, n + 1, fmt::format("token '{}' where DNABERT-6's vocabulary has '{}': this model uses "
                                                    "other token ids than genemask",
                                                    io::excerpt(line, 40), want[n]));
    ++n;
  }
  if (n != want.size())
    throw io::InputError(path, fmt::format("has {} tokens; DNABERT-6's vocabulary (genemask's ids) has {}", n, want.size()));
}

namespace {
BertForMaskedLM import_dir(const std::string& dir, bool encoder_only) {
  check_vocab(dir);
  const BertConfig c = BertConfig::from_json_file(dir + "/config.json");
  BertForMaskedLM model(c);
  const bool bin = !std::filesystem::exists(dir + "/model.safetensors") && std::filesystem::exists(dir + "/pytorch_model.bin");
  auto tensors = read_hf_tensors(dir);
  if (encoder_only) add_bert_prefix(tensors);
  load_state(model, dir + (bin ? "/pytorch_model.bin" : "/model.safetensors"), tensors, encoder_only);
  return model;
}
}  // namespace

BertForMaskedLM import_hf(const std::string& dir) { return import_dir(dir, false); }
BertForMaskedLM import_hf_encoder(const std::string& dir) { return import_dir(dir, true); }

bool is_head_tensor(const std::string& name) { return name.rfind("cls.", 0) == 0 || name.rfind("classifier.", 0) == 0; }

void add_bert_prefix(std::vector<std::pair<std::string, torch::Tensor>>& tensors) {
  for (const auto& t : tensors)
    if (t.first.rfind("bert.", 0) == 0) return;
  for (auto& t : tensors)
    if (!is_head_tensor(t.first)) t.first = "bert." + t.first;
}

bool prepare_mlm_init(std::vector<std::pair<std::string, torch::Tensor>>& tensors, const std::string& source,
                      std::vector<std::string>& notes) {
  const auto starts = [](const std::string& s, const char* p) { return s.rfind(p, 0) == 0; };
  for (const auto& t : tensors)
    if (starts(t.first, "classifier."))
      throw io::InputError(source, fmt::format("holds a sequence classifier (tensor '{}'): --init continues the "
                                               "pretraining of a language model; give the model it was fine-tuned "
                                               "from, or a BertForMaskedLM, BertForPreTraining or BertModel",
                                               t.first));
  add_bert_prefix(tensors);
  const size_t before = tensors.size();
  tensors.erase(std::remove_if(tensors.begin(), tensors.end(),
                               [&](const auto& t) { return starts(t.first, "cls.seq_relationship."); }),
                tensors.end());
  if (tensors.size() != before)
    notes.push_back("its next-sentence head (cls.seq_relationship, of a BertForPreTraining) is left out: genemask "
                    "trains the masked-LM objective only");
  const bool head = std::any_of(tensors.begin(), tensors.end(), [&](const auto& t) { return starts(t.first, "cls."); });
  if (!head)
    notes.push_back("it has no MLM head (a bare BertModel): the head (cls.predictions) starts from genemask's "
                    "initialisation with --seed, as transformers' BertForMaskedLM.from_pretrained would start it");
  return head;
}

}  // namespace genemask::model

#include "model/export.hpp"

namespace genemask::model {

namespace {
std::mutex g_holds_mutex;
std::map<std::string, std::shared_ptr<void>> g_holds;  // run -> its readers lock, while this process reads it
}  // namespace

std::string resolve_model_dir(const std::string& run) {
  io::ResolvedModel r = io::resolve_model(run);
  // A run's newest checkpoint is its model only once the run has finished (as for export-hf
  // and the sweep): a run stopped half-way, or still training, would pass for the final model.
  if (const std::string why = io::unfinished_run_reason(
          r, run, fmt::format("name a checkpoint directory (\"{}\") to use that step", r.dir));
      !why.empty())
    throw std::runtime_error(why);
  if (r.hold) {
    std::lock_guard<std::mutex> g(g_holds_mutex);
    g_holds[r.run] = r.hold;  // one per run, however many jobs of a sweep read it
  }
  return r.dir;
}

void release_model_holds() {
  std::lock_guard<std::mutex> g(g_holds_mutex);
  g_holds.clear();
}

std::string export_run(const std::string& run, const std::string& out_dir) {
  // Resolved once, so the checkpoint's files are hashed once: the finished-run check and the
  // export see the same checkpoint, held against rotation until its files are read. A run's
  // newest checkpoint is its model only once the run has finished: an export of a run stopped
  // half-way (or still training) would pass for the final model downstream.
  const io::ResolvedModel resolved = io::resolve_model(run);
  if (const std::string why = io::unfinished_run_reason(
          resolved, run, fmt::format("name a checkpoint directory (\"{}\") to export that step", resolved.dir));
      !why.empty())
    throw std::runtime_error(why);
  const std::string& src = resolved.dir;
  auto m = import_hf(src);
  require_tied_decoder(m, "an export");
  {
    // A diverged run's weights: transformers would load them and give NaN everywhere.
    const bool bin = !std::filesystem::exists(src + "/model.safetensors");
    auto named = m->named_parameters();
    if (m->has_pooler) {
      named.insert("bert.pooler.dense.weight", m->pooler_weight);
      named.insert("bert.pooler.dense.bias", m->pooler_bias);
    }
    for (const auto& p : named)
      if (const int64_t bad = non_finite_count(p.value()))
        throw io::InputError(src + (bin ? "/pytorch_model.bin" : "/model.safetensors"),
                             fmt::format("tensor '{}' holds {} non-finite values (NaN or infinity): the training "
                                         "diverged; export an earlier checkpoint (--run RUN/checkpoints/step-N) "
                                         "or train again with a lower --lr",
                                         p.key(), bad));
  }
  export_hf(m, out_dir);  // the caller's staging directory (io::OutputSet): published when complete
  // A run on a genome list: what it was trained on, per genome, goes with the model
  // (genemask_pretraining.json; `report` shows it).
  // (A checkpoint of before has no totals: nothing to carry. One whose state.json is not
  // JSON, or gives a key twice, is said: the totals would be guessed.)
  if (std::ifstream(src + "/state.json")) {
    const nlohmann::json st = io::read_json_file(src + "/state.json");
    if (st.is_object() && st.contains("genome_tokens")) {
      const nlohmann::json p = {{"step", st.value("step", nlohmann::json())},
                                {"shards", st.value("shards", nlohmann::json())},
                                {"genome_weights", st.value("genome_weights", nlohmann::json())},
                                {"genome_tokens", st["genome_tokens"]}};
      io::AtomicFile f(out_dir + "/genemask_pretraining.json");
      f.stream() << p.dump(2) << '\n';
      f.commit();
    }
  }
  return src;
}

}  // namespace genemask::model
