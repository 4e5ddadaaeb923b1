// A write fault for tests (LD_PRELOAD): writes to files whose path contains FAULT_PATH are
// refused with FAULT_ERRNO (default EIO) once FAULT_AFTER bytes (summed over those files;
// default 0) have been written, the write that crosses the limit being cut short there, as
// a disk that fills up does. With FAULT_NFAIL=N only the first N refused writes fail; later
// ones pass (space freed again). With FAULT_OP=close the writes pass and close(2) of such a
// file fails instead (after closing it), as NFS reports a deferred write error. With
// FAULT_CONTENT=TEXT only the writes whose bytes hold TEXT count (a marker's final version). tests/cli/test_write_faults.py uses it to check that every
// output notices a refused write, names the file and leaves nothing half-written.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

static long long written = 0;
static long long refused = 0;

static int targeted(int fd) {
  const char* want = getenv("FAULT_PATH");
  if (!want || !*want || fd < 0) return 0;
  char link[64], path[4096];
  snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  const ssize_t n = readlink(link, path, sizeof path - 1);
  if (n <= 0) return 0;
  path[n] = 0;
  return strstr(path, want) != NULL;
}

// How many of n bytes may be written to fd now: n, fewer (cut short), or -1 (refused, errno set).
static int close_faults(void) {
  const char* op = getenv("FAULT_OP");
  return op && strcmp(op, "close") == 0;
}

static ssize_t allowed(int fd, const void* buf, size_t n) {
  if (close_faults() || !targeted(fd)) return (ssize_t)n;
  const char* content = getenv("FAULT_CONTENT");
  if (content && *content && (!buf || !memmem(buf, n, content, strlen(content)))) return (ssize_t)n;
  const char* after = getenv("FAULT_AFTER");
  const char* nfail = getenv("FAULT_NFAIL");
  const long long left = (after ? atoll(after) : 0) - written;
  if (left <= 0) {
    if (nfail && refused >= atoll(nfail)) return (ssize_t)n;
    ++refused;
    const char* e = getenv("FAULT_ERRNO");
    errno = e ? atoi(e) : EIO;
    return -1;
  }
  if ((long long)n > left) n = (size_t)left;
  written += (long long)n;
  return (ssize_t)n;
}

ssize_t write(int fd, const void* buf, size_t n) {
  static ssize_t (*real)(int, const void*, size_t);
  if (!real) real = (ssize_t(*)(int, const void*, size_t))dlsym(RTLD_NEXT, "write");
  const ssize_t k = allowed(fd, buf, n);
  return k < 0 ? -1 : real(fd, buf, (size_t)k);
}

ssize_t pwrite(int fd, const void* buf, size_t n, off_t at) {
  static ssize_t (*real)(int, const void*, size_t, off_t);
  if (!real) real = (ssize_t(*)(int, const void*, size_t, off_t))dlsym(RTLD_NEXT, "pwrite");
  const ssize_t k = allowed(fd, buf, n);
  return k < 0 ? -1 : real(fd, buf, (size_t)k, at);
}

ssize_t pwrite64(int fd, const void* buf, size_t n, off_t at) {
  static ssize_t (*real)(int, const void*, size_t, off_t);
  if (!real) real = (ssize_t(*)(int, const void*, size_t, off_t))dlsym(RTLD_NEXT, "pwrite64");
  const ssize_t k = allowed(fd, buf, n);
  return k < 0 ? -1 : real(fd, buf, (size_t)k, at);
}

ssize_t writev(int fd, const struct iovec* v, int count) {
  static ssize_t (*real)(int, const struct iovec*, int);
  if (!real) real = (ssize_t(*)(int, const struct iovec*, int))dlsym(RTLD_NEXT, "writev");
  size_t n = 0;
  for (int i = 0; i < count; ++i) n += v[i].iov_len;
  const ssize_t k = allowed(fd, count == 1 ? v[0].iov_base : NULL, n);  // FAULT_CONTENT: one buffer only
  if (k < 0) return -1;
  if ((size_t)k == n) return real(fd, v, count);
  // Cut short: the first k bytes, through the real write.
  static ssize_t (*real_write)(int, const void*, size_t);
  if (!real_write) real_write = (ssize_t(*)(int, const void*, size_t))dlsym(RTLD_NEXT, "write");
  ssize_t done = 0;
  for (int i = 0; i < count && done < k; ++i) {
    size_t take = v[i].iov_len;
    if ((ssize_t)take > k - done) take = (size_t)(k - done);
    const ssize_t w = real_write(fd, v[i].iov_base, take);
    if (w < 0) return done ? done : -1;
    done += w;
  }
  return done;
}

int close(int fd) {
  static int (*real)(int);
  if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "close");
  if (!close_faults() || !targeted(fd)) return real(fd);
  real(fd);
  const char* e = getenv("FAULT_ERRNO");
  errno = e ? atoi(e) : EIO;
  return -1;
}
