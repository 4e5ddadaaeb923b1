#pragma once
// A list of genomes (`--genomes LIST`): a multi-species corpus given as one TSV, read by
// count, shards and pretrain (layout in docs/formats.md, "Genome list").
//
//   # comments and empty lines are skipped; an optional header row names the columns
//   name    path                      weight   genes
//   human   GRCh38.fa.gz              1.0      gencode.gtf.gz
//   mouse   /data/GRCm39.fa           0.5
//
// name: unique, [A-Za-z0-9._-], at most 64 characters, not starting with '.' or '-' (it
// names HDF5 groups and appears in file names). path: FASTA, gzip or bgzip; relative paths
// are taken from the list's directory. weight (optional): a positive finite number, for
// `--genome-weights list`. genes (optional): the genes file of the gene-boundary shards.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace genemask::io {

struct GenomeEntry {
  std::string name;
  std::string path;       // as resolved (relative to the list's directory)
  std::string path_text;  // as written in the list
  double weight = 0;      // 0 = not given
  std::string genes;      // "" = not given (resolved like path)
  uint64_t line = 0;      // line of the list it was read from
  uint64_t size_bytes = 0;
  uint64_t device = 0, inode = 0;  // the file's identity (stat)
};

struct GenomeList {
  std::string path;  // the list file
  std::vector<GenomeEntry> genomes;
};

/// Reads and checks a list: every refusal is "LIST:LINE: <what> '<value>': <what to do>" for a
/// missing or unreadable file, an empty file, a FIFO or directory, a duplicate name, the same
/// file listed twice (by device and inode, whatever the spelling), a bad name, a weight that
/// is not a positive finite number, a row with too few or too many columns, and a list with
/// no genome.
GenomeList read_genome_list(const std::string& list_path);

/// One line per genome whose FASTA records are those of an earlier genome of the list (the
/// same names and lengths, in order): one genome listed twice under two files (a copy, or
/// .fa beside .fa.gz: read_genome_list finds the same file only), whose counts or samples
/// are then pooled twice. records[i]: genome i's (name, length) pairs, in file order.
std::vector<std::string> same_genome_warnings(const GenomeList& list,
                                              const std::vector<std::vector<std::pair<std::string, uint64_t>>>& records);

/// Why `name` cannot name a genome, or "" when it can.
std::string genome_name_problem(const std::string& name);

}  // namespace genemask::io
