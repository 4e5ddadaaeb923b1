#pragma once
// Shared set-up of the LibTorch model tests (bert_test, classifier_test).
#include <cstring>
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

}  // namespace genemask::test
