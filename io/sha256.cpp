#include "io/sha256.hpp"

#include <cerrno>
#include <openssl/evp.h>

#include <fmt/format.h>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <vector>

#include "io/error.hpp"

namespace genemask::io {
namespace {
class Sha {
 public:
  Sha() : ctx_(EVP_MD_CTX_new(), EVP_MD_CTX_free) {
    if (!ctx_ || EVP_DigestInit_ex(ctx_.get(), EVP_sha256(), nullptr) != 1) throw std::runtime_error("sha256 init failed");
  }
  void update(const void* p, size_t n) { EVP_DigestUpdate(ctx_.get(), p, n); }
  std::string hex() {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    EVP_DigestFinal_ex(ctx_.get(), md, &len);
    std::string s;
    for (unsigned i = 0; i < len; ++i) s += fmt::format("{:02x}", md[i]);
    return s;
  }

 private:
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx_;
};
}  // namespace

std::string sha256_hex(std::string_view data) {
  Sha s;
  s.update(data.data(), data.size());
  return s.hex();
}

std::string sha256_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path, "cannot open: " + open_error_reason(errno));
  Sha s;
  std::vector<char> buf(1 << 20);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    s.update(buf.data(), static_cast<size_t>(in.gcount()));
  }
  return s.hex();
}

}  // namespace genemask::io
