#pragma once
// One run per output directory: an exclusive flock on DIR/.genemask.lock for the life of
// the object, which names the holder (host, pid). The kernel drops the lock when the
// process ends, so a crashed run never leaves a stale one behind; a run that ends removes
// the file.
#include <string>

namespace genemask::io {

class DirLock {
 public:
  /// Takes the lock, or throws InputError naming DIR and the holder's host and pid.
  /// `what` names the kind of run in that message ("pretrain run", "sweep").
  explicit DirLock(const std::string& dir, const std::string& what = "genemask run");
  ~DirLock();
  DirLock(const DirLock&) = delete;
  DirLock& operator=(const DirLock&) = delete;

  /// True when a live process holds DIR's lock now (a run in progress). Creates nothing.
  static bool held_by_another(const std::string& dir);

 private:
  std::string path_;
  int fd_ = -1;
  int cleanup_slot_ = -1;  // the lock file, removed by a signal that stops the process
};

}  // namespace genemask::io
