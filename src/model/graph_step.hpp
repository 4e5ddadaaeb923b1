#pragma once
// The training step with fixed shapes, so that CUDA graphs can capture it once and replay it
// every step (`pretrain --cuda-graphs`, model/cuda_graph.hpp). What varies from one micro-batch
// to the next is written into buffers of fixed size before each replay:
//  - the samples laid into rows of the model's width as segments (model/packing.hpp: packed
//    with --packing on, one per row with it off; each row's padding one segment), the rows
//    rounded up to a bucket (a multiple of ceil(samples / 64)), the boundaries padded to
//    samples + rows + 1 with zero-length segments at the end (they hold no position);
//  - the masked positions in a buffer of a whole number of twentieths of the positions, the
//    fewest that hold them, as MLPerf's "maximum predictions per sequence": the decoder runs
//    on the buffer's rows whatever the batch masked, instead of a data-dependent
//    index_select. The padding rows point at position 0 with target -100, which the summed
//    cross-entropy of BertForMaskedLM::masked_lm_loss_sum ignores: they add exactly 0 to the
//    loss and gradients (StaticRows.PaddedRowsGiveTheSameLossAndGradients).
// Attention then runs over segments whatever the batch (flash over variable-length segments
// on a GPU in bf16, the block-diagonal mask made on the device otherwise), so a step computes
// what the eager step computes: the same masked tokens, the same summed loss and divisor,
// within float rounding.
//
// Graphs: one per shape (row bucket and masked-row buffer) for a micro-batch's forward and
// backward (captured when a shape is first used, replayed per micro-batch, gradients accumulating in the buckets of
// model/grad_sync.hpp; all of them share one memory pool, as they never run at once and
// keep nothing in it between replays), and one for clipping plus the optimizer; the
// all-reduce runs between them, as the eager step runs it. Without capture (the CPU, or
// tests) the same bodies run eagerly, which is how CI checks everything but the capture.
#include <torch/torch.h>

#include <memory>
#include <optional>

#include "genemask/corpus/loader.hpp"
#include "model/bert.hpp"

