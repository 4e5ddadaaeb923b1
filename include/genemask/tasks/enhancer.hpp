#pragma once
// `genemask dataset enhancer`: windows from genomic-benchmarks interval CSVs
// (DIR/train/<class>.csv[.gz], DIR/test/<class>.csv[.gz]) plus a genome.
#include <string>
#include <vector>

#include "genemask/tasks/task_dataset.hpp"

namespace genemask::dataset {

struct IntervalFile {
  std::string path;
  std::string cls;  // the file's stem: "positive" for train/positive.csv.gz
  char split;       // 't' train, 'e' test
};

/// The class files of a genomic-benchmarks directory, sorted by split then class. Throws
/// io::InputError when DIR/train or DIR/test is missing or holds no *.csv / *.csv.gz.
std::vector<IntervalFile> find_interval_files(const std::string& dir);

/// The label written for a class: "1"/"0" when the classes are exactly positive/negative,
/// else the class name itself.
std::string class_label(const std::string& cls, const std::vector<std::string>& all_classes);

struct EnhancerOptions {
  std::string genome, intervals;  // FASTA; the genomic-benchmarks directory
  std::string chrom_map;          // optional "input<TAB>genome" name aliases
};

/// One example per interval (reverse complemented on '-'), in file order, with the given
/// split in `split` ('t'/'e' per example). Drops "off_chromosome" (end past the chromosome)
/// and "contains_n"; an interval starting past the chromosome end or on a chromosome the
/// genome lacks is an InputError with file:line.
std::vector<Example> build_enhancer(const EnhancerOptions& o, DatasetStats& stats, std::vector<char>& split);

}  // namespace genemask::dataset
