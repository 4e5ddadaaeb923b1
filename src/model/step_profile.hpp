#pragma once
// Where a training step's time goes: LibTorch's profiler (Kineto) around a few steps, its
// events sorted into classes. On a GPU the events are the device's kernels, copies and
// memsets, and the time between them (the device idle, waiting for the host) is a class of
// its own; on a CPU they are the operators' own (exclusive) times.
#include <torch/torch.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace genemask::model {

/// The classes, in the order printed: matrix products, attention, elementwise and
/// normalisation, optimizer (and clipping's reductions are elementwise), copies and casts,
/// and idle (GPU only: no kernel running).
inline const std::vector<std::string>& profile_classes() {
  static const std::vector<std::string> c = {"matmul", "attention", "elementwise_norm", "optimizer", "copies_casts",
                                             "idle"};
  return c;
}

/// The class of a GPU kernel (`cuda`) or a CPU operator by its name; never "idle".
std::string profile_class(const std::string& name, bool cuda);

struct StepProfile {
  bool cuda = false;
  int steps = 0;
  double step_s = 0;  // wall time per step, the device synchronised after the steps
  std::vector<std::pair<std::string, double>> seconds;  // per step, profile_classes() order
  // The costliest kernels (GPU: "kernel  <-  operator(input dtypes and shapes)") or
  // operators with their inputs (CPU), seconds per step.
  std::vector<std::pair<std::string, double>> top;
  double kernels_per_step = 0;                          // GPU kernels (CPU: operators) per step
  // GPU: the times a step's host waited for the GPU as LibTorch reports them (HostSyncCounter
  // in cuda_graph.hpp: a value read on the host, a blocking copy, a synchronisation), per
  // step; -1 where not counted (a CPU).
  double host_syncs_per_step = -1;
  std::string to_json() const;
};

/// The profiler around steps that are not one function (`pretrain --profile-steps`: a run's
/// loop): the constructor synchronises `dev` and starts the profiler and the clock, finish()
/// synchronises `dev` again and sorts what ran since into a StepProfile of `steps` steps.
/// On a GPU it also counts the host's waits for the GPU on the thread that opened it.
/// One window at a time in a process; one that is destroyed unfinished (an early return)
/// stops the profiler and keeps nothing.
class HostSyncCounter;
class ProfileWindow {
 public:
  explicit ProfileWindow(const torch::Device& dev);
  ~ProfileWindow();
  ProfileWindow(const ProfileWindow&) = delete;
  ProfileWindow& operator=(const ProfileWindow&) = delete;
  StepProfile finish(int steps);

 private:
  torch::Device dev_;
  bool open_ = false;
  std::chrono::steady_clock::time_point t0_;
  std::unique_ptr<HostSyncCounter> syncs_;  // between the two synchronisations of the window's ends
};

/// Runs `step` `steps` times under the profiler (after the caller's warm-up) on `dev`.
StepProfile profile_steps(const std::function<void()>& step, int steps, const torch::Device& dev);

}  // namespace genemask::model
