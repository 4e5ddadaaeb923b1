#include "genemask/tasks/enhancer.hpp"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <fmt/format.h>
#include <set>

#include "io/bed.hpp"
#include "io/error.hpp"
#include "io/genome.hpp"
#include "io/task_table.hpp"

namespace genemask::dataset {

namespace fs = std::filesystem;

std::vector<IntervalFile> find_interval_files(const std::string& dir) {
  std::vector<IntervalFile> out;
  for (const char* sub : {"train", "test"})
    if (!fs::is_directory(fs::path(dir) / sub))
      throw io::InputError(dir, fmt::format("no '{}' folder: expected the genomic-benchmarks layout "
                                            "DIR/train/<class>.csv[.gz] and DIR/test/<class>.csv[.gz]",
                                            sub));
  for (const auto& [sub, split] : {std::pair<const char*, char>{"train", 't'}, {"test", 'e'}}) {
    const fs::path d = fs::path(dir) / sub;
    std::vector<IntervalFile> here;
    for (const auto& e : fs::directory_iterator(d)) {
      const std::string name = e.path().filename().string();
      std::string stem;
      if (name.size() > 7 && name.compare(name.size() - 7, 7, ".csv.gz") == 0) {
        stem = name.substr(0, name.size() - 7);
      } else if (name.size() > 4 && name.compare(name.size() - 4, 4, ".csv") == 0) {
        stem = name.substr(0, name.size() - 4);
      } else {
        // A class table under another spelling (x.CSV, x.tsv) would be a class left out
        // without a word: named instead. Other files (README, .DS_Store) are not tables.
        std::string lower = name;
        for (auto& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        for (const char* ext : {".csv", ".csv.gz", ".tsv", ".tsv.gz", ".bed", ".bed.gz"})
          if (lower.size() > std::strlen(ext) && lower.compare(lower.size() - std::strlen(ext), std::string::npos, ext) == 0)
            throw io::InputError(e.path().string(),
                                 fmt::format("looks like a class table, but class files are named <class>.csv or "
                                             "<class>.csv.gz (lower case, comma-separated): rename it, or move it out "
                                             "of {}",
                                             d.string()));
        continue;
      }
      // An empty stray file would be one more class, and change every label (the classes
      // would no longer be exactly negative/positive).
      std::error_code ec;
      if (e.is_regular_file(ec) && fs::file_size(e.path(), ec) == 0 && !ec)
        throw io::InputError(e.path().string(), fmt::format("empty file (0 bytes) among the class files of {}: it "
                                                            "would be a class '{}' of no intervals; remove it",
                                                            d.string(), stem));
      here.push_back({e.path().string(), stem, split});
    }
    if (here.empty()) throw io::InputError(d.string(), "no <class>.csv or <class>.csv.gz files");
    std::sort(here.begin(), here.end(), [](const auto& a, const auto& b) { return a.cls < b.cls; });
    for (size_t i = 1; i < here.size(); ++i)
      if (here[i].cls == here[i - 1].cls)
        throw io::InputError(d.string(), fmt::format("class '{}' has two files: {} and {}", here[i].cls,
                                                     here[i - 1].path, here[i].path));
    out.insert(out.end(), here.begin(), here.end());
  }
  // Both splits need the same classes: a test split without a class scores a task it was
  // not built for, a class only in test was never trained on.
  std::set<std::string> train, test;
  for (const auto& f : out) (f.split == 't' ? train : test).insert(f.cls);
  for (const auto& f : out) {
    const bool in_train = train.count(f.cls) > 0, in_test = test.count(f.cls) > 0;
    if (in_train && in_test) continue;
    const fs::path other = fs::path(dir) / (in_train ? "test" : "train");
    throw io::InputError(other.string(), fmt::format("has no file for class '{}' ({} has one): every class needs "
                                                     "{}.csv[.gz] in both train/ and test/",
                                                     f.cls, f.path, f.cls));
  }
  return out;
}

std::string class_label(const std::string& cls, const std::vector<std::string>& all_classes) {
  std::set<std::string> s(all_classes.begin(), all_classes.end());
  if (s == std::set<std::string>{"negative", "positive"}) return cls == "positive" ? "1" : "0";
  return cls;
}

std::vector<Example> build_enhancer(const EnhancerOptions& o, DatasetStats& stats, std::vector<char>& split) {
  const auto files = find_interval_files(o.intervals);
  std::vector<std::string> classes;
  for (const auto& f : files) classes.push_back(f.cls);
  // The labels are the files' names: each must be a label finetune reads as written, and a
  // task needs two classes.
  for (const auto& f : files)
    if (const std::string why = io::label_problem(class_label(f.cls, classes)); !why.empty())
      throw io::InputError(f.path, fmt::format("its class (the file's name) cannot be a label: {}", why));
  if (std::set<std::string>(classes.begin(), classes.end()).size() < 2)
    throw io::InputError(o.intervals, fmt::format("has one class ('{}') in train/ and test/: a classifier needs two or "
                                                  "more (one <class>.csv[.gz] file per class)",
                                                  classes.front()));

  const auto records = io::genome_records(o.genome);
  std::vector<std::string> names;
  for (const auto& r : records) names.push_back(r.name);
  io::SeqidResolver resolver(names, o.chrom_map.empty() ? std::vector<std::pair<std::string, std::string>>{}
                                                        : io::read_chrom_map(o.chrom_map));

  struct Item {
    io::IntervalRow row;
    size_t file;
  };
  std::vector<Item> items;
  std::vector<std::vector<size_t>> by_record(records.size());
  for (size_t fi = 0; fi < files.size(); ++fi) {
    for (auto& row : io::read_interval_csv(files[fi].path)) {
      const size_t r = resolver.resolve(row.chrom, files[fi].path, row.line, o.genome);
      if (row.start >= records[r].length)
        throw io::InputError(files[fi].path, row.line,
                             fmt::format("interval {}-{} starts beyond the end of '{}' ({} bp): is this the genome "
                                         "assembly the intervals were made for?",
                                         row.start, row.end, records[r].name, records[r].length));
      by_record[r].push_back(items.size());
      items.push_back({std::move(row), fi});
    }
  }

  std::vector<std::string> seqs(items.size());
  std::vector<char> keep(items.size(), 0);
  std::vector<bool> wanted(records.size());
  for (size_t r = 0; r < records.size(); ++r) wanted[r] = !by_record[r].empty();
  io::for_each_wanted_record(o.genome, records, wanted, [&](size_t r, const std::string& seq) {
    for (size_t i : by_record[r]) {
      const auto& row = items[i].row;
      if (row.end > seq.size()) {
        ++stats.dropped["off_chromosome"];
        continue;
      }
      std::string w = seq.substr(row.start, row.end - row.start);
      if (!is_acgt(w)) {
        ++stats.dropped["contains_n"];
        continue;
      }
      seqs[i] = row.strand == '-' ? reverse_complement(w) : std::move(w);
      keep[i] = 1;
    }
  });

  // Every class file must give examples to its split, or the task lacks that class there.
  std::vector<uint64_t> rows_of(files.size(), 0), kept_of(files.size(), 0);
  for (size_t i = 0; i < items.size(); ++i) {
    ++rows_of[items[i].file];
    kept_of[items[i].file] += keep[i] ? 1 : 0;
  }
  for (size_t fi = 0; fi < files.size(); ++fi)
    if (kept_of[fi] == 0)
      throw io::InputError(files[fi].path,
                           rows_of[fi] == 0
                               ? std::string("no intervals after the header: the class would have no examples")
                               : fmt::format("none of its {} intervals gave a sequence (each ran past its chromosome "
                                             "or held N): the class would have no {} examples; is {} the genome "
                                             "they were made for?",
                                             rows_of[fi], files[fi].split == 't' ? "train" : "test", o.genome));

  std::vector<Example> out;
  split.clear();
  for (size_t i = 0; i < items.size(); ++i) {
    if (!keep[i]) continue;
    const auto& it = items[i];
    const auto& f = files[it.file];
    out.push_back({std::move(seqs[i]), class_label(f.cls, classes),
                   fmt::format("{}:{}-{}({})|{}/{}", it.row.chrom, it.row.start, it.row.end, it.row.strand, f.cls,
                               it.row.id),
                   ""});
    split.push_back(f.split);
  }
  return out;
}

}  // namespace genemask::dataset
