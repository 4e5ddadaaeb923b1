#pragma once
// The plan of a few-shot sweep (models x tasks x shots x seeds) and the jobs it expands to,
// for `sweep` (which runs them) and `report` (which orders its tables by it). A plan is
// read from JSON, or YAML (.yaml/.yml), validated once (every error names the file, the key
// path, the value and what is expected) and normalised: absolute paths, defaults filled
// in. The normalised form is what `sweep` writes to DIR/plan.json. MPI- and Torch-free.
#include <cstdint>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace genemask::sweep {

/// What a plan may hold. A real plan (10 models x 4 tasks x 5 shots x 10 seeds = 2000 jobs)
/// is far inside these; they stop a typo or a hostile file (nested YAML aliases, `seeds:
/// 1000000000000`) from expanding until memory runs out.
inline constexpr uint64_t kMaxPlanBytes = 16ull << 20;  // the plan file
inline constexpr uint64_t kMaxPlanNodes = 100000;       // values after YAML aliases are expanded
inline constexpr int64_t kMaxPlanSeeds = 100000;        // `seeds: N`, or a list's length
inline constexpr uint64_t kMaxPlanJobs = 1000000;       // models x tasks x shots x seeds
/// Longest file name (bytes) of a job's run directory, DIR/runs/<model>__<task>__<shots>__<seed>:
/// NAME_MAX of Linux file systems.
inline constexpr size_t kMaxRunDirName = 255;

/// A bad plan; what() is one complete line: "plan.yaml:7: models[1].path: ...".
class PlanError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct PlanModel {
  std::string name;            // display name, e.g. "GeneMask 10K"
  std::string path;            // absolute model directory / pretrain run, or "random"
  // What `path` resolves to, once, when the plan is read (io::resolve_model): the model
  // directory every job of this model loads (a run's newest checkpoint), and its step
  // (-1: a model directory that is no checkpoint). "" for random.
  std::string checkpoint;
  int64_t checkpoint_step = -1;
  std::string config;          // architecture for "random": logo, dnabert or an absolute config.json
  // The identity of what the jobs read, taken when the plan is read: SHA-256 of the weights
  // file (checked against a checkpoint's state.json), or of the config.json of a "random"
  // model given as a file, or of "genemask built-in config: NAME" for a built-in one.
  std::string weights_sha256, config_sha256;
  std::string group;           // optional grouping for the report ("" when absent)
  bool group_given = false;    // the plan names the group: the report takes it over the records'
  // Pretraining replicates: models that are the same strategy (the arm, "GeneMask") pretrained
  // with other seeds (replicate 1, 2, ...). The report compares arms with the replicate as
  // the unit. "" and -1 when the model is no replicate.
  std::string arm;
  int64_t replicate = -1;
};

struct PlanTask {
  std::string name;
  std::string train;                         // full training set (shots sampled per job), or ""
  std::string test;                          // absolute test table
  std::string dir;                           // released few-shot layout root, or ""
  std::map<int64_t, std::string> shot_train; // dir layout: shot -> fixed train file
  // SHA-256 of the tables, taken when the plan is read (train_sha256 "" in the dir layout).
  std::string train_sha256, test_sha256;
  std::map<int64_t, std::string> shot_train_sha256;
};

/// Fine-tuning settings shared by every job; 0 for lr/epochs/batch = the paper's regime.
struct PlanFinetune {
  double lr = 0;
  int64_t epochs = 0, batch = 0;
  double dropout = 0.1, warmup_fraction = 0.1, weight_decay = 0.01;
  std::string precision = "auto";  // "fp32"; "bf16": the forward passes under autocast (CPU or GPU); "auto": bf16 where the device has bf16 hardware
};

