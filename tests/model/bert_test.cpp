#include "model/bert.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "genemask/corpus/tokenizer.hpp"
#include "io/error.hpp"
#include "io/safetensors.hpp"
#include "model/hf_io.hpp"
#include "model/inputs.hpp"
#include "model_test_util.hpp"
#include "test_util.hpp"

using namespace genemask;
using namespace genemask::model;

namespace {

BertConfig small_config() { return test::small_bert_config(64, 128); }

using test::to_st;

/// Random ids with padding: row r has 40 - 7r real positions, [CLS] ... [SEP].
std::pair<torch::Tensor, torch::Tensor> batch() {
  torch::manual_seed(5);
  auto ids = torch::randint(5, 4101, {4, 40}, torch::kLong);
  auto mask = torch::ones({4, 40}, torch::kLong);
  for (int64_t r = 0; r < 4; ++r) {
    const int64_t len = 40 - 7 * r;
    ids[r][0] = 2;
    ids[r][len - 1] = 3;
    if (len < 40) {
      ids[r].slice(0, len).fill_(0);
      mask[r].slice(0, len).fill_(0);
    }
  }
  return {ids, mask};
}

}  // namespace

TEST(Bert, ParameterNamesAreHuggingFaces) {
  BertForMaskedLM m(small_config());
  std::set<std::string> names;
  for (const auto& p : m->named_parameters()) names.insert(p.key());
  std::set<std::string> want = {
      "bert.embeddings.word_embeddings.weight", "bert.embeddings.position_embeddings.weight",
      "bert.embeddings.token_type_embeddings.weight", "bert.embeddings.LayerNorm.weight", "bert.embeddings.LayerNorm.bias",
      "cls.predictions.bias", "cls.predictions.transform.dense.weight", "cls.predictions.transform.dense.bias",
      "cls.predictions.transform.LayerNorm.weight", "cls.predictions.transform.LayerNorm.bias"};
  for (int i = 0; i < 2; ++i) {
    const std::string l = "bert.encoder.layer." + std::to_string(i) + ".";
    for (const char* n : {"attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense",
                          "attention.output.LayerNorm", "intermediate.dense", "output.dense", "output.LayerNorm"}) {
      want.insert(l + n + ".weight");
      want.insert(l + n + ".bias");
    }
  }
  EXPECT_EQ(names, want);
}

TEST(Bert, NamedConfigs) {
  auto d = BertConfig::named("dnabert");
  EXPECT_EQ(d.num_hidden_layers, 12);
  EXPECT_EQ(d.hidden_size, 768);
  EXPECT_EQ(d.hidden_dropout_prob, 0.1);
  auto l = BertConfig::named("logo");
  EXPECT_EQ(l.num_hidden_layers, 2);
  EXPECT_EQ(l.hidden_size, 256);
  EXPECT_EQ(l.num_attention_heads, 8);
  EXPECT_EQ(l.intermediate_size, 3072);
  EXPECT_EQ(l.hidden_dropout_prob, 0.0);
  EXPECT_THROW(BertConfig::named("gpt"), std::invalid_argument);
}

TEST(Bert, PaddingDoesNotChangeRealPositions) {
  torch::manual_seed(1);
  BertForMaskedLM m(small_config());
  init_weights(*m, m->config);
  m->eval();
  auto [ids, mask] = batch();
  auto full = m->forward(ids, mask);
  // Row 1 alone, without its padding, gives the same logits on its real positions.
  const int64_t len = 33;
  auto alone = m->forward(ids[1].slice(0, 0, len).unsqueeze(0), mask[1].slice(0, 0, len).unsqueeze(0));
  EXPECT_LT((alone[0] - full[1].slice(0, 0, len)).abs().max().item<float>(), 1e-5);
}

