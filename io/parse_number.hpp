#pragma once
// Whole-field decimal integers, for numbers read from users' files and options. std::stoull
// and strtoull skip leading spaces, take a sign ("-5" becomes 2^64 - 5) and stop at the first
// character that is not a digit; these take digits only (and one leading '-' for the signed
// form), the whole field, and say when it is anything else or out of range.
#include <charconv>
#include <cstdint>
#include <optional>
#include <string_view>

namespace genemask::io {

/// `s` as a non-negative integer: decimal digits only, the whole of `s`; nullopt otherwise
/// (empty, a sign, a space, a fraction, trailing text, more than uint64_t holds).
inline std::optional<uint64_t> parse_decimal_u64(std::string_view s) {
  uint64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

/// `s` as an integer: an optional '-' and decimal digits, the whole of `s`; nullopt otherwise.
inline std::optional<int64_t> parse_decimal_i64(std::string_view s) {
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

}  // namespace genemask::io
