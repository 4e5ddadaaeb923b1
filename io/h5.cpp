#include "io/h5.hpp"

#include <fcntl.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fmt/format.h>
#include <stdexcept>

#include "io/error.hpp"

namespace genemask::io::h5 {

Handle::Handle(hid_t id, herr_t (*closer)(hid_t), const std::string& what) : id_(id), closer_(closer) {
  if (id_ < 0) throw std::runtime_error(fmt::format("HDF5: {} failed", what));
}
Handle::~Handle() {
  if (id_ >= 0 && closer_) closer_(id_);
}
Handle::Handle(Handle&& o) noexcept : id_(o.id_), closer_(o.closer_) { o.id_ = H5I_INVALID_HID; }
Handle& Handle::operator=(Handle&& o) noexcept {
  if (this != &o) {
    if (id_ >= 0 && closer_) closer_(id_);
    id_ = o.id_;
    closer_ = o.closer_;
    o.id_ = H5I_INVALID_HID;
  }
  return *this;
}

void quiet_errors() { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); }

std::string file_name(hid_t loc) {
  const ssize_t n = H5Fget_name(loc, nullptr, 0);
  if (n <= 0) return "";
  std::string s(static_cast<size_t>(n) + 1, '\0');
  H5Fget_name(loc, s.data(), s.size());
  s.resize(static_cast<size_t>(n));
  return s;
}

namespace {
/// The system error behind the HDF5 call that just failed, read off HDF5's error stack (its
/// POSIX driver records "... errno = 28, error message = 'No space left on device' ..."),
/// or 0 when there is none.
int stack_errno() {
  int found = 0;
  H5Ewalk2(
      H5E_DEFAULT, H5E_WALK_DOWNWARD,
      [](unsigned, const H5E_error2_t* e, void* data) -> herr_t {
        const char* at = e->desc ? std::strstr(e->desc, "errno = ") : nullptr;
        if (!at) return 0;
        *static_cast<int*>(data) = std::atoi(at + 8);
        return 1;
      },
      &found);
  return found;
}

/// "<file>: cannot <what>[: <reason>]", the reason from the error stack, else errno; and that errno.
std::pair<std::string, int> failure_and_errno(const std::string& file, const std::string& what) {
  int err = stack_errno();
  if (err == 0) err = errno;
  const bool known = err == ENOSPC || err == EDQUOT || err == EFBIG || err == EIO || err == EROFS || err == EACCES ||
                     err == ENOMEM || err == EMFILE;
  H5Eclear2(H5E_DEFAULT);
  const std::string reason = err == EMFILE ? open_error_reason(err) : write_error_reason(err);
  return {fmt::format("{}: cannot {}{}", file.empty() ? "HDF5" : file, what, known ? ": " + reason : ""), err};
}
std::string failure(const std::string& file, const std::string& what) { return failure_and_errno(file, what).first; }
/// A failure of the disk (full, quota, EIO, read-only, a size limit) is a WriteError, so that
/// a sweep tells it from a job's own failure.
[[noreturn]] void fail(const std::string& file, const std::string& what) {
  const auto [message, err] = failure_and_errno(file, what);
  WriteError e(message, err);
  if (e.of_the_disk()) throw e;
  throw std::runtime_error(message);
}
[[noreturn]] void fail(hid_t loc, const std::string& what) { fail(file_name(loc), what); }

void check(herr_t rc, hid_t loc, const std::string& what) {
  if (rc < 0) fail(loc, what);
}
void check(herr_t rc, const std::string& what) {
  if (rc < 0) fail(std::string(), what);
}
Handle make(hid_t id, herr_t (*closer)(hid_t), hid_t loc, const std::string& what) {
  if (id < 0) fail(loc, what);
  return Handle(id, closer, what);
}
Handle no_times_dcpl() {
  Handle p(H5Pcreate(H5P_DATASET_CREATE), H5Pclose, "H5Pcreate");
  check(H5Pset_obj_track_times(p, false), "H5Pset_obj_track_times");
  return p;
}
void write_1d(hid_t loc, const std::string& name, hid_t file_type, hid_t mem_type, const void* data, uint64_t n) {
  hsize_t dims[1] = {n};
  Handle space(H5Screate_simple(1, dims, nullptr), H5Sclose, "H5Screate_simple");
  Handle dcpl = no_times_dcpl();
  errno = 0;
  Handle ds = make(H5Dcreate2(loc, name.c_str(), file_type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT), H5Dclose, loc,
                   "create dataset " + name);
  if (n > 0) check(H5Dwrite(ds, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data), loc, "write dataset " + name);
}
Handle vlen_str_type() {
  Handle t(H5Tcopy(H5T_C_S1), H5Tclose, "H5Tcopy");
  check(H5Tset_size(t, H5T_VARIABLE), "H5Tset_size");
  check(H5Tset_cset(t, H5T_CSET_UTF8), "H5Tset_cset");
  return t;
}
}  // namespace

