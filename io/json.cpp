#include "io/json.hpp"

#include <cerrno>
#include <fmt/format.h>
#include <fstream>
#include <sstream>

#include "io/error.hpp"

namespace genemask::io {

size_t json_too_deep_at(std::string_view text, int max_depth) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;  // the escaped byte cannot end the string
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) return i;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return std::string::npos;
}

uint64_t line_of_offset(std::string_view text, size_t offset) {
  uint64_t line = 1;
  for (size_t i = 0; i < offset && i < text.size(); ++i) line += text[i] == '\n';
  return line;
}

JsonParse try_parse_json(std::string_view text, int max_depth) {
  JsonParse r;
  if (const size_t at = json_too_deep_at(text, max_depth); at != std::string::npos) {
    r.line = line_of_offset(text, at);
    r.error = fmt::format("arrays and objects nested more than {} levels deep (byte {}): not a file genemask reads",
                          max_depth, at + 1);
    return r;
  }
  try {
    r.value = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    // e.byte is 1-based and may point one past the end (an unexpected end of input).
    r.line = line_of_offset(text, e.byte > 0 ? e.byte - 1 : 0);
    r.error = fmt::format("not valid JSON: {}", e.what());
  } catch (const nlohmann::json::exception& e) {
    r.line = 1;
    r.error = fmt::format("not valid JSON: {}", e.what());
  }
  return r;
}

nlohmann::json parse_json(std::string_view text, const std::string& path, const std::string& hint,
                          uint64_t first_line) {
  JsonParse r = try_parse_json(text);
  if (!r.ok())
    throw InputError(path, first_line + r.line - 1, hint.empty() ? r.error : r.error + "; " + hint);
  return std::move(r.value);
}

nlohmann::json read_json_file(const std::string& path, const std::string& hint) {
  check_input_type(path);
  errno = 0;
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path, fmt::format("cannot open: {}", open_error_reason(errno)));
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_json(ss.str(), path, hint);
}

JsonParse try_read_json_file(const std::string& path) {
  if (std::string why = input_type_problem(path); !why.empty()) {
    JsonParse r;
    r.error = why;
    return r;
  }
  errno = 0;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    JsonParse r;
    r.error = fmt::format("cannot open: {}", open_error_reason(errno));
    return r;
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return try_parse_json(ss.str());
}

std::string json_excerpt(const nlohmann::json& value, size_t max_bytes) {
  return excerpt(value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), max_bytes);
}

namespace {
nlohmann::json printable_strings(const nlohmann::json& v) {
  if (v.is_string()) return printable(v.get_ref<const std::string&>());
  if (v.is_array()) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& e : v) out.push_back(printable_strings(e));
    return out;
  }
  if (v.is_object()) {
    nlohmann::json out = nlohmann::json::object();
    for (const auto& [k, e] : v.items()) out[printable(k)] = printable_strings(e);
    return out;
  }
  return v;
}
}  // namespace

std::string json_text(const nlohmann::json& value, int indent) {
  try {
    return value.dump(indent);
  } catch (const nlohmann::json::type_error& e) {
    if (e.id != 316) throw;  // 316: invalid UTF-8 in a string
    return printable_strings(value).dump(indent);
  }
}

}  // namespace genemask::io
