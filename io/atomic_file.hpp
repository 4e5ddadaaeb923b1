#pragma once
// Output that appears under its final name only when complete: written to a temporary
// "<path>.tmp.<host>.<pid>" and renamed on commit. A temporary never outlives its writer:
// it is removed when the writer gives up (an exception), when a signal stops the process
// (install_signal_cleanup), and, after a kill -9 or a crash, by the next writer of the same
// output on the same host, which removes temporaries of processes that no longer run.
#include <fstream>
#include <initializer_list>
#include <ostream>
#include <streambuf>
#include <string>
#include <string_view>
#include <vector>

namespace genemask::io {

/// A temporary output file for `path`. Creating one first removes stale temporaries of
/// `path` (same host, dead pid; a note on stderr says so). Registered for removal on a
/// fatal signal while it exists; removed on destruction unless committed.
class TempOutput {
 public:
  explicit TempOutput(std::string path);
  ~TempOutput();
  TempOutput(const TempOutput&) = delete;
  TempOutput& operator=(const TempOutput&) = delete;
  const std::string& path() const { return tmp_; }  // the temporary name
  const std::string& final_path() const { return path_; }
  /// Renames the temporary onto the final path: refused when another command wrote that
  /// path since this one checked it at its start (output_guard.hpp's output_at_start).
  void commit();

 private:
  std::string path_, tmp_;
  int slot_ = -1;
  bool committed_ = false;
};

/// An output stream buffer over a file descriptor, written with write(2), that keeps the
/// errno of the first failed write or close (std::filebuf loses it: a full disk and a file
/// size limit both read "write error").
class FdStreamBuf : public std::streambuf {
 public:
  FdStreamBuf() = default;
  ~FdStreamBuf() override;
  FdStreamBuf(const FdStreamBuf&) = delete;
  FdStreamBuf& operator=(const FdStreamBuf&) = delete;
  /// Creates (truncates) `path`; false with errno set when it cannot.
  bool open(const std::string& path);
  /// Writes to `fd`, which stays open (the standard output): close() only writes what is
  /// buffered.
  void attach(int fd);
  /// Writes what is buffered and closes; false when any write or the close failed.
  bool close();
  int error() const { return error_; }  // errno of the first failure, 0 if none

 protected:
  int overflow(int c) override;
  int sync() override;
  std::streamsize xsputn(const char* s, std::streamsize n) override;

 private:
  bool write_all(const char* p, size_t n);
  bool drain();
  int fd_ = -1;
  bool owned_ = true;  // close(2) it in close() and the destructor
  int error_ = 0;
  char buf_[1 << 16];
};

/// A text or binary stream written through a TempOutput.
class AtomicFile {
 public:
  explicit AtomicFile(std::string path);
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  std::ostream& stream() { return out_; }
  const std::string& temp_path() const { return tmp_.path(); }
  /// Flushes and closes the temporary, checking for write errors (a WriteError naming the file
  /// and the system's reason, e.g. a full disk): what is left for commit() is the rename, so a
  /// command with other outputs can finish this one, publish those, then commit this.
  void finish();
  /// finish(), then renames onto the final path.
  void commit();

 private:
  bool finished_ = false;
  TempOutput tmp_;
  FdStreamBuf buf_;
  std::ostream out_{&buf_};
};

/// A log or record file that is appended to, one whole record at a time: each append() is
/// one write(2) on an O_APPEND descriptor, checked (a short write is followed by a second
/// one, which gives the reason), then, with `sync`, fsync(2). After a crash or a refused
/// write the file holds whole records and at most one torn last one; every failure is a
/// WriteError naming the file ("cannot append to PATH: No space left on device (the disk is
/// full)"). The file is created when missing, never truncated.
class AppendFile {
 public:
  AppendFile(std::string path, bool sync);
  ~AppendFile();
  AppendFile(const AppendFile&) = delete;
  AppendFile& operator=(const AppendFile&) = delete;
  void append(std::string_view record);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  bool sync_;
  int fd_ = -1;
};

/// A command's output directory, created with its parents when missing. When this object
/// created it and is destroyed by an exception before keep(), or a signal stops the process
/// before keep(), what the command put there goes again (its entries `own`, its marker
/// .genemask.json), then the directory and the parents made for it, each only while it is
/// empty: a refused input leaves nothing behind, and a file anyone else put there meanwhile
/// (a monitoring log, another run's output) is never removed, nor the directory holding it.
/// A directory that existed before is never removed.
class OutputDir {
 public:
  OutputDir(const std::string& path, std::vector<std::string> own);
  ~OutputDir();
  /// Once the directory's lock is held: a directory this object made that holds anything
  /// besides the lock file is not this run's alone (another run made its output there
  /// between this one's mkdir and its lock, or the user put files in it): keep().
  void locked();
  OutputDir(OutputDir&& o) noexcept;
  OutputDir& operator=(OutputDir&&) = delete;
  OutputDir(const OutputDir&) = delete;
  OutputDir& operator=(const OutputDir&) = delete;
  /// The outputs are worth keeping from now on, whatever happens later (a first checkpoint),
  /// or the directory is not this command's to remove (its lock is held by another run).
  void keep();
  /// keep(), after removing the directory (and the parents made for it) if it is still
  /// empty: its lock could not be taken for a reason other than another run holding it (a
  /// lock file that could not be written), which leaves nothing of this command's inside.
  void keep_unless_empty();
  bool created() const { return !created_.empty(); }