Handle create_file(const std::string& path) {
  quiet_errors();
  Handle fcpl(H5Pcreate(H5P_FILE_CREATE), H5Pclose, "H5Pcreate");
  Handle fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose, "H5Pcreate");
  // Oldest format that h5py and HDF5 1.8+ read; keeps files stable across library versions.
  check(H5Pset_libver_bounds(fapl, H5F_LIBVER_EARLIEST, H5F_LIBVER_V18), "H5Pset_libver_bounds");
  // Built in memory and written by close_file: HDF5 never meets a disk error (after a failed
  // write, HDF5 1.10 leaves the file half-closed and crashes at exit), and our own write(2)
  // names the errno.
  check(H5Pset_fapl_core(fapl, size_t{1} << 20, /*backing_store=*/false), "H5Pset_fapl_core");
  const hid_t id = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, fcpl, fapl);
  if (id < 0) fail(path, "create the file in memory");
  return Handle(id, H5Fclose, "create file " + path);
}

void close_file(Handle& file) {
  const std::string name = file_name(file);
  std::vector<char> image;
  if (H5Fflush(file, H5F_SCOPE_GLOBAL) >= 0) {
    const ssize_t n = H5Fget_file_image(file, nullptr, 0);
    if (n > 0) {
      image.resize(static_cast<size_t>(n));
      if (H5Fget_file_image(file, image.data(), image.size()) != n) image.clear();
    }
  }
  if (image.empty()) {
    const std::string message = failure(name, "build the file in memory");
    H5Fclose(file.release());
    throw std::runtime_error(message);
  }
  if (H5Fclose(file.release()) < 0) fail(name, "close the file");
  const int fd = ::open(name.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0) throw std::runtime_error(fmt::format("{}: cannot create the file: {}", name, open_error_reason(errno)));
  size_t done = 0;
  int err = 0;
  while (done < image.size() && err == 0) {
    const ssize_t w = ::write(fd, image.data() + done, image.size() - done);
    if (w > 0) done += static_cast<size_t>(w);
    else if (w < 0 && errno != EINTR) err = errno;
    else if (w == 0) err = EIO;
  }
  if (::close(fd) != 0 && err == 0) err = errno;
  if (err != 0) {
    ::unlink(name.c_str());
    throw WriteError(fmt::format("{}: cannot write the file ({} bytes): {}", name, image.size(), write_error_reason(err)),
                     err);
  }
}

Handle create_file_on_disk(const std::string& path, uint64_t expected_bytes) {
  quiet_errors();
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  struct statvfs vfs {};
  if (::statvfs(dir.c_str(), &vfs) == 0) {
    const uint64_t free_bytes = static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
    const uint64_t need = expected_bytes + expected_bytes / 100 + (1u << 20);
    if (free_bytes < need)
      throw WriteError(fmt::format("{}: cannot write the file: it takes about {:.1f} MiB and {} has {:.1f} MiB free (the "
                                   "disk is full); free space or write elsewhere",
                                   path, static_cast<double>(need) / (1 << 20), dir,
                                   static_cast<double>(free_bytes) / (1 << 20)),
                       ENOSPC);
  }
  Handle fcpl(H5Pcreate(H5P_FILE_CREATE), H5Pclose, "H5Pcreate");
  Handle fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose, "H5Pcreate");
  check(H5Pset_libver_bounds(fapl, H5F_LIBVER_EARLIEST, H5F_LIBVER_V18), "H5Pset_libver_bounds");
  errno = 0;
  const hid_t id = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, fcpl, fapl);
  if (id < 0) fail(path, "create the file");
  return Handle(id, H5Fclose, "create file " + path);
}

void close_file_on_disk(Handle& file) {
  const std::string name = file_name(file);
  errno = 0;
  if (H5Fflush(file, H5F_SCOPE_GLOBAL) < 0) fail(file, "write the file");
  errno = 0;
  if (H5Fclose(file.release()) < 0) fail(name, "write the file (closing it)");  // NFS reports write errors here
}

void skip_library_cleanup_at_exit() { H5dont_atexit(); }

Handle open_file_ro(const std::string& path) {
  check_input_type(path);  // H5Fopen of a FIFO would wait for a writer
  quiet_errors();
  hid_t id = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (id < 0) {
    H5Eclear2(H5E_DEFAULT);
    // HDF5 says only that it failed: opening the file ourselves tells a missing or
    // unreadable file, or the limit on open files (EMFILE), from one that is not HDF5.
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    const int err = fd < 0 ? errno : 0;
    if (fd >= 0) ::close(fd);
    if (err != 0) throw InputError(path, fmt::format("cannot open as an HDF5 file: {}", open_error_reason(err)));
    throw InputError(path, "cannot open as an HDF5 file: it is readable but not HDF5 (or a damaged one)");
  }
  return Handle(id, H5Fclose, "open file");
}

