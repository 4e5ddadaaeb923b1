#include "model/torch_bin.hpp"

#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/serialization/unpickler.h>

#include <algorithm>
#include <cstring>
#include <fmt/format.h>
#include <fstream>
#include <map>

#include "io/error.hpp"

namespace genemask::model {

/// DNABERT's released weights: pytorch_model.bin, a torch.save'd (zip) state_dict.
/// LibTorch's unpickler turns collections.OrderedDict into None (it expects it only for
/// tensor hooks) and has no POP opcode, so the top-level `OrderedDict()` call of data.pkl
/// is rewritten as EMPTY_DICT MARK GLOBAL(OrderedDict) BINPUT(0) NONE SETITEMS: a dict with
/// one entry whose key is not a string (skipped below), and the class still in memo slot 0
/// for the hooks of each tensor. A state_dict saved from a module also carries `_metadata`
/// (module versions, an OrderedDict of dicts) as the dict's state, set by a final BUILD:
/// that tail is cut, leaving the dict of tensors on the stack.
std::vector<std::pair<std::string, torch::Tensor>> read_pytorch_bin(std::istream& in, const std::string& path) {
  c10::IValue v;
  std::map<const void*, uint64_t> record_bytes;  // data pointer of each record read -> its size
  try {
    caffe2::serialize::PyTorchStreamReader zip(&in);
    auto rec = zip.getRecord("data.pkl");
    std::string pkl(static_cast<const char*>(std::get<0>(rec).get()), std::get<1>(rec));
    static const char kPattern[] = "ccollections\nOrderedDict\nq\x00)R";
    static const char kRewrite[] = "}(ccollections\nOrderedDict\nq\x00Nu";
    const std::string pattern(kPattern, sizeof kPattern - 1);
    const size_t at = pkl.find(pattern);
    if (at != std::string::npos && at < 8)
      pkl.replace(at, pattern.size(), std::string(kRewrite, sizeof kRewrite - 1));
    // ... }q<n>X\x09\0\0\0_metadata ... SETITEM BUILD STOP  ->  ... STOP
    static const std::string kMeta("X\x09\x00\x00\x00_metadata", 14);
    const size_t meta = pkl.rfind(kMeta);
    if (meta != std::string::npos && pkl.size() >= 2 && pkl.compare(pkl.size() - 2, 2, "b.") == 0) {
      size_t cut = std::string::npos;
      if (meta >= 3 && pkl[meta - 3] == '}' && pkl[meta - 2] == 'q') cut = meta - 3;       // BINPUT
      else if (meta >= 6 && pkl[meta - 6] == '}' && pkl[meta - 5] == 'r') cut = meta - 6;  // LONG_BINPUT
      if (cut != std::string::npos) {
        pkl.resize(cut);
        pkl += '.';
      }
    }
    size_t off = 0;
    auto reader = [&](char* buf, size_t n) {
      n = std::min(n, pkl.size() - off);
      std::memcpy(buf, pkl.data() + off, n);
      off += n;
      return n;
    };
    auto read_record = [&](const std::string& name) {
      auto data = zip.getRecord("data/" + name);
      record_bytes[std::get<0>(data).get()] = std::get<1>(data);
      return std::move(std::get<0>(data));
    };
    torch::jit::Unpickler up(reader, nullptr, nullptr, read_record, c10::Device(torch::kCPU));
    v = up.parse_ivalue();
  } catch (const std::exception& e) {
    throw io::InputError(path, fmt::format("cannot read as a torch.save file: {}", e.what()));
  }
  if (!v.isGenericDict()) throw io::InputError(path, "does not hold a state_dict (a dict of tensors)");
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (const auto& kv : v.toGenericDict()) {
    if (!kv.key().isString()) continue;  // the placeholder entry of the rewrite above
    if (!kv.value().isTensor())
      throw io::InputError(path, fmt::format("state_dict entry '{}' is not a tensor", kv.key().toStringRef()));
    const auto& t = kv.value().toTensor();
    // The tensor's view must lie inside its record's bytes: a record cut short (or a
    // crafted size) would otherwise be read past its end.
    if (t.numel() > 0) {
      int64_t last = t.storage_offset();
      for (int64_t d = 0; d < t.dim(); ++d) {
        if (t.stride(d) < 0 || t.storage_offset() < 0)
          throw io::InputError(path, fmt::format("tensor '{}' has a negative stride or offset", kv.key().toStringRef()));
        last += (t.size(d) - 1) * t.stride(d);
      }
      const uint64_t need = static_cast<uint64_t>(last + 1) * static_cast<uint64_t>(t.element_size());
      const auto rec = record_bytes.find(t.storage().data());
      const uint64_t have = std::min<uint64_t>(t.storage().nbytes(), rec == record_bytes.end() ? 0 : rec->second);
      if (need > have)
        throw io::InputError(path, fmt::format("tensor '{}' needs {} bytes of its data record, which holds {}: the file "
                                               "is damaged or truncated",
                                               kv.key().toStringRef(), need, have));
    }
    out.emplace_back(kv.key().toStringRef(), t);
  }
  return out;
}
std::vector<std::pair<std::string, torch::Tensor>> read_pytorch_bin(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw io::InputError(path, "cannot open");
  return read_pytorch_bin(in, path);
}

}  // namespace genemask::model
