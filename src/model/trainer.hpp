#pragma once
// Data-parallel MLM pretraining (`genemask pretrain`). Every rank holds the model; rank 0's
// initial parameters are broadcast; per step each rank runs grad_accum micro-batches from
// its share of the data (masks from the loader), gradients are summed over ranks in a few
// large flat buckets (NCCL between GPUs, MPI otherwise: model/grad_sync.hpp), clipped, and
// AdamW steps (fused) on every rank identically. On a GPU the next step's batches are
// prepared on a second thread and copied from pinned memory, and nothing in the step waits
// for the device except at logged steps; checkpoints hold the CPU and GPU random states.
//
// The loss of a step is the sum of token losses divided by the number of masked tokens in
// the whole effective batch (all ranks, all micro-batches), so 1 rank x 2 accumulation
// steps and 2 ranks x 1 give the same gradient up to float rounding.
#include <mpi.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "genemask/corpus/masking.hpp"

namespace genemask::model {

struct PretrainOptions {
  std::string shards, out, npmi, pmi_vocab, model = "logo";
  MaskingKind masking = MaskingKind::genemask;
  std::string init;              // HF-format model directory or a run: initial weights and config
  int64_t steps = 10000, warmup = 500, batch_per_rank = 10, grad_accum = 25;
  double lr = 4e-4, weight_decay = 0.01, beta1 = 0.9, beta2 = 0.98, eps = 1e-6, clip = 1.0;
  uint64_t seed = 42;
  int64_t eval_every = 500, eval_batches = 20, checkpoint_every = 1000, keep_checkpoints = 3, log_every = 10;
  bool resume = false;
  bool allow_changes = false;    // --resume with other settings than the run's, deliberately
  bool verify_shards = false;    // --verify: SHA-256 and token ids of every shard before training
  std::string device = "cpu", precision = "auto";
  /// on: the samples of a micro-batch packed several to a row (model/packing.hpp); off: one
  /// per row, padded to the longest.
  std::string packing = "on";
  std::string allreduce = "auto";  // auto | nccl | mpi (model/grad_sync.hpp)
  /// auto | on | off: the step as CUDA graphs replayed every step (model/graph_step.hpp);
  /// auto captures where it can and runs the eager step elsewhere, saying why.
  std::string cuda_graphs = "auto";
  bool static_step = false;  // testing: the graphs' fixed-shape step, run eagerly (any device)
  int64_t static_capacity = 0;  // testing: the fixed buffer's masked rows (0: graph_step.hpp's default)
  bool tf32 = true;                // TF32 for fp32 matrix products on a GPU
  int threads = 0;          // intra-op threads per rank; 0 = cores / ranks on the node
  int64_t stop_after = -1;  // testing: return after this step without a checkpoint (like a kill)
  std::string dump_first_batch;  // testing: the first micro-batch of rank 0 as safetensors
  std::string genome_weights;    // "" or bases | uniform | list | temperature:T (shards of a genome list)
  /// --profile-steps: this many steps before the last one under LibTorch's profiler on rank 0
  /// (model/step_profile.hpp), for where a real step's time goes; 0: none.
  int64_t profile_steps = 0;
  std::string command_line;
};

/// What the run trains, for its logs, summary and state.json: --model, or --init's path when
/// the model comes from there (--model's default is then unused).
inline std::string model_name(const PretrainOptions& o) { return o.init.empty() ? o.model : o.init; }

struct PretrainSummary {
  int64_t start_step = 0, steps_done = 0, effective_batch = 0;
  // The loss of the last logged step, and the last validation loss: nullopt when none was
  // measured (no step ran, the step had no masked token, no validation data), never a
  // stand-in number.
  std::optional<double> last_loss, last_eval_loss;
  /// What last_eval_loss is over (0 while it is nullopt): the validation samples and masked
  /// tokens of the last evaluation, summed over ranks (the split's first --eval-batches x
  /// --batch-per-rank samples, at any rank count), and the validation split's samples.
  uint64_t last_eval_samples = 0, last_eval_masked_tokens = 0, last_eval_split_samples = 0;
  double seconds = 0;
  /// The rates below are those of the last logged window, and nullopt when no window was
  /// timed (no step ran: a --resume of a finished run, a stop before the first log line),
  /// never a stand-in 0. Real tokens per second over all ranks.
  std::optional<double> tokens_per_s;
  /// Model FLOP/s of the last logged window over all ranks (model/flops.hpp: real tokens
  /// only), and that over the run's GPUs' datasheet bf16 peak, each GPU once however many
  /// ranks share it (bf16 on GPUs in the table, no MIG slice; else nullopt).
  std::optional<double> model_tflops, mfu_datasheet;
  /// Of the last logged window (all ranks): the real tokens over the positions the model
  /// computed (rows x columns as staged, padding included), and a micro-batch's mean rows.
  std::optional<double> fill, rows_per_micro_batch;
  /// The input pipeline in the last logged window, of the slowest rank: the share of the
  /// window the loop waited for a step's batches, the share the loader's busier thread worked
  /// (DataLoader's reading and masking, or the staging; on a GPU beside the step, the staging
  /// on a CPU in turn), and the milliseconds a step of each.
  std::optional<double> input_wait, loader_busy, loader_read_ms, loader_stage_ms;
  int ranks = 1;
  bool interrupted = false;  // a signal asked for a checkpoint and exit
  std::string last_checkpoint;
  std::string allreduce;  // how gradients were summed: "NCCL", "MPI", "none (one rank)"
  std::string precision;  // what --precision resolved to: "fp32" or "bf16"
  /// "on" (the step replayed as CUDA graphs), "off (WHY)", or "static (testing)".
  std::string cuda_graphs;
  /// The packed attention's kernels this process (rank 0) ran, bert.hpp's to_string of each
  /// path ("flash-varlen", "cudnn-ragged", ...); empty where no batch was packed (without
  /// packing, or where packing would not have computed fewer positions).
  std::vector<std::string> packed_attention;
  /// Micro-batches that masked more positions than the graphs' fixed buffer, run eagerly.
  int64_t eager_micro_batches = 0;
  int cuda_graphs_captured = 0;  // the update's graph and one per shape used
  /// The fixed shapes used (graph_step.hpp: row bucket and masked-row buffer; 0 without
  /// them), and the steps that first used one (capturing its graph on a GPU) with their
  /// seconds (rank 0's clock), kept out of the rates.
  int fixed_shapes = 0;
  int64_t shape_setup_steps = 0;
  double shape_setup_s = 0;
  /// Per rank (on rank 0): its host, node-local rank (which picks its GPU) and device.
  struct RankPlace {
    std::string host, device;
    int local_rank = 0;
  };
  std::vector<RankPlace> layout;
  /// --profile-steps' result on rank 0: StepProfile::to_json() of the steps profiled (as
  /// train_bench's "profile"), or empty when none was (no --profile-steps, no step in its
  /// window, or the run stopped inside it).
  std::string profile;
};

/// Collective over comm. `log` receives progress lines on rank 0.
PretrainSummary pretrain(const PretrainOptions& o, MPI_Comm comm, const std::function<void(const std::string&)>& log);

/// Learning rate at `step` (0-based): linear warmup, then linear decay to 0 at `steps`.
double scheduled_lr(double peak, int64_t step, int64_t warmup, int64_t steps);

}  // namespace genemask::model