Handle create_group(hid_t loc, const std::string& name) {
  Handle gcpl(H5Pcreate(H5P_GROUP_CREATE), H5Pclose, "H5Pcreate");
  check(H5Pset_obj_track_times(gcpl, false), "H5Pset_obj_track_times");
  errno = 0;
  return make(H5Gcreate2(loc, name.c_str(), H5P_DEFAULT, gcpl, H5P_DEFAULT), H5Gclose, loc, "create group " + name);
}

Handle open_dataset(hid_t loc, const std::string& name) {
  if (!exists(loc, name))
    throw InputError(file_name(loc), fmt::format("has no dataset {}: is it the file you meant, written by this "
                                                 "version of genemask?",
                                                 name));
  return make(H5Dopen2(loc, name.c_str(), H5P_DEFAULT), H5Dclose, loc, "open dataset " + name);
}

Handle open_group(hid_t loc, const std::string& name) {
  if (!exists(loc, name))
    throw InputError(file_name(loc), fmt::format("has no group {}: the file is damaged", name));
  return make(H5Gopen2(loc, name.c_str(), H5P_DEFAULT), H5Gclose, loc, "open group " + name);
}

bool exists(hid_t loc, const std::string& path) {
  // Check each component so that a missing parent is not an error.
  size_t pos = 0;
  while (true) {
    size_t next = path.find('/', pos + 1);
    std::string prefix = path.substr(0, next);
    if (!prefix.empty() && prefix != "/" && H5Lexists(loc, prefix.c_str(), H5P_DEFAULT) <= 0) return false;
    if (next == std::string::npos) return true;
    pos = next;
  }
}

void write_u64(hid_t loc, const std::string& name, const uint64_t* d, uint64_t n) {
  write_1d(loc, name, H5T_STD_U64LE, H5T_NATIVE_UINT64, d, n);
}
void write_u32(hid_t loc, const std::string& name, const uint32_t* d, uint64_t n) {
  write_1d(loc, name, H5T_STD_U32LE, H5T_NATIVE_UINT32, d, n);
}
void write_u16(hid_t loc, const std::string& name, const uint16_t* d, uint64_t n) {
  write_1d(loc, name, H5T_STD_U16LE, H5T_NATIVE_UINT16, d, n);
}

void write_strings(hid_t loc, const std::string& name, const std::vector<std::string>& values) {
  // The type says UTF-8: a FASTA name with a Latin-1 byte is written escaped (\xNN), so that
  // h5py's .asstr() and every UTF-8 reader can read the dataset.
  std::vector<std::string> valid;
  valid.reserve(values.size());
  for (const auto& v : values) valid.push_back(utf8_escaped(v));
  std::vector<const char*> ptrs;
  for (const auto& v : valid) ptrs.push_back(v.c_str());
  Handle t = vlen_str_type();
  write_1d(loc, name, t, t, ptrs.data(), ptrs.size());
}

void write_f32_2d(hid_t loc, const std::string& name, const float* data, uint64_t rows, uint64_t cols) {
  hsize_t dims[2] = {rows, cols};
  Handle space(H5Screate_simple(2, dims, nullptr), H5Sclose, "H5Screate_simple");
  Handle dcpl = no_times_dcpl();
  errno = 0;
  Handle ds = make(H5Dcreate2(loc, name.c_str(), H5T_IEEE_F32LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT), H5Dclose, loc,
                   "create dataset " + name);
  if (rows * cols > 0)
    check(H5Dwrite(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, data), loc, "write dataset " + name);
}

uint64_t dataset_length(hid_t loc, const std::string& name) {
  Handle ds = open_dataset(loc, name);
  Handle space = make(H5Dget_space(ds), H5Sclose, loc, "read the shape of " + name);
  if (H5Sget_simple_extent_ndims(space) != 1)
    throw InputError(file_name(loc), fmt::format("dataset {} is not one-dimensional", name));
  hsize_t dims[1];
  H5Sget_simple_extent_dims(space, dims, nullptr);
  return dims[0];
}

std::vector<uint64_t> read_u64(hid_t loc, const std::string& name) {
  std::vector<uint64_t> out(dataset_length(loc, name));
  Handle ds = open_dataset(loc, name);
  if (!out.empty()) check(H5Dread(ds, H5T_NATIVE_UINT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()), loc, "read " + name);
  return out;
}

