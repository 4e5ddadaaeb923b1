#pragma once
// Command-line numbers of the C++ benchmarks (train_bench, kernel_bench).
#include <cstdint>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace genemask::bench {

/// `text` as a whole integer, or std::invalid_argument naming `what` and the text.
inline int64_t integer(const char* what, const std::string& text) {
  size_t used = 0;
  int64_t v = 0;
  try {
    v = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size()) throw std::invalid_argument(fmt::format("{} must be an integer, got '{}'", what, text));
  return v;
}

/// `text` as a whole integer above 0, or std::invalid_argument naming `what` and the text.
inline int64_t positive_integer(const char* what, const std::string& text) {
  const int64_t v = integer(what, text);
  if (v <= 0) throw std::invalid_argument(fmt::format("{} must be a positive integer, got '{}'", what, text));
  return v;
}

}  // namespace genemask::bench
