#include "model/flops.hpp"

#include <algorithm>
#include <cctype>
#include <map>

namespace genemask::model {

double matrix_parameters(const ModelShape& m) {
  const double H = static_cast<double>(m.hidden), F = static_cast<double>(m.ffn);
  return static_cast<double>(m.layers) * (4 * H * H + 2 * H * F);
}

double training_flops(const ModelShape& m, double real_tokens, double sum_len_sq, double masked) {
  const double H = static_cast<double>(m.hidden), V = static_cast<double>(m.vocab);
  return 6 * matrix_parameters(m) * real_tokens + 12 * static_cast<double>(m.layers) * H * sum_len_sq +
         6 * (H * H + H * V) * masked;
}

double datasheet_bf16_tflops(const std::string& gpu_name) {
  std::string n = gpu_name;
  std::transform(n.begin(), n.end(), n.begin(), [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  const auto has = [&](const char* s) { return n.find(s) != std::string::npos; };
  // A MIG slice ("NVIDIA A100-SXM4-40GB MIG 1g.5gb") has a share of the GPU's units that no
  // datasheet gives: no peak.
  if (has(" MIG ")) return 0;
  if (has("H200")) return has("NVL") ? 835 : 989;  // NVL: 1671 with sparsity; SXM and GH200: 1979
  if (has("H100")) {
    if (has("PCIE")) return 756;
    if (has("NVL")) return 835;
    return 989;  // SXM: "NVIDIA H100 80GB HBM3", "H100 SXM5"
  }
  if (has("A100")) return 312;
  return 0;
}

double run_peak_tflops(const std::vector<std::string>& gpus, const std::vector<double>& peaks) {
  if (gpus.empty() || gpus.size() != peaks.size()) return 0;
  std::map<std::string, double> once;  // per GPU: its peak (ranks sharing it agree)
  for (size_t i = 0; i < gpus.size(); ++i) {
    if (!(peaks[i] > 0) || gpus[i].empty()) return 0;
    once[gpus[i]] = peaks[i];
  }
  double sum = 0;
  for (const auto& [gpu, peak] : once) sum += peak;
  return sum;
}

double mfu(double achieved_tflops, double peak_tflops) { return peak_tflops > 0 ? achieved_tflops / peak_tflops : -1; }

}  // namespace genemask::model
