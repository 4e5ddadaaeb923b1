#pragma once
// Names a genemask file records of other files (a marker's "files", a checkpoint's state.json,
// a shard manifest) must stay inside their directory: an edited entry ("../x", "/etc/x", "")
// must not lead a reader, or a cleanup, elsewhere.
#include <string>
#include <string_view>

namespace genemask::io {

/// One name in a directory: not empty, not "." or "..", no '/'.
inline bool is_plain_name(std::string_view n) {
  return !n.empty() && n != "." && n != ".." && n.find('/') == std::string_view::npos;
}

/// A path relative to a directory and inside it: plain names joined by '/'.
inline bool is_plain_relative_path(std::string_view p) {
  for (size_t from = 0;;) {
    const size_t to = p.find('/', from);
    if (!is_plain_name(p.substr(from, to == std::string_view::npos ? std::string_view::npos : to - from))) return false;
    if (to == std::string_view::npos) return true;
    from = to + 1;
  }
}

}  // namespace genemask::io
