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
namespace {

/// Walks the opcodes of a pickle (protocol <= 5) and checks what LibTorch's unpickler would
/// trust: every length a string, bytes or long opcode declares must fit in the bytes that
/// are left, every memo index must be below the pickle's size, the opcode must be one a
/// pickle can hold, and a STOP must end it. The unpickler allocates what a length says
/// before it reads (a 600-byte file asked for gigabytes): this check comes first. Throws
/// std::invalid_argument naming the byte offset.
void check_pickle(const std::string& p) {
  size_t pos = 0;
  auto need = [&](uint64_t n, uint8_t op) {
    if (n > p.size() - pos)
      throw std::invalid_argument(fmt::format("pickle opcode 0x{:02x} at byte {} declares {} bytes, {} are left", op,
                                              pos - 1, n, p.size() - pos));
  };
  auto uint = [&](int bytes, uint8_t op) {
    need(static_cast<uint64_t>(bytes), op);
    uint64_t v = 0;
    for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p[pos + static_cast<size_t>(i)]);
    pos += static_cast<size_t>(bytes);
    return v;
  };
  auto memo = [&](uint64_t id, uint8_t op) {
    if (id > p.size())
      throw std::invalid_argument(fmt::format("pickle opcode 0x{:02x} at byte {} uses memo slot {}, more than the "
                                              "pickle's {} bytes could fill",
                                              op, pos - 1, id, p.size()));
  };
  auto line = [&](uint8_t op) {
    const size_t nl = p.find('\n', pos);
    if (nl == std::string::npos)
      throw std::invalid_argument(fmt::format("pickle opcode 0x{:02x} at byte {}: its text argument has no end", op, pos - 1));
    pos = nl + 1;
  };
  while (pos < p.size()) {
    const auto op = static_cast<uint8_t>(p[pos++]);
    switch (op) {
      case '.':  // STOP
        return;
      case '(': case '0': case '1': case '2': case 'N': case 'Q': case 'R': case 'a': case 'b': case 'd': case '}':
      case 'e': case 'l': case ']': case 'o': case 's': case 't': case ')': case 'u': case 0x81: case 0x85: case 0x86:
      case 0x87: case 0x88: case 0x89: case 0x8f: case 0x90: case 0x91: case 0x92: case 0x93: case 0x94:
        break;  // no argument
      case 'K': case 0x80: case 0x82:  // BININT1, PROTO, EXT1
        uint(1, op);
        break;
      case 'h': case 'q':  // BINGET, BINPUT
        memo(uint(1, op), op);
        break;
      case 'M': case 0x83:  // BININT2, EXT2
        uint(2, op);
        break;
      case 'J': case 0x84:  // BININT, EXT4
        uint(4, op);
        break;
      case 'j': case 'r':  // LONG_BINGET, LONG_BINPUT
        memo(uint(4, op), op);
        break;
      case 'G':  // BINFLOAT
        uint(8, op);
        break;
      case 0x95:  // FRAME: its length; the frame's opcodes follow
        need(uint(8, op), op);
        break;
      case 'F': case 'I': case 'L': case 'P': case 'S': case 'V': case 'g': case 'p':  // text arguments
        line(op);
        break;
      case 'c': case 'i':  // GLOBAL, INST: module and name lines
        line(op);
        line(op);
        break;
      case 'U': case 'C': case 0x8c: case 0x8a: {  // SHORT_BINSTRING, SHORT_BINBYTES, SHORT_BINUNICODE, LONG1
        const uint64_t n = uint(1, op);
        need(n, op);
        pos += n;
        break;
      }
      case 'T': case 'B': case 'X': case 0x8b: {  // BINSTRING, BINBYTES, BINUNICODE, LONG4
        const uint64_t n = uint(4, op);
        need(n, op);
        pos += n;
        break;
      }
      case 0x8d: case 0x8e: case 0x96: {  // BINUNICODE8, BINBYTES8, BYTEARRAY8
        const uint64_t n = uint(8, op);
        need(n, op);
        pos += n;
        break;
      }
      default:
        throw std::invalid_argument(fmt::format("byte {} holds 0x{:02x}, which is not a pickle opcode", pos - 1, op));
    }
  }
  throw std::invalid_argument("the pickle ends without STOP");
}

std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

}  // namespace

/// DNABERT's released weights: pytorch_model.bin, a torch.save'd (zip) state_dict.
/// LibTorch's unpickler turns collections.OrderedDict into None (it expects it only for
/// tensor hooks) and has no POP opcode, so the top-level `OrderedDict()` call of data.pkl
/// is rewritten as EMPTY_DICT MARK GLOBAL(OrderedDict) BINPUT(0) NONE SETITEMS: a dict with
/// one entry whose key is not a string (skipped below), and the class still in memo slot 0
/// for the hooks of each tensor. A state_dict saved from a module also carries `_metadata`
/// (module versions, an OrderedDict of dicts) as the dict's state, set by a final BUILD:
/// that tail is cut, leaving the dict of tensors on the stack.
std::vector<std::pair<std::string, torch::Tensor>> read_pytorch_bin(std::istream& in, const std::string& path) {
  {
    // torch.save before PyTorch 1.6 (and _use_new_zipfile_serialization=False since) wrote
    // pickles, not a zip: protocol 2, then the magic number 0x1950a86a20f9469cfc6c as a
    // LONG1. LibTorch has no reader for it; transformers loads it through Python's.
    static const char kLegacy[] = "\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19";
    char head[sizeof kLegacy - 1] = {};
    in.read(head, sizeof head);
    const bool legacy = in.gcount() == static_cast<std::streamsize>(sizeof head) &&
                        std::memcmp(head, kLegacy, sizeof head) == 0;
    in.clear();
    in.seekg(0);
    if (legacy)
      throw io::InputError(
          path, fmt::format("is a legacy torch.save file (PyTorch before 1.6, not a zip archive), which genemask "
                            "cannot read; convert it once to the zip format with: python -c \"import torch; "
                            "p = '{}'; torch.save(torch.load(p, map_location='cpu', weights_only=True), p)\"",
                            path));
  }
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
    check_pickle(pkl);
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
  } catch (const c10::Error& e) {
    // what() carries LibTorch's C++ stack trace: the message alone, first line.
    throw io::InputError(path, fmt::format("cannot read as a torch.save file: {}", first_line(e.what_without_backtrace())));
  } catch (const std::exception& e) {
    throw io::InputError(path, fmt::format("cannot read as a torch.save file: {}", first_line(e.what())));
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
  io::check_input_type(path);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw io::InputError(path, "cannot open");
  return read_pytorch_bin(in, path);
}

}  // namespace genemask::model
