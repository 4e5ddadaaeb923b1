// The process-wide fusion switches (fusions.hpp), in every build.
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <sstream>
#include <utility>
#include <stdexcept>

#include "model/fusions.hpp"

namespace genemask::model {
namespace {
std::mutex g_mutex;
std::optional<Fusions> g_fusions;
std::atomic<int> g_gelu_rows{cuda::kBiasGeluRowsInFlight};
}  // namespace

Fusions parse_fusions(const std::string& text) {
  Fusions f{false, false, false, false, false, false, false, false, false};
  if (text == "none") return f;
  std::stringstream in(text);
  std::string item;
  bool any = false;
  while (std::getline(in, item, ',')) {
    if (item == "qkv") f.qkv = true;
    else if (item == "ln") f.ln = true;
    else if (item == "ln-bf16") f.ln_bf16 = true;
    else if (item == "gelu") f.gelu = true;
    else if (item == "bgrad") f.bgrad = true;
    else if (item == "cpu-bias") f.cpu_bias = true;
    else if (item == "ln-smem") f.ln_smem = true;
    else if (item == "bias-sum") f.bias_sum = true;
    else if (item == "ce") f.ce = true;
    else
      throw std::invalid_argument("GENEMASK_FUSED='" + text +
                                  "': expected a comma-separated list of qkv, ln, ln-bf16, gelu, bgrad, cpu-bias, ln-smem, bias-sum and ce, or none");
    any = true;
  }
  if (!any) throw std::invalid_argument("GENEMASK_FUSED is empty: expected a comma-separated list of qkv, ln, ln-bf16, gelu, bgrad, cpu-bias, ln-smem, bias-sum and ce, or none");
  return f;
}

std::string numeric_fusions(const Fusions& f) {
  std::string out;
  for (const auto& [on, name] : {std::pair{f.qkv, "qkv"}, std::pair{f.ln, "ln"}, std::pair{f.gelu, "gelu"},
                                 std::pair{f.bgrad, "bgrad"}, std::pair{f.ln_smem, "ln-smem"},
                                 std::pair{f.bias_sum, "bias-sum"}, std::pair{f.ce, "ce"}})
    if (on) out += (out.empty() ? "" : ",") + std::string(name);
  return out.empty() ? "none" : out;
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

void set_gelu_rows_in_flight(int rows) {
  if (!cuda::bias_gelu_rows_in_flight_supported(rows))
    throw std::invalid_argument("the fused bias + GELU's rows in flight: " + std::to_string(rows) +
                                "; the kernels take 1, 2 or 4");
  g_gelu_rows.store(rows, std::memory_order_relaxed);
}

}  // namespace genemask::model
