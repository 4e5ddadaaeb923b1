#pragma once
// Output that appears under its final name only when complete: written to
// "<path>.tmp.<pid>" and renamed on commit(); removed if never committed.
#include <fstream>
#include <string>

namespace genemask::io {

class AtomicFile {
 public:
  explicit AtomicFile(std::string path);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  std::ofstream& stream() { return out_; }
  const std::string& temp_path() const { return tmp_; }
  /// Flushes, checks for write errors, renames onto the final path.
  void commit();

 private:
  std::string path_, tmp_;
  std::ofstream out_;
  bool committed_ = false;
};

/// Temporary name for outputs written by other means (e.g. HDF5): "<path>.tmp.<pid>".
std::string temp_name_for(const std::string& path);
/// rename(2) with an error that names both paths.
void rename_or_throw(const std::string& from, const std::string& to);

}  // namespace genemask::io
