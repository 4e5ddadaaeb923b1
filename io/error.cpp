#include <algorithm>
#include <iostream>
#include <mutex>
#include "io/error.hpp"

#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fmt/format.h>

namespace genemask::io {

InputError::InputError(std::string path, uint64_t line, const std::string& message)
    : std::runtime_error(printable(fmt::format("{}:{}: {}", path, line, message))), path_(std::move(path)), line_(line) {}

InputError::InputError(std::string path, const std::string& message)
    : std::runtime_error(printable(fmt::format("{}: {}", path, message))), path_(std::move(path)) {}

namespace {
/// Length of the valid UTF-8 sequence at s[i] (2..4), or 0.
size_t utf8_length(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  size_t n = 0;
  unsigned char lo = 0x80, hi = 0xbf;  // bounds of the second byte (no overlongs, surrogates, > U+10FFFF)
  if (c >= 0xc2 && c <= 0xdf) n = 2;
  else if (c >= 0xe0 && c <= 0xef) {
    n = 3;
    if (c == 0xe0) lo = 0xa0;
    if (c == 0xed) hi = 0x9f;
  } else if (c >= 0xf0 && c <= 0xf4) {
    n = 4;
    if (c == 0xf0) lo = 0x90;
    if (c == 0xf4) hi = 0x8f;
  } else {
    return 0;
  }
  if (i + n > s.size() || b(i + 1) < lo || b(i + 1) > hi) return 0;
  for (size_t k = 2; k < n; ++k)
    if (b(i + k) < 0x80 || b(i + k) > 0xbf) return 0;
  return n;
}
}  // namespace

namespace {
/// `text` with every byte that is not part of valid UTF-8, and every ASCII byte `keep` says
/// no to, written as \xNN.
template <class Keep>
std::string escaped(std::string_view text, Keep keep) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x80 && keep(c)) {
      out += static_cast<char>(c);
      ++i;
    } else if (const size_t n = c >= 0x80 ? utf8_length(text, i) : 0; n > 0) {
      out.append(text.substr(i, n));
      i += n;
    } else {
      out += fmt::format("\\x{:02x}", c);
      ++i;
    }
  }
  return out;
}
}  // namespace

std::string printable(std::string_view text) {
  return escaped(text, [](unsigned char c) { return c >= 0x20 && c < 0x7f; });
}

std::string utf8_escaped(std::string_view text) {
  return escaped(text, [](unsigned char c) { return c != 0; });
}

namespace {
constexpr std::string_view kBacktraceMark = "\nException raised from ";
}  // namespace

std::string error_line(std::string_view program, std::string_view what) {
  if (const size_t bt = what.find(kBacktraceMark); bt != std::string_view::npos) what = what.substr(0, bt);
  return std::string(program) + ": error: " + printable(what) + "\n";
}

size_t error_line_into(char* buf, size_t cap, const char* program, const char* what) noexcept {
  if (buf == nullptr || cap < 16) return 0;
  const size_t room = cap - 4;  // "...\n" after a cut
  size_t n = 0;
  bool cut = false;
  auto put = [&](const char* text, const char* end) {
    for (const char* p = text; p != end && *p != '\0'; ++p) {
      if (n == room) {
        cut = true;
        return;
      }
      const auto c = static_cast<unsigned char>(*p);
      buf[n++] = c >= 0x20 && c < 0x7f ? static_cast<char>(c) : '?';
    }
  };
  put(program ? program : "genemask", nullptr);
  put(": error: ", nullptr);
  if (what) put(what, std::strstr(what, kBacktraceMark.data()));
  if (cut) {
    std::memcpy(buf + n, "...", 3);
    n += 3;
  }
  buf[n++] = '\n';
  return n;
}

void write_error_line(const char* program, const char* what) noexcept {
  try {
    const std::string line = error_line(program ? program : "genemask", what ? what : "");
    if (::write(STDERR_FILENO, line.data(), line.size()) >= 0) return;
  } catch (...) {  // no memory for the line: the same words from the stack below
  }
  char buf[4096];
  const size_t n = error_line_into(buf, sizeof buf, program, what);
  if (::write(STDERR_FILENO, buf, n) < 0) return;  // stderr closed: nowhere left to say it
}

std::string excerpt(std::string_view text, size_t max_bytes) {
  return text.size() > max_bytes ? printable(text.substr(0, max_bytes)) + "..." : printable(text);
}

bool WriteError::of_the_disk() const {
  return err_ == ENOSPC || err_ == EDQUOT || err_ == EIO || err_ == EROFS || err_ == EFBIG;
}

std::string write_error_reason(int err) {
  std::string reason = std::strerror(err);
  if (err == ENOSPC) reason += " (the disk is full)";
  else if (err == EDQUOT) reason += " (a quota: free space in it, or ask for a larger one)";
  else if (err == EFBIG) reason += " (a file size limit: ulimit -f)";
  return reason;
}

