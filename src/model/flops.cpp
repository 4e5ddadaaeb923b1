#include "model/flops.hpp"

#include <algorithm>
#include <cctype>

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
  if (has("H200")) return 989;
  if (has("H100")) {
    if (has("PCIE")) return 756;
    if (has("NVL")) return 835;
    return 989;  // SXM: "NVIDIA H100 80GB HBM3", "H100 SXM5"
  }
  if (has("A100")) return 312;
  return 0;
}

double mfu(double achieved_tflops, double peak_tflops) { return peak_tflops > 0 ? achieved_tflops / peak_tflops : -1; }

}  // namespace genemask::model
