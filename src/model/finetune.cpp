// `genemask finetune`: read the task tables, sample the shots, fine-tune, evaluate, write
// metrics.json and predictions.tsv. One process; randomness: the shots from the counter
// streams (seed, fewshot, class), the batch order from (seed, shuffle, epoch), weights and
// dropout from torch::manual_seed(seed). Same seed and thread count -> same numbers.
#include "io/table_text.hpp"
#include "model/finetune.hpp"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fmt/format.h>
#include <map>
#include <string_view>
#include <set>
#include <nlohmann/json.hpp>
#include <thread>

#include "genemask/tasks/fewshot.hpp"
#include "genemask/eval/metrics.hpp"
#include "genemask/rng.hpp"
#include "genemask/corpus/tokenizer.hpp"
#include "io/atomic_file.hpp"
#include "io/error.hpp"
#include "io/task_table.hpp"
#include "model/classifier.hpp"
#include "model/runtime.hpp"
#include "io/json.hpp"

namespace genemask::model {
namespace {

constexpr uint64_t kBatchOrderTag = 0x66696e65;  // "fine": keeps apart from pretraining's shuffle keys

struct Examples {
  std::vector<std::vector<uint16_t>> tokens;  // [CLS] 6-mers [SEP]
  std::vector<int> labels;
};

/// [CLS] 6-mers [SEP], at most max_tokens 6-mers (the model's positions less two: 510 for
/// 512); counts the sequences cut.
std::vector<uint16_t> encode(const io::TaskRow& r, const std::string& path, int64_t max_tokens, uint64_t* truncated) {
  if (r.sequence.size() < static_cast<size_t>(kTokenK))
    throw io::InputError(path, r.line,
                         fmt::format("sequence of {} bases; at least 6 (one 6-mer) are needed", r.sequence.size()));
  auto t = tokenize(r.sequence);
  if (t.size() > static_cast<size_t>(max_tokens)) {
    t.resize(static_cast<size_t>(max_tokens));
    ++*truncated;
  }
  return frame(t);
}

/// Padded ids and attention mask of some examples.
std::pair<torch::Tensor, torch::Tensor> make_batch(const Examples& ex, const std::vector<size_t>& rows,
                                                   const torch::Device& dev) {
  size_t cols = 0;
  for (size_t r : rows) cols = std::max(cols, ex.tokens[r].size());
  auto ids = torch::zeros({static_cast<int64_t>(rows.size()), static_cast<int64_t>(cols)}, torch::kLong);
  auto mask = torch::zeros_like(ids);
  auto ia = ids.accessor<int64_t, 2>();
  auto ma = mask.accessor<int64_t, 2>();
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& t = ex.tokens[rows[i]];
    for (size_t k = 0; k < t.size(); ++k) {
      ia[static_cast<int64_t>(i)][static_cast<int64_t>(k)] = t[k];
      ma[static_cast<int64_t>(i)][static_cast<int64_t>(k)] = 1;
    }
  }
  return {ids.to(dev), mask.to(dev)};
}

/// A number for a message: "nan" whatever its sign bit (fmt writes "-nan").
std::string shown(double v) { return std::isnan(v) ? "nan" : fmt::format("{}", v); }

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "'" : ", '") + x + "'";
  return s;
}

}  // namespace

