#pragma once
// Shared set-up of the LibTorch model tests (bert_test, classifier_test).
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <torch/torch.h>

#include "io/safetensors.hpp"
#include "model/bert.hpp"

namespace genemask::test {

/// A small BERT: 2 layers, 4 heads, 64 positions, the DNABERT vocabulary.
inline model::BertConfig small_bert_config(int64_t hidden, int64_t intermediate) {
  model::BertConfig c;
  c.hidden_size = hidden;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.intermediate_size = intermediate;
  c.max_position_embeddings = 64;
  return c;
}

/// A tensor as a safetensors entry (I64 or F32), for handing tensors to the Python checks.
inline io::StTensor to_st(const std::string& name, const torch::Tensor& t0) {
  auto t = t0.contiguous();
  io::StTensor s;
  s.name = name;
  s.dtype = t.scalar_type() == torch::kLong ? "I64" : "F32";
  s.shape = t.sizes().vec();
  s.data.resize(static_cast<size_t>(t.numel() * t.element_size()));
  std::memcpy(s.data.data(), t.data_ptr(), s.data.size());
  return s;
}

/// The tensors of a safetensors file (F32 or I64) by name, e.g. what a Python check wrote.
inline std::map<std::string, torch::Tensor> read_st(const std::string& path) {
  std::map<std::string, torch::Tensor> out;
  for (auto& s : io::read_safetensors(path)) {
    auto t = torch::empty(s.shape, s.dtype == "I64" ? torch::kLong : torch::kFloat32);
    std::memcpy(t.data_ptr(), s.data.data(), s.data.size());
    out[s.name] = t;
  }
  return out;
}

/// The Python that runs the reference scripts: the environment's GENEMASK_TEST_PYTHON when set
/// (a machine where the build's path does not exist, e.g. a GPU host with its own python3
/// carrying torch and numpy), else the build's (CMake's GENEMASK_PYTHON).
inline std::string test_python() {
  const char* env = std::getenv("GENEMASK_TEST_PYTHON");
  return env && *env ? std::string(env) : std::string(GENEMASK_TEST_PYTHON);
}

/// `<python> tests/model/SCRIPT` with test_python(): the command line, ARGS to be appended.
inline std::string python_command(const std::string& script) {
  return test_python() + " " + std::string(GENEMASK_TEST_SOURCE) + "/model/" + script;
}

/// `python3 tests/model/SCRIPT ARGS` with test_python(); its exit status.
inline int run_python(const std::string& script_and_args) {
  const std::string cmd = python_command(script_and_args);
  return std::system(cmd.c_str());
}

/// Largest |a - b| over the rows/positions where mask is 1 (a, b: [B, L, ...]).
inline double max_diff_real(const torch::Tensor& a, const torch::Tensor& b, const torch::Tensor& mask) {
  auto m = mask.to(torch::kBool);
  return (a - b).index({m}).abs().max().item<double>();
}

}  // namespace genemask::test
