// genemask overlap: the paper's memorisation check (Table "data overlap"): per test
// sequence, the fraction of its k-mers found in the task's training set and/or in the
// pretraining corpus (counts.h5 /presence/k15); median and 95th percentile; optional
// filtering of the test set. Exact sets (docs/analyses.md has the definitions).
#include <cerrno>
#include <cmath>
#include <filesystem>
#include <fmt/format.h>
#include <memory>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>

#include "io/table_text.hpp"
#include "common.hpp"
#include "genemask/kmer/overlap.hpp"
#include "io/atomic_file.hpp"
#include "io/counts_file.hpp"
#include "io/error.hpp"
#include "io/parse_number.hpp"
#include "io/task_table.hpp"
#include "io/json.hpp"

namespace genemask::cli {
namespace {

struct OverlapArgs {
  std::string test, counts, out, task, drop_above, drop_source, filtered;
  std::vector<std::string> train;
  int k = 15;
  bool both_strands = false;
  bool force = false;
};

constexpr const char* kHelp = R"(Definitions (docs/analyses.md):
  A k-mer position of a sequence is a window of k bases without N (or another non-ACGT
  base). fraction = (positions whose k-mer is in the reference set) / (all positions);
  repeated k-mers count at every position. A sequence with no position has no fraction
  (empty field, counted as "no_kmers" and left out of the statistics).
  Training set: every k-mer of every --train sequence (exact, sorted set).
  Corpus: the 15-mers of the pretraining genome, counts.h5 /presence/k15 from
  `genemask count --presence15` (forward strand of the genome; --k must be 15).
  Forward strand only unless --both-strands (then a k-mer or its reverse complement).
  Percentiles: numpy's default (linear interpolation, type 7) over the defined fractions.
Outputs in OUT: overlap.tsv (line label kmers fraction_train fraction_corpus), summary.json,
overlap.md (the paper's table: median (95th percentile) per source).
--drop-above X (a fraction, or pNN = that percentile of the source's fractions) with
--filtered FILE writes the test table without the sequences whose fraction is above X
(strictly; sequences without k-mers are kept): the input's lines copied unchanged, so the
released 6-mer layout stays as it was.)";

/// "" for no value, else the shortest text that reads back as the same double.
std::string num(double v) { return std::isnan(v) ? "" : fmt::format("{}", v); }

nlohmann::ordered_json stats_json(const std::vector<double>& f) {
  double sum = 0;
  uint64_t n = 0;
  for (double v : f)
    if (!std::isnan(v)) sum += v, ++n;
  auto val = [](double v) { return std::isnan(v) ? nlohmann::ordered_json() : nlohmann::ordered_json(v); };
  return {{"n", n},
          {"median", val(overlap::percentile(f, 50))},
          {"p95", val(overlap::percentile(f, 95))},
          {"mean", val(n ? sum / static_cast<double>(n) : std::nan(""))},
          {"min", val(overlap::percentile(f, 0))},
          {"max", val(overlap::percentile(f, 100))}};
}

std::string cell(const std::vector<double>& f, bool present) {
  if (!present) return "-";
  const double m = overlap::percentile(f, 50), p = overlap::percentile(f, 95);
  if (std::isnan(m)) return "n/a";
  return fmt::format("{:.3f} ({:.3f})", m, p);
}

/// The threshold of --drop-above: a number, or "pNN" (a percentile of `f`).
double threshold(const std::string& text, const std::vector<double>& f) {
  if (!text.empty() && (text[0] == 'p' || text[0] == 'P')) {
    if (const auto q = io::parse_decimal_double(std::string_view(text).substr(1)); q && *q >= 0 && *q <= 100) {
      if (f.empty()) return 0;  // the form checked before the fractions exist
      const double x = overlap::percentile(f, *q);
      if (std::isnan(x))
        throw std::runtime_error(fmt::format("--drop-above {}: no test row has a fraction to take the percentile of "
                                             "(every row is shorter than k); give a fraction instead",
                                             text));
      return x;
    }
  } else if (const auto x = io::parse_decimal_double(text)) {
    // Finite (a NaN threshold would drop nothing), and a fraction: 50 for the paper's 50% drops
    // nothing, a negative value every row, each without a word.
    if (*x < 0 || *x > 1)
      throw std::invalid_argument(fmt::format("--drop-above {} is not a fraction in [0, 1] (the fractions are of "
                                              "k-mers found, 0 to 1): for 50%, give 0.5; for a percentile, p50",
                                              text));
    return *x;
  }
  throw std::invalid_argument(
      fmt::format("--drop-above '{}' must be a fraction (e.g. 0.5) or a percentile pNN (e.g. p95)", text));
}

/// `path` without the given 1-based lines `drop` (bytes of other lines unchanged), written
/// whole to a temporary of `out`: finished, not yet committed (it is published after --out).
std::unique_ptr<io::AtomicFile> copy_without_lines(const std::string& path, const std::set<uint64_t>& drop,
                                                   const std::string& out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw io::InputError(path, "cannot be read: " + io::open_error_reason(errno));
  auto f = std::make_unique<io::AtomicFile>(out);
  std::string line;
  uint64_t n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (drop.count(n)) continue;
    f->stream() << line;
    if (!in.eof()) f->stream() << '\n';  // keep a missing final newline missing
  }
  f->finish();
  return f;
}

void run_overlap(const OverlapArgs& a, const Context& ctx) {
  if (ctx.size > 1) {
    refuse_multi_rank(ctx, "overlap is a single-process command: run it without mpirun");
  }
  const auto t0 = std::chrono::steady_clock::now();
  if (a.train.empty() && a.counts.empty())
    throw std::invalid_argument("give --train (the task's training table) and/or --counts (counts.h5 with /presence/k15)");
  if (a.k < 1 || a.k > 31) throw std::invalid_argument(fmt::format("--k {} must be in 1..31", a.k));
  if (!a.counts.empty() && a.k != 15)
    throw std::invalid_argument(fmt::format("--counts holds 15-mers; --k is {} (use --k 15 or leave out --counts)", a.k));
  if (a.drop_above.empty() != a.filtered.empty())
    throw std::invalid_argument("--drop-above and --filtered go together");
  if (!a.drop_source.empty() && a.drop_above.empty())  // it did nothing, without a word
    throw std::invalid_argument("--drop-source chooses the fraction --drop-above filters by: give --drop-above and "
                                "--filtered too, or leave --drop-source out");
  if (!a.drop_above.empty()) threshold(a.drop_above, {});  // its form, before any work
  std::string source = a.drop_source;
  if (source.empty()) source = a.train.empty() ? "corpus" : "train";
  if (!a.drop_above.empty() && ((source == "train" && a.train.empty()) || (source == "corpus" && a.counts.empty()) ||
                                (source == "max" && (a.train.empty() || a.counts.empty()))))
    throw std::invalid_argument(fmt::format("--drop-source {} needs {}", source,
                                            source == "max" ? "both --train and --counts" : source == "train" ? "--train" : "--counts"));
  // A training table given twice (by any path) would count its rows twice in summary.json.
  for (size_t i = 0; i < a.train.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (std::filesystem::equivalent(a.train[i], a.train[j]))
        throw std::invalid_argument(fmt::format("--train {} is the same file as --train {}: give each training table once",
                                                a.train[i], a.train[j]));
  io::OutputSet out(a.out, {"overlap", "--out", a.force, "summary.json"});  // published when complete
  const std::string dir = out.staging();
  if (!a.filtered.empty()) check_writable(a.filtered);

  const auto test = io::read_task_table(a.test);
  overlap::KmerSet train_set(a.k);
  uint64_t train_rows = 0;
  for (const auto& path : a.train)
    for (const auto& r : io::read_task_table(path)) {
      train_set.add_sequence(r.sequence);
      ++train_rows;
    }
  train_set.finish();
  io::CountsFile counts;
  if (!a.counts.empty()) counts = io::read_counts_file(a.counts, 1, true);
  const overlap::PresenceBits corpus{&counts.presence15};
  if (!a.counts.empty() && counts.presence15.size() != num_kmers(15) / 64)
    throw io::InputError(a.counts, fmt::format("/presence/k15 has {} words, expected {}", counts.presence15.size(),
                                               num_kmers(15) / 64));

  const size_t n = test.size();
  std::vector<uint64_t> kmers(n);
  std::vector<double> f_train(n, std::nan("")), f_corpus(n, std::nan(""));
  uint64_t no_kmers = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!a.train.empty()) {
      const auto r = overlap::sequence_overlap(test[i].sequence, a.k, a.both_strands, train_set);
      kmers[i] = r.kmers;
      f_train[i] = r.fraction();
    }
    if (!a.counts.empty()) {
      const auto r = overlap::sequence_overlap(test[i].sequence, a.k, a.both_strands, corpus);
      kmers[i] = r.kmers;
      f_corpus[i] = r.fraction();
    }
    no_kmers += kmers[i] == 0;
  }

