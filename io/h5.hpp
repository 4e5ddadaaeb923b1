#pragma once
// Small RAII + helper layer over the HDF5 C API. Files written through it carry no
// timestamps, so the same content gives byte-identical files.
#include <hdf5.h>

#include <cstdint>
#include <string>
#include <vector>

namespace genemask::io::h5 {

/// Owns an hid_t and closes it with the right H5*close.
class Handle {
 public:
  Handle() = default;
  Handle(hid_t id, herr_t (*closer)(hid_t), const std::string& what);
  ~Handle();
  Handle(Handle&& o) noexcept;
  Handle& operator=(Handle&& o) noexcept;
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  hid_t id() const { return id_; }
  /// Gives up the id without closing it.
  hid_t release() {
    const hid_t id = id_;
    id_ = H5I_INVALID_HID;
    return id;
  }
  operator hid_t() const { return id_; }

 private:
  hid_t id_ = H5I_INVALID_HID;
  herr_t (*closer_)(hid_t) = nullptr;
};

// Errors name the file (and the dataset or attribute), and the system's reason when HDF5
// had one: "out.h5.tmp.host.42: cannot write dataset /counts/k9: No space left on device
// (the disk is full)". A dataset or attribute that is not there is an InputError.

/// A new file, built in memory: nothing reaches `path` until close_file(), and a file
/// given up (an exception) never appears on disk at all.
Handle create_file(const std::string& path);
/// Writes a file made by create_file to its path and closes it. A failed write (a full disk)
/// is an error naming the file and the errno; the partial file is removed.
void close_file(Handle& file);
/// A new file written to `path` as it is built (HDF5's sec2 driver), for files too large to
/// build in memory (a counts file of many genomes). Refuses, before HDF5 writes a byte, when
/// the file system has less than `expected_bytes` (plus 1%) free: HDF5 1.10 does not recover
/// from a failed write. Close with close_file_on_disk().
Handle create_file_on_disk(const std::string& path, uint64_t expected_bytes);
void close_file_on_disk(Handle& file);
Handle open_file_ro(const std::string& path);  // InputError when not an HDF5 file
Handle create_group(hid_t loc, const std::string& name);
Handle open_dataset(hid_t loc, const std::string& name);  // InputError naming the file when missing
Handle open_group(hid_t loc, const std::string& name);    // InputError naming the file when missing
bool exists(hid_t loc, const std::string& path);
/// The name of the file that holds `loc` ("" when HDF5 cannot say).
std::string file_name(hid_t loc);

void write_u64(hid_t loc, const std::string& name, const uint64_t* data, uint64_t n);
void write_u32(hid_t loc, const std::string& name, const uint32_t* data, uint64_t n);
void write_u16(hid_t loc, const std::string& name, const uint16_t* data, uint64_t n);
void write_strings(hid_t loc, const std::string& name, const std::vector<std::string>& values);
/// A row-major float32 matrix [rows, cols].
void write_f32_2d(hid_t loc, const std::string& name, const float* data, uint64_t rows, uint64_t cols);
std::vector<uint64_t> read_u64(hid_t loc, const std::string& name);
std::vector<std::string> read_strings(hid_t loc, const std::string& name);
uint64_t dataset_length(hid_t loc, const std::string& name);

void set_attr(hid_t obj, const std::string& name, const std::string& value);
void set_attr(hid_t obj, const std::string& name, uint64_t value);
void set_attr(hid_t obj, const std::string& name, const std::vector<uint64_t>& values);
bool has_attr(hid_t obj, const std::string& name);
std::string get_attr_string(hid_t obj, const std::string& name);
uint64_t get_attr_u64(hid_t obj, const std::string& name);
std::vector<uint64_t> get_attr_u64s(hid_t obj, const std::string& name);

/// Silences HDF5's own error printing (we report errors ourselves).
void quiet_errors();

/// Keeps HDF5 from closing the files still open when the process exits (call before any other
/// HDF5 call). Every file genemask writes is closed (and checked) before it is published; one
/// still open at exit is the temporary of a write that failed, and HDF5 1.10's library cleanup
/// crashes closing an on-disk file whose write failed (a segfault after the error message).
void skip_library_cleanup_at_exit();

}  // namespace genemask::io::h5
