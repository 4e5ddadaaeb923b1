#pragma once
// What every `genemask dataset` builder produces (Torch-free): labelled windows, a split by
// seed, and the two output layouts users feed to `finetune`/`sweep`.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace genemask::dataset {

struct Example {
  std::string sequence;  // bases, upper case, ACGT only
  std::string label;     // class label as written to the tables ("0", "1", "2", ...)
  std::string id;        // provenance, e.g. "chr1:1000-1070(+)" or the input's id
};

struct DatasetStats {
  std::map<std::string, uint64_t> per_class;        // examples kept, by label
  std::map<std::string, uint64_t> dropped;          // reason -> count ("off_chromosome", "contains_n", "duplicate", ...)
  uint64_t train = 0, test = 0;
};

struct OutputOptions {
  std::string out;               // directory
  double train_fraction = 0.7;   // used when examples carry no given split
  uint64_t seed = 42;
  std::vector<int64_t> shots;    // also write OUT/fewshot/<n>/train.tsv (n per class, sampled with seed)
};

/// Drops exact duplicate sequences (first kept, counted as "duplicate"), splits by a hash
/// of (seed, sequence) (stable: adding examples never moves others between splits) unless
/// `given_split` (same size as examples: 't' train, 'e' test) is supplied, then writes,
/// each file atomically:
///   OUT/train.tsv, OUT/test.tsv         plain: header "sequence<TAB>label<TAB>id"
///   OUT/fewshot/train.tsv, OUT/fewshot/test.tsv   released layout: header "sequence" "label",
///                                       fields double-quoted, sequence as space-separated 6-mers
///   OUT/fewshot/<n>/train.tsv            per --shots n (released layout), n per class
///   OUT/summary.json                     counts per class and split, drops by reason, options
/// Returns the statistics (merged with `stats` that the builder filled in).
DatasetStats write_task_dataset(std::vector<Example> examples, const OutputOptions& o, DatasetStats stats,
                                const std::vector<char>& given_split = {});

}  // namespace genemask::dataset
