// BertForSequenceClassification: HF names, an independent Python forward pass, training
// steps against PyTorch's AdamW + HF's schedule, and loading encoders from checkpoints.
#include "model/classifier.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fmt/format.h>
#include <set>

#include "io/error.hpp"
#include "io/safetensors.hpp"
#include "model/runtime.hpp"
#include "model/hf_io.hpp"
#include "model_test_util.hpp"
#include "test_util.hpp"

using namespace genemask;
using namespace genemask::model;

namespace {

BertConfig small_config() { return test::small_bert_config(32, 64); }

std::string write_config(const test::TempDir& tmp) {
  const std::string p = tmp.file("small.json");
  test::write_file(p, small_config().to_json());
  return p;
}

using test::to_st;

/// `rows` random sequences of different lengths ([CLS] ... [SEP], padded) and labels < classes.
struct Batch {
  torch::Tensor ids, mask, labels;
};
Batch batch(int64_t rows, int64_t cols, int64_t classes, uint64_t seed) {
  torch::manual_seed(seed);
  Batch b{torch::randint(5, 4101, {rows, cols}, torch::kLong), torch::ones({rows, cols}, torch::kLong),
          torch::randint(0, classes, {rows}, torch::kLong)};
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t len = cols - (r * 5) % (cols - 3);
    b.ids[r][0] = 2;
    b.ids[r][len - 1] = 3;
    if (len < cols) {
      b.ids[r].slice(0, len).fill_(0);
      b.mask[r].slice(0, len).fill_(0);
    }
  }
  return b;
}

std::string python(const std::string& args) {
  return genemask::test::python_command("classifier_reference.py ") + args;
}

bool same_tensor(BertForSequenceClassification& a, BertForSequenceClassification& b, const std::string& name) {
  return torch::equal(a->named_parameters()[name], b->named_parameters()[name]);
}

}  // namespace

TEST(Classifier, ParameterNamesAreHuggingFaces) {
  // BertForSequenceClassification(BertConfig(num_hidden_layers=2), num_labels=3).state_dict()
  // keys, without the position_ids buffer.
  BertForSequenceClassification m(small_config(), 3);
  std::set<std::string> names;
  for (const auto& p : m->named_parameters()) names.insert(p.key());
  std::set<std::string> want = {"bert.embeddings.word_embeddings.weight", "bert.embeddings.position_embeddings.weight",
                                "bert.embeddings.token_type_embeddings.weight", "bert.embeddings.LayerNorm.weight",
                                "bert.embeddings.LayerNorm.bias", "bert.pooler.dense.weight", "bert.pooler.dense.bias",
                                "classifier.weight", "classifier.bias"};
  for (int i = 0; i < 2; ++i)
    for (const char* n : {"attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense",
                          "attention.output.LayerNorm", "intermediate.dense", "output.dense", "output.LayerNorm"})
      for (const char* wb : {".weight", ".bias"}) want.insert(fmt::format("bert.encoder.layer.{}.{}{}", i, n, wb));
  EXPECT_EQ(names, want);
  EXPECT_EQ(m->named_parameters()["classifier.weight"].sizes(), (std::vector<int64_t>{3, 32}));
  EXPECT_THROW(BertForSequenceClassification(small_config(), 1), std::invalid_argument);
}

TEST(Classifier, LogitsMatchIndependentPythonForward) {
  test::TempDir tmp;
  auto m = build_classifier("random", write_config(tmp), 3, 0.1, 7, nullptr);
  m->eval();
  auto b = batch(5, 30, 3, 1);
  torch::Tensor logits;
  {
    torch::NoGradGuard ng;
    logits = m->forward(b.ids, b.mask);
  }
  ASSERT_EQ(logits.sizes(), (std::vector<int64_t>{5, 3}));
  save_classifier_hf(m, {"a", "b", "c"}, tmp.file("clf"));
  io::write_safetensors(tmp.file("io.safetensors"), {to_st("input_ids", b.ids), to_st("attention_mask", b.mask),
                                                     to_st("logits", logits)});
  const std::string cmd = python("forward " + tmp.file("clf") + " " + tmp.file("io.safetensors") + " 1e-5");
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  // The saved config is a classifier's.
  const std::string cfg = test::read_file(tmp.file("clf/config.json"));
  EXPECT_NE(cfg.find("\"BertForSequenceClassification\""), std::string::npos);
  EXPECT_NE(cfg.find("\"2\": \"c\""), std::string::npos) << cfg;
}

