// Classification metrics, computed exactly as scikit-learn defines them (see metrics.hpp).
// AUC is computed from integer counts (tie groups of equal scores), so it is the
// Mann-Whitney statistic with average ranks, rounded once at the final division.
#include "genemask/eval/metrics.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <string>

namespace genemask::metrics {
namespace {

void check_classes(int classes) {
  if (classes < 2)
    throw std::invalid_argument("metrics: need at least 2 classes, got " + std::to_string(classes));
}

void check_labels(const std::vector<int>& labels, int classes, const char* what) {
  for (size_t i = 0; i < labels.size(); ++i)
    if (labels[i] < 0 || labels[i] >= classes)
      throw std::invalid_argument(std::string("metrics: ") + what + "[" + std::to_string(i) + "] = " +
                                  std::to_string(labels[i]) + " is outside the classes 0.." +
                                  std::to_string(classes - 1));
}

void check_pair(const std::vector<int>& labels, const std::vector<int>& predicted, int classes) {
  check_classes(classes);
  if (labels.size() != predicted.size())
    throw std::invalid_argument("metrics: " + std::to_string(labels.size()) + " labels but " +
                                std::to_string(predicted.size()) + " predictions");
  if (labels.empty()) throw std::invalid_argument("metrics: no samples");
  check_labels(labels, classes, "labels");
  check_labels(predicted, classes, "predicted");
}

/// AUC of `score` separating positives (is_pos) from negatives, over the indices `idx`.
/// Sorting by score and walking tie groups: a positive beats every negative below its
/// group and half of the negatives inside it. The doubled count is an exact integer.
double auc_from(const std::vector<size_t>& idx, const std::vector<char>& is_pos,
                const std::vector<double>& score, const std::string& what) {
  std::vector<size_t> order(idx);
  for (size_t i : order)
    if (!std::isfinite(score[i]))
      throw std::invalid_argument("metrics: " + what + ": score of sample " + std::to_string(i) +
                                  " is not finite (" + std::to_string(score[i]) + ")");
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return score[a] < score[b]; });
  uint64_t pos = 0, neg = 0, twice_wins = 0;
  for (size_t g = 0; g < order.size();) {
    size_t e = g;
    uint64_t gp = 0, gn = 0;
    while (e < order.size() && score[order[e]] == score[order[g]]) {
      (is_pos[order[e]] ? gp : gn)++;
      ++e;
    }
    twice_wins += gp * (2 * neg + gn);
    pos += gp;
    neg += gn;
    g = e;
  }
  if (pos == 0 || neg == 0)
    throw std::invalid_argument("metrics: " + what + ": ROC AUC is undefined when only one class is present (" +
                                std::to_string(pos) + " positive, " + std::to_string(neg) +
                                " negative samples); the test set needs samples of every class");
  return static_cast<double>(twice_wins) / (2.0 * static_cast<double>(pos) * static_cast<double>(neg));
}

}  // namespace

std::vector<int> argmax_rows(const std::vector<double>& probs, int classes) {
  check_classes(classes);
  const size_t c = static_cast<size_t>(classes);
  if (probs.size() % c != 0)
    throw std::invalid_argument("metrics: " + std::to_string(probs.size()) + " probabilities is not a multiple of " +
                                std::to_string(classes) + " classes");
  std::vector<int> out(probs.size() / c);
  for (size_t r = 0; r < out.size(); ++r) {
    const double* row = probs.data() + r * c;
    size_t best = 0;
    for (size_t k = 1; k < c; ++k)
      if (row[k] > row[best]) best = k;  // strict: ties keep the lower index, as numpy.argmax
    out[r] = static_cast<int>(best);
  }
  return out;
}

double accuracy(const std::vector<int>& labels, const std::vector<int>& predicted) {
  if (labels.size() != predicted.size())
    throw std::invalid_argument("metrics: " + std::to_string(labels.size()) + " labels but " +
                                std::to_string(predicted.size()) + " predictions");
  if (labels.empty()) throw std::invalid_argument("metrics: no samples");
  uint64_t correct = 0;
  for (size_t i = 0; i < labels.size(); ++i) correct += labels[i] == predicted[i];
  return static_cast<double>(correct) / static_cast<double>(labels.size());
}

double roc_auc_binary(const std::vector<int>& labels, const std::vector<double>& score) {
  if (labels.size() != score.size())
    throw std::invalid_argument("metrics: " + std::to_string(labels.size()) + " labels but " +
                                std::to_string(score.size()) + " scores");
  check_labels(labels, 2, "labels");
  std::vector<size_t> idx(labels.size());
  std::iota(idx.begin(), idx.end(), size_t{0});
  std::vector<char> is_pos(labels.size());
  for (size_t i = 0; i < labels.size(); ++i) is_pos[i] = labels[i] == 1;
  return auc_from(idx, is_pos, score, "binary AUC");
}