 private:
  std::string created_;  // the topmost directory this object made, or ""
  std::string dir_;      // the directory, absolute
  std::vector<std::string> own_;  // the entries the command writes, and the marker (whole paths)
  std::vector<std::string> chain_;  // the directory and the parents made for it (empty_dir_chain)
  int exceptions_ = 0;   // std::uncaught_exceptions() when it was made
  bool kept_ = false;
  std::vector<int> cleanup_slots_;  // the directories it made, for a signal that stops the process
};

/// `dir` and its parents up to and including `top` (a directory made for it), absolute, `dir`
/// first: what remove_empty_chain removes, each only while it is empty (never a directory
/// another command has put anything in). Made ahead, so that the removal allocates nothing.
std::vector<std::string> empty_dir_chain(const std::string& dir, const std::string& top);
/// rmdir(2) of each directory of `chain` in order, stopping at the first that is not empty
/// (or not there). Allocates nothing: it runs after an out-of-memory error too.
void remove_empty_chain(const std::vector<std::string>& chain) noexcept;
/// The same removal for a signal that stops the process: the parents of `chain` (outermost
/// first) while empty, then `dir` (chain's first, as the user named it: the message names it)
/// as a directory the command made. Returns the cleanup slots (unregister_cleanup).
std::vector<int> register_made_dirs(const std::vector<std::string>& chain, const std::string& dir);

/// This machine's host name (gethostname), "localhost" when it has none: the HOST of
/// temporary names and lock holders, and how ranks tell nodes apart.
std::string host_name();

/// The temporary name of `path` for this process: "<path>.tmp.<host>.<pid><suffix>"; when
/// that would exceed the file system's 255-byte name limit, the name part is shortened and
/// a hash of it added ("<first bytes>~<hash>.tmp.<host>.<pid>").
std::string temp_name_for(const std::string& path, const std::string& suffix = "");
/// Removes "<path>.tmp.<host>.<pid>" files left by processes of this host that no longer
/// run; returns how many.
int remove_stale_temporaries(const std::string& path);
/// rename(2) with an error that names both paths (an io::WriteError: the errno is kept).
void rename_or_throw(const std::string& from, const std::string& to);
/// fsync(2) of a file or directory (not through a link): an output's data reaches the disk
/// before its name is published. A file system that cannot sync it is not an error; an I/O
/// error is (std::runtime_error).
void sync_to_disk(const std::string& path);
/// The same for a directory and everything in it (a staged output), or a file.
void sync_tree_to_disk(const std::string& path);
/// The same, never replacing an existing `to`: "TO appeared while this command ran" then.
void rename_no_replace_or_throw(const std::string& from, const std::string& to);

/// Removes `path` and everything below it (symlinks removed, never followed) with system calls
/// and stack buffers only: it allocates nothing, so it works when memory ran out (the
/// cleanup after an out-of-memory error) and in a signal handler. True when `path` is gone.
bool remove_tree(const std::string& path) noexcept;

/// What a fatal signal removes besides the temporaries (install_signal_cleanup).
enum class CleanupKind {
  tree,       // a directory and everything in it, named (the staging directory of an existing output)
  part,       // the same, not named: an entry a command wrote in an output directory it made
  file,       // a file (a lock file)
  empty_dir,  // a directory, only while it is empty (a parent made for an output)
  made_dir,   // an output directory a command made: removed while empty (its parts go first), named
};
/// Registers `path` (made absolute now) for removal when a signal stops the process; the
/// newest registration is removed first. Returns a slot for unregister_cleanup (-1 when the
/// table is full: then only the normal paths remove it).
int register_cleanup(const std::string& path, CleanupKind kind);
void unregister_cleanup(int slot);

/// Installs handlers for SIGTERM, SIGINT, SIGHUP, SIGUSR1 and SIGUSR2 that remove the live
/// temporaries, print one line naming the signal (and what was removed) and end the process
/// with that signal's default action (exit status 128 + signal in a shell). `program` heads
/// the line, printed when `announce` (rank 0) or something was removed. Commands that stop
/// gracefully on some of these signals install their own handlers after this one. `program`
/// is copied (at most 127 bytes): the caller's string may go before the last signal comes.
void install_signal_cleanup(const char* program, bool announce = true);
/// For a command that stops gracefully on `signals` (pretrain: SIGTERM and SIGUSR1, Slurm's
/// warning): from now on each only sets a flag (graceful_stop_requested), and
/// install_signal_cleanup leaves them so. Called as the command is chosen, before a long start
/// (loading the model library takes seconds under load), so that a signal then is kept rather
/// than ending the process.
void stop_gracefully_on(std::initializer_list<int> signals);
/// Whether one of those signals has come.
bool graceful_stop_requested() noexcept;
/// Removes the live temporaries now, as those handlers do, and prints one line: the program
/// (install_signal_cleanup's), `why`, and what was removed. For a process that is about to
/// end without unwinding (the MPI watchdog). Async-signal-safe; callable from any thread.
void remove_unfinished_outputs(const char* why);

/// Testing hook: when the environment variable `name` is set, sleeps that many milliseconds
/// (a test widens a race window with it: GENEMASK_TEST_HOLD_RENAME, _CLEANUP). Nothing
/// otherwise; it allocates nothing (it runs in cleanups after an out-of-memory error).
void hold_for_tests(const char* name) noexcept;

}  // namespace genemask::io