std::string open_error_reason(int err) {
  if (err == 0) return "unknown reason";
  std::string reason = std::strerror(err);
  if (err == EMFILE) {
    struct rlimit rl {};
    if (::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
      reason += fmt::format(" (EMFILE: this process may have at most {} files open, the limit `ulimit -n` sets; raise "
                            "it, e.g. ulimit -n 4096)",
                            static_cast<uint64_t>(rl.rlim_cur));
    else
      reason += " (EMFILE: the per-process limit on open files, ulimit -n; raise it)";
  } else if (err == ENFILE) {
    reason += " (ENFILE: the system-wide limit on open files, fs.file-max, is reached)";
  }
  return reason;
}

std::string memory_limit_note() {
  struct rlimit rl {};
  if (::getrlimit(RLIMIT_AS, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return "";
  return fmt::format(" under a virtual memory limit of {} MiB (ulimit -v)", static_cast<uint64_t>(rl.rlim_cur) >> 20);
}

std::string describe_byte(unsigned char c) {
  if (c >= 0x21 && c < 0x7f) return fmt::format("'{}'", static_cast<char>(c));
  return fmt::format("byte 0x{:02x}", static_cast<unsigned>(c));
}

std::string input_problem(const std::string& path, InputKind kind) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    const int err = errno;
    if (err == ENOENT) {
      struct stat lst {};
      if (::lstat(path.c_str(), &lst) == 0 && S_ISLNK(lst.st_mode))
        return "is a symbolic link to a file that does not exist";
      return "does not exist";
    }
    if (err == ELOOP) return "cannot be read: too many levels of symbolic links (a symlink that points to itself?)";
    if (err == ENOTDIR) return "does not exist (a part of the path is not a directory)";
    return fmt::format("cannot be read: {}", std::strerror(err));
  }
  if (S_ISDIR(st.st_mode)) return kind == InputKind::file ? "is a directory, not a file" : "";
  if (S_ISREG(st.st_mode)) return kind == InputKind::directory ? "is a file, not a directory" : "";
  const char* what = S_ISFIFO(st.st_mode)   ? "a FIFO (a named pipe, or a process substitution such as <(zcat ...))"
                     : S_ISCHR(st.st_mode)  ? "a character device"
                     : S_ISBLK(st.st_mode)  ? "a block device"
                     : S_ISSOCK(st.st_mode) ? "a socket"
                                            : "not a regular file";
  return fmt::format("is {}, not a regular file: genemask reads its inputs more than once and from any offset, so it "
                     "does not read from pipes or devices; write the data to a file first (e.g. zcat g.fa.gz > g.fa), "
                     "or give the file itself (gzip and bgzip files are read directly)",
                     what);
}

void check_input(const std::string& path, InputKind kind) {
  if (std::string why = input_problem(path, kind); !why.empty()) throw InputError(path, why);
}

std::string input_type_problem(const std::string& path, InputKind kind) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return "";
  return input_problem(path, kind);
}

void check_input_type(const std::string& path, InputKind kind) {
  if (std::string why = input_type_problem(path, kind); !why.empty()) throw InputError(path, why);
}

namespace {
struct UnterminatedInputs {
  std::mutex m;
  std::vector<std::string> paths;
};
UnterminatedInputs& unterminated_record() {
  static UnterminatedInputs r;
  return r;
}
}  // namespace

std::vector<std::string> unterminated_inputs() {
  auto& r = unterminated_record();
  std::lock_guard<std::mutex> lock(r.m);
  return r.paths;
}

namespace {
/// Records PATH; true when it is new to the record.
bool record_unterminated(const std::string& path) {
  auto& r = unterminated_record();
  std::lock_guard<std::mutex> lock(r.m);
  if (std::find(r.paths.begin(), r.paths.end(), path) != r.paths.end()) return false;
  r.paths.push_back(path);
  return true;
}

void say_unterminated(const std::string& where, std::string_view what) {
  std::cerr << fmt::format("genemask: warning: {}: the last line has no line end: if the file was cut short (a "
                           "truncated download or copy), {} and was read as it is; check the file (a whole file "
                           "ends its last line; the summary lists it: unterminated_inputs)\n",
                           where, what);
}
}  // namespace

void warn_unterminated_last_line(const std::string& path, uint64_t line, std::string_view what) {
  record_unterminated(path);
  say_unterminated(fmt::format("{}:{}", printable(path), line), what);
}

void warn_unterminated_file(const std::string& path, std::string_view what) {
  if (record_unterminated(path)) say_unterminated(printable(path), what);
}

}  // namespace genemask::io