struct Plan {
  std::string source;  // the plan file as given
  std::vector<PlanModel> models;
  std::vector<PlanTask> tasks;
  std::vector<int64_t> shots{10, 50, 100, 500, 1000};
  std::vector<uint64_t> seeds{1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  int retries = 2;
  int threads_per_worker = 1;
  std::string device = "cpu";
  int ranks_per_gpu = 1;
  PlanFinetune finetune;
  // read_plan_order of a sweep's own plan.json: its "finetune" as written (finetune_to_json);
  // null otherwise. The report holds the records' settings against it.
  nlohmann::json recorded_finetune;
  // read_plan_order of a sweep's own plan.json: its shots and seeds are the grid the sweep
  // ran (the report counts each cell's seeds against them); false otherwise, and shots and
  // seeds are then only defaults.
  bool grid_given = false;

  /// Whether (model, task, shots) is a cell of the grid the sweep ran: grid_given, and the
  /// plan lists the model, the task and the shot count.
  bool in_grid(const std::string& model, const std::string& task, int64_t shots) const;
};

/// One fine-tuning run. Everything a worker needs travels in the job (workers never read
/// the plan), as a Boost.Serialization archive.
struct Job {
  std::string key;         // "<model>|<task>|<shots>|<seed>": stable across runs and rank counts
  std::string model, group, task;
  std::string arm;         // the model's arm and replicate ("" and -1: none)
  int64_t replicate = -1;
  int64_t shots = 0;       // the plan's shot count (n per class)
  uint64_t seed = 0;
  std::string model_path, config, train, test;  // model_path: the plan's resolved checkpoint
  int64_t checkpoint_step = -1;                 // its step, -1 when not a checkpoint
  int64_t sample_shots = 0;  // n per class to sample from `train`; 0 = train is a fixed shot file
  std::string out;           // DIR/runs/<safe job name>; set by the sweep
  PlanFinetune finetune;
  int attempt = 1;           // 1 for the first try, 2 for the first retry, ...
  // The inputs' SHA-256 as the plan recorded them: the worker checks what it reads against
  // them (a table or weights changed during the sweep fail the job, named), and records them.
  std::string train_sha256, test_sha256, model_sha256;  // model: weights, or a random model's config.json

  template <class A>
  void serialize(A& ar, const unsigned int) {
    ar & key & model & group & task & shots & seed & model_path & config & train & test & sample_shots & out;
    ar & finetune.lr & finetune.epochs & finetune.batch & finetune.dropout & finetune.warmup_fraction &
        finetune.weight_decay & finetune.precision & attempt & checkpoint_step;
    ar & train_sha256 & test_sha256 & model_sha256;
    ar & arm & replicate;
  }
};

/// Reads and validates a plan (JSON, or YAML by extension). Relative paths are taken
/// relative to the plan's directory; every referenced file must exist. A model path that is
/// a pretrain run resolves here, once, to its newest complete checkpoint (so that every job
/// of the sweep uses the same step); a run that has not finished (a live pretrain holds its
/// lock, or its newest checkpoint is below the --steps its state.json records) is refused
/// unless the plan names a checkpoint directory explicitly. Throws PlanError.
Plan load_plan(const std::string& path);

/// The model and task order (and model groups) of a plan, for the report: DIR/plan.json as
/// `sweep` writes it, or a JSON file whose "models"/"tasks" list names or objects with
/// "name" (and "group"). Nothing else is read or checked; throws io::InputError.
Plan read_plan_order(const std::string& path);

/// Validates a parsed plan document. `lines` maps key paths to source lines (YAML), may be null.
Plan plan_from_json(const nlohmann::json& doc, const std::string& source, const std::string& base_dir,
                    const std::map<std::string, int>* lines = nullptr);

/// The normalised plan (what DIR/plan.json holds): models, tasks, shots, seeds in plan order.
nlohmann::json plan_to_json(const Plan& plan);
/// The fine-tuning settings as the plan's JSON and each result record hold them.
nlohmann::json finetune_to_json(const PlanFinetune& f);

/// All jobs in dispatch order: shots descending (long jobs first), then plan order
/// (model, task, seed). `out_dir` is the sweep's DIR (job.out = DIR/runs/<safe name>).
std::vector<Job> expand_jobs(const Plan& plan, const std::string& out_dir);

/// A file-name-safe rendering: characters other than [A-Za-z0-9._-] become '_'.
std::string safe_name(const std::string& s);

/// How a new plan relates to the one already in DIR/plan.json (both normalised).
struct PlanDiff {
  std::vector<std::string> changes;  // human-readable, empty when compatible
  std::set<std::string> changed_models, changed_tasks;
  bool settings_changed = false;     // finetune overrides or device: every old result is stale
};
/// Compatible = the new plan only adds models, tasks, shots or seeds; everything that
/// defines an existing job's result (model and task definitions, finetune, device) is unchanged.
PlanDiff compare_plans(const nlohmann::json& old_plan, const nlohmann::json& new_plan);

}  // namespace genemask::sweep
