#include "io/dir_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fmt/format.h>

#include "io/error.hpp"

namespace genemask::io {

DirLock::DirLock(const std::string& dir, const std::string& what) {
  const std::string path = dir + "/.genemask.lock";
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) throw InputError(path, fmt::format("cannot open the lock file: {}", std::strerror(errno)));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    char buf[256] = {};
    const ssize_t n = ::pread(fd_, buf, sizeof buf - 1, 0);
    std::string holder(buf, n > 0 ? static_cast<size_t>(n) : 0);
    while (!holder.empty() && (holder.back() == '\n' || holder.back() == '\0')) holder.pop_back();
    ::close(fd_);
    fd_ = -1;
    throw InputError(dir, fmt::format("is in use by another {} ({}); wait for it to end, or choose another --out", what,
                                      holder.empty() ? "holder unknown" : holder));
  }
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  const std::string me = fmt::format("host {}, pid {}\n", host, ::getpid());
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, me.data(), me.size(), 0) != static_cast<ssize_t>(me.size())) {
    const int err = errno;
    ::close(fd_);
    fd_ = -1;
    throw InputError(path, fmt::format("cannot write the lock file: {}", std::strerror(err)));
  }
}

DirLock::~DirLock() {
  if (fd_ < 0) return;
  (void)::ftruncate(fd_, 0);
  ::close(fd_);
}

}  // namespace genemask::io