TEST(Classifier, ClsOnlyLastLayerEqualsFullEncoder) {
  test::TempDir tmp;
  for (int64_t classes : {2, 5}) {
    auto m = build_classifier("random", write_config(tmp), classes, 0.1, 9, nullptr);
    m->eval();
    auto b = batch(6, 40, classes, 4);
    torch::NoGradGuard ng;
    auto fast = m->forward(b.ids, b.mask), full = m->forward_full(b.ids, b.mask);
    EXPECT_LT((fast - full).abs().max().item<float>(), 1e-5);
    EXPECT_GT(full.abs().max().item<float>(), 1e-3);  // not trivially zero
  }
}

TEST(Classifier, HeadStaysFp32UnderBf16Autocast) {
  // Under bf16 autocast the encoder runs in bf16, but the logits come out of an fp32 head:
  // fp32 dtype, values that bf16 cannot hold (so the test set's scores do not tie), and
  // close to the fp32 model's. With the head in bf16 as well, every logit would round-trip
  // through bf16 unchanged.
  test::TempDir tmp;
  auto m = build_classifier("random", write_config(tmp), 2, 0.1, 9, nullptr);
  m->eval();
  auto b = batch(16, 40, 2, 4);
  torch::NoGradGuard ng;
  auto fp32 = m->forward(b.ids, b.mask);
  torch::Tensor bf16, full;
  {
    Autocast autocast(true);
    bf16 = m->forward(b.ids, b.mask);
    full = m->forward_full(b.ids, b.mask);
  }
  for (const auto& t : {bf16, full}) {
    EXPECT_EQ(t.scalar_type(), torch::kFloat32);
    const auto held = t.to(torch::kBFloat16).to(torch::kFloat32);
    EXPECT_GT((held != t).sum().item<int64_t>(), t.numel() / 2);
    EXPECT_LT((t - fp32).abs().max().item<float>(), 0.05 * std::max(1.0f, fp32.abs().max().item<float>()));
  }
}

TEST(Classifier, PaddingDoesNotChangeLogits) {
  test::TempDir tmp;
  auto m = build_classifier("random", write_config(tmp), 2, 0.1, 3, nullptr);
  m->eval();
  auto b = batch(4, 30, 2, 2);
  torch::NoGradGuard ng;
  auto full = m->forward(b.ids, b.mask);
  const int64_t len = b.mask[2].sum().item<int64_t>();
  auto alone = m->forward(b.ids[2].slice(0, 0, len).unsqueeze(0), b.mask[2].slice(0, 0, len).unsqueeze(0));
  EXPECT_LT((alone[0] - full[2]).abs().max().item<float>(), 1e-5);
}

