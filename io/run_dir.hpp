#pragma once
// The layout of a `genemask pretrain` run directory, Torch-free: the sweep resolves a run
// to one of its checkpoints at plan time without LibTorch, and the model code uses the same
// functions, so that both read the same names the same way.
//   RUN/.genemask.lock                     flock'ed by the live pretrain (io/dir_lock.hpp)
//   RUN/checkpoints/step-NNNNNNNN/         a checkpoint, complete once its state.json is there
//   RUN/checkpoints/step-NNNNNNNN.tmp/     one being written
//   RUN/checkpoints/.genemask-readers.lock flock'ed shared by readers of a checkpoint (export-hf,
//                                          embed, finetune, --init) while they read; the live
//                                          pretrain removes old checkpoints only under an
//                                          exclusive lock, so a reader never sees one vanish
// Anything else under checkpoints/ ("step-latest", a copy, a step too large for int64) is
// not a checkpoint and is ignored: never read, resumed from or removed.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace genemask::io {

/// The step of a checkpoint directory name: "step-" and 1 to 19 decimal digits whose value
/// fits in int64; nullopt for any other name ("step-latest", "step-0020.tmp",
/// "step-99999999999999999999", "step--1").
std::optional<int64_t> checkpoint_step_of(std::string_view name);

/// RUN/checkpoints/step-NNNNNNNN: the directory of the checkpoint of `step`.
std::string checkpoint_dir(const std::string& run, int64_t step);

/// Steps of the complete checkpoints of a run (a checkpoint name, a directory, state.json
/// written), ascending; empty when there is no RUN/checkpoints.
std::vector<int64_t> checkpoint_steps(const std::string& run);

/// "host H, pid P" of the live process that holds DIR/.genemask.lock (a running pretrain or
/// sweep), or "" when no process holds it or there is no lock file. Never creates the file.
std::string lock_holder(const std::string& dir);

/// The lock file of RUN/checkpoints that readers share and rotation takes exclusively.
inline constexpr const char* kCheckpointReadersLock = ".genemask-readers.lock";

/// What a model path resolves to.
struct ResolvedModel {
  std::string dir;        // the model directory to load
  int64_t step = -1;      // the checkpoint's step; -1 for a model directory that is no checkpoint
  int64_t run_steps = -1; // the run's --steps as the checkpoint's state.json records it; -1 unknown
  std::string run;        // the run directory when `dir` is one of its checkpoints, else ""
  // The highest step RUN/metrics.jsonl logs (-1: none, or a checkpoint named explicitly). Past
  // `step`, the run trained on after its newest checkpoint and stopped before the next one
  // (a run extended with --resume --steps M, killed).
  int64_t logged_step = -1;
  int64_t started_steps = -1;  // the --steps of the run's latest start (its marker's "steps"); -1 unknown
  // A run of a genemask that writes markers (its checkpoints/ has the readers lock) without its
  // marker: copied without its hidden files (`cp -r RUN/* DEST`), so its latest start's --steps
  // is unknown, and a start stopped before its next checkpoint cannot be told from a finished run.
  bool marker_missing = false;
  std::string weights;    // the weights file: DIR/model.safetensors or DIR/pytorch_model.bin
  /// SHA-256 of the weights file when it was checked against a checkpoint's state.json
  /// ("" for a model directory that records none: model_weights_sha256 computes it).
  std::string weights_sha256;
  /// While held, the checkpoint cannot be rotated away by its run's pretrain (a shared lock
  /// on RUN/checkpoints/.genemask-readers.lock); keep it until the files are read.
  std::shared_ptr<void> hold;
};

/// A model directory (model.safetensors or pytorch_model.bin) as it is (a checkpoint
/// directory named explicitly included: its step comes from its name), or the newest complete
/// checkpoint of a run directory, taken under the run's readers lock (ResolvedModel::hold).
/// A checkpoint's files that a reader loads (all but the optimizer and random states) are
/// checked against the SHA-256 its state.json records: a weights file copied in from another
/// checkpoint, or changed, is an InputError. Throws InputError when it is neither.
ResolvedModel resolve_model(const std::string& run_or_dir);

/// Why `m`, resolved from the run directory `given`, is not the run's final model: the run is
/// still being trained (a live pretrain holds its lock), stopped before the steps it was
/// started for, or logged steps past its newest checkpoint (an extended run that stopped
/// before its next checkpoint: the checkpoint's state.json still records its old --steps). "" when it is the final model, or when `given` names a model or checkpoint
/// directory itself (a step chosen deliberately). `other` ends the message: the caller's
/// way to take a step deliberately (e.g. "name a checkpoint directory ... to export that step").
std::string unfinished_run_reason(const ResolvedModel& m, const std::string& given, const std::string& other);

/// SHA-256 of the model's weights file: the checked one of a checkpoint, else computed.
std::string model_weights_sha256(const ResolvedModel& m);

/// For the pretrain that owns RUN: creates RUN/checkpoints/.genemask-readers.lock if missing,
/// and removes the checkpoint directories `dirs` only when no reader holds it (an exclusive,
/// non-blocking flock). Returns false, removing nothing, when a reader holds it: the caller
/// tries again at its next checkpoint.
bool remove_checkpoints_unless_read(const std::string& run, const std::vector<std::string>& dirs);
void create_checkpoint_readers_lock(const std::string& run);

}  // namespace genemask::io