// The masked-positions-only head (what training uses) gives the full head's logits at those
// rows, and the same loss and parameter gradients as the full head with ignore_index.
TEST(Bert, HeadOnMaskedRowsEqualsFullHead) {
  torch::manual_seed(4);
  BertForMaskedLM m(small_config());
  init_weights(*m, m->config);
  m->eval();  // no dropout: both passes see the same network
  auto [ids, mask] = batch();
  auto labels = torch::full_like(ids, -100);
  auto pick = torch::rand(ids.sizes()) < 0.15;
  labels.masked_scatter_(pick, ids.masked_select(pick));
  auto flat = labels.reshape({-1});
  auto rows = (flat != -100).nonzero().reshape({-1});
  ASSERT_GT(rows.numel(), 5);

  auto grads = [&](bool full) {
    m->zero_grad();
    torch::Tensor loss;
    if (full) {
      auto logits = m->forward(ids, mask);
      loss = torch::nn::functional::cross_entropy(
          logits.view({-1, logits.size(-1)}), flat,
          torch::nn::functional::CrossEntropyFuncOptions().ignore_index(-100).reduction(torch::kSum));
    } else {
      loss = m->masked_lm_loss_sum(ids, mask, labels);
    }
    loss.backward();
    std::vector<torch::Tensor> g{loss.detach().clone()};
    for (auto& p : m->parameters()) g.push_back(p.grad().clone());
    return g;
  };
  auto a = grads(true);
  auto b = grads(false);
  ASSERT_EQ(a.size(), b.size());
  EXPECT_NEAR(a[0].item<double>(), b[0].item<double>(), 1e-4 * std::abs(a[0].item<double>()));
  // Relative to the largest gradient entry: the attention key biases' gradients are zero in
  // exact arithmetic (softmax ignores a constant shift), so their own scale is rounding noise.
  double scale = 0;
  for (size_t i = 1; i < a.size(); ++i) scale = std::max(scale, a[i].abs().max().item<double>());
  for (size_t i = 1; i < a.size(); ++i)
    EXPECT_LT((a[i] - b[i]).abs().max().item<double>() / scale, 1e-5) << "parameter " << i;
  torch::NoGradGuard ng;
  auto full = m->forward(ids, mask);
  auto at = full.view({-1, full.size(-1)}).index_select(0, rows);
  EXPECT_LT((m->forward_rows(ids, mask, rows) - at).abs().max().item<float>(), 1e-5);
}

// The exported model, run by an independent forward pass in Python (plain
// torch.nn.functional from the safetensors), gives the same logits.
TEST(Bert, ExportMatchesIndependentPythonForward) {
  test::TempDir tmp;
  torch::manual_seed(2);
  BertForMaskedLM m(small_config());
  init_weights(*m, m->config);
  m->eval();
  auto [ids, mask] = batch();
  torch::Tensor logits;
  {
    torch::NoGradGuard ng;
    logits = m->forward(ids, mask);
  }
  export_hf(m, tmp.file("hf"));
  io::write_safetensors(tmp.file("io.safetensors"),
                        {to_st("input_ids", ids), to_st("attention_mask", mask), to_st("logits", logits)});
  const std::string cmd = genemask::test::python_command("bert_reference.py ") +
                          tmp.file("hf") + " " + tmp.file("io.safetensors") + " 1e-5";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;

  // Import gives back the same model.
  auto back = import_hf(tmp.file("hf"));
  back->eval();
  torch::NoGradGuard ng;
  EXPECT_TRUE(torch::equal(back->forward(ids, mask), logits));
}

// The real transformers library: AutoTokenizer, AutoModelForMaskedLM and AutoModel load the
// export (no missing weights) and give genemask's ids, logits and hidden states.
TEST(Bert, ExportLoadsInTransformers) {
  test::TempDir tmp;
  torch::manual_seed(4);
  BertForMaskedLM m(small_config());
  init_weights(*m, m->config);
  m->eval();
  auto [ids, mask] = batch();
  torch::Tensor logits, hidden;
  {
    torch::NoGradGuard ng;
    logits = m->forward(ids, mask);
    hidden = m->bert(ids, mask);
  }
  export_hf(m, tmp.file("hf"));
  for (const char* f : {"tokenizer_config.json", "special_tokens_map.json", "vocab.txt"})
    EXPECT_TRUE(std::filesystem::exists(tmp.file(std::string("hf/") + f))) << f;
  io::write_safetensors(tmp.file("io.safetensors"), {to_st("input_ids", ids), to_st("attention_mask", mask),
                                                     to_st("logits", logits), to_st("hidden", hidden)});
  EXPECT_EQ(test::run_python("hf_transformers_check.py export " + tmp.file("hf") + " " + tmp.file("io.safetensors") + " 1e-5"), 0);
}

// Models saved by transformers (save_pretrained's safetensors, and pytorch_model.bin) load
// and give transformers' logits and hidden states.
TEST(Bert, LoadsModelsSavedByTransformers) {
  test::TempDir tmp;
  ASSERT_EQ(test::run_python("hf_transformers_check.py save " + tmp.path()), 0);
  auto io = test::read_st(tmp.file("io.safetensors"));
  for (const char* d : {"mlm-st", "mlm-bin"}) {
    auto m = import_hf(tmp.file(d));
    m->eval();
    torch::NoGradGuard ng;
    const auto& ids = io["input_ids"];
    const auto& mask = io["attention_mask"];
    EXPECT_LT(test::max_diff_real(m->forward(ids, mask), io["logits"], mask), 1e-5) << d;
    EXPECT_LT(test::max_diff_real(m->bert(ids, mask), io["hidden"], mask), 1e-5) << d;
  }
}