// Same initial weights and batches: PyTorch's AdamW with the same groups, HF's schedule and
// clipping give the same losses and weights. The large lr and weight decay make a wrong
// group, beta, eps or schedule show far above the tolerance.
TEST(Classifier, TrainingStepsMatchPyTorch) {
  test::TempDir tmp;
  auto m = build_classifier("random", write_config(tmp), 3, 0.0, 11, nullptr);
  save_classifier_hf(m, {"0", "1", "2"}, tmp.file("init"));
  const double lr = 1e-2, wd = 0.5, clip = 1.0;
  const int64_t warmup = 2, total = 10, n = 4;
  auto opt = make_adamw(m, lr, wd);
  m->train();
  std::vector<io::StTensor> io;
  std::vector<float> losses;
  for (int64_t k = 0; k < n; ++k) {
    auto b = batch(5, 24, 3, 100 + static_cast<uint64_t>(k));
    losses.push_back(static_cast<float>(train_step(m, *opt, b.ids, b.mask, b.labels, linear_warmup_lr(lr, k, warmup, total), clip)));
    io.push_back(to_st(fmt::format("ids_{}", k), b.ids));
    io.push_back(to_st(fmt::format("mask_{}", k), b.mask));
    io.push_back(to_st(fmt::format("labels_{}", k), b.labels));
  }
  io.push_back(to_st("loss", torch::tensor(losses)));
  save_classifier_hf(m, {"0", "1", "2"}, tmp.file("after"));
  io::write_safetensors(tmp.file("io.safetensors"), io);
  const std::string cmd = python(fmt::format("train {} {} {} {} {} {} {} {} 1e-5", tmp.file("init"), tmp.file("after"),
                                             tmp.file("io.safetensors"), lr, wd, warmup, total, clip));
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

TEST(Classifier, LinearWarmupScheduleIsHuggingFaces) {
  // transformers.get_linear_schedule_with_warmup(opt, 3, 10): lambda(step) of steps 0..10.
  const double want[] = {0.0, 1.0 / 3, 2.0 / 3, 1.0, 6.0 / 7, 5.0 / 7, 4.0 / 7, 3.0 / 7, 2.0 / 7, 1.0 / 7, 0.0};
  for (int64_t s = 0; s <= 10; ++s) EXPECT_NEAR(linear_warmup_lr(2.0, s, 3, 10), 2.0 * want[s], 1e-15) << s;
  EXPECT_DOUBLE_EQ(linear_warmup_lr(1.0, 0, 0, 4), 1.0);  // no warm-up: the first step at the peak
  EXPECT_DOUBLE_EQ(linear_warmup_lr(1.0, 3, 0, 4), 0.25);
}

TEST(Classifier, LoadsEncoderFromMaskedLmAndInitialisesPooler) {
  test::TempDir tmp;
  torch::manual_seed(4);
  BertForMaskedLM mlm(small_config());
  init_weights(*mlm, mlm->config);
  export_hf(mlm, tmp.file("mlm"));
  ClassifierSource src;
  auto a = build_classifier(tmp.file("mlm"), "", 2, 0.1, 5, &src);
  EXPECT_EQ(src.dir, tmp.file("mlm"));
  EXPECT_FALSE(src.pooler_loaded);
  auto mp = mlm->named_parameters();
  for (const auto& p : a->named_parameters())
    if (p.key().rfind("bert.", 0) == 0 && p.key().rfind("bert.pooler.", 0) != 0)
      EXPECT_TRUE(torch::equal(p.value(), mp[p.key()])) << p.key();
  // Pooler and classifier as HF initialises them: normal(0, 0.02), zero bias.
  auto pw = a->named_parameters()["bert.pooler.dense.weight"];
  EXPECT_NEAR(pw.std().item<double>(), 0.02, 0.002);
  EXPECT_EQ(a->named_parameters()["bert.pooler.dense.bias"].abs().max().item<float>(), 0.0f);
  EXPECT_NEAR(a->named_parameters()["classifier.weight"].std().item<double>(), 0.02, 0.006);
  // The head comes from the seed: the same seed the same head, another seed another.
  auto b = build_classifier(tmp.file("mlm"), "", 2, 0.1, 5, nullptr);
  auto c = build_classifier(tmp.file("mlm"), "", 2, 0.1, 6, nullptr);
  EXPECT_TRUE(same_tensor(a, b, "classifier.weight"));
  EXPECT_FALSE(same_tensor(a, c, "classifier.weight"));
  EXPECT_EQ(a->config.hidden_dropout_prob, 0.1);
  EXPECT_EQ(a->config.attention_probs_dropout_prob, 0.1);
}

// DNABERT's release: pytorch_model.bin with bert.pooler.*, the MLM head, its tied decoder
// copies and the position_ids buffer. The pooler is taken; the heads are ignored.
TEST(Classifier, LoadsPoolerFromDnabertStyleCheckpoint) {
  test::TempDir tmp;
  torch::manual_seed(8);
  BertForMaskedLM mlm(small_config());
  init_weights(*mlm, mlm->config);
  export_hf(mlm, tmp.file("dnabert"));
  auto st = io::read_safetensors(tmp.file("dnabert/model.safetensors"));
  const auto pw = torch::randn({32, 32}), pb = torch::randn({32});
  st.push_back(to_st("bert.pooler.dense.weight", pw));
  st.push_back(to_st("bert.pooler.dense.bias", pb));
  io::write_safetensors(tmp.file("dnabert/model.safetensors"), st);
  const std::string cmd = genemask::test::python_command("to_pytorch_bin.py ") +
                          tmp.file("dnabert");
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  ClassifierSource src;
  auto m = build_classifier(tmp.file("dnabert"), "", 2, 0.1, 1, &src);
  EXPECT_TRUE(src.pooler_loaded);
  EXPECT_TRUE(torch::equal(m->named_parameters()["bert.pooler.dense.weight"], pw));
  EXPECT_TRUE(torch::equal(m->named_parameters()["bert.pooler.dense.bias"], pb));
  EXPECT_TRUE(torch::equal(m->named_parameters()["bert.encoder.layer.1.output.dense.weight"],
                           mlm->named_parameters()["bert.encoder.layer.1.output.dense.weight"]));
}

TEST(Classifier, ReloadsSavedClassifierWithNewHead) {
  test::TempDir tmp;
  auto a = build_classifier("random", write_config(tmp), 3, 0.1, 2, nullptr);
  {
    torch::NoGradGuard ng;
    a->named_parameters()["classifier.weight"].add_(1.0);  // "fine-tuned"
  }
  save_classifier_hf(a, {"x", "y", "z"}, tmp.file("clf"));
  ClassifierSource src;
  auto b = build_classifier(tmp.file("clf"), "", 3, 0.1, 2, &src);
  EXPECT_TRUE(src.pooler_loaded);
  EXPECT_TRUE(same_tensor(a, b, "bert.pooler.dense.weight"));
  EXPECT_TRUE(same_tensor(a, b, "bert.encoder.layer.0.attention.self.query.weight"));
  EXPECT_LT(b->named_parameters()["classifier.weight"].abs().max().item<float>(), 0.5f);  // re-initialised
}

// `finetune --save-model` loads in transformers as AutoModelForSequenceClassification (no
// missing or unexpected weights) with the same logits; transformers' own saved classifiers
// (safetensors and pytorch_model.bin, default labels left out of config.json) load here.
TEST(Classifier, HuggingFaceRoundTripWithTransformers) {
  test::TempDir tmp;
  auto a = build_classifier("random", write_config(tmp), 3, 0.0, 5, nullptr);
  {
    torch::NoGradGuard ng;
    a->named_parameters()["classifier.bias"].add_(0.3);
  }
  a->eval();
  save_classifier_hf(a, {"x", "y", "z"}, tmp.file("clf"));
  auto b = batch(4, 24, 3, 6);
  torch::Tensor logits;
  {
    torch::NoGradGuard ng;
    logits = a->forward(b.ids, b.mask);
  }
  io::write_safetensors(tmp.file("io.safetensors"),
                        {to_st("input_ids", b.ids), to_st("attention_mask", b.mask), to_st("cls_logits", logits)});
  EXPECT_EQ(test::run_python("hf_transformers_check.py export " + tmp.file("clf") + " " + tmp.file("io.safetensors")), 0);

  ASSERT_EQ(test::run_python("hf_transformers_check.py save " + tmp.file("hf")), 0);
  auto io = test::read_st(tmp.file("hf/io.safetensors"));
  for (const char* d : {"cls-st", "cls-bin"}) {
    std::vector<std::string> names;
    auto m = load_classifier_hf(tmp.file(std::string("hf/") + d), &names);
    EXPECT_EQ(names, (std::vector<std::string>{"0", "1"})) << d;
    m->eval();
    torch::NoGradGuard ng;
    EXPECT_LT((m->forward(io["input_ids"], io["attention_mask"]) - io["cls_logits"]).abs().max().item<double>(), 1e-5) << d;
  }
  // finetune's start from a transformers-saved MLM: its encoder, as transformers computes it.
  for (const char* d : {"mlm-st", "mlm-bin"}) {
    ClassifierSource src;
    auto m = build_classifier(tmp.file(std::string("hf/") + d), "", 2, 0.0, 1, &src);
    EXPECT_FALSE(src.pooler_loaded) << d;  // BertForMaskedLM has none
    m->eval();
    torch::NoGradGuard ng;
    EXPECT_LT(test::max_diff_real(m->bert(io["input_ids"], io["attention_mask"]), io["hidden"], io["attention_mask"]), 1e-5)
        << d;
  }
}

TEST(Classifier, LoadErrorsNameTheProblem) {
  test::TempDir tmp;
  EXPECT_NE(test::error_of([&] { build_classifier(tmp.file("none"), "", 2, 0.1, 1, nullptr); })
                .find("must be \"random\", a model directory or a `genemask pretrain` run"),
            std::string::npos);
  std::filesystem::create_directories(tmp.file("noweights"));
  test::write_file(tmp.file("noweights/config.json"), small_config().to_json());
  EXPECT_NE(test::error_of([&] { build_classifier(tmp.file("noweights"), "", 2, 0.1, 1, nullptr); })
                .find("no complete checkpoint (checkpoints/step-*/state.json) and no model.safetensors"),
            std::string::npos);
  BertForMaskedLM mlm(small_config());
  export_hf(mlm, tmp.file("hf"));
  auto st = io::read_safetensors(tmp.file("hf/model.safetensors"));
  st.erase(st.begin());  // the first tensor (by name)
  st.push_back(to_st("bert.extra.weight", torch::zeros({2})));
  io::write_safetensors(tmp.file("hf/model.safetensors"), st);
  const std::string e = test::error_of([&] { build_classifier(tmp.file("hf"), "", 2, 0.1, 1, nullptr); });
  EXPECT_NE(e.find("unexpected tensor 'bert.extra.weight'"), std::string::npos) << e;
  st.pop_back();
  io::write_safetensors(tmp.file("hf/model.safetensors"), st);
  const std::string e2 = test::error_of([&] { build_classifier(tmp.file("hf"), "", 2, 0.1, 1, nullptr); });
  EXPECT_NE(e2.find("is missing"), std::string::npos) << e2;
  try {
    build_classifier("random", "logo", 2, 1.5, 1, nullptr);
    ADD_FAILURE() << "no error for --dropout 1.5";
  } catch (const std::invalid_argument& ex) {
    EXPECT_STREQ(ex.what(), "--dropout 1.5 must be in [0, 1)");
  }
}
