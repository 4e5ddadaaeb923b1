#pragma once
// The result of a few-shot run, and results.jsonl, the sweep's record of them: one home for
// both, used by `finetune` (metrics.json), the sweep (which writes results.jsonl) and the
// report (which reads it). Layout in docs/formats.md.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "genemask/eval/metrics.hpp"

namespace genemask::results {

/// "<model>|<task>|<shots>|<seed>": a job's key, the same for every run and rank count.
std::string job_key(const std::string& model, const std::string& task, int64_t shots, uint64_t seed);

/// What one fine-tuning run reports: its test metrics (test.n = test examples) and how many
/// training examples it had.
struct RunMetrics {
  metrics::Classification test;
  uint64_t n_train = 0;
  std::string precision;  // the precision the job ran in ("fp32", "bf16"); empty in records of before
  // Test sequences that are also training sequences; -1: not measured (records of before, a
  // simulated sweep's pseudo-metrics), and then not written.
  int64_t test_in_train = -1;
  // Test sequences that repeat an earlier test sequence (the same tokens, under any label):
  // each repeat is scored again, as one more test sequence. -1: not measured (as above).
  int64_t test_duplicates = -1;
  // Training and test sequences cut to the model's positions, and those whose 6-mers are all
  // [UNK] (the model sees nothing of their bases). -1: not measured (as above).
  int64_t truncated = -1, unknown_only = -1;
  // The job's tables (training, test: 0, 1 or 2) whose last line has no line end, so that
  // either may have been cut short (a download or copy stopped) and its metrics be of part
  // of it. -1: not measured (as above).
  int64_t unterminated_tables = -1;

  /// The metrics as fields of a JSON object (nlohmann::json or ordered_json): the
  /// kMetricFields by name, then n_train, n_test, classes and (when known) precision,
  /// test_in_train, test_duplicates, truncated, unknown_only and unterminated_tables.
  template <class Json>
  void to_json(Json& j) const {
    for (const auto& f : metrics::kMetricFields) j[f.name] = test.*f.member;
    j["n_train"] = n_train;
    j["n_test"] = test.n;
    j["classes"] = test.classes;
    if (!precision.empty()) j["precision"] = precision;
    if (test_in_train >= 0) j["test_in_train"] = test_in_train;
    if (test_duplicates >= 0) j["test_duplicates"] = test_duplicates;
    if (truncated >= 0) j["truncated"] = truncated;
    if (unknown_only >= 0) j["unknown_only"] = unknown_only;
    if (unterminated_tables >= 0) j["unterminated_tables"] = unterminated_tables;
  }
  template <class A>
  void serialize(A& ar, const unsigned int) {
    for (const auto& f : metrics::kMetricFields) ar&(test.*f.member);
    ar& test.n& test.classes& n_train& precision& test_in_train& test_duplicates& truncated& unknown_only&
        unterminated_tables;
  }
};

/// One line of results.jsonl: the final outcome of one job.
struct Record {
  std::string job, model, group, task;
  int64_t shots = 0;
  uint64_t seed = 0;
  bool ok = false;
  RunMetrics metrics;                  // ok records
  std::map<std::string, double> values;  // the kMetricFields the line holds as numbers (by name)
  double seconds = 0;
  std::string host, device, out, error;  // error: failed records
  std::string checkpoint;                // the model directory the job loaded ("random" for none)
  // SHA-256 of the inputs the job read: the training and test tables, the weights (or a
  // random model's config file). "" when not recorded (null in the file: records written
  // before they were, a built-in random model); the report refuses to mix records of one
  // task, shot count or model whose digests differ.
  std::string train_sha256, test_sha256, model_sha256;
  bool simulated = false;  // pseudo-metrics of `sweep --simulate` (testing): never a result
  std::string arm;         // the model's arm (pretraining strategy) when it is a replicate, else ""
  int64_t replicate = -1;  // its replicate (pretraining seed), -1 when none
  int64_t checkpoint_step = -1;          // its pretraining step; -1: not a checkpoint (null in the file)
  // The number of jobs of the sweep's plan when the record was written (-1 in records of
  // before): without the plan, a results file cut short at a line end still shows its gap.
  int64_t jobs_total = -1;
  std::string sweep_id;  // the sweep that wrote it ("" in records of before): jobs_total is counted per sweep
  // The line carries "record_sha256", the SHA-256 of its other fields (checked when read:
  // a line edited since, or rewritten by another program with other digits, is refused);
  // false in records of before and in records written by hand.
  bool sealed = false;
  // The fine-tuning settings the job ran with (the plan's "finetune", as plan_to_json writes
  // it); null in records of before. The report refuses to mix records of different settings.
  nlohmann::json finetune;
  int rank = 0, attempts = 1;
  uint64_t line = 0;                     // 1-based line it was read from
  std::string text;                      // the line as read (kept as is when records are moved)

  /// The record as one JSON object, with "record_sha256" over the others (record_digest).
  nlohmann::json to_json() const;
};

/// SHA-256 (hex) of a record's fields but "record_sha256", as compact JSON with sorted keys
/// (io::json_text of an nlohmann::json): a line read back and parsed gives the same text.
std::string record_digest(const nlohmann::json& record);

/// An ok or failed record for a job, as the sweep writes it.
Record make_record(const std::string& model, const std::string& group, const std::string& task, int64_t shots,
                   uint64_t seed, const RunMetrics* ok_metrics, const std::string& error);

/// The records of results.jsonl. Blank lines are skipped. A LAST line that is torn (no
/// newline, or not a JSON object: a writer killed mid-line) is left out with a warning, and
/// cut off the file when `repair`. Any other bad line, or a field of the wrong type, is an
/// io::InputError "<path>:<line>: <what>; <remedy>". A missing file is an empty result when
/// `missing_ok`, else an InputError.
struct ResultsFile {
  std::vector<Record> records;
  uint64_t repaired_bytes = 0;        // the torn last line's length
  std::vector<std::string> warnings;  // e.g. the torn last line left out
};
ResultsFile read_results(const std::string& path, bool repair, bool missing_ok);

}  // namespace genemask::results
