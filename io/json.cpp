#include "io/json.hpp"

#include <cerrno>
#include <cstdlib>
#include <fmt/format.h>
#include <fstream>
#include <set>
#include <sstream>
#include <vector>

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

namespace {
/// The end of the number token that starts at `i`: as far as the characters a JSON number
/// may hold (what json_underflow_at reads, and the refusal quotes).
size_t number_token_end(std::string_view text, size_t i) {
  while (i < text.size() && std::string_view("0123456789+-.eE").find(text[i]) != std::string_view::npos) ++i;
  return i;
}
}  // namespace

size_t json_underflow_at(std::string_view text) {
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
      continue;
    }
    if (c != '-' && (c < '0' || c > '9')) continue;
    const size_t j = number_token_end(text, i);
    bool nonzero = false, exponent = false;  // a digit 1-9 before any exponent; an exponent
    for (size_t k = i; k < j; ++k) {
      if (text[k] == 'e' || text[k] == 'E') exponent = true;
      else if (!exponent && text[k] >= '1' && text[k] <= '9') nonzero = true;
    }
    // Only an exponent or a very long fraction can go below a double's smallest value.
    if (nonzero && (exponent || j - i > 300)) {
      const std::string token(text.substr(i, j - i));
      char* end = nullptr;
      if (std::strtod(token.c_str(), &end) == 0.0) return i;
    }
    i = j - 1;
  }
  return std::string_view::npos;
}

namespace {
/// The offset of the first key that repeats one of its own object's keys, in valid JSON (0
/// when there is none): objects tracked by nesting, each key decoded as JSON decodes it
/// (escapes included). Only for the message; the parse found the duplicate.
size_t duplicate_key_offset(std::string_view text) {
  std::vector<char> open;                    // '{' or '[' per level
  std::vector<std::set<std::string>> keys;   // per open object
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '{') {
      open.push_back('{');
      keys.emplace_back();
    } else if (c == '[') {
      open.push_back('[');
    } else if ((c == '}' || c == ']') && !open.empty()) {
      if (open.back() == '{') keys.pop_back();
      open.pop_back();
    } else if (c == '"') {
      size_t j = i + 1;
      while (j < text.size() && text[j] != '"') j += text[j] == '\\' ? 2 : 1;
      if (j >= text.size()) return 0;
      const size_t after = text.find_first_not_of(" \t\r\n", j + 1);
      if (!open.empty() && open.back() == '{' && after != std::string_view::npos && text[after] == ':') {
        const auto key = nlohmann::json::parse(text.substr(i, j - i + 1), nullptr, /*allow_exceptions=*/false);
        if (key.is_string() && !keys.back().insert(key.get<std::string>()).second) return i;
      }
      i = j;
    }
  }
  return 0;
}
}  // namespace

JsonParse try_parse_json(std::string_view text, int max_depth) {
  JsonParse r;
  if (const size_t at = json_too_deep_at(text, max_depth); at != std::string::npos) {
    r.line = line_of_offset(text, at);
    r.error = fmt::format("arrays and objects nested more than {} levels deep (byte {}): not a file genemask reads",
                          max_depth, at + 1);
    return r;
  }
  // nlohmann ends its input at a NUL byte: what follows one (another file's bytes, garbage)
  // was dropped without a word. JSON text holds none.
  if (const size_t nul = text.find('\0'); nul != std::string_view::npos) {
    r.line = line_of_offset(text, nul);
    r.error = fmt::format("not valid JSON: byte {} is a NUL byte (a binary file, or two files joined?)", nul + 1);
    return r;
  }
  // nlohmann reads a number below a double's smallest (1e-400) as 0 without a word; it refuses
  // one above the largest. Both are refused.
  if (const size_t at = json_underflow_at(text); at != std::string::npos) {
    const size_t end = number_token_end(text, at);
    r.line = line_of_offset(text, at);
    r.error = fmt::format("the number {} is too small for a double (it would be read as 0): write 0, or a "
                          "number within 1e-308",
                          excerpt(std::string(text.substr(at, end - at)), 40));
    return r;
  }
  // A key given twice in one object: nlohmann keeps the last and drops the first without a
  // word, so a file edited by appending ("seeds": 2 ... "seeds": 5) would be read as one of
  // them silently. Refused, naming the key.
  struct DuplicateKey {
    std::string key;
  };
  std::vector<std::set<std::string>> keys;
  const auto check_keys = [&](int /*depth*/, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    using E = nlohmann::json::parse_event_t;
    if (event == E::object_start) keys.emplace_back();
    else if (event == E::object_end && !keys.empty()) keys.pop_back();
    else if (event == E::key && !keys.empty() && !keys.back().insert(parsed.get<std::string>()).second)
      throw DuplicateKey{parsed.get<std::string>()};
    return true;
  };
  try {
    r.value = nlohmann::json::parse(text, check_keys);
  } catch (const DuplicateKey& d) {
    r.value = nullptr;
    r.line = line_of_offset(text, duplicate_key_offset(text));
    r.error = fmt::format("the key {} appears twice in one object: which value is meant cannot be known; give it once",
                          excerpt(nlohmann::json(d.key).dump(), 80));
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
