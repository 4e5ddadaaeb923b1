#include "io/h5.hpp"

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

namespace {
void check(herr_t rc, const std::string& what) {
  if (rc < 0) throw std::runtime_error(fmt::format("HDF5: {} failed", what));
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
  Handle ds(H5Dcreate2(loc, name.c_str(), file_type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT), H5Dclose,
            "create dataset " + name);
  if (n > 0) check(H5Dwrite(ds, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data), "write dataset " + name);
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
  return Handle(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, fcpl, fapl), H5Fclose, "create file " + path);
}

Handle open_file_ro(const std::string& path) {
  quiet_errors();
  hid_t id = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (id < 0) throw InputError(path, "cannot open as an HDF5 file (missing, unreadable or not HDF5)");
  return Handle(id, H5Fclose, "open file");
}

Handle create_group(hid_t loc, const std::string& name) {
  Handle gcpl(H5Pcreate(H5P_GROUP_CREATE), H5Pclose, "H5Pcreate");
  check(H5Pset_obj_track_times(gcpl, false), "H5Pset_obj_track_times");
  return Handle(H5Gcreate2(loc, name.c_str(), H5P_DEFAULT, gcpl, H5P_DEFAULT), H5Gclose, "create group " + name);
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
  std::vector<const char*> ptrs;
  for (const auto& v : values) ptrs.push_back(v.c_str());
  Handle t = vlen_str_type();
  write_1d(loc, name, t, t, ptrs.data(), ptrs.size());
}

void write_f32_2d(hid_t loc, const std::string& name, const float* data, uint64_t rows, uint64_t cols) {
  hsize_t dims[2] = {rows, cols};
  Handle space(H5Screate_simple(2, dims, nullptr), H5Sclose, "H5Screate_simple");
  Handle dcpl = no_times_dcpl();
  Handle ds(H5Dcreate2(loc, name.c_str(), H5T_IEEE_F32LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT), H5Dclose,
            "create dataset " + name);
  if (rows * cols > 0) check(H5Dwrite(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, data), "write dataset " + name);
}

uint64_t dataset_length(hid_t loc, const std::string& name) {
  Handle ds(H5Dopen2(loc, name.c_str(), H5P_DEFAULT), H5Dclose, "open dataset " + name);
  Handle space(H5Dget_space(ds), H5Sclose, "H5Dget_space");
  if (H5Sget_simple_extent_ndims(space) != 1) throw std::runtime_error(name + " is not one-dimensional");
  hsize_t dims[1];
  H5Sget_simple_extent_dims(space, dims, nullptr);
  return dims[0];
}

std::vector<uint64_t> read_u64(hid_t loc, const std::string& name) {
  std::vector<uint64_t> out(dataset_length(loc, name));
  Handle ds(H5Dopen2(loc, name.c_str(), H5P_DEFAULT), H5Dclose, "open dataset " + name);
  if (!out.empty()) check(H5Dread(ds, H5T_NATIVE_UINT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()), "read " + name);
  return out;
}

std::vector<std::string> read_strings(hid_t loc, const std::string& name) {
  const uint64_t n = dataset_length(loc, name);
  Handle ds(H5Dopen2(loc, name.c_str(), H5P_DEFAULT), H5Dclose, "open dataset " + name);
  Handle t = vlen_str_type();
  std::vector<char*> ptrs(n, nullptr);
  if (n) check(H5Dread(ds, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, ptrs.data()), "read " + name);
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
  Handle a(H5Acreate2(obj, name.c_str(), t, space, H5P_DEFAULT, H5P_DEFAULT), H5Aclose, "create attribute " + name);
  const char* p = value.c_str();
  check(H5Awrite(a, t, &p), "write attribute " + name);
}

void set_attr(hid_t obj, const std::string& name, uint64_t value) {
  Handle space(H5Screate(H5S_SCALAR), H5Sclose, "H5Screate");
  Handle a(H5Acreate2(obj, name.c_str(), H5T_STD_U64LE, space, H5P_DEFAULT, H5P_DEFAULT), H5Aclose,
           "create attribute " + name);
  check(H5Awrite(a, H5T_NATIVE_UINT64, &value), "write attribute " + name);
}

void set_attr(hid_t obj, const std::string& name, const std::vector<uint64_t>& values) {
  hsize_t dims[1] = {values.size()};
  Handle space(values.empty() ? H5Screate(H5S_NULL) : H5Screate_simple(1, dims, nullptr), H5Sclose, "H5Screate");
  Handle a(H5Acreate2(obj, name.c_str(), H5T_STD_U64LE, space, H5P_DEFAULT, H5P_DEFAULT), H5Aclose,
           "create attribute " + name);
  if (!values.empty()) check(H5Awrite(a, H5T_NATIVE_UINT64, values.data()), "write attribute " + name);
}

bool has_attr(hid_t obj, const std::string& name) { return H5Aexists(obj, name.c_str()) > 0; }

std::string get_attr_string(hid_t obj, const std::string& name) {
  Handle a(H5Aopen(obj, name.c_str(), H5P_DEFAULT), H5Aclose, "open attribute " + name);
  Handle ft(H5Aget_type(a), H5Tclose, "H5Aget_type");
  if (H5Tget_class(ft) != H5T_STRING) throw std::runtime_error("attribute " + name + " is not a string");
  if (H5Tis_variable_str(ft) > 0) {
    char* p = nullptr;
    Handle mt = vlen_str_type();
    check(H5Aread(a, mt, &p), "read attribute " + name);
    std::string s = p ? p : "";
    H5free_memory(p);
    return s;
  }
  size_t n = H5Tget_size(ft);
  std::string s(n, '\0');
  check(H5Aread(a, ft, s.data()), "read attribute " + name);
  while (!s.empty() && s.back() == '\0') s.pop_back();
  return s;
}

uint64_t get_attr_u64(hid_t obj, const std::string& name) {
  Handle a(H5Aopen(obj, name.c_str(), H5P_DEFAULT), H5Aclose, "open attribute " + name);
  uint64_t v = 0;
  check(H5Aread(a, H5T_NATIVE_UINT64, &v), "read attribute " + name);
  return v;
}

std::vector<uint64_t> get_attr_u64s(hid_t obj, const std::string& name) {
  Handle a(H5Aopen(obj, name.c_str(), H5P_DEFAULT), H5Aclose, "open attribute " + name);
  Handle space(H5Aget_space(a), H5Sclose, "H5Aget_space");
  if (H5Sget_simple_extent_type(space) == H5S_NULL) return {};
  hssize_t n = H5Sget_simple_extent_npoints(space);
  std::vector<uint64_t> v(static_cast<size_t>(n));
  check(H5Aread(a, H5T_NATIVE_UINT64, v.data()), "read attribute " + name);
  return v;
}

}  // namespace genemask::io::h5
