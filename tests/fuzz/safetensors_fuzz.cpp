// libFuzzer target for the safetensors reader (model weights users download).
// Oracle: the input either reads or raises io::InputError (nothing else, no crash, no
// sanitizer report); when it reads, every tensor's bytes match its dtype and shape, and
// no two tensors share bytes.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "io/error.hpp"
#include "io/safetensors.hpp"

using namespace genemask;

static std::string temp_path() {
  static std::string p = [] {
    const char* dir = std::getenv("TMPDIR");
    return std::string(dir ? dir : "/tmp") + "/genemask-fuzz-" + std::to_string(::getpid()) + ".safetensors";
  }();
  return p;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = temp_path();
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return 0;
  std::fwrite(data, 1, size, f);
  std::fclose(f);
  try {
    uint64_t total = 0;
    for (const auto& t : io::read_safetensors(path)) {
      uint64_t n = t.dtype == "F32" || t.dtype == "I32" ? 4 : t.dtype == "I64" || t.dtype == "F64" ? 8 : 0;
      if (n) {
        for (int64_t d : t.shape) n *= static_cast<uint64_t>(d);
        if (n != t.data.size()) std::abort();  // read, but the bytes do not fit the shape
      }
      total += t.data.size();
    }
    if (total + 8 > size) std::abort();  // more tensor bytes than the file: shared bytes
  } catch (const io::InputError&) {
  }
  return 0;
}
