#include "io/counts_file.hpp"
#include "io/count_checks.hpp"

#include <algorithm>
#include <utility>
#include <fmt/format.h>

#include "io/atomic_file.hpp"
#include "io/error.hpp"
#include "io/h5.hpp"

namespace genemask::io {

namespace {

/// counts[k] as /<group>/k<K> with attributes k and total; returns the totals.
std::vector<uint64_t> write_tables(hid_t g, int kmax, const std::vector<std::vector<uint64_t>>& counts) {
  std::vector<uint64_t> totals;
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
  return totals;
}

std::string joined(const std::vector<std::string>& v) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += (i ? "\n" : "") + v[i];
  return out;
}

/// Everything but /genomes: the (pooled) tables, presence, records and root attributes.
void write_pool(hid_t f, int kmax, const std::vector<std::vector<uint64_t>>& counts,
                const std::vector<uint64_t>& presence15, const CountsMeta& meta) {
  std::vector<uint64_t> totals;
  {
    h5::Handle g = h5::create_group(f, "counts");
    totals = write_tables(g, kmax, counts);
  }
  if (!presence15.empty()) {
    h5::Handle g = h5::create_group(f, "presence");
    h5::write_u64(g, "k15", presence15.data(), presence15.size());
  }
  {
    h5::Handle g = h5::create_group(f, "records");
    h5::write_strings(g, "name", meta.record_names);
    h5::write_u64(g, "length", meta.record_lengths.data(), meta.record_lengths.size());
    if (!meta.genome_names.empty())
      h5::write_u64(g, "genome", meta.record_genomes.data(), meta.record_genomes.size());
  }
  h5::set_attr(f, "format", std::string(kCountsFormat));
  h5::set_attr(f, "format_version", kCountsFormatVersion);
  h5::set_attr(f, "kmax", static_cast<uint64_t>(kmax));
  h5::set_attr(f, "totals", totals);
  h5::set_attr(f, "acgt_bases", meta.acgt_bases);
  h5::set_attr(f, "other_bases", meta.other_bases);
  h5::set_attr(f, "source_files", joined(meta.source_files));
  h5::set_attr(f, "source_sizes", meta.source_sizes);
  h5::set_attr(f, "command_line", meta.command_line);
  h5::set_attr(f, "genemask_version", meta.genemask_version);
  if (!meta.genome_names.empty()) h5::set_attr(f, "genomes", joined(meta.genome_names));
}

}  // namespace

uint64_t counts_table_bytes(int kmax) {
  uint64_t n = 0;
  for (int k = 1; k <= kmax; ++k) n += uint64_t{1} << (2 * k);
  return n * sizeof(uint64_t);
}

void write_counts_file(const std::string& path, int kmax, const std::vector<std::vector<uint64_t>>& counts,
                       const std::vector<uint64_t>& presence15, const CountsMeta& meta) {
  TempOutput tmp(path);
  {
    h5::Handle f = h5::create_file(tmp.path());
    write_pool(f, kmax, counts, presence15, meta);
    h5::close_file(f);
  }
  tmp.commit();
}

struct CountsWriter::Impl {
  TempOutput tmp;
  int kmax;
  h5::Handle file, genomes;
  Impl(const std::string& path, int k, uint64_t n, bool presence15) : tmp(path), kmax(k) {
    const uint64_t presence = presence15 ? (uint64_t{1} << 30) / 8 : 0;  // 4^15 bits
    file = h5::create_file_on_disk(tmp.path(), (n + 1) * counts_table_bytes(kmax) + presence);
    genomes = h5::create_group(file, "genomes");
  }
};

CountsWriter::CountsWriter(const std::string& path, int kmax, uint64_t genomes, bool presence15)
    : impl_(new Impl(path, kmax, genomes, presence15)) {}
CountsWriter::~CountsWriter() { delete impl_; }

void CountsWriter::add_genome(const GenomeCountsMeta& g, const std::vector<std::vector<uint64_t>>& counts) {
  h5::Handle grp = h5::create_group(impl_->genomes, g.name);
  std::vector<uint64_t> totals;
  {
    h5::Handle c = h5::create_group(grp, "counts");
    totals = write_tables(c, impl_->kmax, counts);
  }
  h5::set_attr(grp, "index", g.index);
  h5::set_attr(grp, "source_file", g.source_file);
  h5::set_attr(grp, "source_size", g.source_size);
  h5::set_attr(grp, "acgt_bases", g.acgt_bases);
  h5::set_attr(grp, "other_bases", g.other_bases);
  h5::set_attr(grp, "records", g.records);
  h5::set_attr(grp, "totals", totals);
}

