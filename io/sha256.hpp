#pragma once
// SHA-256 (OpenSSL) of files and strings, as lowercase hex: manifest checksums.
#include <string>
#include <string_view>

namespace genemask::io {
std::string sha256_hex(std::string_view data);
std::string sha256_file(const std::string& path);
}  // namespace genemask::io