namespace genemask::model {

class GradBuckets;
class FusedAdamW;

struct StaticShape {
  int64_t rows = 0, cols = 0, capacity = 0;  // positions rows x cols; masked rows buffered
  int64_t samples = 0;  // samples per micro-batch: each one segment, and each row's padding one more
  int64_t boundaries() const { return samples + rows + 1; }
  /// int64 values of one staged micro-batch: ids, position ids, boundaries, masked rows, targets.
  int64_t cells() const { return 2 * rows * cols + boundaries() + 2 * capacity; }
};

/// The row buckets: a micro-batch's rows are rounded up to a multiple of ceil(samples /
/// kRowBuckets). The rows of packed micro-batches vary little (the default recipe's samples,
/// 64 / 256 / 500 a micro-batch: 49.8 / 195.7 / 381.3 rows, standard deviation 2.9 / 6.0 / 8.0;
/// docs/benchmarks.md, "Fixed shapes' buckets"), so finer buckets add few shapes while the
/// rows added to each micro-batch (5-10% with eighths of the batch) fall to about 1%.
inline constexpr int64_t kRowBuckets = 64;
/// The masked-row buffer: the fewest twentieths of the shape's positions that hold the
/// micro-batch's masked positions (at least one). The strategies mask about 14% of the real
/// tokens, so the buffer is mostly 15% of the positions, and the decoder computes about
/// 1.1x the masked rows (a fixed 25% of the positions was 1.8x).
inline constexpr int64_t kCapacityLevels = 20;

/// What every micro-batch of a run may need: `samples` samples in at most `samples` rows of
/// `cols` positions. `capacity` > 0 fixes the masked-row buffer (testing; a micro-batch that
/// masks more runs eagerly); 0: by kCapacityLevels.
struct StaticLimits {
  int64_t samples = 0, cols = 0, capacity = 0;
};

/// The shape for a micro-batch that needs `rows` rows and masks `masked` positions: the rows
/// rounded up to a multiple of ceil(samples / kRowBuckets) (at most `samples`), the buffer
/// as kCapacityLevels says (or limits.capacity). std::invalid_argument for rows outside
/// [1, samples] or a negative `masked`.
StaticShape static_shape(const StaticLimits& limits, int64_t rows, int64_t masked);

/// A micro-batch in its fixed shape on the host (pinned for a GPU): `shape` receives the
/// shape, `masked` and `rows` its masked positions and the rows it needs. std::nullopt when
/// it does not fit: more samples or columns than the limits, or (with a fixed
/// limits.capacity) more masked positions than it.
std::optional<torch::Tensor> stage_static(const Batch& b, bool packing, const StaticLimits& limits, bool pinned,
                                          StaticShape& shape, int64_t& masked, int64_t& rows);

/// Up to this many matrix-product FLOPs per token (6 x the encoder's matrix parameters,
/// flops.hpp: logo 22 million, dnabert 510 million) the step is bound by kernel launches and
/// `auto` captures it. Above, the products hide the launches and the fixed shapes' extra
/// positions cost more than the graphs save: `pretrain` on real shards, bf16, 64 samples per
/// micro-batch on an H100 measured graphs on / off 0.95x for dnabert and 1.39x for logo
/// (docs/benchmarks.md, "CUDA graphs in `pretrain`"; with the coarser buckets of then, rows
/// rounded up to an eighth of the batch and a buffer of 25% of the positions).
inline constexpr double kGraphsMaxFlopsPerToken = 1e8;

/// What `--cuda-graphs auto|on|off` means here. `unavailable`: why this rank's device cannot
/// capture (StepGraph::unavailable; "" when it can); `shared`: which ranks share a GPU
/// (shared_gpu; "" when none do); `flops_per_token`: the model's matrix-product FLOPs per
/// token. Returns "" to capture the step, else the reason the eager step runs
/// ("--cuda-graphs off", "the device is a CPU", "ranks 0 and 1 on n1 share GPU ...", or for
/// `auto` a model above kGraphsMaxFlopsPerToken). `on` where capture cannot work is an error
/// that says why and what to use instead; `on` captures a large model all the same; another
/// value is an error. Pure: unit-tested without a GPU.
std::string decide_cuda_graphs(const std::string& requested, const std::string& unavailable, const std::string& shared,
                               double flops_per_token);

class GraphStep {
 public:
  /// `capture`: record the graphs on first use (a CUDA device only); else run the same
  /// bodies eagerly. The model, buckets and optimizer must outlive this.
  GraphStep(BertForMaskedLM model, GradBuckets& grads, FusedAdamW& fused, const torch::Device& dev, bool bf16,
            double clip, bool capture);
  ~GraphStep();
  GraphStep(const GraphStep&) = delete;
  GraphStep& operator=(const GraphStep&) = delete;

  /// Before a step's micro-batches: the step's loss sum to 0, and the loss divisor (the
  /// masked tokens of the whole effective batch, at least 1).
  void begin(double divisor);
  /// One staged micro-batch (stage_static) of shape `shape`: copied into that shape's fixed
  /// buffers, its forward and backward replayed (or run), the gradients accumulated, its
  /// summed loss added to loss_sum.
  void micro(const torch::Tensor& staged, const StaticShape& shape);
  /// The step's summed loss so far (float64 on the device): a micro-batch run outside the
  /// fixed shapes adds its own here.
  torch::Tensor& loss_sum();
  /// After the all-reduce: clipping and AdamW at `lr`; the gradient norm before clipping (a
  /// device scalar, overwritten by the next step).
  torch::Tensor finish(double lr);
  /// Graphs captured so far (the update's and one per shape used); 0 without capture.
  int graphs() const;
  /// The shapes used so far (with or without capture).
  int shapes() const;
  /// Whether the step since begin() set something up: a shape first used (its buffers made
  /// and, with capture, its graph captured, warm-up runs and all) or the update's graph
  /// captured. Such a step is the run's start more than its rate.
  bool set_up() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace genemask::model
