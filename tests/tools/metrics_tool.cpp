// Test-only bridge from Python to the metrics and statistics library: reads a JSON array of
// cases from the file argv[1], writes one JSON array of results to stdout (doubles with 17
// significant digits, so Python reads back the exact values). Used by
// tests/cli/test_metrics_peers.py to compare against scikit-learn and SciPy.
//   {"kind": "classify", "classes": C, "labels": [...], "probs": [... n*C ...], "predicted": [...]?}
//     -> {"accuracy", "auc", "f1", "mcc", "argmax"} (accuracy/f1/mcc of "predicted" when given,
//        else of argmax_rows(probs)) or {"error": what()} when the library throws.
//   {"kind": "ttest", "a": [...], "b": [...]} -> {"t", "p", "df", "defined", "mean_a", "std_a"}
//   {"kind": "welch", "a": [...], "b": [...]} -> the same for Welch's t-test
#include <cmath>
#include <fstream>
#include <iostream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "genemask/eval/metrics.hpp"
#include "genemask/eval/stats.hpp"

using nlohmann::json;
namespace gm = genemask;

static json one(const json& c) {
  const std::string kind = c.at("kind");
  json r;
  if (kind == "classify") {
    const int classes = c.at("classes");
    const auto labels = c.at("labels").get<std::vector<int>>();
    const auto probs = c.at("probs").get<std::vector<double>>();
    const auto m = gm::metrics::evaluate(labels, probs, classes);
    r["auc"] = m.auc;
    r["argmax"] = gm::metrics::argmax_rows(probs, classes);
    if (c.contains("predicted")) {
      const auto pred = c.at("predicted").get<std::vector<int>>();
      r["accuracy"] = gm::metrics::accuracy(labels, pred);
      r["f1"] = gm::metrics::f1_macro(labels, pred, classes);
      r["mcc"] = gm::metrics::mcc(labels, pred, classes);
    } else {
      r["accuracy"] = m.accuracy;
      r["f1"] = m.f1;
      r["mcc"] = m.mcc;
    }
  } else if (kind == "ttest" || kind == "welch") {
    const auto a = c.at("a").get<std::vector<double>>(), b = c.at("b").get<std::vector<double>>();
    const auto t = kind == "ttest" ? gm::stats::paired_t_test(a, b) : gm::stats::welch_t_test(a, b);
    r = {{"t", t.t}, {"p", t.p}, {"df", t.df}, {"defined", t.defined}, {"mean_a", gm::stats::mean(a)},
         {"std_a", gm::stats::stddev(a)}};
    if (std::isinf(t.t)) r["t"] = t.t > 0 ? "inf" : "-inf";  // JSON has no infinity
  } else {
    throw std::runtime_error("unknown kind " + kind);
  }
  return r;
}

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: metrics_tool CASES.json\n";
    return 2;
  }
  std::ifstream in(argv[1]);
  const json cases = json::parse(in);
  json out = json::array();
  for (const auto& c : cases) {
    try {
      out.push_back(one(c));
    } catch (const std::invalid_argument& e) {
      out.push_back({{"error", e.what()}});
    }
  }
  std::cout << out.dump() << "\n";
  return 0;
}
