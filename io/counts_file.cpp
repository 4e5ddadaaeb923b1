#include "io/counts_file.hpp"

#include <fmt/format.h>

#include "io/atomic_file.hpp"
#include "io/error.hpp"
#include "io/h5.hpp"

namespace genemask::io {

void write_counts_file(const std::string& path, int kmax, const std::vector<std::vector<uint64_t>>& counts,
                       const std::vector<uint64_t>& presence15, const CountsMeta& meta) {
  TempOutput tmp(path);
  {
    h5::Handle f = h5::create_file(tmp.path());
    std::vector<uint64_t> totals;
    {
      h5::Handle g = h5::create_group(f, "counts");
      for (int k = 1; k <= kmax; ++k) {
        const auto& c = counts.at(static_cast<size_t>(k));
        const std::string name = fmt::format("k{}", k);
        h5::write_u64(g, name, c.data(), c.size());
        uint64_t total = 0;
        for (uint64_t v : c) total += v;
        totals.push_back(total);
        h5::Handle ds = h5::open_dataset(g, name);
        h5::set_attr(ds, "k", static_cast<uint64_t>(k));
        h5::set_attr(ds, "total", total);
      }
    }
    if (!presence15.empty()) {
      h5::Handle g = h5::create_group(f, "presence");
      h5::write_u64(g, "k15", presence15.data(), presence15.size());
    }
    {
      h5::Handle g = h5::create_group(f, "records");
      h5::write_strings(g, "name", meta.record_names);
      h5::write_u64(g, "length", meta.record_lengths.data(), meta.record_lengths.size());
    }
    h5::set_attr(f, "format", std::string(kCountsFormat));
    h5::set_attr(f, "format_version", kCountsFormatVersion);
    h5::set_attr(f, "kmax", static_cast<uint64_t>(kmax));
    h5::set_attr(f, "totals", totals);
    h5::set_attr(f, "acgt_bases", meta.acgt_bases);
    h5::set_attr(f, "other_bases", meta.other_bases);
    std::string files;
    for (size_t i = 0; i < meta.source_files.size(); ++i) files += (i ? "\n" : "") + meta.source_files[i];
    h5::set_attr(f, "source_files", files);
    h5::set_attr(f, "source_sizes", meta.source_sizes);
    h5::set_attr(f, "command_line", meta.command_line);
    h5::set_attr(f, "genemask_version", meta.genemask_version);
    h5::close_file(f);
  }
  tmp.commit();
}

CountsFile read_counts_file(const std::string& path, int load_kmax, bool load_presence) {
  h5::Handle f = h5::open_file_ro(path);
  if (!h5::has_attr(f, "format") || h5::get_attr_string(f, "format") != kCountsFormat)
    throw InputError(path, "not a genemask counts file (expected attribute format=\"genemask-counts\"; "
                           "make one with `genemask count`)");
  const uint64_t version = h5::get_attr_u64(f, "format_version");
  if (version != kCountsFormatVersion)
    throw InputError(path, fmt::format("counts format version {} is not supported (expected {})", version,
                                       kCountsFormatVersion));
  CountsFile out;
  const uint64_t kmax = h5::get_attr_u64(f, "kmax");
  if (kmax < 1 || kmax > kMaxCountsK)
    throw InputError(path, fmt::format("attribute kmax is {}, expected 1 to {}: the file is damaged", kmax, kMaxCountsK));
  out.kmax = static_cast<int>(kmax);
  if (load_kmax == 0) load_kmax = out.kmax;
  if (load_kmax > out.kmax)
    throw InputError(path, fmt::format("has k-mer counts up to k={}, but k={} is needed (re-run `genemask count "
                                       "--kmax {}`)",
                                       out.kmax, load_kmax, load_kmax));
  out.totals.assign(1, 0);
  auto t = h5::get_attr_u64s(f, "totals");
  if (t.size() != kmax)
    throw InputError(path, fmt::format("attribute totals has {} values for kmax {}: the file is damaged", t.size(), kmax));
  out.totals.insert(out.totals.end(), t.begin(), t.end());
  out.meta.acgt_bases = h5::get_attr_u64(f, "acgt_bases");
  out.counts.resize(static_cast<size_t>(out.kmax) + 1);
  for (int k = 1; k <= load_kmax; ++k) {
    auto c = h5::read_u64(f, fmt::format("/counts/k{}", k));
    if (c.size() != (uint64_t{1} << (2 * k)))
      throw InputError(path, fmt::format("/counts/k{} has {} entries, expected 4^{}", k, c.size(), k));
    // The counts must add up to the recorded total, which cannot exceed the bases counted: a
    // crafted or damaged count (2^63, say) would otherwise overflow the totals that every
    // probability is divided by.
    uint64_t sum = 0;
    for (size_t i = 0; i < c.size(); ++i)
      if (__builtin_add_overflow(sum, c[i], &sum))
        throw InputError(path, fmt::format("/counts/k{}: the counts overflow 64 bits at entry {} (count {}): the file "
                                           "is damaged",
                                           k, i, c[i]));
    const uint64_t total = out.totals[static_cast<size_t>(k)];
    if (sum != total)
      throw InputError(path, fmt::format("/counts/k{} sums to {}, but attribute totals says {}: the file is damaged", k,
                                         sum, total));
    if (total > out.meta.acgt_bases)
      throw InputError(path, fmt::format("/counts/k{} counts {} k-mers in {} A/C/G/T bases (attribute acgt_bases): "
                                         "the file is damaged",
                                         k, total, out.meta.acgt_bases));
    out.counts[static_cast<size_t>(k)] = std::move(c);
  }
  out.has_presence15 = h5::exists(f, "/presence/k15");
  if (load_presence) {
    if (!out.has_presence15)
      throw InputError(path, "has no 15-mer presence set (re-run `genemask count --presence15`)");
    out.presence15 = h5::read_u64(f, "/presence/k15");
  }
  out.meta.command_line = h5::get_attr_string(f, "command_line");
  out.meta.genemask_version = h5::get_attr_string(f, "genemask_version");
  out.meta.other_bases = h5::get_attr_u64(f, "other_bases");
  out.meta.record_names = h5::read_strings(f, "/records/name");
  out.meta.record_lengths = h5::read_u64(f, "/records/length");
  return out;
}

}  // namespace genemask::io
