#pragma once
// `genemask finetune`: one few-shot fine-tuning run of a BERT sequence classifier
// (HF BertForSequenceClassification: pooler + dropout + linear) and its test metrics.
// Torch-free header: the CLI and the sweep driver call it through libgenemask_model.so.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "genemask/eval/results.hpp"

namespace genemask::model {

struct FinetuneOptions {
  std::string model = "random";  // "random", an HF-format model directory, or a pretrain run
  std::string config = "logo";   // architecture when model == "random": logo, dnabert or config.json
  std::string train, test;       // task tables (released 6-mer TSV or plain sequence,label CSV/TSV)
  std::string out;               // DIR: metrics.json, predictions.tsv; empty = write nothing
  int64_t shots = 0;             // n per class sampled from train with seed; 0 = train as given
  int64_t file_shots = 0;        // train is the N-shot file of the released layout (a sweep's task
                                 // "dir"): it must hold N per class; 0 = not checked
  uint64_t seed = 42;            // sampling, classifier initialisation, dropout, batch order
  // 0 = the paper's regime for n per class: n < 500: lr 4e-4, 20 epochs, batch 5;
  // n >= 500: lr 5e-5, 5 epochs, batch 15.
  double lr = 0;
  int64_t epochs = 0, batch = 0;
  double warmup_fraction = 0.1, weight_decay = 0.01, dropout = 0.1;
  double clip = 1.0;             // gradient-norm clipping (DNABERT's max_grad_norm); 0 = off
  int64_t eval_batch = 64;       // test sequences per forward pass
  std::string save_model;        // DIR: the fine-tuned classifier in HF layout; empty = not saved
  int threads = 0;               // intra-op threads; 0 = all cores
  std::string device = "cpu";    // cpu or cuda
  int device_index = 0;          // GPU ordinal for cuda
  std::string precision = "auto";  // fp32, bf16 (forward passes under autocast) or auto
  std::string command_line;
};

struct FinetuneSummary {
  results::RunMetrics metrics;  // test metrics (metrics.test.n: test examples), n_train
  std::vector<std::string> class_names;
  int64_t epochs = 0, steps = 0, batch = 0;
  double lr = 0;
  double seconds = 0, train_examples_per_s = 0;
  std::string model_source;  // the directory or checkpoint used, or "random"
  bool pooler_loaded = false;  // bert.pooler.* came from the checkpoint (else initialised from the seed)
  int64_t warmup_steps = 0;
  uint64_t truncated = 0;      // train + test sequences cut to 510 6-mers
  // train + test sequences whose 6-mers are all [UNK] (no stretch of 6 A/C/G/T: a run of N):
  // the model sees nothing of their bases; learnt and scored as such, and said.
  uint64_t unknown_only = 0;
  std::string regime;          // "small" (n < 500 per class) or "large"
};

/// Not collective: one process, one run. `log` receives progress lines (may be empty).
FinetuneSummary finetune(const FinetuneOptions& o, const std::function<void(const std::string&)>& log);

}  // namespace genemask::model
