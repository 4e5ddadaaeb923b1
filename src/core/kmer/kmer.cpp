#include "genemask/kmer/kmer.hpp"

namespace genemask {

std::string decode_kmer(uint64_t code, int k) {
  static constexpr char kBases[4] = {'A', 'C', 'G', 'T'};
  std::string s(static_cast<size_t>(k), 'A');
  for (int i = k - 1; i >= 0; --i) {
    s[static_cast<size_t>(i)] = kBases[code & 3];
    code >>= 2;
  }
  return s;
}

bool encode_kmer(std::string_view s, uint64_t& code) {
  code = 0;
  for (char c : s) {
    uint64_t b;
    switch (c) {
      case 'A': case 'a': b = 0; break;
      case 'C': case 'c': b = 1; break;
      case 'G': case 'g': b = 2; break;
      case 'T': case 't': b = 3; break;
      default: return false;
    }
    code = (code << 2) | b;
  }
  return true;
}

}  // namespace genemask
