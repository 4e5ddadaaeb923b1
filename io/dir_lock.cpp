#include "io/dir_lock.hpp"

#include "io/atomic_file.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fmt/format.h>

#include "io/error.hpp"

namespace genemask::io {

DirLock::DirLock(const std::string& dir, const std::string& what) : path_(dir + "/.genemask.lock") {
  // The holder removes the lock file when it ends: a file locked here may have been removed
  // (and another created) between open and flock, so the lock counts only when the path
  // still names the file that was locked.
  for (int attempt = 0;; ++attempt) {
    fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) throw InputError(path_, fmt::format("cannot open the lock file: {}", open_error_reason(errno)));
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      if (errno != EWOULDBLOCK) {
        // Not held by anyone: this file system cannot lock (Lustre mounted without -o flock
        // says ENOSYS, an NFS without its lock service ENOLCK). Running unlocked would let
        // two runs share DIR: refuse, and say why.
        const int err = errno;
        ::close(fd_);
        fd_ = -1;
        throw InputError(path_, fmt::format("cannot lock: {}. The file system of {} does not support file locks "
                                            "(on Lustre: mount with -o flock; on NFS: run the lock service); "
                                            "put --out on a file system that does",
                                            std::strerror(err), dir));
      }
      char buf[256] = {};
      const ssize_t n = ::pread(fd_, buf, sizeof buf - 1, 0);
      std::string holder(buf, n > 0 ? static_cast<size_t>(n) : 0);
      while (!holder.empty() && (holder.back() == '\n' || holder.back() == '\0')) holder.pop_back();
      ::close(fd_);
      fd_ = -1;
      throw InputError(dir, fmt::format("is in use by another {} ({}); wait for it to end, or choose another --out",
                                        what, holder.empty() ? "holder unknown" : printable(holder)));
    }
    struct stat held {}, named {};
    if (::fstat(fd_, &held) == 0 && ::stat(path_.c_str(), &named) == 0 && held.st_dev == named.st_dev &&
        held.st_ino == named.st_ino)
      break;
    ::close(fd_);
    fd_ = -1;
    if (attempt == 100) throw InputError(path_, "the lock file keeps being replaced by another process");
  }
  const std::string me = fmt::format("host {}, pid {}\n", host_name(), ::getpid());
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, me.data(), me.size(), 0) != static_cast<ssize_t>(me.size())) {
    const int err = errno;
    ::unlink(path_.c_str());
    ::close(fd_);
    fd_ = -1;
    throw InputError(path_, fmt::format("cannot write the lock file: {}", write_error_reason(err)));
  }
  cleanup_slot_ = register_cleanup(path_, CleanupKind::file);
}

DirLock::~DirLock() {
  unregister_cleanup(cleanup_slot_);
  if (fd_ < 0) return;
  ::unlink(path_.c_str());  // still locked: nobody else holds this file now
  ::close(fd_);
}

bool DirLock::held_by_another(const std::string& dir) {
  const int fd = ::open((dir + "/.genemask.lock").c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool held = ::flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
  ::close(fd);
  return held;
}

}  // namespace genemask::io
