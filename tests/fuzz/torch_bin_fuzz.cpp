// libFuzzer target for the pytorch_model.bin reader (DNABERT-6's release format: a zip
// holding a pickled state_dict and one data record per storage).
// Oracle: the input either reads or raises io::InputError (nothing else, no crash, no
// sanitizer report); when it reads, every byte that each tensor's sizes, strides and
// storage offset reach is read here, in instrumented code, so that a view reaching past
// its data record is an AddressSanitizer report (LibTorch itself is not instrumented).
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>

#include "io/error.hpp"
#include "model/torch_bin.hpp"

using namespace genemask;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  try {
    for (const auto& [name, t] : model::read_pytorch_bin(in, "fuzz.bin")) {
      if (t.numel() == 0) continue;
      int64_t last = 0;  // elements past data_ptr() of the view's last element
      for (int64_t d = 0; d < t.dim(); ++d) {
        if (t.stride(d) < 0) std::abort();  // the reader promises non-negative strides
        last += (t.size(d) - 1) * t.stride(d);
      }
      const auto* p = static_cast<const volatile unsigned char*>(t.data_ptr());
      const uint64_t bytes = static_cast<uint64_t>(last + 1) * static_cast<uint64_t>(t.element_size());
      unsigned sum = 0;
      for (uint64_t i = 0; i < bytes; ++i) sum += p[i];
      (void)sum;
    }
  } catch (const io::InputError&) {
  }
  return 0;
}
