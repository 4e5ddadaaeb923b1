// Scoring of variant sequence pairs with a fine-tuned classifier: every ref and alt
// sequence is one item; items are sorted by token length so a batch pads little, run
// without gradients in eval mode, and the softmax probability of the chosen class is put
// back in input order. Threads: LibTorch's intra-op pool (one process; no MPI).
#include "model/variants.hpp"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <fmt/format.h>
#include <thread>

#include "genemask/corpus/tokenizer.hpp"
#include "io/parse_number.hpp"
#include "model/classifier.hpp"
#include "model/runtime.hpp"

namespace genemask::model {

VariantScores score_variants(const VariantScoreOptions& o, const std::vector<std::string>& ref,
                             const std::vector<std::string>& alt, const std::function<void(const std::string&)>& log) {
  const auto t0 = std::chrono::steady_clock::now();
  if (ref.size() != alt.size()) throw std::invalid_argument("score_variants: ref and alt differ in length");
  if (o.batch <= 0) throw std::invalid_argument(fmt::format("--batch {} must be positive", o.batch));
  VariantScores s;
  s.threads = set_intra_op_threads(o.threads);
  const bool bf16 = wants_bf16(o.precision, o.device);
  s.precision = precision_name(bf16);
  const torch::Device dev = pick_device(o.device, o.device_index);
  use_device(dev, /*tf32=*/false);  // full fp32: outputs match the CPU's within 1e-4
  auto model = load_classifier_hf(o.model, &s.class_names);
  model->to(dev);
  const int C = static_cast<int>(s.class_names.size());
  if (o.class_name.empty()) {
    s.class_index = 1;
  } else {
    std::string names;
    for (const auto& n : s.class_names) names += (names.empty() ? "'" : ", '") + n + "'";
    // "#N" is index N whatever the labels; a bare N is a label where one is spelt so, else an
    // index, and refused where it is both (labels "1" and "2": is --class 1 label "1", index
    // 0, or index 1, label "2"?).
    const bool hash = o.class_name.size() > 1 && o.class_name[0] == '#';
    const auto idx = io::parse_decimal_u64(hash ? o.class_name.substr(1) : o.class_name);  // digits only
    const auto it = hash ? s.class_names.end() : std::find(s.class_names.begin(), s.class_names.end(), o.class_name);
    const bool index_ok = idx && *idx < static_cast<uint64_t>(C);
    if (it != s.class_names.end()) {
      s.class_index = static_cast<int>(it - s.class_names.begin());
      if (index_ok && *idx != static_cast<uint64_t>(s.class_index))
        throw std::invalid_argument(fmt::format(
            "--class '{}' is both the label of class {} and the index of class {} (label '{}') of {} ({}): give "
            "--class '#{}' for index {}, or '#{}' for the label '{}'",
            o.class_name, s.class_index, *idx, s.class_names[*idx], o.model, names, *idx, *idx, s.class_index,
            o.class_name));
    } else if (index_ok) {
      s.class_index = static_cast<int>(*idx);
    } else {
      throw std::invalid_argument(fmt::format("--class '{}' is neither a class of {} ({}) nor an index 0..{} (or #0..#{})",
                                              o.class_name, o.model, names, C - 1, C - 1));
    }
  }

  const size_t n = ref.size();
  const int64_t max_tokens = model->config.max_tokens();
  std::vector<std::vector<uint16_t>> tokens(2 * n);
  for (size_t i = 0; i < 2 * n; ++i) {
    const std::string& seq = i < n ? ref[i] : alt[i - n];
    if (seq.size() < static_cast<size_t>(kTokenK))
      throw std::invalid_argument(fmt::format("a sequence of {} bases: at least 6 (one 6-mer) are needed", seq.size()));
    auto t = tokenize(seq);
    if (t.size() > static_cast<size_t>(max_tokens)) {  // the model's limit: 510, or fewer positions
      t.resize(static_cast<size_t>(max_tokens));
      ++s.truncated;
    }
    tokens[i] = frame(t);
  }
  // A window longer than the model reads is cut to its first 6-mers; a variant beyond them
  // would leave ref and alt reading the same tokens, and its delta 0 would be no measurement.
  // (Where the first difference lies decides: ref and alt may also read the same tokens
  // because every 6-mer over the variant holds an N, which is no matter of the window.)
  const size_t kept_bases = static_cast<size_t>(max_tokens + kTokenK - 1);
  for (size_t i = 0; i < n; ++i) {
    if (ref[i] == alt[i]) continue;
    if (tokens[i] == tokens[i + n]) ++s.same_tokens;
    if (const auto diff = std::mismatch(ref[i].begin(), ref[i].end(), alt[i].begin(), alt[i].end());
        static_cast<size_t>(diff.first - ref[i].begin()) >= kept_bases)
      throw std::invalid_argument(fmt::format(
          "{}: the variant lies beyond the first {} 6-mers of its {}-base window, all the model reads ({} bases): ref "
          "and alt would be scored on the same tokens; use a window of at most {} bases (--flank {} for a SNV), or "
          "centre the sequences on the variant",
          i < o.origins.size() ? o.origins[i] : fmt::format("pair {}", i + 1), max_tokens,
          std::max(ref[i].size(), alt[i].size()), max_tokens + kTokenK - 1, max_tokens + kTokenK - 1,
          (max_tokens + kTokenK - 2) / 2));
  }
  if (s.same_tokens > 0 && log)
    log(fmt::format("{} variant(s) read the same tokens as their reference: every 6-mer over them holds an N or "
                    "another IUPAC code ([UNK]), so their delta is 0 by construction (summary: same_tokens)",
                    s.same_tokens));
  std::vector<size_t> order(2 * n);
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return tokens[a].size() < tokens[b].size(); });
  std::vector<double> p(2 * n);
  const size_t B = static_cast<size_t>(o.batch);
  torch::NoGradGuard ng;
  auto last_log = std::chrono::steady_clock::now();
  for (size_t lo = 0; lo < order.size(); lo += B) {
    const size_t hi = std::min(order.size(), lo + B);
    size_t cols = 0;
    for (size_t i = lo; i < hi; ++i) cols = std::max(cols, tokens[order[i]].size());
    auto ids = torch::zeros({static_cast<int64_t>(hi - lo), static_cast<int64_t>(cols)}, torch::kLong);
    auto mask = torch::zeros_like(ids);
    auto ia = ids.accessor<int64_t, 2>();
    auto ma = mask.accessor<int64_t, 2>();
    for (size_t i = lo; i < hi; ++i) {
      const auto& t = tokens[order[i]];
      for (size_t k = 0; k < t.size(); ++k) {
        ia[static_cast<int64_t>(i - lo)][static_cast<int64_t>(k)] = t[k];
        ma[static_cast<int64_t>(i - lo)][static_cast<int64_t>(k)] = 1;
      }
    }
    Autocast autocast(bf16);
    auto prob = torch::softmax(model->forward(ids.to(dev), mask.to(dev)).to(torch::kDouble), -1)
                    .select(1, s.class_index)
                    .to(torch::kCPU)
                    .contiguous();
    const double* pp = prob.data_ptr<double>();
    for (size_t i = lo; i < hi; ++i) p[order[i]] = pp[i - lo];
    const auto now = std::chrono::steady_clock::now();
    if (log && std::chrono::duration<double>(now - last_log).count() > 10) {
      log(fmt::format("{} / {} sequences scored", hi, order.size()));
      last_log = now;
    }
  }
  s.p_ref.assign(p.begin(), p.begin() + static_cast<std::ptrdiff_t>(n));
  s.p_alt.assign(p.begin() + static_cast<std::ptrdiff_t>(n), p.end());
  s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  s.sequences_per_s = s.seconds > 0 ? static_cast<double>(2 * n) / s.seconds : 0;
  return s;
}

}  // namespace genemask::model
