#include "io/genome.hpp"

#include <unordered_map>

#include <algorithm>
#include <fmt/format.h>
#include <sys/stat.h>

#include "io/annotation.hpp"
#include "io/bed.hpp"
#include "io/error.hpp"
#include "io/fai.hpp"
#include "io/text_source.hpp"

namespace genemask::io {

namespace {
// An index is trusted only for a plain FASTA it is not older than: a .fai left behind after
// the FASTA was replaced (or one meant for a bgzip file's .gzi pair) would give wrong lengths.
bool fai_usable(const std::string& fasta) {
  struct stat fa {}, fai {};
  if (::stat(fasta.c_str(), &fa) != 0 || ::stat((fasta + ".fai").c_str(), &fai) != 0) return false;
  if (fai.st_mtime < fa.st_mtime) return false;
  return probe_file(fasta).compression == Compression::none;
}
}  // namespace

std::vector<FastaRecordSummary> genome_records(const std::string& fasta) {
  if (fai_usable(fasta)) {
    if (auto idx = FaiIndex::load_if_present(fasta); idx && !idx->entries().empty()) {
      std::vector<FastaRecordSummary> out;
      out.reserve(idx->entries().size());
      for (const auto& e : idx->entries()) out.push_back({e.name, e.length});
      return out;
    }
  }
  return read_fasta(fasta, FastaVisitor{});
}

void for_each_chromosome(const std::string& fasta, const std::function<bool(const std::string&)>& wanted,
                         const std::function<void(const std::string& name, const std::string& seq)>& fn) {
  std::string name, seq;
  bool keep = false;
  FastaVisitor v;
  v.on_record = [&](const std::string& n) {
    name = n;
    seq.clear();
    keep = wanted(n);
  };
  v.on_bases = [&](std::string_view b) {
    if (keep) seq.append(b.data(), b.size());
  };
  v.on_record_end = [&]() {
    if (keep) fn(name, seq);
    seq.clear();
    seq.shrink_to_fit();  // one chromosome in memory at a time
    keep = false;
  };
  read_fasta(fasta, v);
}

SeqidResolver::SeqidResolver(std::vector<std::string> genome_names,
                             std::vector<std::pair<std::string, std::string>> aliases)
    : names_(std::move(genome_names)), aliases_(std::move(aliases)) {}

size_t SeqidResolver::resolve(const std::string& name, const std::string& file, uint64_t line,
                              const std::string& genome) const {
  for (const auto& [n, i] : cache_)
    if (n == name) {
      if (i >= 0) return static_cast<size_t>(i);
      break;
    }
  // The documented order: the exact name, then the user's --chrom-map alias (which must name a
  // record: an alias is what the user says the name means), then the chr prefix added or
  // removed, then a RefSeq accession's chromosome.
  auto records = [&] {
    std::string some;
    for (size_t i = 0; i < names_.size() && i < 8; ++i) some += (i ? ", " : "") + names_[i];
    if (names_.size() > 8) some += fmt::format(", ... ({} in all)", names_.size());
    return some;
  };
  int idx = -1;
  if (auto exact = std::find(names_.begin(), names_.end(), name); exact != names_.end())
    idx = static_cast<int>(exact - names_.begin());
  if (idx < 0)
    for (const auto& [from, to] : aliases_)
      if (from == name) {
        auto it = std::find(names_.begin(), names_.end(), to);
        if (it == names_.end())
          throw InputError(file, line,
                           fmt::format("sequence '{}' is mapped by --chrom-map to '{}', which is not a record of the "
                                       "genome {} (its records: {}); correct the map",
                                       name, to, genome, records()));
        idx = static_cast<int>(it - names_.begin());
        break;
      }
  if (idx < 0) idx = match_seqid(name, names_);  // exact (none here), then the chr prefix
  if (idx < 0)
    if (const std::string ucsc = refseq_to_ucsc(name); !ucsc.empty()) {
      idx = match_seqid(ucsc, names_);
      // A RefSeq accession's version is its assembly (NC_000001.10 is GRCh37's chr1, .11
      // GRCh38's), and its number the organism: positions of two assemblies or organisms cut
      // from one genome would be at wrong places without a word.
      const std::string number = name.substr(0, name.find('.')), organism = refseq_organism(name);
      for (const auto& [key, seen] : accessions_) {
        const bool same_number = key == number;
        if ((same_number && seen.name != name) || refseq_organism(seen.name) != organism)
          throw InputError(file, line,
                           fmt::format("sequences '{}' and '{}' ({}:{}) are RefSeq accessions of {}: their "
                                       "positions would all be cut from the one genome {}; give coordinates of one "
                                       "assembly, the genome's",
                                       name, seen.name, seen.file, seen.line,
                                       same_number ? "two assemblies (two versions of one chromosome)"
                                                   : "two organisms",
                                       genome));
      }
      accessions_.emplace(number, Accession{name, file, line});
    }
  if (cache_.size() < 4096) cache_.emplace_back(name, idx);
  if (idx >= 0) return static_cast<size_t>(idx);
  const std::string some = records();
  throw InputError(file, line,
                   fmt::format("sequence '{}' is not in the genome {} (its records: {}); use the genome the "
                               "coordinates refer to, or map names with --chrom-map",
                               name, genome, some));
}

void for_each_wanted_record(const std::string& fasta, const std::vector<FastaRecordSummary>& records,
                            const std::vector<bool>& wanted,
                            const std::function<void(size_t record, const std::string& seq)>& fn) {
  std::unordered_map<std::string, size_t> index;
  for (size_t r = 0; r < records.size(); ++r)
    if (r < wanted.size() && wanted[r]) index.emplace(records[r].name, r);
  const std::string stale = fmt::format("; is {}.fai the index of another FASTA? Remove it (or index again with "
                                        "samtools faidx) and run again",
                                        fasta);
  for_each_chromosome(
      fasta, [&](const std::string& n) { return index.count(n) > 0; },
      [&](const std::string& name, const std::string& seq) {
        const size_t r = index.at(name);
        if (seq.size() != records[r].length)
          throw InputError(fasta, fmt::format("record '{}' has {} bases, but the genome's index says {}{}", name,
                                              seq.size(), records[r].length, stale));
        index.erase(name);
        fn(r, seq);
      });
  if (!index.empty())
    throw InputError(fasta, fmt::format("has no record '{}', which the genome's index lists{}", index.begin()->first,
                                        stale));
}

}  // namespace genemask::io