void CountsWriter::finish(const std::vector<std::vector<uint64_t>>& pooled, const std::vector<uint64_t>& presence15,
                          const CountsMeta& meta) {
  impl_->genomes = h5::Handle();
  write_pool(impl_->file, impl_->kmax, pooled, presence15, meta);
  h5::close_file_on_disk(impl_->file);
  impl_->tmp.commit();
}

CountsFile read_counts_file(const std::string& path, int load_kmax, bool load_presence, const std::string& genome) {
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
  if (h5::has_attr(f, "genomes")) {
    const std::string names = h5::get_attr_string(f, "genomes");
    size_t start = 0;
    while (start <= names.size()) {
      const size_t nl = names.find('\n', start);
      out.meta.genome_names.push_back(names.substr(start, nl == std::string::npos ? std::string::npos : nl - start));
      if (nl == std::string::npos) break;
      start = nl + 1;
    }
  }
  std::string prefix = "/counts";
  h5::Handle group;  // the genome's group, or the file
  hid_t attrs = f;
  if (!genome.empty()) {
    if (out.meta.genome_names.empty())
      throw InputError(path, fmt::format("counts one genome (it was made with `genemask count --genome`): --genome "
                                         "{} selects a genome of a file counted from a list (`genemask count "
                                         "--genomes LIST`); leave --genome out to use this file's counts",
                                         printable(genome)));
    if (std::find(out.meta.genome_names.begin(), out.meta.genome_names.end(), genome) == out.meta.genome_names.end()) {
      std::string some;
      for (size_t i = 0; i < out.meta.genome_names.size() && i < 12; ++i)
        some += (i ? ", " : "") + out.meta.genome_names[i];
      if (out.meta.genome_names.size() > 12) some += fmt::format(", ... ({} in all)", out.meta.genome_names.size());
      throw InputError(path, fmt::format("has no genome '{}' (its genomes: {})", printable(genome), some));
    }
    group = h5::open_group(f, "/genomes/" + genome);
    attrs = group;
    prefix = "/genomes/" + genome + "/counts";
    out.meta.genome = genome;
  }
  out.totals.assign(1, 0);
  auto t = h5::get_attr_u64s(attrs, "totals");
  if (t.size() != kmax)
    throw InputError(path, fmt::format("attribute totals has {} values for kmax {}: the file is damaged", t.size(), kmax));
  out.totals.insert(out.totals.end(), t.begin(), t.end());
  out.meta.acgt_bases = h5::get_attr_u64(attrs, "acgt_bases");
  out.counts.resize(static_cast<size_t>(out.kmax) + 1);
  for (int k = 1; k <= load_kmax; ++k) {
    const std::string ds = fmt::format("{}/k{}", prefix, k);
    auto c = h5::read_u64(f, ds);
    if (c.size() != (uint64_t{1} << (2 * k)))
      throw InputError(path, fmt::format("{} has {} entries, expected 4^{}", ds, c.size(), k));
    // The counts must add up to the recorded total, which cannot exceed the bases counted: a
    // crafted or damaged count (2^63, say) would otherwise overflow the totals that every
    // probability is divided by.
    uint64_t sum = 0;
    for (size_t i = 0; i < c.size(); ++i)
      if (__builtin_add_overflow(sum, c[i], &sum))
        throw InputError(path, fmt::format("{}: the counts overflow 64 bits at entry {} (count {}): the file "
                                           "is damaged",
                                           ds, i, c[i]));
    const uint64_t total = out.totals[static_cast<size_t>(k)];
    if (sum != total)
      throw InputError(path, fmt::format("{} sums to {}, but attribute totals says {}: the file is damaged", ds,
                                         sum, total));
    if (total > out.meta.acgt_bases)
      throw InputError(path, fmt::format("{} counts {} k-mers in {} A/C/G/T bases (attribute acgt_bases): "
                                         "the file is damaged",
                                         ds, total, out.meta.acgt_bases));
    if (k >= 2) check_against_shorter(path, ds, k, c, out.counts[static_cast<size_t>(k) - 1]);
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
  out.meta.other_bases = h5::get_attr_u64(attrs, "other_bases");
  out.meta.record_names = h5::read_strings(f, "/records/name");
  out.meta.record_lengths = h5::read_u64(f, "/records/length");
  if (!out.meta.genome_names.empty()) out.meta.record_genomes = h5::read_u64(f, "/records/genome");
  return out;
}

}  // namespace genemask::io