// DNABERT's released weights come as pytorch_model.bin (torch.save of a state_dict).
TEST(Bert, ImportsPytorchModelBin) {
  test::TempDir tmp;
  torch::manual_seed(3);
  BertForMaskedLM m(small_config());
  init_weights(*m, m->config);
  m->eval();
  export_hf(m, tmp.file("hf"));
  const std::string cmd = genemask::test::python_command("to_pytorch_bin.py ") + tmp.file("hf");
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  auto back = import_hf(tmp.file("hf"));
  back->eval();
  auto [ids, mask] = batch();
  torch::NoGradGuard ng;
  EXPECT_TRUE(torch::equal(back->forward(ids, mask), m->forward(ids, mask)));
}

// A torch.save file whose tensor record holds fewer bytes than its pickle declares (a
// damaged download, or a crafted file) is an error naming the file, never a crash.
TEST(Bert, DamagedPytorchModelBinIsAnError) {
  test::TempDir tmp;
  BertForMaskedLM m(small_config());
  export_hf(m, tmp.file("hf"));
  ASSERT_EQ(test::run_python("to_pytorch_bin.py " + tmp.file("hf") + " --cut-record 64"), 0);
  const std::string e = test::error_of([&] { import_hf(tmp.file("hf")); });
  EXPECT_NE(e.find(tmp.file("hf/pytorch_model.bin") + ": "), std::string::npos) << e;
  EXPECT_NE(e.find("bytes"), std::string::npos) << e;
}

TEST(Bert, ImportRejectsMismatches) {
  test::TempDir tmp;
  BertForMaskedLM m(small_config());
  export_hf(m, tmp.file("hf"));
  auto t = io::read_safetensors(tmp.file("hf/model.safetensors"));
  t.pop_back();
  io::write_safetensors(tmp.file("hf/model.safetensors"), t);
  EXPECT_NE(test::error_of([&] { import_hf(tmp.file("hf")); }).find("is missing"), std::string::npos);
  test::write_file(tmp.file("hf/config.json"), "{\"model_type\": \"gpt2\"}");
  EXPECT_NE(test::error_of([&] { import_hf(tmp.file("hf")); }).find("only \"bert\" is supported"), std::string::npos);
}

// A config is checked before anything is allocated, and the error names the file and field.
TEST(Bert, ConfigBoundsBeforeAllocation) {
  test::TempDir tmp;
  const auto base = nlohmann::json::parse(small_config().to_json());
  auto error_for = [&](const std::string& key, const nlohmann::json& value) {
    auto j = base;
    j[key] = value;
    test::write_file(tmp.file("c.json"), j.dump());
    return test::error_of([&] { BertConfig::from_json_file(tmp.file("c.json")); });
  };
  EXPECT_NE(error_for("num_hidden_layers", 1000000).find("c.json: num_hidden_layers is 1000000, more than genemask accepts"),
            std::string::npos);
  EXPECT_NE(error_for("hidden_size", 1e9).find("hidden_size is 1000000000"), std::string::npos);
  EXPECT_NE(error_for("max_position_embeddings", 1e12).find("max_position_embeddings is 1000000000000"), std::string::npos);
  EXPECT_NE(error_for("hidden_size", 1e30).find("field 'hidden_size' must be an integer"), std::string::npos);
  EXPECT_NE(error_for("intermediate_size", 2.5).find("field 'intermediate_size' must be an integer"), std::string::npos);
  EXPECT_NE(error_for("vocab_size", 100).find("vocab_size is 100, but genemask's tokenizer (DNABERT-6) has 4101"),
            std::string::npos);
  EXPECT_NE(error_for("num_attention_heads", 5).find("must be a positive multiple of num_attention_heads 5"),
            std::string::npos);
  EXPECT_NE(error_for("hidden_dropout_prob", 1.5).find("must be in [0, 1)"), std::string::npos);
  // Within the bounds but more weights than any memory: refused with the estimate.
  auto j = base;
  j["num_hidden_layers"] = 1024;
  j["hidden_size"] = 65536;
  j["num_attention_heads"] = 1024;
  test::write_file(tmp.file("big.json"), j.dump());
  EXPECT_NE(test::error_of([&] { BertConfig::from_json_file(tmp.file("big.json")); }).find("more than this machine's memory"),
            std::string::npos);
  EXPECT_EQ(error_for("hidden_size", 64.0), "no error");  // an integer written as a float is fine
}

