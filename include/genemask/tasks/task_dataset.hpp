#pragma once
// What every `genemask dataset` builder produces (Torch-free): labelled windows, a split by
// seed, and the two output layouts users feed to `finetune`/`sweep`.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace genemask::dataset {

struct Example {
  std::string sequence;  // bases, upper case, ACGT only
  std::string label;     // class label as written to the tables ("0", "1", "2", ...)
  std::string id;        // provenance, e.g. "chr1:1000-1070(+)" or the input's id
  // Hashed for the train/test split in place of the sequence: an example derived from another
  // (a promoter's negative, made from its positive) goes to that one's split. Empty: the
  // sequence.
  std::string split_key;
};

struct DatasetStats {
  std::map<std::string, uint64_t> per_class;        // examples kept, by label
  std::map<std::string, uint64_t> dropped;          // reason -> count ("off_chromosome", "contains_n", "duplicate", ...)
  std::map<std::string, uint64_t> train_per_class, test_per_class;  // filled by write_task_dataset
  uint64_t train = 0, test = 0;
  bool given_split = false;  // the input's own train/test split was kept
};

struct OutputOptions {
  std::string out;               // directory
  std::string write_dir;         // where the files are written (a staging directory); empty: out
  bool force = false;            // the CLI's --force: replace an earlier build in out
  double train_fraction = 0.7;   // used when examples carry no given split
  uint64_t seed = 42;
  std::vector<int64_t> shots;    // also write OUT/fewshot/<n>/train.tsv (n per class, sampled with seed)
  // Provenance for summary.json (optional): the builder ("promoter", "splice", ...), its
  // input files (role -> path) and its settings (name -> value as text).
  std::string builder;
  std::map<std::string, std::string> inputs;
  std::map<std::string, std::string> settings;
};

/// Drops exact duplicate sequences (first kept, counted as "duplicate"), splits by a hash
/// of (seed, sequence) (stable: adding examples never moves others between splits) unless
/// `given_split` (same size as examples: 't' train, 'e' test) is supplied, then writes,
/// each file atomically:
///   OUT/train.tsv, OUT/test.tsv         plain: header "sequence<TAB>label<TAB>id"
///   OUT/fewshot/train.tsv, OUT/fewshot/test.tsv   released layout (as the published few-shot
///                                       files): header "sequence"<TAB>"label", the sequence
///                                       double-quoted as space-separated 6-mers, the label bare
///   OUT/fewshot/<n>/train.tsv            per --shots n (released layout), n per class
///   OUT/summary.json                     counts per class and split, drops by reason, options
/// OUT/fewshot is a `genemask sweep` task directory (DIR/<shots>/train.tsv, DIR/test.tsv).
/// Throws std::runtime_error when a class has fewer than n training examples for a --shots n.
/// Returns the statistics (merged with `stats` that the builder filled in).
DatasetStats write_task_dataset(std::vector<Example> examples, const OutputOptions& o, DatasetStats stats,
                                const std::vector<char>& given_split = {});

/// What OUT/summary.json holds: counts per class and split, drops by reason, options, inputs.
nlohmann::json dataset_summary(const DatasetStats& stats, const OutputOptions& o);

/// "label: total (train N, test M)" lines, one per class, then the drops by reason: what the
/// CLI prints on stderr.
std::string describe_counts(const DatasetStats& stats);

/// The released few-shot row text of a sequence: overlapping 6-mers separated by spaces.
std::string kmer_text(const std::string& bases, int k = 6);

/// The DNA reverse complement (ACGTN; other letters are kept as they are).
std::string reverse_complement(const std::string& bases);

/// True when every base is A, C, G or T.
bool is_acgt(const std::string& bases);

}  // namespace genemask::dataset