std::vector<std::string> read_strings(hid_t loc, const std::string& name) {
  const uint64_t n = dataset_length(loc, name);
  Handle ds = open_dataset(loc, name);
  Handle t = vlen_str_type();
  std::vector<char*> ptrs(n, nullptr);
  if (n) check(H5Dread(ds, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, ptrs.data()), loc, "read " + name);
  std::vector<std::string> out;
  for (char* p : ptrs) out.emplace_back(p ? p : "");
  if (n) {
    Handle space(H5Dget_space(ds), H5Sclose, "H5Dget_space");
    H5Dvlen_reclaim(t, space, H5P_DEFAULT, ptrs.data());
  }
  return out;
}

void set_attr(hid_t obj, const std::string& name, const std::string& value) {
  // Variable-length UTF-8: h5py returns str (fixed-length strings come back as bytes).
  Handle t = vlen_str_type();
  Handle space(H5Screate(H5S_SCALAR), H5Sclose, "H5Screate");
  Handle a = make(H5Acreate2(obj, name.c_str(), t, space, H5P_DEFAULT, H5P_DEFAULT), H5Aclose, obj,
                  "create attribute " + name);
  const std::string valid = utf8_escaped(value);  // declared UTF-8 (a command line with a Latin-1 path)
  const char* p = valid.c_str();
  check(H5Awrite(a, t, &p), obj, "write attribute " + name);
}

void set_attr(hid_t obj, const std::string& name, uint64_t value) {
  Handle space(H5Screate(H5S_SCALAR), H5Sclose, "H5Screate");
  Handle a = make(H5Acreate2(obj, name.c_str(), H5T_STD_U64LE, space, H5P_DEFAULT, H5P_DEFAULT), H5Aclose, obj,
                  "create attribute " + name);
  check(H5Awrite(a, H5T_NATIVE_UINT64, &value), obj, "write attribute " + name);
}

void set_attr(hid_t obj, const std::string& name, const std::vector<uint64_t>& values) {
  hsize_t dims[1] = {values.size()};
  Handle space(values.empty() ? H5Screate(H5S_NULL) : H5Screate_simple(1, dims, nullptr), H5Sclose, "H5Screate");
  Handle a = make(H5Acreate2(obj, name.c_str(), H5T_STD_U64LE, space, H5P_DEFAULT, H5P_DEFAULT), H5Aclose, obj,
                  "create attribute " + name);
  if (!values.empty()) check(H5Awrite(a, H5T_NATIVE_UINT64, values.data()), obj, "write attribute " + name);
}

bool has_attr(hid_t obj, const std::string& name) { return H5Aexists(obj, name.c_str()) > 0; }

namespace {
Handle open_attr(hid_t obj, const std::string& name) {
  if (!has_attr(obj, name))
    throw InputError(file_name(obj), fmt::format("has no attribute '{}': is it the file you meant, written by this "
                                                 "version of genemask?",
                                                 name));
  return make(H5Aopen(obj, name.c_str(), H5P_DEFAULT), H5Aclose, obj, "open attribute " + name);
}
}  // namespace

std::string get_attr_string(hid_t obj, const std::string& name) {
  Handle a = open_attr(obj, name);
  Handle ft(H5Aget_type(a), H5Tclose, "H5Aget_type");
  if (H5Tget_class(ft) != H5T_STRING) throw InputError(file_name(obj), "attribute '" + name + "' is not a string");
  if (H5Tis_variable_str(ft) > 0) {
    char* p = nullptr;
    Handle mt = vlen_str_type();
    check(H5Aread(a, mt, &p), obj, "read attribute " + name);
    std::string s = p ? p : "";
    H5free_memory(p);
    return s;
  }
  size_t n = H5Tget_size(ft);
  std::string s(n, '\0');
  check(H5Aread(a, ft, s.data()), obj, "read attribute " + name);
  while (!s.empty() && s.back() == '\0') s.pop_back();
  return s;
}

uint64_t get_attr_u64(hid_t obj, const std::string& name) {
  Handle a = open_attr(obj, name);
  uint64_t v = 0;
  check(H5Aread(a, H5T_NATIVE_UINT64, &v), obj, "read attribute " + name + " as an unsigned integer");
  return v;
}

std::vector<uint64_t> get_attr_u64s(hid_t obj, const std::string& name) {
  Handle a = open_attr(obj, name);
  Handle space(H5Aget_space(a), H5Sclose, "H5Aget_space");
  if (H5Sget_simple_extent_type(space) == H5S_NULL) return {};
  hssize_t n = H5Sget_simple_extent_npoints(space);
  if (n < 0 || n > (1 << 20))
    throw InputError(file_name(obj), fmt::format("attribute '{}' has {} values (expected at most {})", name, n, 1 << 20));
  std::vector<uint64_t> v(static_cast<size_t>(n));
  check(H5Aread(a, H5T_NATIVE_UINT64, v.data()), obj, "read attribute " + name + " as unsigned integers");
  return v;
}

}  // namespace genemask::io::h5
