#pragma once
// Input errors that carry the place (file, line or byte offset), the offending value and a hint.
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>
#include <string_view>

namespace genemask::io {

/// Raised for bad user input. what() is a complete one-line message:
/// "<file>:<line>: <message>" (or "<file>: <message>" when no line applies), made
/// printable (see printable()): values copied from a binary file cannot end the message
/// early (a NUL) or reach the terminal raw.
class InputError : public std::runtime_error {
 public:
  InputError(std::string path, uint64_t line, const std::string& message);
  InputError(std::string path, const std::string& message);
  const std::string& path() const { return path_; }
  uint64_t line() const { return line_; }  // 0 when unknown / not applicable

 private:
  std::string path_;
  uint64_t line_ = 0;
};

/// A printable rendering of a byte for messages: 'J', or 0x07 for control/binary bytes.
std::string describe_byte(unsigned char c);

/// `text` for a one-line message on a terminal: control bytes (NUL, ESC, newlines, ...), DEL
/// and bytes that are not valid UTF-8 become \xNN; a backslash stays itself; valid UTF-8
/// (file names in any language) is kept.
std::string printable(std::string_view text);
/// `text` as valid UTF-8, for a file that declares its strings UTF-8 (HDF5): bytes that are
/// not valid UTF-8, and NUL (which would end a C string early), become \xNN; everything else,
/// control bytes and backslashes included, is kept as it is. h5py's .asstr() reads the result.
std::string utf8_escaped(std::string_view text);
/// printable() of at most the first `max_bytes` of `text`, with "..." when it was longer: a
/// value quoted from a file in a message.
std::string excerpt(std::string_view text, size_t max_bytes);

/// The one line a failed command ends with: "<program>: error: <what>\n", `what` cut where
/// LibTorch appends its C++ backtrace ("\nException raised from ...": not for users) and
/// made printable().
std::string error_line(std::string_view program, std::string_view what);
/// The same line written into buf[0, cap) without allocating, for when error_line() cannot be
/// built (no memory left, which is often the very error being reported): every byte that
/// printable() would escape is '?', and a line longer than the buffer is cut and ends with
/// "...\n". Returns its length (0 when cap < 16). Never throws.
size_t error_line_into(char* buf, size_t cap, const char* program, const char* what) noexcept;
/// Writes error_line(program, what) to stderr in one write(2) (so that the lines of several
/// ranks on one terminal do not interleave), or, where building it throws, error_line_into()'s
/// from a buffer on the stack. Never throws.
void write_error_line(const char* program, const char* what) noexcept;

/// Says (a warning on stderr) that PATH's last line, line LINE, has no line end, which is
/// how a file cut short (a truncated download or copy) ends: `what` names what may then be
/// partial or missing ("its last feature", "its last row, and rows after it"). The file is
/// read as it is; genemask's own tables, which end every line, refuse it instead.
/// The process records PATH (unterminated_inputs), so that the command's summary line says
/// it beside its numbers, not only on stderr.
void warn_unterminated_last_line(const std::string& path, uint64_t line, std::string_view what);

/// The same for a file whose last line's number is not known (a genome read in parts by its
/// ranks): said once per path and process.
void warn_unterminated_file(const std::string& path, std::string_view what);

/// The inputs this process has read whose last line had no line end (warn_unterminated_last_line),
/// each once, in the order warned. Every command's summary line lists them
/// (`unterminated_inputs`, cli/common.cpp's print_summary).
std::vector<std::string> unterminated_inputs();

/// A write that the system refused (a full disk or quota, an I/O error, a read-only or
/// size-limited file system): what() names the file and says why; err() is the errno. Raised
/// by every checked write of an output (AtomicFile, AppendFile, HDF5 files, fsync), so that a
/// caller that goes on after one command's failure (a sweep's jobs) can tell a failure of the
/// machine's disk, which every following job would meet too, from a failure of the job.
class WriteError : public std::runtime_error {
 public:
  WriteError(const std::string& message, int err) : std::runtime_error(message), err_(err) {}
  int err() const { return err_; }
  /// The disk itself failed or is full (ENOSPC, EDQUOT, EIO, EROFS, EFBIG): not the job's fault.
  bool of_the_disk() const;

 private:
  int err_;
};

/// The system's reason for a failed write: strerror(err), and what it usually means for a
/// full disk or quota ("(the disk is full)") or a file size limit ("(... ulimit -f)").
std::string write_error_reason(int err);

/// The system's reason for a failed open: strerror(err), and for the limit on open files
/// (EMFILE) the limit itself and the remedy: "Too many open files (this process may have
/// 256 files open: ulimit -n; raise it, e.g. ulimit -n 4096)". errno 0 (unknown) reads
/// "unknown reason".
std::string open_error_reason(int err);

/// What an input path must be.
enum class InputKind { file, directory, file_or_directory };

/// Why `path` cannot be read as an input of `kind`, or "" when it can: it does not exist, a
/// symlink loop, no permission, a directory where a file is wanted (or the reverse), or a
/// FIFO, device or socket (a named pipe or a process substitution `<(zcat ...)`): genemask
/// reads inputs more than once and at any offset, and a FIFO would block open(2) until a
/// writer comes. Uses stat(2), which never blocks. The text follows the path: "is a FIFO ...".
std::string input_problem(const std::string& path, InputKind kind = InputKind::file);
/// Throws InputError(path, input_problem(path, kind)) when there is a problem.
void check_input(const std::string& path, InputKind kind = InputKind::file);
/// input_problem() when `path` exists but is of the wrong type (a FIFO, a device, a directory
/// for a file); "" when it is of the right type or cannot be stat'ed (left to the opener).
std::string input_type_problem(const std::string& path, InputKind kind = InputKind::file);
/// Throws as check_input does when `path` exists but is of the wrong type (a FIFO, a device,
/// a directory for a file); a path that cannot be stat'ed is left to the opener's own error.
/// Every reader calls it before open(2).
void check_input_type(const std::string& path, InputKind kind = InputKind::file);

/// " under a virtual memory limit of N MiB (ulimit -v)" when this process has one, else "":
/// for messages about a failed allocation.
std::string memory_limit_note();

}  // namespace genemask::io
