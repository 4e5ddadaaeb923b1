#include "io/shard_file.hpp"

#include <cstdio>
#include <fmt/format.h>

#include "io/atomic_file.hpp"
#include "io/error.hpp"

namespace genemask::io {

void write_shard(const std::string& path, const ShardData& d, const std::string& split, uint64_t seed,
                 const std::string& vocab_sha256) {
  const std::string tmp = temp_name_for(path);
  try {
    h5::Handle f = h5::create_file(tmp);
    h5::write_u16(f, "tokens", d.tokens.data(), d.tokens.size());
    h5::write_u64(f, "offsets", d.offsets.data(), d.offsets.size());
    h5::write_u64(f, "sample_index", d.sample_index.data(), d.sample_index.size());
    h5::write_u32(f, "chrom", d.chrom.data(), d.chrom.size());
    h5::write_u64(f, "start", d.start.data(), d.start.size());
    h5::set_attr(f, "format", std::string(kShardFormat));
    h5::set_attr(f, "format_version", kShardFormatVersion);
    h5::set_attr(f, "split", split);
    h5::set_attr(f, "seed", seed);
    h5::set_attr(f, "vocab_sha256", vocab_sha256);
  } catch (...) {
    std::remove(tmp.c_str());
    throw;
  }
  rename_or_throw(tmp, path);
}

namespace {
std::vector<uint32_t> read_u32(hid_t loc, const std::string& name) {
  std::vector<uint32_t> out(h5::dataset_length(loc, name));
  h5::Handle ds(H5Dopen2(loc, name.c_str(), H5P_DEFAULT), H5Dclose, "open dataset " + name);
  if (!out.empty() && H5Dread(ds, H5T_NATIVE_UINT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()) < 0)
    throw std::runtime_error("HDF5: read " + name + " failed");
  return out;
}
}  // namespace

ShardReader::ShardReader(const std::string& path) : path_(path) {
  file_ = h5::open_file_ro(path);
  if (!h5::has_attr(file_, "format") || h5::get_attr_string(file_, "format") != kShardFormat)
    throw InputError(path, "not a genemask shard (expected attribute format=\"genemask-shard\")");
  const uint64_t v = h5::get_attr_u64(file_, "format_version");
  if (v != kShardFormatVersion)
    throw InputError(path, fmt::format("shard format version {} is not supported (expected {})", v, kShardFormatVersion));
  split_ = h5::get_attr_string(file_, "split");
  offsets_ = h5::read_u64(file_, "offsets");
  sample_index_ = h5::read_u64(file_, "sample_index");
  start_ = h5::read_u64(file_, "start");
  chrom_ = read_u32(file_, "chrom");
  const uint64_t ntok = h5::dataset_length(file_, "tokens");
  if (offsets_.size() != sample_index_.size() + 1 || offsets_.back() != ntok || chrom_.size() != sample_index_.size() ||
      start_.size() != sample_index_.size())
    throw InputError(path, "inconsistent shard: offsets, sample_index, chrom, start and tokens disagree in length");
  tokens_ = h5::Handle(H5Dopen2(file_, "tokens", H5P_DEFAULT), H5Dclose, "open tokens");
}

void ShardReader::read(size_t i, std::vector<uint16_t>& out) const {
  const hsize_t off = offsets_[i], n = offsets_[i + 1] - offsets_[i];
  out.resize(n);
  if (n == 0) return;
  h5::Handle fs(H5Dget_space(tokens_), H5Sclose, "H5Dget_space");
  H5Sselect_hyperslab(fs, H5S_SELECT_SET, &off, nullptr, &n, nullptr);
  h5::Handle ms(H5Screate_simple(1, &n, nullptr), H5Sclose, "H5Screate_simple");
  if (H5Dread(tokens_, H5T_NATIVE_UINT16, ms, fs, H5P_DEFAULT, out.data()) < 0)
    throw InputError(path_, fmt::format("cannot read sample {}", i));
}

std::vector<uint16_t> ShardReader::read_all() const {
  std::vector<uint16_t> out(offsets_.back());
  if (!out.empty() && H5Dread(tokens_, H5T_NATIVE_UINT16, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()) < 0)
    throw InputError(path_, "cannot read tokens");
  return out;
}

}  // namespace genemask::io
