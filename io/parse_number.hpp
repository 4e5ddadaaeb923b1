#pragma once
// Whole-field decimal numbers, for numbers read from users' files and options. std::stoull
// and strtoull skip leading spaces, take a sign ("-5" becomes 2^64 - 5) and stop at the first
// character that is not a digit; these take digits only (and one leading '-' for the signed
// form), the whole field, and say when it is anything else or out of range. strtod and stod
// also read C's hexadecimal floats ("0x1p3" is 8), which no other reader of a table takes
// for a number; parse_decimal_double does not.
#include <charconv>
#include <cmath>
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

/// `s` as a finite decimal number: an optional sign, digits with an optional '.' and an
/// optional exponent (2, -0.5, 1e-3, .5), the whole of `s`; nullopt otherwise (empty, a space,
/// hexadecimal, inf, nan, trailing text, out of a double's range).
inline std::optional<double> parse_decimal_double(std::string_view s) {
  // from_chars takes '-' but not '+'; a '+' may lead a number, not a sign.
  if (s.size() > 1 && s[0] == '+' && s[1] != '-' && s[1] != '+') s.remove_prefix(1);
  double v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v, std::chars_format::general);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

}  // namespace genemask::io
