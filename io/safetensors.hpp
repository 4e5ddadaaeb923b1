#pragma once
// safetensors files (the Hugging Face tensor format), Torch-free:
//   8-byte little-endian header length N, N bytes of JSON
//   {"name": {"dtype": "F32", "shape": [...], "data_offsets": [begin, end]}, ...,
//    "__metadata__": {"format": "pt", ...}}, then the raw little-endian data.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace genemask::io {

struct StTensor {
  std::string name;
  std::string dtype;            // "F32", "F16", "BF16", "I64", "I32", "U8", ...
  std::vector<int64_t> shape;
  std::vector<char> data;       // little-endian bytes, row-major
};

size_t dtype_size(const std::string& dtype);  // 0 if unknown

/// Writes atomically. Tensors are stored in the given order.
void write_safetensors(const std::string& path, const std::vector<StTensor>& tensors,
                       const std::map<std::string, std::string>& metadata = {{"format", "pt"}});

/// Reads every tensor; checks the header, dtypes, shapes against byte ranges, and that the
/// ranges lie inside the file. Errors name the file and the tensor.
std::vector<StTensor> read_safetensors(const std::string& path, std::map<std::string, std::string>* metadata = nullptr);

}  // namespace genemask::io
