#include "io/table_text.hpp"
#include "genemask/tasks/task_dataset.hpp"

#include <algorithm>
#include <filesystem>
#include <fmt/format.h>
#include <map>
#include <stdexcept>
#include <unordered_map>

#include "genemask/tasks/fewshot.hpp"
#include "genemask/rng.hpp"
#include "io/atomic_file.hpp"
#include "io/json.hpp"

namespace genemask::dataset {

namespace fs = std::filesystem;

bool is_acgt(const std::string& bases) {
  for (char c : bases)
    if (c != 'A' && c != 'C' && c != 'G' && c != 'T') return false;
  return true;
}

std::string reverse_complement(const std::string& bases) {
  std::string out(bases.rbegin(), bases.rend());
  for (char& c : out) {
    switch (c) {
      case 'A': c = 'T'; break;
      case 'C': c = 'G'; break;
      case 'G': c = 'C'; break;
      case 'T': c = 'A'; break;
      default: break;  // N and IUPAC codes stay (such windows are dropped anyway)
    }
  }
  return out;
}

std::string kmer_text(const std::string& bases, int k) {
  const size_t kk = static_cast<size_t>(k);
  if (k <= 0 || bases.size() < kk)
    throw std::invalid_argument(fmt::format("sequence of {} bases is shorter than one {}-mer", bases.size(), k));
  std::string out;
  out.reserve((bases.size() - kk + 1) * (kk + 1));
  for (size_t i = 0; i + kk <= bases.size(); ++i) {
    if (i) out.push_back(' ');
    out.append(bases, i, kk);
  }
  return out;
}

namespace {


void write_plain(const std::string& path, const std::vector<const Example*>& rows) {
  io::AtomicFile f(path);
  auto& out = f.stream();
  out << "sequence\tlabel\tid\n";
  for (const Example* e : rows) out << e->sequence << '\t' << io::tsv_field(e->label) << '\t' << io::tsv_field(e->id) << '\n';
  f.commit();
}

// Exactly the published few-shot files: "sequence"<TAB>"label" header, the 6-mer text in
// double quotes, the label bare.
void write_released(const std::string& path, const std::vector<const Example*>& rows) {
  io::AtomicFile f(path);
  auto& out = f.stream();
  out << "\"sequence\"\t\"label\"\n";
  for (const Example* e : rows) out << '"' << kmer_text(e->sequence) << "\"\t" << io::tsv_field(e->label) << '\n';
  f.commit();
}

}  // namespace

nlohmann::json dataset_summary(const DatasetStats& stats, const OutputOptions& o) {
  nlohmann::json classes = nlohmann::json::object();
  for (const auto& [label, n] : stats.per_class) {
    auto get = [&](const std::map<std::string, uint64_t>& m) {
      auto it = m.find(label);
      return it == m.end() ? uint64_t{0} : it->second;
    };
    classes[label] = {{"total", n}, {"train", get(stats.train_per_class)}, {"test", get(stats.test_per_class)}};
  }
  uint64_t dropped_total = 0;
  for (const auto& [reason, n] : stats.dropped) dropped_total += n;
  nlohmann::json j = {{"builder", o.builder},
                      {"out", o.out},
                      {"examples", stats.train + stats.test},
                      {"train", stats.train},
                      {"test", stats.test},
                      {"classes", classes},
                      {"dropped", stats.dropped},
                      {"dropped_total", dropped_total},
                      {"options",
                       {{"seed", o.seed},
                        {"split", stats.given_split ? "given" : "hash"},
                        {"train_fraction", o.train_fraction}, {"shots", o.shots}, {"settings", o.settings}}},
                      {"inputs", o.inputs}};
  return j;
}

std::string describe_counts(const DatasetStats& stats) {
  std::string s;
  for (const auto& [label, n] : stats.per_class) {
    auto tr = stats.train_per_class.count(label) ? stats.train_per_class.at(label) : 0;
    auto te = stats.test_per_class.count(label) ? stats.test_per_class.at(label) : 0;
    s += fmt::format("class {}: {} (train {}, test {})\n", label, n, tr, te);
  }
  for (const auto& [reason, n] : stats.dropped) s += fmt::format("dropped ({}): {}\n", reason, n);
  return s;
}

DatasetStats write_task_dataset(std::vector<Example> examples, const OutputOptions& o, DatasetStats stats,
                                const std::vector<char>& given_split) {
  if (!given_split.empty() && given_split.size() != examples.size())
    throw std::invalid_argument("write_task_dataset: given_split and examples differ in length");
  if (given_split.empty() && !(o.train_fraction > 0.0 && o.train_fraction < 1.0))
    throw std::invalid_argument(fmt::format("--train-fraction must be in (0, 1), got {}", o.train_fraction));
  for (size_t i = 0; i < o.shots.size(); ++i) {
    if (o.shots[i] <= 0) throw std::invalid_argument(fmt::format("--shots values must be positive, got {}", o.shots[i]));
    if (std::find(o.shots.begin(), o.shots.begin() + static_cast<std::ptrdiff_t>(i), o.shots[i]) !=
        o.shots.begin() + static_cast<std::ptrdiff_t>(i))
      throw std::invalid_argument(fmt::format("--shots lists {} twice: give each shot count once", o.shots[i]));
  }

  // Exact duplicates: the first occurrence wins. A repeat under another label is counted
  // apart because it means the input itself is contradictory.
  std::unordered_map<std::string, const std::string*> first_label;
  std::map<std::string, uint64_t> repeats_dropped;  // per class: examples dropped as repeats
  std::vector<const Example*> train, test;
  stats.per_class.clear();
  stats.train_per_class.clear();
  stats.test_per_class.clear();
  stats.given_split = !given_split.empty();
  for (size_t i = 0; i < examples.size(); ++i) {
    const Example& e = examples[i];
    if (e.label.empty()) throw std::invalid_argument(fmt::format("example '{}' has an empty label", e.id));
    if (!is_acgt(e.sequence) || e.sequence.size() < 6)
      throw std::invalid_argument(fmt::format("example '{}' is not an ACGT sequence of at least 6 bases", e.id));
    auto [it, inserted] = first_label.emplace(e.sequence, &e.label);
    if (!inserted) {
      ++stats.dropped[*it->second == e.label ? "duplicate" : "duplicate_other_label"];
      ++repeats_dropped[e.label];
      continue;
    }
    bool is_train;
    if (!given_split.empty()) {
      if (given_split[i] != 't' && given_split[i] != 'e')
        throw std::invalid_argument("write_task_dataset: given_split holds values other than 't' and 'e'");
      is_train = given_split[i] == 't';
    } else {
      is_train = hash_uniform(o.seed, Stream::split, fnv1a(e.split_key.empty() ? e.sequence : e.split_key)) <
                 o.train_fraction;
    }
    (is_train ? train : test).push_back(&e);
    ++stats.per_class[e.label];
    ++(is_train ? stats.train_per_class : stats.test_per_class)[e.label];
  }
  stats.train = train.size();
  stats.test = test.size();
  if (train.empty() || test.empty()) {
    // What was dropped, by reason: all windows off their chromosomes is the options' doing
    // (a window or preset wider than the input allows), not too little input.
    std::string dropped;
    for (const auto& [why, n] : stats.dropped)
      if (n > 0) dropped += fmt::format("{}{} {}", dropped.empty() ? "" : ", ", why, n);
    throw std::runtime_error(fmt::format("the dataset would have {} training and {} test examples: both must be non-empty "
                                         "({}; give more input, change the window or preset, or change "
                                         "--train-fraction)",
                                         train.size(), test.size(),
                                         dropped.empty() ? fmt::format("{} example(s) made, none dropped", examples.size())
                                                         : fmt::format("{} example(s) made; dropped: {}",
                                                                       examples.size(), dropped)));
  }
  if (stats.per_class.size() < 2) {
    const uint64_t other = stats.dropped.count("duplicate_other_label") ? stats.dropped.at("duplicate_other_label") : 0;
    throw std::runtime_error(fmt::format(
        "the dataset would have one class ('{}'){}: a classifier needs two or more", stats.per_class.begin()->first,
        other ? fmt::format(" once {} examples that repeat a sequence of another class are dropped", other) : ""));
  }
  // Every class in both splits: a class never trained on cannot be predicted, and a test set
  // without a class has no ROC AUC (two classes) or scores a task it was not built for.
  for (const auto& [label, n] : stats.per_class)
    for (const auto& [part, per_class] : {std::pair{"training", &stats.train_per_class},
                                          std::pair{"test", &stats.test_per_class}})
      if (!per_class->count(label)) {
        const uint64_t repeats = repeats_dropped.count(label) ? repeats_dropped.at(label) : 0;
        throw std::runtime_error(fmt::format(
            "class '{}' would have no {} examples: none of its {} distinct example(s) fell in that split{}; {}", label,
            part, n,
            repeats ? fmt::format(" ({} more were dropped as repeats of an earlier sequence)", repeats) : "",
            stats.given_split ? "give the class distinct sequences in both train/ and test/"
                              : "give more input or change --train-fraction"));
      }

  // Few-shot subsets first: a class that is too small fails before anything is written.
  std::vector<std::string> labels;
  std::vector<std::string> seqs;
  for (const Example* e : train) {
    labels.push_back(e->label);
    seqs.push_back(e->sequence);
  }
  const auto names = fewshot::class_names(labels);
  std::vector<int> class_of_row;
  for (const auto& l : labels)
    class_of_row.push_back(static_cast<int>(std::find(names.begin(), names.end(), l) - names.begin()));
  std::vector<std::pair<int64_t, std::vector<const Example*>>> subsets;
  for (int64_t n : o.shots) {
    for (const auto& name : names) {
      const uint64_t have = stats.train_per_class[name];
      if (have < static_cast<uint64_t>(n))
        throw std::runtime_error(fmt::format("--shots {}: class '{}' has only {} training examples (need {} per class); "
                                             "use fewer shots or more input",
                                             n, name, have, n));
    }
    auto idx = fewshot::sample_per_class(class_of_row, seqs, static_cast<int>(names.size()), static_cast<size_t>(n),
                                         o.seed, names);
    std::vector<const Example*> rows;
    for (size_t i : idx) rows.push_back(train[i]);
    subsets.emplace_back(n, std::move(rows));
  }

  const fs::path out = o.write_dir.empty() ? fs::path(o.out) : fs::path(o.write_dir);
  fs::create_directories(out / "fewshot");
  write_plain((out / "train.tsv").string(), train);
  write_plain((out / "test.tsv").string(), test);
  write_released((out / "fewshot" / "train.tsv").string(), train);
  write_released((out / "fewshot" / "test.tsv").string(), test);
  for (const auto& [n, rows] : subsets) {
    const fs::path dir = out / "fewshot" / std::to_string(n);
    fs::create_directories(dir);
    write_released((dir / "train.tsv").string(), rows);
  }
  io::AtomicFile f((out / "summary.json").string());
  f.stream() << io::json_text(io::with_unterminated_inputs(dataset_summary(stats, o)), 2) << '\n';
  f.commit();
  return stats;
}

}  // namespace genemask::dataset
