#include "io/shard_file.hpp"

#include <algorithm>
#include <cstdio>
#include <fmt/format.h>

#include "io/atomic_file.hpp"
#include "io/error.hpp"

namespace genemask::io {

void write_shard(const std::string& path, const ShardData& d, const std::string& split, uint64_t seed,
                 const std::string& vocab_sha256) {
  TempOutput tmp(path);
  {
    h5::Handle f = h5::create_file(tmp.path());
    h5::write_u16(f, "tokens", d.tokens.data(), d.tokens.size());
    h5::write_u64(f, "offsets", d.offsets.data(), d.offsets.size());
    h5::write_u64(f, "sample_index", d.sample_index.data(), d.sample_index.size());
    h5::write_u32(f, "chrom", d.chrom.data(), d.chrom.size());
    h5::write_u64(f, "start", d.start.data(), d.start.size());
    if (!d.genome.empty()) h5::write_u32(f, "genome", d.genome.data(), d.genome.size());
    h5::set_attr(f, "format", std::string(kShardFormat));
    h5::set_attr(f, "format_version", kShardFormatVersion);
    h5::set_attr(f, "split", split);
    h5::set_attr(f, "seed", seed);
    h5::set_attr(f, "vocab_sha256", vocab_sha256);
    h5::close_file(f);
  }
  tmp.commit();
}

namespace {
std::vector<uint32_t> read_u32(hid_t loc, const std::string& name) {
  std::vector<uint32_t> out(h5::dataset_length(loc, name));
  h5::Handle ds = h5::open_dataset(loc, name);
  if (!out.empty() && H5Dread(ds, H5T_NATIVE_UINT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()) < 0)
    throw InputError(h5::file_name(loc), "cannot read /" + name + ": the file is damaged or truncated");
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
  if (h5::exists(file_, "genome")) {
    genome_ = read_u32(file_, "genome");
    if (genome_.size() != sample_index_.size())
      throw InputError(path, fmt::format("damaged shard: {} genome entries for {} samples", genome_.size(),
                                         sample_index_.size()));
  }
  const uint64_t ntok = h5::dataset_length(file_, "tokens");
  if (offsets_.size() != sample_index_.size() + 1 || chrom_.size() != sample_index_.size() ||
      start_.size() != sample_index_.size())
    throw InputError(path, fmt::format("damaged shard: {} offsets for {} samples (expected samples + 1), {} chrom and "
                                       "{} start entries",
                                       offsets_.size(), sample_index_.size(), chrom_.size(), start_.size()));
  if (offsets_.front() != 0)
    throw InputError(path, fmt::format("damaged shard: offsets[0] is {}, expected 0", offsets_.front()));
  for (size_t i = 0; i + 1 < offsets_.size(); ++i) {
    if (offsets_[i + 1] <= offsets_[i] || offsets_[i + 1] - offsets_[i] > kShardMaxSampleTokens)
      throw InputError(path, fmt::format("damaged shard: sample {} spans offsets {}..{}, expected 1 to {} tokens in "
                                         "increasing order",
                                         i, offsets_[i], offsets_[i + 1], kShardMaxSampleTokens));
    if (i > 0 && sample_index_[i] <= sample_index_[i - 1])
      throw InputError(path, fmt::format("damaged shard: sample {} has sample_index {} after {} (must increase)", i,
                                         sample_index_[i], sample_index_[i - 1]));
  }
  if (offsets_.back() != ntok)
    throw InputError(path, fmt::format("damaged shard: the offsets end at token {}, but /tokens holds {}",
                                       offsets_.back(), ntok));
  tokens_ = h5::open_dataset(file_, "tokens");
}

void ShardReader::check_ids(const uint16_t* ids, uint64_t n, uint64_t first_token) const {
  bool bad = false;
  for (uint64_t j = 0; j < n; ++j) bad |= ids[j] < kShardFirstToken || ids[j] > kShardLastToken;  // vectorises
  if (!bad) return;
  for (uint64_t j = 0; j < n; ++j) {
    if (ids[j] >= kShardFirstToken && ids[j] <= kShardLastToken) continue;
    const uint64_t token = first_token + j;
    const size_t sample = static_cast<size_t>(
        std::upper_bound(offsets_.begin(), offsets_.end(), token) - offsets_.begin() - 1);
    throw InputError(path_, fmt::format("damaged shard: sample {} has token id {} at position {}, outside the 6-mer ids "
                                        "{}..{} of the DNABERT-6 vocabulary (build the shards again)",
                                        sample, ids[j], token - offsets_[sample], kShardFirstToken, kShardLastToken));
  }
}

void ShardReader::read(size_t i, std::vector<uint16_t>& out) const {
  const hsize_t off = offsets_[i], n = offsets_[i + 1] - offsets_[i];
  out.resize(n);
  if (n == 0) return;
  h5::Handle fs(H5Dget_space(tokens_), H5Sclose, "H5Dget_space");
  H5Sselect_hyperslab(fs, H5S_SELECT_SET, &off, nullptr, &n, nullptr);
  h5::Handle ms(H5Screate_simple(1, &n, nullptr), H5Sclose, "H5Screate_simple");
  if (H5Dread(tokens_, H5T_NATIVE_UINT16, ms, fs, H5P_DEFAULT, out.data()) < 0)
    throw InputError(path_, fmt::format("cannot read the tokens of sample {}: the file is damaged or truncated", i));
  check_ids(out.data(), n, off);
}

std::vector<uint16_t> ShardReader::read_all() const {
  std::vector<uint16_t> out(offsets_.back());
  if (!out.empty() && H5Dread(tokens_, H5T_NATIVE_UINT16, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()) < 0)
    throw InputError(path_, "cannot read /tokens: the file is damaged or truncated");
  check_ids(out.data(), out.size(), 0);
  return out;
}

void ShardReader::verify_tokens() const {
  constexpr hsize_t kBlock = hsize_t{1} << 22;  // 8 MiB of ids
  std::vector<uint16_t> buf;
  h5::Handle fs(H5Dget_space(tokens_), H5Sclose, "H5Dget_space");
  for (hsize_t off = 0; off < offsets_.back(); off += kBlock) {
    const hsize_t n = std::min<hsize_t>(kBlock, offsets_.back() - off);
    buf.resize(n);
    H5Sselect_hyperslab(fs, H5S_SELECT_SET, &off, nullptr, &n, nullptr);
    h5::Handle ms(H5Screate_simple(1, &n, nullptr), H5Sclose, "H5Screate_simple");
    if (H5Dread(tokens_, H5T_NATIVE_UINT16, ms, fs, H5P_DEFAULT, buf.data()) < 0)
      throw InputError(path_, fmt::format("cannot read /tokens at {}: the file is damaged or truncated", off));
    check_ids(buf.data(), n, off);
  }
}

}  // namespace genemask::io
