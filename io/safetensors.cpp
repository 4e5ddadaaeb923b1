#include "io/safetensors.hpp"

#include <cerrno>
#include <algorithm>
#include <cstring>
#include <fmt/format.h>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <tuple>

#include "io/atomic_file.hpp"
#include "io/error.hpp"
#include "io/json.hpp"

namespace genemask::io {

size_t dtype_size(const std::string& d) {
  if (d == "F64" || d == "I64" || d == "U64") return 8;
  if (d == "F32" || d == "I32" || d == "U32") return 4;
  if (d == "F16" || d == "BF16" || d == "I16" || d == "U16") return 2;
  if (d == "I8" || d == "U8" || d == "BOOL") return 1;
  return 0;
}

void write_safetensors(const std::string& path, const std::vector<StTensor>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json h;
  if (!metadata.empty()) h["__metadata__"] = metadata;
  uint64_t off = 0;
  for (const auto& t : tensors) {
    uint64_t n = dtype_size(t.dtype);
    for (int64_t d : t.shape) n *= static_cast<uint64_t>(d);
    if (n != t.data.size())
      throw std::invalid_argument(fmt::format("tensor {}: shape and dtype need {} bytes, data has {}", t.name, n, t.data.size()));
    h[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {off, off + n}}};
    off += n;
  }
  std::string header = h.dump();
  while (header.size() % 8) header.push_back(' ');
  AtomicFile f(path);
  uint64_t len = header.size();
  char le[8];
  for (int i = 0; i < 8; ++i) le[i] = static_cast<char>((len >> (8 * i)) & 0xff);
  f.stream().write(le, 8);
  f.stream() << header;
  for (const auto& t : tensors) f.stream().write(t.data.data(), static_cast<std::streamsize>(t.data.size()));
  f.commit();
}

std::vector<StTensor> read_safetensors(const std::string& path, std::map<std::string, std::string>* metadata) {
  check_input_type(path);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path, "cannot open: " + open_error_reason(errno));
  in.seekg(0, std::ios::end);
  const uint64_t size = static_cast<uint64_t>(in.tellg());
  in.seekg(0);
  unsigned char le[8];
  if (size < 8 || !in.read(reinterpret_cast<char*>(le), 8)) throw InputError(path, "too short for a safetensors file");
  uint64_t hlen = 0;
  for (int i = 7; i >= 0; --i) hlen = (hlen << 8) | le[i];
  if (hlen > size - 8 || hlen > (uint64_t{100} << 20))
    throw InputError(path, fmt::format("header length {} does not fit the file ({} bytes): not safetensors?", hlen, size));
  std::string header(hlen, '\0');
  in.read(header.data(), static_cast<std::streamsize>(hlen));
  JsonParse parsed = try_parse_json(header);
  if (!parsed.ok()) throw InputError(path, fmt::format("header (bytes 9 to {}): {}", 8 + hlen, parsed.error));
  const nlohmann::json h = std::move(parsed.value);
  const uint64_t data_start = 8 + hlen, data_size = size - data_start;
  std::vector<StTensor> out;
  std::vector<std::tuple<uint64_t, uint64_t, std::string>> ranges;  // [begin, end), name
  if (!h.is_object()) throw InputError(path, "header is not a JSON object: not safetensors?");
  for (auto it = h.begin(); it != h.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (!it.value().is_object()) throw InputError(path, "__metadata__ is not a JSON object");
      for (auto m = it.value().begin(); m != it.value().end(); ++m) {
        if (!m.value().is_string())
          throw InputError(path, fmt::format("__metadata__ entry '{}' is not a string", m.key()));
        if (metadata) (*metadata)[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    StTensor t;
    t.name = it.key();
    std::pair<uint64_t, uint64_t> offs_of{0, 0};
    try {
      t.dtype = it.value().at("dtype").get<std::string>();
      // Integers only: a float (1e30) converted to an integer type is undefined behaviour.
      auto integers = [&](const char* key) {
        const auto& a = it.value().at(key);
        if (!a.is_array()) throw InputError(path, fmt::format("tensor {}: {} is not an array", t.name, key));
        for (const auto& e : a)
          if (!e.is_number_integer())
            throw InputError(path, fmt::format("tensor {}: {} holds {}, not an integer", t.name, key, e.dump()));
        return a;
      };
      t.shape = integers("shape").get<std::vector<int64_t>>();
      const auto& offs_json = integers("data_offsets");
      for (const auto& e : offs_json)
        if (!e.is_number_unsigned())
          throw InputError(path, fmt::format("tensor {}: data_offsets holds {}, not an offset", t.name, e.dump()));
      auto offs = offs_json.get<std::vector<uint64_t>>();
      if (offs.size() != 2 || offs[0] > offs[1] || offs[1] > data_size)
        throw InputError(path, fmt::format("tensor {}: data_offsets outside the file", t.name));
      offs_of = {offs[0], offs[1]};
      uint64_t n = dtype_size(t.dtype);
      if (n == 0) throw InputError(path, fmt::format("tensor {}: unknown dtype {}", t.name, t.dtype));
      for (int64_t d : t.shape) {
        if (d < 0) throw InputError(path, fmt::format("tensor {}: negative dimension {} in its shape", t.name, d));
        // The product must not wrap: it is compared with the data's size below.
        if (d != 0 && n > data_size / static_cast<uint64_t>(d))
          throw InputError(path, fmt::format("tensor {}: shape needs more bytes than the file holds", t.name));
        n *= static_cast<uint64_t>(d);
      }
      if (n != offs[1] - offs[0])
        throw InputError(path, fmt::format("tensor {}: shape needs {} bytes, the offsets give {}", t.name, n, offs[1] - offs[0]));
      t.data.resize(n);
      in.seekg(static_cast<std::streamoff>(data_start + offs[0]));
      if (n && !in.read(t.data.data(), static_cast<std::streamsize>(n)))
        throw InputError(path, fmt::format("tensor {}: read failed", t.name));
    } catch (const nlohmann::json::exception& e) {
      throw InputError(path, fmt::format("tensor {}: malformed header entry: {}", t.name, e.what()));
    }
    ranges.push_back({offs_of.first, offs_of.second, t.name});
    out.push_back(std::move(t));
  }
  // Two tensors must not share bytes (safetensors forbids it; a crafted file could alias).
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i) {
    const auto& a = ranges[i - 1];
    const auto& b = ranges[i];
    if (std::get<0>(b) < std::get<1>(a) && std::get<0>(b) < std::get<1>(b))
      throw InputError(path, fmt::format("tensors {} and {} overlap (data_offsets [{}, {}) and [{}, {}))", std::get<2>(a),
                                         std::get<2>(b), std::get<0>(a), std::get<1>(a), std::get<0>(b), std::get<1>(b)));
  }
  return out;
}

}  // namespace genemask::io
