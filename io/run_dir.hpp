#pragma once
// The layout of a `genemask pretrain` run directory, Torch-free: the sweep resolves a run
// to one of its checkpoints at plan time without LibTorch, and the model code uses the same
// functions, so that both read the same names the same way.
//   RUN/.genemask.lock                     flock'ed by the live pretrain (io/dir_lock.hpp)
//   RUN/checkpoints/step-NNNNNNNN/         a checkpoint, complete once its state.json is there
//   RUN/checkpoints/step-NNNNNNNN.tmp/     one being written
// Anything else under checkpoints/ ("step-latest", a copy, a step too large for int64) is
// not a checkpoint and is ignored: never read, resumed from or removed.
#include <cstdint>
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

/// What a model path resolves to.
struct ResolvedModel {
  std::string dir;        // the model directory to load
  int64_t step = -1;      // the checkpoint's step; -1 for a model directory that is no checkpoint
  int64_t run_steps = -1; // the run's --steps as the checkpoint's state.json records it; -1 unknown
  std::string run;        // the run directory when `dir` is one of its checkpoints, else ""
};

/// A model directory (model.safetensors or pytorch_model.bin) as it is (a checkpoint
/// directory named explicitly included: its step comes from its name), or the newest complete
/// checkpoint of a run directory. Throws InputError when it is neither.
ResolvedModel resolve_model(const std::string& run_or_dir);

}  // namespace genemask::io
