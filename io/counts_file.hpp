#pragma once
// counts.h5: the output of `genemask count` (layout in docs/formats.md).
//   /counts/k<K>    uint64 [4^K], index = 2-bit code (A=0 C=1 G=2 T=3, first base most significant)
//                   attributes: k, total (sum of the dataset)
//   /presence/k15   uint64 [4^15/64], bit i of word i/64 set when 15-mer i occurs (optional)
//   /records/name, /records/length   the FASTA records and their lengths (sequence characters)
//   root attributes: format="genemask-counts", format_version, kmax, totals (per k),
//   acgt_bases, other_bases, source_files, source_sizes, command_line, genemask_version
// A file counted from a genome list (`count --genomes`) holds the pooled counts (the sum over
// the genomes) where a one-genome file holds its counts, so every reader sees the pool, and:
//   /genomes/<NAME>/counts/k<K>   each genome's counts (attributes k, total)
//      group attributes: index, source_file, source_size, acgt_bases, other_bases, totals
//   /records/genome               the genome index of each record (records of all genomes)
//   root attribute genomes        the genome names in list order, one per line
#include <cstdint>
#include <string>
#include <vector>

namespace genemask::io {

inline constexpr const char* kCountsFormat = "genemask-counts";
inline constexpr uint64_t kCountsFormatVersion = 1;
inline constexpr uint64_t kMaxCountsK = 15;  // the largest kmax a counts file may record (4^15 counts)

struct CountsMeta {
  std::string command_line;
  std::string genemask_version;
  std::vector<std::string> source_files;
  std::vector<uint64_t> source_sizes;
  std::vector<std::string> record_names;
  std::vector<uint64_t> record_lengths;
  uint64_t acgt_bases = 0;
  uint64_t other_bases = 0;
  std::vector<std::string> genome_names;  // a genome list's names (empty for one --genome)
  std::vector<uint64_t> record_genomes;   // genome index per record (with genome_names)
  std::string genome;                     // the genome read (read_counts_file's `genome`), "" = pool
};

/// One genome of a genome list, for CountsWriter.
struct GenomeCountsMeta {
  std::string name, source_file;
  uint64_t index = 0, source_size = 0, acgt_bases = 0, other_bases = 0, records = 0;
};

/// The counts file of a genome list, written genome by genome (one genome's tables in memory
/// at a time) to a temporary file on disk, renamed onto `path` by finish().
class CountsWriter {
 public:
  /// genomes and presence15 size the file, for the free-space check made before writing.
  CountsWriter(const std::string& path, int kmax, uint64_t genomes, bool presence15);
  ~CountsWriter();
  CountsWriter(const CountsWriter&) = delete;
  CountsWriter& operator=(const CountsWriter&) = delete;
  void add_genome(const GenomeCountsMeta& g, const std::vector<std::vector<uint64_t>>& counts);
  /// The pooled counts and the file's attributes (meta: every genome's records, with
  /// record_genomes and genome_names); then the file appears under its name.
  void finish(const std::vector<std::vector<uint64_t>>& pooled, const std::vector<uint64_t>& presence15,
              const CountsMeta& meta);

 private:
  struct Impl;
  Impl* impl_;
};

/// Bytes of the k-mer tables of one counts table set, k = 1..kmax.
uint64_t counts_table_bytes(int kmax);



struct CountsFile {
  int kmax = 0;
  std::vector<std::vector<uint64_t>> counts;  // counts[k], k = 1..kmax loaded (others empty)
  std::vector<uint64_t> totals;               // totals[k], all k = 1..kmax
  std::vector<uint64_t> presence15;           // loaded only on request
  bool has_presence15 = false;
  CountsMeta meta;
};

/// Writes atomically (temporary name, then rename).
void write_counts_file(const std::string& path, int kmax, const std::vector<std::vector<uint64_t>>& counts,
                       const std::vector<uint64_t>& presence15, const CountsMeta& meta);

/// Reads and checks the format; loads counts for k = 1..load_kmax (0 = all): the pooled counts,
/// or with `genome` the counts of that genome of a genome list's file.
/// Throws InputError when the file is not a counts file, lacks the k needed, or has no such
/// genome (naming the ones it has).
CountsFile read_counts_file(const std::string& path, int load_kmax = 0, bool load_presence = false,
                            const std::string& genome = {});

}  // namespace genemask::io
