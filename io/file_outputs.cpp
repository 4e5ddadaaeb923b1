#include "io/file_outputs.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>

#include "io/error.hpp"
#include "io/h5.hpp"
#include "io/json.hpp"
#include "io/run_dir.hpp"
#include "io/sha256.hpp"
#include "io/shard_manifest.hpp"

namespace genemask::io {
namespace fs = std::filesystem;
namespace {

bool is_regular(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

/// "the output of `genemask X`" when `dir` is a directory genemask manages, else "".
std::string managed_by(const std::string& dir) {
  if (is_regular(dir + "/" + kOutputMarker)) {
    try {
      if (const auto m = read_output_marker(dir)) return fmt::format("the output of `genemask {}`", (*m)["command"].get<std::string>());
    } catch (const std::exception&) {
    }
    return fmt::format("a directory genemask marked as its own ({})", kOutputMarker);
  }
  if (is_regular(dir + "/manifest.json")) {
    const JsonParse j = try_read_json_file(dir + "/manifest.json");
    if (j.ok() && j.value.is_object() && j.value.value("format", "") == kManifestFormat)
      return "a shard set of `genemask shards`";
  }
  if (checkpoint_step_of(fs::path(dir).filename().string()) && is_regular(dir + "/state.json"))
    return "a checkpoint of `genemask pretrain`";
  return "";
}

std::string first_line(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string line;
  char c;
  while (line.size() < (64u << 10) && in.get(c) && c != '\n') line += c;
  if (!line.empty() && line.back() == '\r') line.pop_back();
  return line;
}

bool hdf5_has_format(const std::string& path, const std::string& format) {
  static const char kSignature[8] = {'\x89', 'H', 'D', 'F', '\r', '\n', '\x1a', '\n'};
  char head[8] = {};
  {
    std::ifstream in(path, std::ios::binary);
    if (!in.read(head, sizeof head) || std::memcmp(head, kSignature, sizeof head) != 0) return false;
  }
  try {
    h5::Handle f = h5::open_file_ro(path);
    return h5::has_attr(f, "format") && h5::get_attr_string(f, "format") == format;
  } catch (const std::exception&) {
    return false;
  }
}

bool safetensors_has_metadata(const std::string& path, const std::string& value) {
  std::ifstream in(path, std::ios::binary);
  unsigned char le[8] = {};
  if (!in.read(reinterpret_cast<char*>(le), 8)) return false;
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | le[i];
  if (n == 0 || n > (1u << 20)) return false;
  std::string header(n, '\0');
  if (!in.read(header.data(), static_cast<std::streamsize>(n))) return false;
  const JsonParse j = try_parse_json(header);
  if (!j.ok() || !j.value.is_object() || !j.value.contains("__metadata__")) return false;
  const auto& m = j.value["__metadata__"];
  return m.is_object() && m.contains("genemask") && m["genemask"] == value;
}

std::string quoted(const NamedOutput& o) { return o.option.empty() ? o.path : o.option + " " + o.path; }

}  // namespace

std::optional<std::string> managed_directory_above(const std::string& path) {
  fs::path q = fs::absolute(path).lexically_normal();
  if (!q.has_filename() && q.has_parent_path() && q != q.root_path()) q = q.parent_path();  // "out/"
  fs::path up = q.parent_path();
  struct stat st {};
  while (!up.empty() && ::stat(up.c_str(), &st) != 0 && up != up.parent_path()) up = up.parent_path();
  char buf[PATH_MAX];
  const fs::path real = ::realpath(up.c_str(), buf) ? fs::path(buf) : up;
  for (fs::path d = real; !d.empty(); d = d.parent_path()) {
    if (std::string who = managed_by(d.string()); !who.empty()) return fmt::format("{}, {}", d.string(), who);
    if (d == d.parent_path()) break;
  }
  return std::nullopt;
}

bool is_own_output(const std::string& path, const OwnFile& own) {
  if (!is_regular(path)) return false;
  switch (own.kind) {
    case OwnFile::Kind::none: return false;
    case OwnFile::Kind::hdf5_format: return hdf5_has_format(path, own.value);
    case OwnFile::Kind::first_line: return first_line(path) == own.value;
    case OwnFile::Kind::first_line_prefix: return first_line(path).rfind(own.value, 0) == 0;
    case OwnFile::Kind::safetensors_metadata: return safetensors_has_metadata(path, own.value);
    case OwnFile::Kind::sha256: return sha256_file(path) == own.value;
  }
  return false;
}

void check_replaceable_outputs(const std::vector<NamedOutput>& outputs, const std::string& command) {
  for (const auto& o : outputs) {
    if (o.path.empty()) continue;
    if (const auto managed = managed_directory_above(o.path))
      throw std::runtime_error(fmt::format(
          "{} lies inside {}: genemask never writes inside a directory it manages for another purpose, --force or "
          "not; choose an {} outside it",
          quoted(o), *managed, o.option));
    if (o.kind != OutputKind::file || !is_regular(o.path) || o.force || is_own_output(o.path, o.own)) continue;
    const std::string remedy = o.has_force ? fmt::format("pass --force to replace it, or choose another {}", o.option)
                                           : fmt::format("remove it yourself, or choose another {}", o.option);
    if (o.own.kind == OwnFile::Kind::none)
      throw std::runtime_error(fmt::format("{} exists: genemask replaces an existing file only when told to; {}",
                                           quoted(o), remedy));
    throw std::runtime_error(fmt::format(
        "{} exists and is not an earlier output of `genemask {}` (it is not {}): genemask replaces a file only when "
        "it is its own earlier output; {}",
        quoted(o), command, o.own.what, remedy));
  }
}

}  // namespace genemask::io
