#include "io/atomic_file.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fmt/format.h>
#include <iostream>
#include <stdexcept>
#include <utility>

#include "io/error.hpp"
#include "io/host_name.hpp"
#include "io/output_guard.hpp"

namespace genemask::io {

void host_name_into(char* buf, std::size_t size) noexcept {
  if (size == 0) return;
  // uname's node name is gethostname's on Linux; unlike gethostname it never fails for a short
  // buffer, so a name longer than `size` is cut rather than replaced by "localhost".
  struct utsname u;
  std::snprintf(buf, size, "%s", ::uname(&u) == 0 && u.nodename[0] != '\0' ? u.nodename : "localhost");
}

std::string host_name() {
  char buf[256];
  host_name_into(buf, sizeof buf);
  return buf;
}

namespace {

// The live temporaries, for the signal handler: a fixed table that it can read without
// allocating or locking. state: 0 free, 1 being written, 2 live.
constexpr int kSlots = 64;
char g_paths[kSlots][PATH_MAX];
std::atomic<int> g_state[kSlots];
// A copy, not the caller's pointer: a signal can arrive after the caller's string is gone
// (mpirun ends the other ranks while one runs its static destructors at exit).
char g_program[128] = "genemask";
bool g_announce = true;

int register_temp(const std::string& path) {
  if (path.size() >= PATH_MAX) return -1;
  for (int i = 0; i < kSlots; ++i) {
    int expected = 0;
    if (g_state[i].compare_exchange_strong(expected, 1)) {
      std::memcpy(g_paths[i], path.c_str(), path.size() + 1);
      g_state[i].store(2);
      return i;
    }
  }
  return -1;  // more than kSlots at once: still removed by the destructor, not by a signal
}

void unregister_temp(int slot) {
  if (slot >= 0) g_state[slot].store(0);
}

// Directories and files a fatal signal removes besides the temporaries (register_cleanup):
// a command's unfinished output directory, its staging directory, its lock file. Removed in
// the reverse order of registration (the lock and the staging directory before the
// directory that holds them, the directory before the parents made for it). state: as above.
char g_cleanup_paths[kSlots][PATH_MAX];
std::atomic<int> g_cleanup_state[kSlots];
std::atomic<uint64_t> g_cleanup_seq[kSlots];
CleanupKind g_cleanup_kind[kSlots];
std::atomic<uint64_t> g_cleanup_next{1};

const char* signal_name(int sig) {
  switch (sig) {
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGHUP: return "SIGHUP";
    case SIGUSR1: return "SIGUSR1";
    case SIGUSR2: return "SIGUSR2";
    default: return "a signal";
  }
}

// Async-signal-safe appends to a fixed buffer.
struct Line {
  char buf[1024];
  size_t n = 0;
  void add(const char* s) {
    const size_t len = std::strlen(s);
    const size_t room = sizeof buf - 1 - n;
    const size_t take = len < room ? len : room;
    std::memcpy(buf + n, s, take);
    n += take;
  }
};

/// Unlinks the live temporaries, naming them in `line`; how many. Async-signal-safe.
int unlink_live_temporaries(Line& line) {
  int removed = 0;
  for (int i = 0; i < kSlots; ++i) {
    if (g_state[i].load() != 2) continue;
    if (::unlink(g_paths[i]) == 0) {
      line.add(removed++ ? ", " : "; removed the unfinished ");
      line.add(g_paths[i]);
    }
  }
  return removed;
}

// The entry of a directory as getdents64(2) returns it (glibc's getdents64 wrapper is not
// async-signal-safe by contract; the system call is).
struct LinuxDirent64 {
  uint64_t d_ino;
  int64_t d_off;
  unsigned short d_reclen;
  unsigned char d_type;
  char d_name[1];
};

bool remove_entries(int fd, int depth);

/// Removes `name` (relative to dirfd) with everything below it, depth-first, with system
/// calls only (openat, getdents64, unlinkat, close): async-signal-safe. Symlinks are removed,
/// never followed. Each directory is read again until a pass removes nothing (removing
/// entries while reading may skip some), and again when an entry appeared after that pass
/// (another rank still writing into a staging directory being removed). True when `name` is
/// gone.
bool remove_tree_at(int dirfd, const char* name, int depth) {
  const int fd = ::openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT || ::unlinkat(dirfd, name, 0) == 0 || errno == ENOENT;  // a file or symlink
  for (int round = 0;; ++round) {
    const bool removed = depth < 32 && remove_entries(fd, depth);
    if (::unlinkat(dirfd, name, AT_REMOVEDIR) == 0 || errno == ENOENT) {
      ::close(fd);
      return true;
    }
    // ENOTEMPTY: a writer added an entry after the last pass (the next round removes it, and
    // once the directory is gone, the writer's creations fail), or an entry cannot be removed
    // (a round that removes nothing ends it).
    if ((errno != ENOTEMPTY && errno != EEXIST) || !removed || round == 64) {
      ::close(fd);
      return false;
    }
  }
}

/// Removes the entries of the directory open as `fd` for remove_tree_at; true when it removed any.
bool remove_entries(int fd, int depth) {
  bool removed = false;
  int pass = 0;
  alignas(8) char buf[4096];
  // Bounded: a writer that keeps adding entries (another thread, while a signal's cleanup runs)
  // must not hold the removal forever.
  for (bool removed_any = true; removed_any && pass < 256; removed = removed || removed_any, ++pass) {
    removed_any = false;
    if (::lseek(fd, 0, SEEK_SET) != 0) break;
    for (;;) {
      const long n = ::syscall(SYS_getdents64, fd, buf, sizeof buf);
      if (n <= 0) break;
      for (long off = 0; off < n;) {
        const auto* e = reinterpret_cast<const LinuxDirent64*>(buf + off);
        off += e->d_reclen;
        const char* child = e->d_name;
        if (child[0] == '.' && (child[1] == '\0' || (child[1] == '.' && child[2] == '\0'))) continue;
        const bool gone = e->d_type == DT_DIR ? remove_tree_at(fd, child, depth + 1)
                                              : (::unlinkat(fd, child, 0) == 0 ||
                                                 (errno == EISDIR && remove_tree_at(fd, child, depth + 1)));
        removed_any = removed_any || gone;
      }
    }
  }
  return removed;
}

/// Removes the registered directories and files, newest registration first, naming the
/// directories that existed in `line`; how many were named. Async-signal-safe.
int remove_registered(Line& line, int named) {
  uint64_t below = UINT64_MAX;
  for (;;) {
    int pick = -1;
    uint64_t best = 0;
    for (int i = 0; i < kSlots; ++i) {
      if (g_cleanup_state[i].load() != 2) continue;
      const uint64_t seq = g_cleanup_seq[i].load();
      if (seq < below && seq > best) best = seq, pick = i;
    }
    if (pick < 0) return named;
    below = best;
    const char* path = g_cleanup_paths[pick];
    struct stat st {};
    if (::lstat(path, &st) != 0) continue;
    switch (g_cleanup_kind[pick]) {
      case CleanupKind::file:
        ::unlink(path);
        break;
      case CleanupKind::empty_dir:
        ::rmdir(path);
        break;
      case CleanupKind::tree:
        if (remove_tree_at(AT_FDCWD, path, 0)) {
          line.add(named++ ? ", " : "; removed the unfinished ");
          line.add(path);
        }
        break;
      case CleanupKind::part:
        remove_tree_at(AT_FDCWD, path, 0);
        break;
      case CleanupKind::made_dir:
        if (::rmdir(path) == 0) {
          line.add(named++ ? ", " : "; removed the unfinished ");
          line.add(path);
        }
        break;
    }
  }
}

extern "C" void on_stop_signal(int sig) {
  const int saved = errno;
  Line line;
  line.add(g_program);
  line.add(": stopped by ");
  line.add(signal_name(sig));
  int removed = unlink_live_temporaries(line);
  removed = remove_registered(line, removed);
  line.add("\n");
  if (g_announce || removed) {
    const ssize_t ignored = ::write(STDERR_FILENO, line.buf, line.n);
    (void)ignored;
  }
  errno = saved;
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

// Signals a command stops on gracefully (stop_gracefully_on): a bit per signal number, set
// before the handler is installed; install_signal_cleanup leaves them alone.
std::atomic<uint64_t> g_graceful_signals{0};
std::atomic<bool> g_graceful_stop{false};
extern "C" void on_graceful_stop_signal(int) { g_graceful_stop = true; }
bool graceful(int sig) { return sig > 0 && sig < 64 && (g_graceful_signals.load() >> sig & 1u); }

bool process_alive(long pid) {
  if (pid <= 0) return true;  // not ours to judge
  return ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM;
}

}  // namespace

namespace {

constexpr size_t kNameMax = 255;  // NAME_MAX of Linux file systems

/// "<name>.tmp." for the file name `name`, to which "<host>.<pid><suffix>" is added; a name
/// too long for that keeps its first bytes and a hash of the whole name instead, so that any
/// name the file system accepts can be written.
std::string temp_base(const std::string& name, const std::string& host) {
  const std::string tail = ".tmp." + host + ".";
  constexpr size_t kRoom = 20 + 8;  // the pid and a suffix such as ".probe"
  if (name.size() + tail.size() + kRoom <= kNameMax) return name + ".tmp.";
  uint64_t h = 1469598103934665603ull;  // FNV-1a 64 (io is below core's rng.hpp)
  for (unsigned char c : name) h = (h ^ c) * 1099511628211ull;
  const std::string mark = fmt::format("~{:016x}", h);
  const size_t keep = kNameMax > tail.size() + kRoom + mark.size() ? kNameMax - tail.size() - kRoom - mark.size() : 0;
  return name.substr(0, std::min(keep, name.size())) + mark + ".tmp.";
}

/// "<name>.tmp.<host>." (temp_base) for this host.
std::string temp_prefix(const std::string& name) {
  const std::string host = host_name();
  return temp_base(name, host) + host + ".";
}

std::pair<std::string, std::string> split_dir(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return {"", path};
  return {path.substr(0, slash + 1), path.substr(slash + 1)};
}

}  // namespace

std::string temp_name_for(const std::string& path, const std::string& suffix) {
  const auto [dir, name] = split_dir(path);
  return fmt::format("{}{}{}{}", dir, temp_prefix(name), ::getpid(), suffix);
}

int remove_stale_temporaries(const std::string& path) {
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  const std::string me = host_name();
  DIR* d = ::opendir(dir.c_str());
  if (!d) return 0;
  int removed = 0;
  while (const dirent* e = ::readdir(d)) {
    const std::string entry = e->d_name;
    // "<base><host>.<pid>": the host is everything between the base and the last dot. (A
    // shortened name's base depends on the host's length: try this host's, then the plain
    // one, which is what other hosts use unless the name is long.)
    std::string host, pid;
    for (const std::string& base : {temp_base(name, me), name + ".tmp."}) {
      if (entry.size() <= base.size() || entry.compare(0, base.size(), base) != 0) continue;
      const size_t dot = entry.rfind('.');
      if (dot == std::string::npos || dot < base.size() + 1) continue;
      host = entry.substr(base.size(), dot - base.size());
      pid = entry.substr(dot + 1);
      break;
    }
    if (pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos || pid.size() > 9) continue;
    const long p = std::stol(pid);
    const std::string full = dir + "/" + entry;
    struct stat st {};
    if (::lstat(full.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    if (host != me) {
      // Whether process p of another host still runs cannot be told from here: name it.
      std::cerr << fmt::format(
                       "genemask: note: {} is an unfinished output of process {} on host {}; it was left alone "
                       "(this host cannot tell whether that process still runs). It is never read: delete it once "
                       "no genemask runs there",
                       full, p, printable(host))
                << std::endl;
      continue;
    }
    if (p == static_cast<long>(::getpid()) || process_alive(p)) continue;
    if (::unlink(full.c_str()) == 0) {
      ++removed;
      std::cerr << fmt::format("genemask: removed {}, an unfinished output of process {} that no longer runs",
                               full, p)
                << std::endl;
    }
  }
  ::closedir(d);
  return removed;
}

bool remove_tree(const std::string& path) noexcept { return remove_tree_at(AT_FDCWD, path.c_str(), 0); }

int register_cleanup(const std::string& path, CleanupKind kind) {
  namespace fs = std::filesystem;
  const std::string abs = fs::absolute(path).lexically_normal().string();  // the handler may run after a chdir
  if (abs.size() >= PATH_MAX) return -1;
  for (int i = 0; i < kSlots; ++i) {
    int expected = 0;
    if (g_cleanup_state[i].compare_exchange_strong(expected, 1)) {
      std::memcpy(g_cleanup_paths[i], abs.c_str(), abs.size() + 1);
      g_cleanup_kind[i] = kind;
      g_cleanup_seq[i].store(g_cleanup_next.fetch_add(1));
      g_cleanup_state[i].store(2);
      return i;
    }
  }
  return -1;  // more than kSlots at once: removed by the normal paths, not by a signal
}

void unregister_cleanup(int slot) {
  if (slot >= 0) g_cleanup_state[slot].store(0);
}

void sync_to_disk(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return;  // a link (never fsync'ed through) or gone: its own writer's
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  // EINVAL/EROFS/ENOTSUP: a file system (or a directory) that cannot be synced; nothing lost.
  if (rc != 0 && err != EINVAL && err != EROFS && err != ENOTSUP && err != EBADF)
    throw WriteError(fmt::format("cannot write {}: {} (the data did not reach the disk)", path, std::strerror(err)),
                     err);
}

void sync_tree_to_disk(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const auto st = fs::symlink_status(path, ec);
  if (ec || fs::is_symlink(st)) return;
  if (fs::is_directory(st))
    for (auto it = fs::recursive_directory_iterator(path, ec); !ec && it != fs::recursive_directory_iterator();
         it.increment(ec))
      if (it->is_regular_file() || (it->is_directory() && !it->is_symlink())) sync_to_disk(it->path().string());
  sync_to_disk(path);
}

void rename_or_throw(const std::string& from, const std::string& to) {
  if (std::rename(from.c_str(), to.c_str()) != 0)
    throw WriteError(fmt::format("cannot rename {} to {}: {}", from, to, std::strerror(errno)), errno);
}

/// rename(2) that never replaces an existing `to` (renameat2's RENAME_NOREPLACE; on a file
/// system without it, a check just before a plain rename).
void rename_no_replace_or_throw(const std::string& from, const std::string& to) {
  if (::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_NOREPLACE) == 0) return;
  if (errno == EEXIST) throw another_writers_output(to, "appeared");
  if (errno != EINVAL && errno != ENOSYS)
    throw std::runtime_error(fmt::format("cannot rename {} to {}: {}", from, to, std::strerror(errno)));
  struct stat st {};
  if (::lstat(to.c_str(), &st) == 0) throw another_writers_output(to, "appeared");
  rename_or_throw(from, to);
}

TempOutput::TempOutput(std::string path) : path_(std::move(path)), tmp_(temp_name_for(path_)) {
  check_writable_target(path_);  // never over an input, a device or a FIFO
  remove_stale_temporaries(path_);
  slot_ = register_temp(tmp_);
}

TempOutput::~TempOutput() {
  if (!committed_) std::remove(tmp_.c_str());
  unregister_temp(slot_);
}

void TempOutput::commit() {
  // Testing hook: hold the finished temporary for N seconds before the rename, so that a
  // test can stop the process while it exists (tests/cli/test_interrupts.py).
  // GENEMASK_TEST_HOLD_TEMP_MATCH limits it to temporaries whose name contains that text.
  const char* match = std::getenv("GENEMASK_TEST_HOLD_TEMP_MATCH");
  if (const char* hold = std::getenv("GENEMASK_TEST_HOLD_TEMP"); hold && (!match || tmp_.find(match) != std::string::npos)) {
    std::cerr << "genemask: holding " << tmp_ << std::endl;
    ::sleep(static_cast<unsigned>(std::atoi(hold)));
  }
  check_writable_target(path_);  // it may have become one while the output was written
  // The data on the disk before the name points to it: a node that loses power after the
  // rename must not leave the output's name on an empty or partial file.
  sync_to_disk(tmp_);
  // Another command may have written the output since this one checked it at its start (two
  // writers of one name): refused, not replaced. A target that was absent then is renamed to
  // without replacing anything, so one that appears in the last instant is refused too.
  const OutputAtStart then = output_at_start(path_);
  // Testing hook: the moment between that check and the rename (another writer's rename
  // lands there in tests/io/output_guard_test.cpp).
  hold_for_tests("GENEMASK_TEST_HOLD_RENAME");
  if (then == OutputAtStart::absent) {
    rename_no_replace_or_throw(tmp_, path_);
  } else if (then == OutputAtStart::present &&
             ::renameat2(AT_FDCWD, tmp_.c_str(), AT_FDCWD, path_.c_str(), RENAME_EXCHANGE) == 0) {
    // The check above and this rename are two steps: another writer's rename may have come
    // between them. The exchange puts what it displaced at the temporary's name, where it is
    // checked to be the file of the start: if not, it goes back, and this result is not kept.
    if (!is_output_at_start(path_, tmp_)) {
      if (::renameat2(AT_FDCWD, tmp_.c_str(), AT_FDCWD, path_.c_str(), RENAME_EXCHANGE) != 0)
        throw std::runtime_error(fmt::format("{} was replaced while this command ran, and the other writer's file, "
                                             "displaced to {}, could not be put back: {}; move it back by hand",
                                             path_, tmp_, std::strerror(errno)));
      throw another_writers_output(path_, "was replaced");
    }
    ::unlink(tmp_.c_str());  // the earlier output, replaced
  } else {
    // Not a checked output, or a file system without RENAME_EXCHANGE (NFS): a plain rename,
    // after the check above.
    if (then == OutputAtStart::present && errno != EINVAL && errno != ENOSYS && errno != ENOTSUP)
      throw std::runtime_error(fmt::format("cannot rename {} to {}: {}", tmp_, path_, std::strerror(errno)));
    rename_or_throw(tmp_, path_);
  }
  // And the rename itself (the directory's entry), once it is made.
  const std::string parent = std::filesystem::path(path_).parent_path().string();
  sync_to_disk(parent.empty() ? "." : parent);
  output_written(path_);
  committed_ = true;
  unregister_temp(slot_);
  slot_ = -1;
}

FdStreamBuf::~FdStreamBuf() {
  if (fd_ >= 0 && owned_) ::close(fd_);
}

void FdStreamBuf::attach(int fd) {
  fd_ = fd;
  owned_ = false;
  setp(buf_, buf_ + sizeof buf_);
}

bool FdStreamBuf::open(const std::string& path) {
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) return false;
  setp(buf_, buf_ + sizeof buf_);
  return true;
}

bool FdStreamBuf::write_all(const char* p, size_t n) {
  while (n > 0 && error_ == 0) {
    const ssize_t w = ::write(fd_, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      error_ = w < 0 ? errno : EIO;  // a short write is followed by the real error
      return false;
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return error_ == 0;
}

bool FdStreamBuf::drain() {
  const bool ok = write_all(pbase(), static_cast<size_t>(pptr() - pbase()));
  setp(buf_, buf_ + sizeof buf_);
  return ok;
}

int FdStreamBuf::overflow(int c) {
  if (fd_ < 0 || !drain()) return traits_type::eof();
  if (c != traits_type::eof()) {
    *pptr() = static_cast<char>(c);
    pbump(1);
  }
  return traits_type::not_eof(c);
}

int FdStreamBuf::sync() { return fd_ >= 0 && drain() ? 0 : -1; }

std::streamsize FdStreamBuf::xsputn(const char* s, std::streamsize n) {
  if (fd_ < 0) return 0;
  if (n < epptr() - pptr()) {
    std::memcpy(pptr(), s, static_cast<size_t>(n));
    pbump(static_cast<int>(n));
    return n;
  }
  if (!drain() || !write_all(s, static_cast<size_t>(n))) return 0;
  return n;
}

bool FdStreamBuf::close() {
  if (fd_ < 0) return error_ == 0;
  drain();
  if (!owned_) return error_ == 0;
  if (::close(fd_) != 0 && error_ == 0) error_ = errno;  // NFS reports write errors here
  fd_ = -1;
  return error_ == 0;
}

AtomicFile::AtomicFile(std::string path) : tmp_(std::move(path)) {
  if (!buf_.open(tmp_.path()))
    throw std::runtime_error(fmt::format("cannot create {}: {}", tmp_.path(), open_error_reason(errno)));
}

void AtomicFile::finish() {
  if (finished_) return;
  out_.flush();
  if (!buf_.close() || !out_) {
    const int err = buf_.error();
    throw WriteError(fmt::format("cannot write {}: {}", tmp_.path(), err ? write_error_reason(err) : "a write failed"),
                     err ? err : EIO);
  }
  finished_ = true;
}

void AtomicFile::commit() {
  finish();
  tmp_.commit();
}

AppendFile::AppendFile(std::string path, bool sync) : path_(std::move(path)), sync_(sync) {
  fd_ = ::open(path_.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) throw std::runtime_error(fmt::format("cannot open {} for appending: {}", path_, open_error_reason(errno)));
}

AppendFile::~AppendFile() { ::close(fd_); }

void AppendFile::append(std::string_view record) {
  ssize_t n = ::write(fd_, record.data(), record.size());
  while (n < 0 && errno == EINTR) n = ::write(fd_, record.data(), record.size());
  if (n != static_cast<ssize_t>(record.size())) {
    // A short write (a full disk, `ulimit -f`) leaves a torn last record; the second write
    // gives the reason.
    const ssize_t again = n >= 0 ? ::write(fd_, record.data() + n, record.size() - static_cast<size_t>(n)) : -1;
    const int err = again < 0 ? errno : EIO;
    throw WriteError(fmt::format("cannot append to {}: {}", path_, again < 0 ? write_error_reason(err) : "a short write"),
                     err);
  }
  if (sync_ && ::fsync(fd_) != 0 && errno != EINVAL && errno != ENOTSUP) {
    const int err = errno;
    throw WriteError(fmt::format("cannot append to {}: {} (the data did not reach the disk)", path_, std::strerror(err)),
                     err);
  }
}

OutputDir::OutputDir(const std::string& path, std::vector<std::string> own)
    : own_(std::move(own)), exceptions_(std::uncaught_exceptions()) {
  own_.emplace_back(".genemask.json");  // the run directory's marker (claim_run_directory)
  namespace fs = std::filesystem;
  fs::path p = fs::absolute(path).lexically_normal();
  if (!p.has_filename()) p = p.parent_path();  // "out/"
  fs::path top;
  for (fs::path q = p; !q.empty() && !fs::exists(q); q = q.parent_path()) {
    top = q;
    if (q == q.parent_path()) break;
  }
  fs::create_directories(p);
  if (!top.empty()) created_ = top.string();
  dir_ = p.string();
  for (auto& n : own_) n = dir_ + "/" + n;  // whole paths now: the destructor may run out of memory
  if (!created_.empty()) {
    chain_ = empty_dir_chain(dir_, created_);
    cleanup_slots_ = register_made_dirs(chain_, dir_);
    for (const auto& n : own_) cleanup_slots_.push_back(register_cleanup(n, CleanupKind::part));
  }
}

void OutputDir::locked() {
  if (created_.empty() || kept_) return;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir_, ec))
    if (e.path().filename() != ".genemask.lock") {
      keep();
      return;
    }
}

void OutputDir::keep() {
  kept_ = true;
  for (int slot : cleanup_slots_) unregister_cleanup(slot);
  cleanup_slots_.clear();
}

OutputDir::OutputDir(OutputDir&& o) noexcept
    : created_(std::move(o.created_)),
      dir_(std::move(o.dir_)),
      own_(std::move(o.own_)),
      chain_(std::move(o.chain_)),
      exceptions_(o.exceptions_),
      kept_(o.kept_),
      cleanup_slots_(std::move(o.cleanup_slots_)) {
  o.created_.clear();
  o.cleanup_slots_.clear();
}

OutputDir::~OutputDir() {
  if (!created_.empty() && !kept_ && std::uncaught_exceptions() > exceptions_) {
    // What the command wrote, then the directory and the parents made for it while they are
    // empty: a file anyone else put there (or another command writing beside it in a parent
    // made here) keeps its directory. Each entry's signal cleanup is dropped once the entry is
    // removed, the directories' last (they are removed only while empty): a signal meanwhile
    // (mpirun's SIGTERM once another rank aborted) finishes the removal.
    for (size_t i = 0; i < own_.size(); ++i) {
      remove_tree(own_[i]);  // allocates nothing: this runs after an out-of-memory error too
      if (chain_.size() + i < cleanup_slots_.size()) unregister_cleanup(std::exchange(cleanup_slots_[chain_.size() + i], -1));
    }
    // Testing hook: a pause here, for a signal to come between the two removals
    // (tests/io/output_guard_test.cpp).
    hold_for_tests("GENEMASK_TEST_HOLD_CLEANUP");
    remove_empty_chain(chain_);
  }
  for (int slot : cleanup_slots_) unregister_cleanup(slot);
}

std::vector<std::string> empty_dir_chain(const std::string& dir, const std::string& top) {
  namespace fs = std::filesystem;
  std::vector<std::string> chain;
  const fs::path t = fs::absolute(top).lexically_normal();
  for (fs::path p = fs::absolute(dir).lexically_normal(); p.string().size() >= t.string().size(); p = p.parent_path()) {
    chain.push_back(p.string());
    if (p == t || p == p.parent_path()) break;
  }
  return chain;
}

void remove_empty_chain(const std::vector<std::string>& chain) noexcept {
  for (const auto& d : chain)
    if (::rmdir(d.c_str()) != 0) break;
}

std::vector<int> register_made_dirs(const std::vector<std::string>& chain, const std::string& dir) {
  std::vector<int> slots;
  for (size_t i = chain.size(); i-- > 1;) slots.push_back(register_cleanup(chain[i], CleanupKind::empty_dir));
  slots.push_back(register_cleanup(dir, CleanupKind::made_dir));
  return slots;
}

void OutputDir::keep_unless_empty() {
  if (!created_.empty() && !kept_) remove_empty_chain(chain_);
  keep();
}

void remove_unfinished_outputs(const char* why) {
  Line line;
  line.add(g_program);
  line.add(": ");
  line.add(why);
  remove_registered(line, unlink_live_temporaries(line));
  line.add("\n");
  const ssize_t ignored = ::write(STDERR_FILENO, line.buf, line.n);
  (void)ignored;
}

void install_signal_cleanup(const char* program, bool announce) {
  std::snprintf(g_program, sizeof g_program, "%s", program);
  g_announce = announce;
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2}) sigaddset(&sa.sa_mask, sig);
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2})
    if (!graceful(sig)) ::sigaction(sig, &sa, nullptr);
}

void stop_gracefully_on(std::initializer_list<int> signals) {
  struct sigaction sa {};
  sa.sa_handler = on_graceful_stop_signal;
  sa.sa_flags = SA_RESTART;  // as std::signal's: a read or write the signal comes in goes on
  sigemptyset(&sa.sa_mask);
  for (int sig : signals) {
    if (sig <= 0 || sig >= 64) throw std::invalid_argument(fmt::format("stop_gracefully_on: signal {}", sig));
    g_graceful_signals |= uint64_t{1} << sig;
    ::sigaction(sig, &sa, nullptr);
  }
}

bool graceful_stop_requested() noexcept { return g_graceful_stop.load(); }

void hold_for_tests(const char* name) noexcept {
  if (const char* hold = std::getenv(name)) ::usleep(static_cast<useconds_t>(std::atoi(hold)) * 1000);
}

}  // namespace genemask::io