double roc_auc_ovo_macro(const std::vector<int>& labels, const std::vector<double>& probs, int classes) {
  check_classes(classes);
  const size_t c = static_cast<size_t>(classes), n = labels.size();
  if (probs.size() != n * c)
    throw std::invalid_argument("metrics: " + std::to_string(probs.size()) + " probabilities for " +
                                std::to_string(n) + " samples x " + std::to_string(classes) + " classes");
  check_labels(labels, classes, "labels");
  std::vector<double> col(n);
  std::vector<char> is_pos(n);
  double sum = 0;
  int pairs = 0;
  for (int a = 0; a < classes; ++a)
    for (int b = a + 1; b < classes; ++b) {
      std::vector<size_t> idx;  // samples of class a or b only
      for (size_t i = 0; i < n; ++i)
        if (labels[i] == a || labels[i] == b) idx.push_back(i);
      const std::string what = "one-vs-one AUC of classes " + std::to_string(a) + " and " + std::to_string(b);
      double pair = 0;
      for (int positive : {a, b}) {
        for (size_t i : idx) {
          col[i] = probs[i * c + static_cast<size_t>(positive)];
          is_pos[i] = labels[i] == positive;
        }
        pair += auc_from(idx, is_pos, col, what);
      }
      sum += pair / 2;
      ++pairs;
    }
  return sum / pairs;
}

double f1_macro(const std::vector<int>& labels, const std::vector<int>& predicted, int classes) {
  check_pair(labels, predicted, classes);
  const size_t c = static_cast<size_t>(classes);
  std::vector<uint64_t> tp(c), fp(c), fn(c);
  for (size_t i = 0; i < labels.size(); ++i) {
    const size_t y = static_cast<size_t>(labels[i]), p = static_cast<size_t>(predicted[i]);
    if (y == p) {
      ++tp[y];
    } else {
      ++fp[p];
      ++fn[y];
    }
  }
  // sklearn: precision and recall with 0 for 0/0 (zero_division=0), then 2PR/(P+R), 0 if P+R=0.
  double sum = 0;
  for (size_t k = 0; k < c; ++k) {
    const double prec = tp[k] + fp[k] ? static_cast<double>(tp[k]) / static_cast<double>(tp[k] + fp[k]) : 0.0;
    const double rec = tp[k] + fn[k] ? static_cast<double>(tp[k]) / static_cast<double>(tp[k] + fn[k]) : 0.0;
    sum += prec + rec > 0 ? 2 * prec * rec / (prec + rec) : 0.0;
  }
  return sum / static_cast<double>(c);
}

double mcc(const std::vector<int>& labels, const std::vector<int>& predicted, int classes) {
  check_pair(labels, predicted, classes);
  const size_t c = static_cast<size_t>(classes);
  std::vector<int64_t> t_sum(c), p_sum(c);
  int64_t correct = 0;
  for (size_t i = 0; i < labels.size(); ++i) {
    ++t_sum[static_cast<size_t>(labels[i])];
    ++p_sum[static_cast<size_t>(predicted[i])];
    correct += labels[i] == predicted[i];
  }
  // Gorodkin's R_K as sklearn.metrics.matthews_corrcoef computes it; the covariances are
  // exact integers (n^2 fits int64 for n < 3e9), only the final ratio is rounded.
  const int64_t n = static_cast<int64_t>(labels.size());
  int64_t tp_dot = 0, pp_dot = 0, tt_dot = 0;
  for (size_t k = 0; k < c; ++k) {
    tp_dot += t_sum[k] * p_sum[k];
    pp_dot += p_sum[k] * p_sum[k];
    tt_dot += t_sum[k] * t_sum[k];
  }
  const int64_t cov_tp = correct * n - tp_dot, cov_pp = n * n - pp_dot, cov_tt = n * n - tt_dot;
  if (cov_pp == 0 || cov_tt == 0) return 0.0;  // one class predicted or present: undefined, 0 as sklearn
  return static_cast<double>(cov_tp) / std::sqrt(static_cast<double>(cov_tt) * static_cast<double>(cov_pp));
}

Classification evaluate(const std::vector<int>& labels, const std::vector<double>& probs, int classes) {
  check_classes(classes);
  const size_t c = static_cast<size_t>(classes);
  if (probs.size() != labels.size() * c)
    throw std::invalid_argument("metrics: " + std::to_string(probs.size()) + " probabilities for " +
                                std::to_string(labels.size()) + " samples x " + std::to_string(classes) +
                                " classes");
  const std::vector<int> predicted = argmax_rows(probs, classes);
  Classification r;
  r.n = labels.size();
  r.classes = classes;
  r.accuracy = accuracy(labels, predicted);
  r.f1 = f1_macro(labels, predicted, classes);
  r.mcc = mcc(labels, predicted, classes);
  if (classes == 2) {
    std::vector<double> p1(labels.size());
    for (size_t i = 0; i < labels.size(); ++i) p1[i] = probs[i * 2 + 1];
    r.auc = roc_auc_binary(labels, p1);
  } else {
    r.auc = roc_auc_ovo_macro(labels, probs, classes);
  }
  return r;
}

}  // namespace genemask::metrics
