#pragma once
// Classification metrics of the few-shot evaluation, exact and Torch-free. Conventions
// follow scikit-learn so that numbers match what users compute in Python:
// ROC AUC with tied scores counted half (average ranks), macro one-vs-one AUC for 3+
// classes (Hand & Till, sklearn roc_auc_score(multi_class="ovo", average="macro")),
// macro F1 over the classes (a class never predicted and absent scores 0 as sklearn's
// zero_division=0), multiclass MCC (sklearn matthews_corrcoef; 0 when undefined).
#include <cstddef>
#include <cstdint>
#include <vector>

namespace genemask::metrics {

struct Classification {
  double accuracy = 0, auc = 0, f1 = 0, mcc = 0;
  uint64_t n = 0;
  int classes = 0;
};

/// The metrics, each once: the name in files (metrics.json, results.jsonl, summaries), the
/// title in tables, and the member. Writers, readers and the report go through this list,
/// so a new metric is a member above, a line here and its computation in evaluate().
/// [min, max] is the range a value can have; readers refuse a value outside it.
struct MetricField {
  const char* name;
  const char* title;
  double Classification::*member;
  double min, max;
};
inline constexpr MetricField kMetricFields[] = {{"accuracy", "Accuracy", &Classification::accuracy, 0, 1},
                                                {"auc", "AUC", &Classification::auc, 0, 1},
                                                {"f1", "F1", &Classification::f1, 0, 1},
                                                {"mcc", "MCC", &Classification::mcc, -1, 1}};
/// Rounding in a computed metric may step this far past its range (an MCC of 1 + 2e-16).
inline constexpr double kMetricRangeSlack = 1e-9;

/// argmax per row of probs (row-major, n x classes); ties go to the lower class index.
std::vector<int> argmax_rows(const std::vector<double>& probs, int classes);

double accuracy(const std::vector<int>& labels, const std::vector<int>& predicted);
/// Binary ROC AUC of `score` for the positive class (label 1). Throws std::invalid_argument
/// when only one class is present.
double roc_auc_binary(const std::vector<int>& labels, const std::vector<double>& score);
/// Macro one-vs-one AUC (Hand & Till) from per-class probabilities (n x classes, row-major).
double roc_auc_ovo_macro(const std::vector<int>& labels, const std::vector<double>& probs, int classes);
double f1_macro(const std::vector<int>& labels, const std::vector<int>& predicted, int classes);
double mcc(const std::vector<int>& labels, const std::vector<int>& predicted, int classes);

/// All four: AUC is roc_auc_binary of P(class 1) for 2 classes, else roc_auc_ovo_macro.
Classification evaluate(const std::vector<int>& labels, const std::vector<double>& probs, int classes);

}  // namespace genemask::metrics
