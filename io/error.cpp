#include "io/error.hpp"

#include <fmt/format.h>

namespace genemask::io {

InputError::InputError(std::string path, uint64_t line, const std::string& message)
    : std::runtime_error(fmt::format("{}:{}: {}", path, line, message)), path_(std::move(path)), line_(line) {}

InputError::InputError(std::string path, const std::string& message)
    : std::runtime_error(fmt::format("{}: {}", path, message)), path_(std::move(path)) {}

std::string describe_byte(unsigned char c) {
  if (c >= 0x21 && c < 0x7f) return fmt::format("'{}'", static_cast<char>(c));
  return fmt::format("byte 0x{:02x}", static_cast<unsigned>(c));
}

}  // namespace genemask::io
