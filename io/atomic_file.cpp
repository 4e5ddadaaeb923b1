#include "io/atomic_file.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fmt/format.h>
#include <stdexcept>
#include <unistd.h>

namespace genemask::io {

std::string temp_name_for(const std::string& path) { return fmt::format("{}.tmp.{}", path, ::getpid()); }

void rename_or_throw(const std::string& from, const std::string& to) {
  if (std::rename(from.c_str(), to.c_str()) != 0)
    throw std::runtime_error(fmt::format("cannot rename {} to {}: {}", from, to, std::strerror(errno)));
}

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)), tmp_(temp_name_for(path_)) {
  out_.open(tmp_, std::ios::binary | std::ios::trunc);
  if (!out_) throw std::runtime_error(fmt::format("cannot create {}: {}", tmp_, std::strerror(errno)));
}

AtomicFile::~AtomicFile() {
  if (!committed_) {
    out_.close();
    std::remove(tmp_.c_str());
  }
}

void AtomicFile::commit() {
  out_.flush();
  if (!out_) throw std::runtime_error(fmt::format("write error on {} (disk full?)", tmp_));
  out_.close();
  rename_or_throw(tmp_, path_);
  committed_ = true;
}

}  // namespace genemask::io