FinetuneSummary finetune(const FinetuneOptions& o, const std::function<void(const std::string&)>& log) {
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  auto say = [&](const std::string& s) {
    if (log) log(s);
  };
  if (o.shots < 0) throw std::invalid_argument(fmt::format("--shots {} must be positive (or 0: the file as given)", o.shots));
  if (!std::isfinite(o.lr) || o.lr < 0)
    throw std::invalid_argument(fmt::format("--lr {} must be a number >= 0 (0: by the paper's regime)", o.lr));
  for (const auto& [flag, v] : {std::pair{"--epochs", o.epochs}, std::pair{"--batch", o.batch}})
    if (v < 0) throw std::invalid_argument(fmt::format("{} {} must be an integer >= 0 (0: by the paper's regime)", flag, v));
  if (o.eval_batch <= 0) throw std::invalid_argument(fmt::format("--eval-batch {} must be an integer >= 1", o.eval_batch));
  for (const auto& [flag, v] : {std::pair{"--weight-decay", o.weight_decay}, std::pair{"--dropout", o.dropout},
                                std::pair{"--clip", o.clip}})
    if (!std::isfinite(v) || v < 0) throw std::invalid_argument(fmt::format("{} must be a number >= 0, got {}", flag, v));
  if (!(o.warmup_fraction >= 0 && o.warmup_fraction <= 1))  // NaN fails too
    throw std::invalid_argument(fmt::format("--warmup-fraction {} must be in [0, 1]", o.warmup_fraction));
  tune_cpu_for_training();
  const int threads = set_intra_op_threads(o.threads);
  const bool bf16 = wants_bf16(o.precision, o.device);
  const torch::Device dev = pick_device(o.device, o.device_index);
  use_device(dev, /*tf32=*/false);  // full fp32: outputs match the CPU's within 1e-4

  // Tables and classes (the classes are those of the training file).
  const auto train_rows = io::read_task_table(o.train);
  const auto test_rows = io::read_task_table(o.test);
  std::vector<std::string> train_labels;
  for (const auto& r : train_rows) train_labels.push_back(r.label);
  const auto names = fewshot::class_names(train_labels);
  if (names.size() < 2)
    throw io::InputError(o.train, fmt::format("every row has label '{}': fine-tuning needs 2 or more classes", names[0]));
  std::map<std::string, int> index;
  for (size_t i = 0; i < names.size(); ++i) index[names[i]] = static_cast<int>(i);
  const int C = static_cast<int>(names.size());
  std::vector<int> class_of_row;
  std::vector<std::string> seqs;
  for (const auto& r : train_rows) {
    class_of_row.push_back(index.at(r.label));
    seqs.push_back(r.sequence);
  }
  std::vector<uint64_t> test_per_class(names.size());
  for (const auto& r : test_rows) {
    if (!index.count(r.label))
      throw io::InputError(o.test, r.line,
                           fmt::format("label '{}' is not a class of the training set {} (classes: {})", r.label,
                                       o.train, joined(names)));
    ++test_per_class[static_cast<size_t>(index.at(r.label))];
  }
  // The metrics (ROC AUC) need every class in the test set: said before training, not after.
  for (size_t c = 0; c < names.size(); ++c)
    if (test_per_class[c] == 0)
      throw io::InputError(o.test, fmt::format("has no row of class '{}' of the training set {} (classes: {}): the ROC "
                                               "AUC is undefined without every class; use a test table of every class",
                                               names[c], o.train, joined(names)));

  std::vector<size_t> chosen;
  int64_t per_class = 0;
  if (o.shots > 0) {
    try {
      chosen = fewshot::sample_per_class(class_of_row, seqs, C, static_cast<size_t>(o.shots), o.seed, names);
    } catch (const std::invalid_argument& e) {
      throw io::InputError(o.train, fmt::format("{}: choose a smaller --shots", e.what()));
    }
    per_class = o.shots;
    // The sample takes a sequence listed under two labels once, for one class: the table's
    // contradiction, which the chosen rows no longer show, is said here.
    std::map<std::string_view, int> label_of;
    uint64_t contradictions = 0, first_line = 0;
    for (size_t i = 0; i < train_rows.size(); ++i) {
      const auto [it, fresh] = label_of.emplace(train_rows[i].sequence, class_of_row[i]);
      if (!fresh && it->second != class_of_row[i] && contradictions++ == 0) first_line = train_rows[i].line;
    }
    if (contradictions)
      say(fmt::format("warning: {} row(s) of {} ({}:{} the first) repeat an earlier sequence under another label: "
                      "--shots draws such a sequence for one class at most, under a label the table contradicts; "
                      "correct the table",
                      contradictions, o.train, o.train, first_line));
  } else {
    chosen.resize(train_rows.size());
    for (size_t i = 0; i < chosen.size(); ++i) chosen[i] = i;
    std::vector<int64_t> counts(names.size());
    for (int c : class_of_row) ++counts[static_cast<size_t>(c)];
    per_class = *std::min_element(counts.begin(), counts.end());
    // A sweep records the N-shot file of the released layout as N-shot: a file of another
    // size per class would be published in the N-shot rows of Table 1.
    for (size_t c = 0; c < counts.size() && o.file_shots > 0; ++c)
      if (counts[c] != o.file_shots)
        throw io::InputError(o.train, fmt::format("holds {} examples of class '{}', but as the {}-shot training file "
                                                  "of the few-shot layout (DIR/{}/train.tsv) it must hold {} of each "
                                                  "class; use the right file, or give the task as train: (sampled "
                                                  "shots) instead of dir:",
                                                  counts[c], names[c], o.file_shots, o.file_shots, o.file_shots));
  }

  FinetuneSummary s;
  s.metrics.precision = precision_name(bf16);  // in metrics.json, the summary and each sweep record
  s.metrics.test.classes = C;
  s.class_names = names;
  s.regime = per_class < 500 ? "small" : "large";
  const bool small = s.regime == "small";
  s.lr = o.lr > 0 ? o.lr : small ? 4e-4 : 5e-5;
  s.epochs = o.epochs > 0 ? o.epochs : small ? 20 : 5;
  s.batch = o.batch > 0 ? o.batch : small ? 5 : 15;

  ClassifierSource src;
  auto model = build_classifier(o.model, o.config, C, o.dropout, o.seed, &src);
  s.model_source = src.dir;
  s.pooler_loaded = src.pooler_loaded;

  Examples train, test;
  const int64_t max_tokens = model->config.max_tokens();
  std::string first_cut, first_unknown;  // file:line of the first sequence cut, of all [UNK]
  const auto encode_row = [&](const io::TaskRow& r, const std::string& path) {
    const uint64_t before = s.truncated;
    auto t = encode(r, path, max_tokens, &s.truncated);
    if (s.truncated > before && first_cut.empty()) first_cut = fmt::format("{}:{}", path, r.line);
    if (std::all_of(t.begin() + 1, t.end() - 1, [](uint16_t id) { return id == genemask::kUnk; }) &&
        s.unknown_only++ == 0)
      first_unknown = fmt::format("{}:{}", path, r.line);
    return t;
  };
  for (size_t i : chosen) {
    train.tokens.push_back(encode_row(train_rows[i], o.train));
    train.labels.push_back(class_of_row[i]);
  }
  for (const auto& r : test_rows) {
    test.tokens.push_back(encode_row(r, o.test));
    test.labels.push_back(index.at(r.label));
  }
  if (s.truncated)
    say(fmt::format("note: {} sequence(s) ({} the first) have more than the model's {} 6-mers: fine-tuning and the test "
                    "read their first {} (truncated in metrics.json); `genemask predict` scores a long sequence over "
                    "windows that cover it",
                    s.truncated, first_cut, max_tokens, max_tokens));
  if (s.unknown_only)
    say(fmt::format("warning: {} sequence(s) ({} the first) have no stretch of 6 A, C, G or T bases (a run of N): their "
                    "6-mers are all [UNK], so the model sees nothing of their bases, and they are trained on and scored "
                    "as such (unknown_only in metrics.json); remove them from the tables if they are not meant",
                    s.unknown_only, first_unknown));
  s.metrics.truncated = static_cast<int64_t>(s.truncated);
  s.metrics.unknown_only = static_cast<int64_t>(s.unknown_only);
  // The tables read_task_table warned of (their last line without its line end), for
  // metrics.json and the sweep's records, whose report says them beside the metrics.
  s.metrics.unterminated_tables = int64_t{train_rows.back().unterminated} + int64_t{test_rows.back().unterminated};
  s.metrics.n_train = train.tokens.size();
  s.metrics.test.n = test.tokens.size();
  // A test sequence that is also a training sequence (the same tokens, whatever the tables'
  // formats) is scored after being learnt: counted, written and said, since a test table that
  // is the training table gives metrics that measure memory, not generalisation.
  {
    std::set<std::vector<uint16_t>> seen(train.tokens.begin(), train.tokens.end());
    uint64_t first_line = 0, in_train = 0;
    for (size_t i = 0; i < test.tokens.size(); ++i)
      if (seen.count(test.tokens[i]) && !in_train++) first_line = test_rows[i].line;
    s.metrics.test_in_train = static_cast<int64_t>(in_train);
    if (in_train)
      say(fmt::format("warning: {} of the {} test sequences ({}:{} the first) are also training sequences{}: the test "
                      "metrics count them as unseen (test_in_train in metrics.json)",
                      in_train, test.tokens.size(), o.test, first_line,
                      in_train == test.tokens.size() ? ", all of them: is --test the training table?" : ""));
  }
  // A test sequence given twice is scored twice and counts twice in every metric; under
  // another label it is a contradiction no classifier can score right. Counted, written and
  // said, like the above: duplicates in a released test table are the user's to judge.
  {
    std::map<std::vector<uint16_t>, int> label_of;
    uint64_t first_line = 0, repeats = 0, other_label = 0;
    for (size_t i = 0; i < test.tokens.size(); ++i) {
      const auto [it, first] = label_of.emplace(test.tokens[i], test.labels[i]);
      if (first) continue;
      if (!repeats++) first_line = test_rows[i].line;
      other_label += it->second != test.labels[i];
    }
    s.metrics.test_duplicates = static_cast<int64_t>(repeats);
    if (repeats)
      say(fmt::format("warning: {} of the {} test sequences ({}:{} the first) repeat an earlier test sequence{}: each "
                      "is scored again, as one more test sequence in the metrics (test_duplicates in metrics.json)",
                      repeats, test.tokens.size(), o.test, first_line,
                      other_label ? fmt::format(", {} of them under another label", other_label) : ""));
  }
  // A training sequence given under two labels is learnt both ways (one of them wrong):
  // said, with the first line, as the tables' other contradictions are.
  {
    std::map<std::vector<uint16_t>, int> label_of;
    uint64_t first_line = 0, contradictions = 0;
    for (size_t k = 0; k < train.tokens.size(); ++k) {
      const auto [it, first] = label_of.emplace(train.tokens[k], train.labels[k]);
      if (!first && it->second != train.labels[k] && !contradictions++) first_line = train_rows[chosen[k]].line;
    }
    if (contradictions)
      say(fmt::format("warning: {} training sequence(s) ({}:{} the first) repeat an earlier training sequence under "
                      "another label: both labels are learnt; correct the table",
                      contradictions, o.train, first_line));
  }
  model->to(dev);
  auto opt = make_adamw(model, s.lr, o.weight_decay);
  const int64_t n = static_cast<int64_t>(s.metrics.n_train);
  const int64_t per_epoch = (n + s.batch - 1) / s.batch;
  s.steps = per_epoch * s.epochs;
  // Rounded down, as DNABERT's run_finetune.py does (int(ratio * steps)); transformers'
  // warmup_ratio rounds up (math.ceil), one step more for 36 steps x 0.1.
  s.warmup_steps = static_cast<int64_t>(o.warmup_fraction * static_cast<double>(s.steps));
  say(fmt::format("{} classes ({}), {} training sequences ({} per class, {} regime), {} test; model {}{}; lr {:g}, "
                  "{} epochs x {} steps of batch {}, warmup {} steps, {} threads",
                  C, joined(names), n, per_class, s.regime, s.metrics.test.n, s.model_source,
                  src.dir == "random" ? "" : src.pooler_loaded ? " (with its pooler)" : " (pooler initialised)", s.lr,
                  s.epochs, per_epoch, s.batch, s.warmup_steps, threads));

  const auto t_train = clock::now();
  model->train();
  int64_t step = 0;
  std::vector<size_t> order(static_cast<size_t>(n));
  for (int64_t e = 0; e < s.epochs; ++e) {
    const auto t_epoch = clock::now();
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    Rng rng(o.seed, Stream::shuffle, kBatchOrderTag, static_cast<uint64_t>(e));
    for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng.below(i)]);
    double loss_sum = 0;
    for (int64_t b = 0; b < per_epoch; ++b) {
      const size_t lo = static_cast<size_t>(b * s.batch), hi = std::min(order.size(), lo + static_cast<size_t>(s.batch));
      std::vector<size_t> rows(order.begin() + static_cast<std::ptrdiff_t>(lo), order.begin() + static_cast<std::ptrdiff_t>(hi));
      auto [ids, mask] = make_batch(train, rows, dev);
      std::vector<int64_t> lab;
      for (size_t r : rows) lab.push_back(train.labels[r]);
      auto labels = torch::tensor(lab, torch::kLong).to(dev);
      const double lr = linear_warmup_lr(s.lr, step, s.warmup_steps, s.steps);
      const double loss = train_step(model, *opt, ids, mask, labels, lr, o.clip, bf16);
      ++step;
      if (!std::isfinite(loss))  // the weights are ruined from here on: stop before any output
        throw std::runtime_error(fmt::format("fine-tuning diverged: the training loss is {} at step {} of {} (epoch {}, "
                                             "learning rate {:g}); nothing was written: lower --lr (now {:g})",
                                             shown(loss), step, s.steps, e + 1, lr, s.lr));
      loss_sum += loss * static_cast<double>(rows.size());
    }
    say(fmt::format("epoch {}/{}  loss {:.4f}  {:.2f} s", e + 1, s.epochs, loss_sum / static_cast<double>(n),
                    std::chrono::duration<double>(clock::now() - t_epoch).count()));
  }
  const double train_s = std::chrono::duration<double>(clock::now() - t_train).count();
  s.train_examples_per_s = train_s > 0 ? static_cast<double>(n * s.epochs) / train_s : 0;

  // Evaluation: no dropout, batches of similar lengths, probabilities back in file order.
  model->eval();
  std::vector<double> probs(s.metrics.test.n * static_cast<size_t>(C));
  {
    torch::NoGradGuard ng;
    std::vector<size_t> by_len(s.metrics.test.n);
    for (size_t i = 0; i < by_len.size(); ++i) by_len[i] = i;
    std::stable_sort(by_len.begin(), by_len.end(),
                     [&](size_t a, size_t b) { return test.tokens[a].size() < test.tokens[b].size(); });
    for (size_t lo = 0; lo < by_len.size(); lo += static_cast<size_t>(o.eval_batch)) {
      std::vector<size_t> rows(by_len.begin() + static_cast<std::ptrdiff_t>(lo),
                               by_len.begin() + static_cast<std::ptrdiff_t>(std::min(by_len.size(), lo + static_cast<size_t>(o.eval_batch))));
      auto [ids, mask] = make_batch(test, rows, dev);
      Autocast autocast(bf16);
      auto p = torch::softmax(model->forward(ids, mask).to(torch::kFloat32), -1).to(torch::kCPU, torch::kDouble).contiguous();
      const double* pp = p.data_ptr<double>();
      for (size_t i = 0; i < rows.size(); ++i)
        std::memcpy(probs.data() + rows[i] * static_cast<size_t>(C), pp + i * static_cast<size_t>(C),
                    static_cast<size_t>(C) * sizeof(double));
    }
  }
  for (size_t i = 0; i < probs.size(); ++i)
    if (!std::isfinite(probs[i]))
      throw std::runtime_error(fmt::format("fine-tuning diverged: the model gives a probability of {} for test row {} "
                                           "({}); nothing was written: lower --lr (now {:g})",
                                           shown(probs[i]), i / static_cast<size_t>(C) + 1, o.test, s.lr));
  try {
    s.metrics.test = metrics::evaluate(test.labels, probs, C);
  } catch (const std::invalid_argument& e) {
    throw io::InputError(o.test, fmt::format("cannot score the test set: {}", e.what()));
  }
  s.seconds = std::chrono::duration<double>(clock::now() - t0).count();
  std::string line = "test:";
  for (const auto& f : metrics::kMetricFields) line += fmt::format("  {} {:.4f}", f.name, s.metrics.test.*f.member);
  say(line);

  if (!o.save_model.empty()) save_classifier_hf(model, names, o.save_model);
  if (!o.out.empty()) {
    std::filesystem::create_directories(o.out);
    {
      io::AtomicFile f(o.out + "/predictions.tsv");
      auto& out = f.stream();
      out << "id\tlabel";
      // prob_<label>, as `predict` names them (and transformers' id2label): P(label 1) is prob_1
      // in both, whatever the labels are.
      for (int c = 0; c < C; ++c) out << '\t' << io::tsv_field("prob_" + names[static_cast<size_t>(c)]);
      out << '\n';
      for (size_t i = 0; i < s.metrics.test.n; ++i) {
        out << "line" << test_rows[i].line << '\t' << io::tsv_field(test_rows[i].label);
        for (int c = 0; c < C; ++c) out << '\t' << fmt::format("{}", probs[i * static_cast<size_t>(C) + static_cast<size_t>(c)]);
        out << '\n';
      }
      f.commit();
    }
    std::vector<uint64_t> train_lines;  // the shots, for provenance
    for (size_t i : chosen) train_lines.push_back(train_rows[i].line);
    nlohmann::ordered_json j;
    s.metrics.to_json(j);
    j.update(nlohmann::ordered_json{{"class_names", names},
                                {"seed", o.seed},             {"shots", o.shots},
                                {"per_class", per_class},     {"regime", s.regime},
                                {"lr", s.lr},                 {"epochs", s.epochs},
                                {"batch", s.batch},           {"steps", s.steps},
                                {"warmup_steps", s.warmup_steps}, {"weight_decay", o.weight_decay},
                                {"dropout", o.dropout},       {"clip", o.clip},
                                {"model", s.model_source},    {"pooler_loaded", s.pooler_loaded},
                                {"train", o.train},           {"test", o.test},
                                {"threads", threads},
                                {"train_lines", train_lines},
                                {"device", o.device},
                                {"seconds", s.seconds},
                                {"train_examples_per_s", s.train_examples_per_s},
                                {"command_line", o.command_line}});
    io::AtomicFile f(o.out + "/metrics.json");
    f.stream() << io::json_text(j, 2) << '\n';
    f.commit();
  }
  return s;
}

}  // namespace genemask::model
