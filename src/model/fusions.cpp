// The process-wide fusion switches (fusions.hpp), in every build.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <iterator>
#include <mutex>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "model/fusions.hpp"

namespace genemask::model {
namespace {
std::mutex g_mutex;
std::optional<Fusions> g_fusions;
std::atomic<int> g_gelu_rows{cuda::kBiasGeluRowsInFlight};

/// Every fusion's name in GENEMASK_FUSED, its switch, and whether it changes a step's numbers
/// (numeric_fusions), in the order numeric_fusions lists them: the one place a fusion is named.
struct FusionEntry {
  const char* name;
  bool Fusions::*on;
  bool numeric;
};
constexpr FusionEntry kFusionTable[] = {
    {"qkv", &Fusions::qkv, true},           {"ln", &Fusions::ln, true},
    {"ln-bf16", &Fusions::ln_bf16, false},  {"gelu", &Fusions::gelu, true},
    {"bgrad", &Fusions::bgrad, true},       {"cpu-bias", &Fusions::cpu_bias, false},
    {"ln-smem", &Fusions::ln_smem, true},   {"bias-sum", &Fusions::bias_sum, true},
    {"ce", &Fusions::ce, true},             {"weight-bf16", &Fusions::weight_bf16, false},
    {"ln-lean", &Fusions::ln_lean, false},  {"ce-pad", &Fusions::ce_pad, true},
    {"cudnn-varlen", &Fusions::cudnn_varlen, true}, {"gemm-gelu", &Fusions::gemm_gelu, true},
};
// Every switch of Fusions is in the table (a bool is one byte, and Fusions holds bools only).
static_assert(sizeof(Fusions) == std::size(kFusionTable), "a Fusions switch is missing from kFusionTable");

/// GENEMASK_FUSED's error text: what it takes.
std::string expected_list() { return "expected a comma-separated list of " + fusion_names(false) + ", or none"; }

}  // namespace

std::string fusion_names(bool numeric_only) {
  std::vector<std::string> names;
  for (const FusionEntry& e : kFusionTable)
    if (e.numeric || !numeric_only) names.emplace_back(e.name);
  std::string out;
  for (size_t i = 0; i < names.size(); ++i)
    out += (i == 0 ? "" : i + 1 == names.size() ? " and " : ", ") + names[i];
  return out;
}

Fusions parse_fusions(const std::string& text) {
  Fusions f;
  for (const FusionEntry& e : kFusionTable) f.*e.on = false;
  if (text == "none") return f;
  if (text.empty()) throw std::invalid_argument("GENEMASK_FUSED is empty: " + expected_list());
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    const auto* e = std::find_if(std::begin(kFusionTable), std::end(kFusionTable),
                                 [&](const FusionEntry& x) { return item == x.name; });
    if (e == std::end(kFusionTable))
      throw std::invalid_argument("GENEMASK_FUSED='" + text + "': " + expected_list());
    f.*e->on = true;
  }
  return f;
}

std::string numeric_fusions(const Fusions& f) {
  std::string out;
  for (const FusionEntry& e : kFusionTable)
    if (e.numeric && f.*e.on) out += (out.empty() ? "" : ",") + std::string(e.name);
  return out.empty() ? "none" : out;
}

Fusions with_numeric_of(Fusions base, const Fusions& numeric) {
  for (const FusionEntry& e : kFusionTable)
    if (e.numeric) base.*e.on = numeric.*e.on;
  return base;
}

Fusions fusions() {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (!g_fusions) {
    const char* env = std::getenv("GENEMASK_FUSED");
    g_fusions = env ? parse_fusions(env) : Fusions{};
  }
  return *g_fusions;
}

void set_fusions(Fusions f) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_fusions = f;
}

int gelu_rows_in_flight() { return g_gelu_rows.load(std::memory_order_relaxed); }

void check_gelu_rows_in_flight(int rows) {
  if (!cuda::bias_gelu_rows_in_flight_supported(rows))
    throw std::invalid_argument("the fused bias + GELU's rows in flight: " + std::to_string(rows) +
                                "; the kernels take 1, 2 or 4");
}

void set_gelu_rows_in_flight(int rows) {
  check_gelu_rows_in_flight(rows);
  g_gelu_rows.store(rows, std::memory_order_relaxed);
}

}  // namespace genemask::model