  // Filtering (before any output, so a bad threshold leaves nothing behind).
  nlohmann::ordered_json filter = nullptr;
  std::set<uint64_t> dropped_lines;
  size_t dropped = 0;
  std::unique_ptr<io::AtomicFile> filtered;  // written now, published once --out is
  if (!a.drop_above.empty()) {
    std::vector<double> f(n);
    for (size_t i = 0; i < n; ++i)
      f[i] = source == "train" ? f_train[i] : source == "corpus" ? f_corpus[i] : std::fmax(f_train[i], f_corpus[i]);
    const double x = threshold(a.drop_above, f);
    for (size_t i = 0; i < n; ++i)
      if (!std::isnan(f[i]) && f[i] > x) {
        ++dropped;
        for (uint64_t l = test[i].line; l <= test[i].last_line; ++l) dropped_lines.insert(l);  // a record's every line
      }
    filtered = copy_without_lines(a.test, dropped_lines, a.filtered);
    filter = {{"source", source}, {"drop_above", a.drop_above}, {"threshold", x},
              {"dropped", dropped}, {"kept", n - dropped}, {"filtered", a.filtered}};
  }

  {
    io::AtomicFile f(dir + "/overlap.tsv");
    auto& o = f.stream();
    o << "line\tlabel\tkmers\tfraction_train\tfraction_corpus\n";
    for (size_t i = 0; i < n; ++i)
      o << test[i].line << '\t' << io::tsv_field(test[i].label) << '\t' << kmers[i] << '\t' << num(f_train[i]) << '\t'
        << num(f_corpus[i]) << '\n';
    f.commit();
  }
  std::string task = a.task;
  if (task.empty()) {
    const std::filesystem::path p(a.test);
    task = p.has_parent_path() && p.parent_path().has_filename() ? p.parent_path().filename().string() + "/" + p.filename().string()
                                                                  : p.filename().string();
  }
  {
    io::AtomicFile f(dir + "/overlap.md");
    f.stream() << "| Task | Training data | Pretraining data |\n|---|---|---|\n"
               << "| " << task << " | " << cell(f_train, !a.train.empty()) << " | " << cell(f_corpus, !a.counts.empty())
               << " |\n\nMedian overlap ratio of the test sequences' " << a.k << "-mers"
               << (a.both_strands ? " (either strand)" : "") << ", 95th percentile in brackets.\n";
    f.commit();
  }
  nlohmann::ordered_json sources = nlohmann::ordered_json::object();
  if (!a.train.empty()) {
    sources["train"] = stats_json(f_train);
    sources["train"]["files"] = a.train;
    sources["train"]["rows"] = train_rows;
    sources["train"]["distinct_kmers"] = train_set.size();
  }
  if (!a.counts.empty()) {
    sources["corpus"] = stats_json(f_corpus);
    sources["corpus"]["counts"] = a.counts;
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  nlohmann::ordered_json j = {{"task", task},         {"test", a.test},       {"n_test", n},
                              {"no_kmers", no_kmers}, {"k", a.k},             {"both_strands", a.both_strands},
                              {"percentile_method", "linear (numpy default)"}, {"sources", sources},
                              {"filter", filter},     {"seconds", seconds},   {"command_line", ctx.command_line}};
  {
    io::AtomicFile f(dir + "/summary.json");
    f.stream() << io::json_text(io::with_unterminated_inputs(j), 2) << '\n';
    f.commit();
  }
  out.publish();
  if (filtered) filtered->commit();  // last: a failure before leaves no filtered table of a run that failed
  nlohmann::json line = {{"command", "overlap"}, {"task", task}, {"n_test", n}, {"no_kmers", no_kmers}, {"k", a.k},
                         {"out", a.out}, {"seconds", seconds}};
  if (!a.train.empty()) line["train_median"] = sources["train"]["median"], line["train_p95"] = sources["train"]["p95"];
  if (!a.counts.empty()) line["corpus_median"] = sources["corpus"]["median"], line["corpus_p95"] = sources["corpus"]["p95"];
  if (!filter.is_null()) line["dropped"] = dropped, line["filtered"] = a.filtered;
  print_summary(ctx, line);
}

}  // namespace

void register_overlap(CLI::App& app, Context& ctx) {
  auto a = std::make_shared<OverlapArgs>();
  auto* sub = app.add_subcommand("overlap", "Memorisation check: test sequences' k-mers found in the training set / corpus");
  sub->footer(kHelp);
  sub->add_option("--test", a->test, "test table (released 6-mer TSV or sequence,label CSV/TSV)")
      ->required()
      ->check(existing_file());
  sub->add_option("--train", a->train, "training table(s) of the task (repeat for several)")->check(existing_file());
  sub->add_option("--counts", a->counts, "counts.h5 of the pretraining genome with /presence/k15")
      ->check(existing_file());
  sub->add_option("--out", a->out, "output directory: overlap.tsv, summary.json, overlap.md")->required();
  sub->add_option("--k", a->k, "k-mer length (15 with --counts)")->capture_default_str();
  sub->add_flag("--both-strands", a->both_strands, "a k-mer also counts when its reverse complement is in the set");
  sub->add_option("--task", a->task, "task name for the table (default: the test file's folder/name)");
  sub->add_option("--drop-above", a->drop_above, "drop test sequences with a fraction above this (0.5, or p95)");
  sub->add_option("--drop-source", a->drop_source, "fraction used by --drop-above: train, corpus or max (default: train if given)")
      ->check(CLI::IsMember({"train", "corpus", "max"}));
  sub->add_option("--filtered", a->filtered, "the filtered test table (same layout as --test)");
  sub->add_flag("--force", a->force,
                "replace an earlier output of this command in --out (a directory genemask wrote: .genemask.json; "
                "nothing genemask did not write is removed), and an existing --filtered table (a filtered table "
                "looks like any task table, so it always needs --force)");
  sub->callback([a, &ctx] {
    ctx.inputs = {{"--test", a->test}, {"--counts", a->counts}};
    for (const auto& t : a->train) ctx.inputs.push_back({"--train", t});
    ctx.outputs = {{"--out", a->out, io::OutputKind::directory}, 
                   file_output("--filtered", a->filtered, {}, a->force)};
    ctx.run = [a, &ctx] { run_overlap(*a, ctx); };
  });
}

}  // namespace genemask::cli