// vocab.txt, when a model directory has one, must be genemask's vocabulary.
TEST(Bert, ModelDirectoryVocabularyIsChecked) {
  test::TempDir tmp;
  BertForMaskedLM m(small_config());
  export_hf(m, tmp.file("hf"));
  EXPECT_NO_THROW(import_hf(tmp.file("hf")));
  test::write_file(tmp.file("hf/vocab.txt"), "[PAD]\n[UNK]\n");
  EXPECT_NE(test::error_of([&] { import_hf(tmp.file("hf")); }).find("vocab.txt: has 2 tokens; DNABERT-6's vocabulary"),
            std::string::npos);
  auto v = vocab_tokens();
  std::swap(v[10], v[11]);
  std::string text;
  for (const auto& t : v) text += t + "\n";
  test::write_file(tmp.file("hf/vocab.txt"), text);
  EXPECT_NE(test::error_of([&] { import_hf(tmp.file("hf")); }).find("vocab.txt:11: token '" + v[10] + "'"), std::string::npos);
}

TEST(Bert, MlmLossIgnoresUnlabelled) {
  auto logits = torch::zeros({1, 3, 5});
  logits[0][1][2] = 10;
  auto labels = torch::tensor({-100, 2, -100}, torch::kLong).view({1, 3});
  const float loss = BertForMaskedLMImpl::mlm_loss(logits, labels).item<float>();
  EXPECT_NEAR(loss, -std::log(std::exp(10.0) / (std::exp(10.0) + 4)), 1e-5);
}

// The input rows of `embed` and `predict` (model/inputs.hpp): each window's row is [CLS], the
// tokens of the whole sequence from the window's start, [SEP], then padding, with the mask
// over the first len + 2 positions; the windows as window_starts cuts them. Checked against
// the tokenizer run over each whole sequence (the function tokenizes each window's bases
// alone).
TEST(Inputs, WindowRowsAreTheSequencesTokensBetweenClsAndSep) {
  using genemask::model::fill_window_rows;
  using genemask::model::Window;
  using genemask::model::window_starts;
  const std::vector<std::string> seqs{"ACGTACGTTGCANNACGTAGGCT", "TTTTTGCGCA", "GATTACAGATTACA"};
  const std::vector<size_t> mine{2, 0, 1};  // the caller's order of the sequences
  const int64_t width = 5, stride = 3;
  std::vector<Window> windows;
  int64_t widest = 0;
  for (size_t j = 0; j < mine.size(); ++j) {
    const auto n = static_cast<int64_t>(seqs[mine[j]].size()) - (genemask::kTokenK - 1);
    for (int64_t s : window_starts(n, width, stride)) {
      windows.push_back({j, s, std::min(width, n - s)});
      widest = std::max(widest, windows.back().len);
    }
  }
  ASSERT_EQ(windows.size(), 10u);  // starts: 9 tokens 0 3 4; 18 tokens 0 3 6 9 12 13; 5 tokens 0
  const auto rows = static_cast<int64_t>(windows.size()), cols = widest + 3;  // one column of padding
  std::vector<int64_t> ids(static_cast<size_t>(rows * cols), 0), mask(ids.size(), 0);
  fill_window_rows(seqs, mine, windows.data(), rows, cols, ids.data(), mask.data());
  for (int64_t r = 0; r < rows; ++r) {
    const Window& w = windows[static_cast<size_t>(r)];
    const auto whole = genemask::tokenize(seqs[mine[w.seq]]);
    for (int64_t c = 0; c < cols; ++c) {
      const int64_t want = c == 0 ? genemask::kCls
                           : c <= w.len ? whole[static_cast<size_t>(w.start + c - 1)]
                           : c == w.len + 1 ? genemask::kSep
                                            : 0;
      EXPECT_EQ(ids[static_cast<size_t>(r * cols + c)], want) << r << " " << c;
      EXPECT_EQ(mask[static_cast<size_t>(r * cols + c)], c <= w.len + 1 ? 1 : 0) << r << " " << c;
    }
  }
  // A row too narrow for its window is refused, not written past.
  EXPECT_THROW(fill_window_rows(seqs, mine, windows.data(), 1, windows[0].len + 1, ids.data(), mask.data()),
               std::invalid_argument);
}
