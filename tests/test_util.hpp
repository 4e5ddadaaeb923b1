#pragma once
// Helpers for tests: temporary directories, files in plain / gzip / BGZF form,
// random genomes with the features real ones have (soft-masking, N gaps, IUPAC codes).
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace genemask::test {

class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

void write_file(const std::string& path, const std::string& content);
std::string read_file(const std::string& path);
/// gzip with zlib; `members` > 1 splits the text into that many gzip members.
void write_gzip(const std::string& path, const std::string& content, int members = 1);
/// BGZF (bgzip's format) with at most block_bytes of text per block, plus the EOF block.
void write_bgzf(const std::string& path, const std::string& content, size_t block_bytes = 65280);

struct Genome {
  std::vector<std::pair<std::string, std::string>> records;  // name, sequence as written (mixed case)
  std::string fasta;                                          // the FASTA text
  /// Upper-cased sequences, the reference view.
  std::vector<std::string> upper() const;
};

struct GenomeSpec {
  int records = 3;
  size_t min_len = 1, max_len = 3000;
  int line_width = 60;        // 0 = random per record (1..120), -1 = one line per record
  bool crlf = false;
  bool lowercase = true;      // soft-masked stretches
  bool gaps = true;           // N runs and IUPAC codes
  double gap_rate = 0.01;     // per base: an N run starts
  double iupac_rate = 0.01;   // per base: an IUPAC code
  bool blank_lines = false;
};

Genome random_genome(std::mt19937_64& rng, const GenomeSpec& spec);

/// While alive, this process cannot open another file: RLIMIT_NOFILE is lowered to the
/// lowest free descriptor, so the next open() fails with EMFILE (as under `ulimit -n`).
class NoMoreFiles {
 public:
  NoMoreFiles();
  ~NoMoreFiles();
  NoMoreFiles(const NoMoreFiles&) = delete;
  NoMoreFiles& operator=(const NoMoreFiles&) = delete;
  uint64_t limit() const { return limit_; }

 private:
  uint64_t old_soft_ = 0, limit_ = 0;
};

/// What is wrong with a run's progress fractions: empty when there are some, each in [0, 1],
/// none below the one before, and the last within 1e-9 of 1.
std::string progress_problem(const std::vector<double>& seen);

/// The message of the io::InputError that f throws, or "no error".
std::string error_of(const std::function<void()>& f);

}  // namespace genemask::test
