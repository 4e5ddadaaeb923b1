#pragma once
// JSON from user files (plans, results.jsonl lines, config.json, manifest.json, state.json,
// safetensors headers), parsed with a bound on nesting. nlohmann's parser is iterative, but
// serialising (dump() in an error message), copying and comparing values recurse once per
// level: "[[[[..." 100,000 deep (200 KB) overflowed the stack. Every file genemask reads
// nests a few levels, so anything past kMaxJsonDepth is refused before it is parsed.
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "io/error.hpp"

namespace genemask::io {

/// The deepest nesting of arrays and objects accepted (genemask's own files use at most 5).
inline constexpr int kMaxJsonDepth = 64;

/// The byte offset of the first '[' or '{' of `text` that opens level max_depth + 1, or
/// std::string::npos when none does. Strings (with their escapes) are skipped; the text need
/// not be valid JSON. One pass, no allocation.
size_t json_too_deep_at(std::string_view text, int max_depth = kMaxJsonDepth);

/// The byte offset of the first number of `text` (outside strings) that is not zero as
/// written but is 0 as a double (1e-400: below the smallest subnormal), or npos when none is.
size_t json_underflow_at(std::string_view text);

/// 1-based line of the byte at `offset` of `text`.
uint64_t line_of_offset(std::string_view text, size_t offset);

/// The outcome of parsing text that may be bad: `error` is empty when `value` holds it.
struct JsonParse {
  nlohmann::json value;
  std::string error;  // "not valid JSON: ..." or "nested more than 64 levels deep ..."
  uint64_t line = 0;  // 1-based line of `text` the error is on; 0 without an error
  bool ok() const { return error.empty(); }
};

/// Parses `text`, bounded to max_depth levels; never throws for bad text.
JsonParse try_parse_json(std::string_view text, int max_depth = kMaxJsonDepth);

/// Parses `text` read from `path`; bad or too deeply nested text is an InputError
/// "<path>:<line>: not valid JSON: ...[; hint]". `first_line` is the line of the file the
/// text starts on (a line of a .jsonl file).
nlohmann::json parse_json(std::string_view text, const std::string& path, const std::string& hint = "",
                          uint64_t first_line = 1);

/// Reads `path` whole and parses it as parse_json() does; a file that cannot be opened is an
/// InputError naming the system's reason (open_error_reason()).
nlohmann::json read_json_file(const std::string& path, const std::string& hint = "");

/// Reads and parses `path` as try_parse_json() does; never throws for a missing or bad file
/// (error says "cannot open: <reason>" or what is wrong with the text).
JsonParse try_read_json_file(const std::string& path);

/// A JSON value quoted in a message: its compact text, cut to `max_bytes` (with "...") and
/// made printable. Values from parse_json are bounded in depth, so dump() is safe.
std::string json_excerpt(const nlohmann::json& value, size_t max_bytes = 80);

/// The text of a JSON value genemask writes (a summary line, summary.json, a marker, a
/// results record): value.dump(indent), except that a string which is not valid UTF-8 (a
/// path the user named with Latin-1 bytes) is written as printable() renders it, with \xNN
/// escapes, instead of failing after the work is done. Valid UTF-8 is written as it is.
std::string json_text(const nlohmann::json& value, int indent = -1);

/// `j` with `unterminated_inputs` added where it is an object and this process has read inputs
/// whose last line had no line end (io::unterminated_inputs: perhaps cut short): the summaries
/// that commands print and write say them beside the numbers that came from them.
template <typename Json>
Json with_unterminated_inputs(Json j) {
  if (auto cut = unterminated_inputs(); !cut.empty() && j.is_object()) j["unterminated_inputs"] = std::move(cut);
  return j;
}

}  // namespace genemask::io
