#include "model/trainer.hpp"

#include <ATen/core/Generator.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstdlib>
#include <chrono>
#include <future>
#include <cmath>
#include <csignal>
#include <exception>
#include <optional>
#include <cstring>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <nlohmann/json.hpp>
#include <mutex>
#include <thread>

#include "genemask/corpus/loader.hpp"
#include "io/shard_manifest.hpp"
#include "genemask/eval/svg_plot.hpp"
#include "hpc/mpi.hpp"
#include "io/atomic_file.hpp"
#include "io/dir_lock.hpp"
#include "io/error.hpp"
#include "io/output_guard.hpp"
#include "io/json.hpp"
#include "io/plain_names.hpp"
#include "io/run_dir.hpp"
#include "io/safetensors.hpp"
#include "io/sha256.hpp"
#include "model/bert.hpp"
#include "model/cuda_graph.hpp"
#include "model/flops.hpp"
#include "model/fusions.hpp"
#include "model/grad_sync.hpp"
#include "model/graph_step.hpp"
#include "model/hf_io.hpp"
#include "model/optim.hpp"
#include "model/packing.hpp"
#include "model/runtime.hpp"
#include "model/step_profile.hpp"
#include "model/weight_copies.hpp"

namespace fs = std::filesystem;

namespace genemask::model {
namespace {

/// One micro-batch on the host in one int64 buffer (pinned for a GPU, so that the copy is
/// asynchronous): input ids | attention mask (padded) or position ids (packed) | flat indices
/// of the masked positions | their target ids | (packed) the segment boundaries. The masked
/// positions are found here, so the device never synchronises to find them.
struct HostBatch {
  torch::Tensor buf;
  int64_t rows = 0, cols = 0, masked = 0;
  bool padded = false;
  bool packed = false;     // samples packed several to a row (model/packing.hpp)
  int64_t segments = 0;    // packed: segment count (boundaries: segments + 1)
  int64_t samples = 0;     // the samples in it (packed: the segments that are not a row's padding)
  int64_t max_seqlen = 0;  // packed: the longest segment
  bool fixed = false;      // buf is stage_static's fixed layout (model/graph_step.hpp) of this shape:
  StaticShape shape;
};

/// Stages rows x cols of ids, per-position `second` (mask or position ids) and labels.
HostBatch stage_cells(int64_t rows, int64_t cols, const std::vector<int64_t>& ids, const std::vector<int64_t>& second,
                      const std::vector<int64_t>& labels, const std::vector<int64_t>& boundaries, bool pinned) {
  HostBatch h;
  h.rows = rows;
  h.cols = cols;
  const int64_t n = rows * cols;
  for (int64_t l : labels) h.masked += l != kIgnoreLabel;
  const auto extra = static_cast<int64_t>(boundaries.size());
  h.buf = torch::empty({2 * n + 2 * h.masked + extra}, torch::TensorOptions().dtype(torch::kLong).pinned_memory(pinned));
  int64_t* p = h.buf.data_ptr<int64_t>();
  std::copy(ids.begin(), ids.end(), p);
  std::copy(second.begin(), second.end(), p + n);
  int64_t* masked_rows = p + 2 * n;
  int64_t* targets = masked_rows + h.masked;
  for (int64_t i = 0, k = 0; i < n; ++i)
    if (labels[static_cast<size_t>(i)] != kIgnoreLabel) {
      masked_rows[k] = i;
      targets[k++] = labels[static_cast<size_t>(i)];
    }
  std::copy(boundaries.begin(), boundaries.end(), targets + h.masked);
  return h;
}

HostBatch stage(const Batch& b, bool pinned) {
  HostBatch h = stage_cells(b.rows, b.cols, b.input_ids, b.attention_mask, b.labels, {}, pinned);
  h.padded = static_cast<int64_t>(b.real_tokens()) < b.rows * b.cols;
  h.samples = b.rows;
  return h;
}

HostBatch stage(const PackedBatch& b, bool pinned) {
  HostBatch h = stage_cells(b.rows, b.cols, b.input_ids, b.position_ids, b.labels, b.cu_seqlens, pinned);
  h.packed = true;
  h.segments = static_cast<int64_t>(b.cu_seqlens.size()) - 1;
  h.samples = std::count_if(b.segment_sample.begin(), b.segment_sample.end(), [](int64_t s) { return s >= 0; });
  h.max_seqlen = b.max_seqlen;
  return h;
}

/// The batch as the model takes it: with --packing on, packed into rows of the model's width
/// where that computes fewer positions than the padded batch (a batch of samples that fill
/// their rows stays as it is: the same computation, and LibTorch's CPU flash kernel is
/// faster than the kernel over segments when there is nothing to skip).
HostBatch stage(const Batch& b, bool pinned, bool packing, int64_t width) {
  if (!packing) return stage(b, pinned);
  PackedBatch p = pack_batch(b, width);
  if (p.rows * p.cols >= b.rows * b.cols) return stage(b, pinned);
  return stage(p, pinned);
}

struct StepBatch {
  torch::Tensor ids, mask, rows, targets;  // mask undefined: no padding (or packed)
  std::optional<PackedLayout> layout;      // packed rows
};

/// Testing: a micro-batch as the loader gave it (unpacked), as safetensors (input_ids,
/// attention_mask, labels with -100 where unmasked, sample_index), for an independent loss
/// computation.
void dump_batch(const Batch& b, const std::string& path) {
  auto tensor = [&](const char* name, const int64_t* data, std::vector<int64_t> shape) {
    io::StTensor t;
    t.name = name;
    t.dtype = "I64";
    t.shape = std::move(shape);
    int64_t cells = 1;
    for (int64_t d : t.shape) cells *= d;
    t.data.resize(static_cast<size_t>(cells) * sizeof(int64_t));
    std::memcpy(t.data.data(), data, t.data.size());
    return t;
  };
  const std::vector<int64_t> index(b.sample_index.begin(), b.sample_index.end());
  io::write_safetensors(path, {tensor("input_ids", b.input_ids.data(), {b.rows, b.cols}),
                               tensor("attention_mask", b.attention_mask.data(), {b.rows, b.cols}),
                               tensor("labels", b.labels.data(), {b.rows, b.cols}),
                               tensor("sample_index", index.data(), {b.rows})},
                        {{"format", "pt"}, {"genemask", "first-batch"}});
}

/// One copy to the device (asynchronous from pinned memory), then views.
StepBatch to_device(const HostBatch& h, const torch::Device& dev) {
  auto d = h.buf.to(dev, /*non_blocking=*/true);
  const int64_t n = h.rows * h.cols;
  StepBatch s;
  s.ids = d.narrow(0, 0, n).view({h.rows, h.cols});
  if (h.padded) s.mask = d.narrow(0, n, n).view({h.rows, h.cols});
  s.rows = d.narrow(0, 2 * n, h.masked);
  s.targets = d.narrow(0, 2 * n + h.masked, h.masked);
  if (h.packed) {
    PackedLayout l;
    l.position_ids = d.narrow(0, n, n).view({h.rows, h.cols});
    l.segments = h.buf.narrow(0, 2 * n + 2 * h.masked, h.segments + 1);  // on the host
    l.cu_seqlens = d.narrow(0, 2 * n + 2 * h.masked, h.segments + 1).to(torch::kInt);
    l.max_seqlen = h.max_seqlen;
    s.layout = std::move(l);
  }
  return s;
}

/// The micro-batches of one optimizer step, staged on the host.
struct StepData {
  std::vector<HostBatch> micro;
  std::optional<Batch> first;  // the first micro-batch as the loader gave it (--dump-first-batch)
  double masked = 0, tokens = 0;
  double len_sq = 0;  // sum over samples of (real tokens)^2: the attention's model FLOPs
  std::vector<uint64_t> genome_tokens;  // real tokens per genome (shard sets of a genome list)
  LoaderCursor next;
  /// Seconds the loader's two threads spent on this step: DataLoader's reading and masking its
  /// batches, and the fetch's staging them (packed, laid out and copied to pinned memory).
  double read_s = 0, stage_s = 0;
};

/// A window's time-based sums on one rank: what its tokens/s, model TFLOP/s and input shares
/// are made of. The steps kept out of the rates (profiled, or setting a fixed shape up)
/// gather a second one, taken from the window's in one operation.
struct RateSums {
  double secs = 0, tokens = 0, flops = 0;
  double wait = 0, read = 0, stage = 0;  // the input: waited for, the loader's two threads' work
  // The positions the model computed (each micro-batch's rows x columns as staged: padding
  // and the fixed shapes' rows included), its rows and micro-batches: the fill, of the same
  // steps as the tokens.
  double positions = 0, rows = 0, micro = 0;
  int64_t steps = 0;
  RateSums& operator-=(const RateSums& o) {
    secs -= o.secs, tokens -= o.tokens, flops -= o.flops;
    wait -= o.wait, read -= o.read, stage -= o.stage;
    positions -= o.positions, rows -= o.rows, micro -= o.micro;
    steps -= o.steps;
    return *this;
  }
  RateSums& operator+=(const RateSums& o) {
    secs += o.secs, tokens += o.tokens, flops += o.flops;
    wait += o.wait, read += o.read, stage += o.stage;
    positions += o.positions, rows += o.rows, micro += o.micro;
    steps += o.steps;
    return *this;
  }
};

/// The steps (first..last, counted from 1, adjacent windows joined) of the log's windows
/// that hold only steps [begin, end] (counted from 1): a run that resumed after step `start`
/// logs every `every` steps and at step `steps`.
std::vector<std::pair<int64_t, int64_t>> windows_within(int64_t begin, int64_t end, int64_t start, int64_t every,
                                                        int64_t steps) {
  std::vector<std::pair<int64_t, int64_t>> within;
  for (int64_t n = std::max(begin, start + 1); n <= end;) {
    const int64_t first = std::max((n - 1) / every * every + 1, start + 1);
    const int64_t last = std::min((n + every - 1) / every * every, steps);
    if (first >= begin && last <= end) {
      if (!within.empty() && within.back().second + 1 == first)
        within.back().second = last;
      else
        within.emplace_back(first, last);
    }
    n = last + 1;
  }
  return within;
}

/// Sum of token losses over masked positions (not the mean: the step divides).
torch::Tensor summed_loss(BertForMaskedLM& m, const StepBatch& b, bool bf16) {
  Autocast autocast(bf16);
  if (b.layout) return m->masked_lm_loss_sum(b.ids, *b.layout, b.rows, b.targets);
  return m->masked_lm_loss_sum(b.ids, b.mask, b.rows, b.targets);
}

void broadcast_params(std::vector<torch::Tensor>& params, MPI_Comm comm) {
  if (hpc::comm_size(comm) == 1) return;
  torch::NoGradGuard ng;
  for (auto& p : params) {
    auto c = p.to(torch::kCPU, torch::kFloat32).contiguous();
    hpc::bcast_f32(c.data_ptr<float>(), static_cast<uint64_t>(c.numel()), 0, comm);
    p.copy_(c);
  }
}

int64_t latest_checkpoint(const std::string& out) {
  const auto steps = io::checkpoint_steps(out);
  return steps.empty() ? -1 : steps.back();
}

/// The default random generator of a device: the CPU's, or a GPU's (dropout on the GPU
/// draws from that one). A handle to the global generator.
at::Generator generator(const torch::Device& d) {
  return d.is_cuda() ? at::globalContext().defaultGenerator(d) : at::detail::getDefaultCPUGenerator();
}
torch::Tensor rng_state(const torch::Device& d) {
  at::Generator g = generator(d);
  std::lock_guard<std::mutex> lock(g.mutex());
  return g.get_state();
}
void set_rng_state(const torch::Device& d, const torch::Tensor& t) {
  at::Generator g = generator(d);
  std::lock_guard<std::mutex> lock(g.mutex());
  g.set_state(t);
}
std::string rng_file(const std::string& dir, const char* what, int rank) {
  return fmt::format("{}/{}rank{:05d}.pt", dir, what, rank);
}

/// torch::save of `value` to `path`, written through io::AtomicFile: a write that fails (a
/// full disk, a file size limit) is an error naming the file and the system's reason.
/// LibTorch's own file writer finds such a failure in its destructor, where the exception
/// ends the process (std::terminate: an abort and a backtrace, the temporaries left).
template <class T>
void save_torch_file(const T& value, const std::string& path) {
  using torch::operator<<;  // a tensor's (torch/serialize/tensor.h), as torch::save finds it
  torch::serialize::OutputArchive archive(std::make_shared<torch::jit::CompilationUnit>());
  archive << value;
  io::AtomicFile f(path);
  archive.save_to([&f](const void* data, size_t n) -> size_t {
    f.stream().write(static_cast<const char*>(data), static_cast<std::streamsize>(n));
    return n;  // a failed write is kept by the stream and said by commit()
  });
  f.commit();
}

}  // namespace

double scheduled_lr(double peak, int64_t step, int64_t warmup, int64_t steps) {
  if (step < warmup) return peak * static_cast<double>(step + 1) / static_cast<double>(warmup);
  if (steps <= warmup) return peak;
  return peak * std::max(0.0, static_cast<double>(steps - step - 1) / static_cast<double>(steps - warmup));
}

namespace {

/// The checkpoint format state.json declares (format, format_version); --resume refuses others.
/// Version 2 adds the run id, the run's --steps and the SHA-256 of every file of the
/// checkpoint (`files`), which bind the checkpoint's files to its state.json; version 1
/// (without them) still resumes. Version 3: the data cursor's position is a place in the
/// stream of all ranks' samples (loader.hpp), where before it counted one rank's samples of
/// the epoch (resumed as that times the ranks).
constexpr const char* kCheckpointFormat = "genemask-checkpoint";
constexpr int kCheckpointVersion = 3;
/// A logged window whose loop waited for its batches more than this share of the time says
/// once that the input, not the model, bounds the rate.
constexpr double kInputBoundShare = 0.05;

/// The most steps a run may have (and the most of any option counted in steps): 10^12.
constexpr int64_t kMaxSteps = 1000000000000;

/// Every check of the options that needs no file: NaN compares false, so every check is
/// written so that NaN fails it.
void check_options(const PretrainOptions& o) {
  // Bounds far past any run, under which the step, sample and log arithmetic cannot overflow.
  const auto within = [](const char* option, int64_t v, int64_t lo, int64_t hi) {
    if (v < lo || v > hi) throw std::invalid_argument(fmt::format("{} must be in {}..{}, got {}", option, lo, hi, v));
  };
  within("--steps", o.steps, 1, kMaxSteps);
  within("--batch-per-rank", o.batch_per_rank, 1, 1 << 20);
  within("--grad-accum", o.grad_accum, 1, 1 << 20);
  // A table the masking does not read was ignored without a word (a script that passes it for
  // every arm, or a --masking that is not the one meant).
  if (!o.npmi.empty() && o.masking != MaskingKind::genemask)
    throw std::invalid_argument(fmt::format("--npmi is read by --masking genemask only, and the masking is {}: leave "
                                            "--npmi out (or give --masking genemask)",
                                            to_string(o.masking)));
  if (!o.pmi_vocab.empty() && o.masking != MaskingKind::pmi_vocab)
    throw std::invalid_argument(fmt::format("--pmi-vocab is read by --masking pmi-vocab only, and the masking is {}: "
                                            "leave --pmi-vocab out (or give --masking pmi-vocab)",
                                            to_string(o.masking)));
  if (!(std::isfinite(o.lr) && o.lr > 0)) throw std::invalid_argument(fmt::format("--lr must be a positive number, got {}", o.lr));
  if (!(std::isfinite(o.weight_decay) && o.weight_decay >= 0))
    throw std::invalid_argument(fmt::format("--weight-decay must be a number >= 0, got {}", o.weight_decay));
  if (!(std::isfinite(o.clip) && o.clip > 0)) throw std::invalid_argument(fmt::format("clip must be positive, got {}", o.clip));
  if (!(o.beta1 >= 0 && o.beta1 < 1 && o.beta2 >= 0 && o.beta2 < 1 && o.eps > 0 && std::isfinite(o.eps)))
    throw std::invalid_argument("AdamW needs betas in [0, 1) and eps > 0");
  if (o.keep_checkpoints < 1)
    throw std::invalid_argument(fmt::format(
        "--keep-checkpoints must be at least 1 (the last checkpoint holds the trained model), got {}",
        o.keep_checkpoints));
  within("--warmup", o.warmup, 0, kMaxSteps);
  within("--log-every", o.log_every, 1, kMaxSteps);
  within("--checkpoint-every", o.checkpoint_every, 0, kMaxSteps);
  within("--eval-every", o.eval_every, 0, kMaxSteps);
  within("--eval-batches", o.eval_batches, 0, kMaxSteps);
  if (o.profile_steps < 0 || (o.profile_steps > 0 && o.profile_steps >= o.steps))
    throw std::invalid_argument(fmt::format("--profile-steps {} must be in 0..{} (--steps {} less one: the profiled steps "
                                            "end before the last step, whose log line, evaluation and checkpoint are "
                                            "not training)",
                                            o.profile_steps, o.steps - 1, o.steps));
}

/// One pretraining run: what the steps below set up and the training loop uses.
struct Run {
  const PretrainOptions& o;
  MPI_Comm comm;
  int rank = 0, world = 1;
  std::function<void(const std::string&)> say;  // rank 0's log
  std::chrono::steady_clock::time_point t_start = std::chrono::steady_clock::now();
  // Where it runs.
  torch::Device device = torch::kCPU;
  bool bf16 = false;
  bool packing = false;  // --packing on
  // --cuda-graphs: the fixed-shape step (captured, or eagerly with --static-step); why not.
  bool fixed_shapes = false;
  std::string graphs_off, gpus_shared;  // why the eager step runs; which ranks share a GPU
  std::vector<std::string> rank_gpus;   // per rank: "HOST GPU-UUID", "" on the CPU
  /// The fixed-shape step captured as CUDA graphs (decided in build_model; false before).
  bool capture() const { return fixed_shapes && graphs_off.empty(); }
  bool valid_checksums_done = false;  // the validation shards' SHA-256 checked (at the first evaluation)
  bool has_validation = false;        // the shard set has validation samples for every rank
  // Shards of a genome list: real tokens trained on per genome (all ranks, the whole run:
  // carried by state.json across --resume), and the resumed checkpoint's record of them.
  std::vector<uint64_t> genome_tokens;
  std::vector<std::string> genome_names;
  nlohmann::json resumed_genome_tokens;
  std::string resumed_state;        // --resume: the checkpoint's state.json, for messages
  int resumed_version = 0;          // --resume: its format_version
  std::string resumed_shards_sha256;  // --resume: the manifest digest its run trained on ("" if unrecorded)
  AllReduce how = AllReduce::Local;
  int threads = 1;
  int local_rank = 0;
  // What it trains.
  std::string init_dir;  // --init, resolved to a model directory
  // SHA-256 of the inputs that define what is trained, for state.json and --resume: the
  // masking tables ("" when not given) and the shard set's manifest.
  std::string npmi_sha256, pmi_vocab_sha256, shards_sha256;
  std::shared_ptr<void> shards_hold;  // a shared lock on the shard set (io::hold_output_for_reading)
  BertConfig cfg;
  BertForMaskedLM model{nullptr};
  std::vector<torch::Tensor> params;
  std::unique_ptr<torch::optim::AdamW> optimizer;
  // Where it stands.
  int64_t step = 0;
  std::string run_id;  // made when the run starts, kept by --resume, in every state.json
  LoaderCursor cursor;
  std::optional<io::OutputDir> out_dir;  // rank 0: a new --out goes again if the run fails before its first checkpoint
  std::optional<io::DirLock> lock;       // rank 0: one run per --out
  MaskingConfig masking;
  LoaderOptions loader;
  std::optional<io::AppendFile> metrics;  // rank 0: RUN/metrics.jsonl (a refused write stops the run)
  std::string metrics_path;

  Run(const PretrainOptions& options, MPI_Comm c, const std::function<void(const std::string&)>& log)
      : o(options), comm(c), rank(hpc::comm_rank(c)), world(hpc::comm_size(c)), metrics_path(options.out + "/metrics.jsonl") {
    say = [this, log](const std::string& line) {
      if (rank == 0 && log) log(line);
    };
  }
};

/// The FLOP definition's view of a model (flops.hpp).
ModelShape shape_of(const BertConfig& c) {
  return {c.num_hidden_layers, c.hidden_size, c.intermediate_size, c.vocab_size};
}

/// Device (each rank binds its node-local GPU before any CUDA work), precision, intra-op
/// threads and how gradients are summed.
void choose_runtime(Run& r) {
  hpc::check_slurm_world(r.world);
  tune_cpu_for_training();  // before anything could run a product
  const auto [local_rank, local_size] = hpc::local_rank_size(r.comm);
  r.bf16 = wants_bf16(r.o.precision, r.o.device, r.rank == 0);
  r.packing = parse_packing(r.o.packing);
  r.local_rank = local_rank;
  r.device = pick_rank_device(r.o.device, local_rank);
  use_device(r.device, r.o.tf32);
  const std::vector<RankGpu> gpus = gather_rank_gpus(r.device, r.comm);
  r.how = decide_allreduce(r.o.allreduce, gpus, nccl_built());
  r.gpus_shared = shared_gpu(gpus);  // for the CUDA graphs' decision, once the model is known
  r.rank_gpus.clear();
  for (const auto& g : gpus) r.rank_gpus.push_back(g.gpu.empty() ? "" : g.host + " " + g.gpu);
  r.threads = set_intra_op_threads(r.o.threads, local_size, r.rank == 0);
}

/// --resume without GENEMASK_FUSED: the run goes on with the fused paths that change the
/// numbers as its newest checkpoint records them, not with this version's defaults for a new
/// run (which may since have gained one), so that a run started with an earlier default
/// resumes as it was trained. The paths that do not change the numbers (ln-bf16) stay as they
/// are. Before the model is built (the Q/K/V product is chosen then). A checkpoint that
/// records none, or whose state.json cannot be read, changes nothing here:
/// resume_from_checkpoint names what is wrong with it.
void adopt_run_fusions(Run& r) {
  if (!r.o.resume || std::getenv("GENEMASK_FUSED") != nullptr) return;
  const int64_t last = latest_checkpoint(r.o.out);
  if (last < 0) return;
  const nlohmann::json st = io::try_read_json_file(io::checkpoint_dir(r.o.out, last) + "/state.json").value;
  if (!st.is_object() || !st.contains("fused") || !st["fused"].is_string()) return;
  const std::string recorded = st["fused"].get<std::string>();
  Fusions f;
  try {
    f = parse_fusions(recorded);
  } catch (const std::invalid_argument&) {
    return;  // compared (and refused) with the other settings
  }
  const Fusions now = fusions();
  f = with_numeric_of(now, f);  // the fusions that keep the numbers are this run's
  if (numeric_fusions(f) == numeric_fusions(now) || numeric_fusions(f) != recorded) return;
  set_fusions(f);
  r.say(fmt::format("--resume: the fused paths that change the numbers are \"{}\", as the run recorded them (a new run "
                    "takes \"{}\"; GENEMASK_FUSED chooses others)",
                    recorded, numeric_fusions(now)));
}

/// The model (--model, or --init's architecture and weights) on its device, and AdamW. The
/// optimizer, schedule and masking are always this run's own.
void build_model(Run& r) {
  const auto& o = r.o;
  adopt_run_fusions(r);
  r.init_dir = o.init.empty() ? "" : resolve_model_dir(o.init);
  // Token ids are genemask's: a model whose vocab.txt orders them otherwise would be trained
  // on other tokens than it learnt (finetune and embed refuse it the same way).
  if (!r.init_dir.empty()) check_vocab(r.init_dir);
  const bool config_file = r.init_dir.empty() && o.model.find(".json") != std::string::npos;
  r.cfg = !r.init_dir.empty() ? BertConfig::from_json_file(r.init_dir + "/config.json")
          : config_file       ? BertConfig::from_json_file(o.model)
                              : BertConfig::named(o.model);
  // A new model from a config: an untied MLM decoder asked for would be trained tied.
  if (config_file && !r.cfg.tie_word_embeddings)
    throw io::InputError(o.model, "tie_word_embeddings is false: genemask's BERT ties its MLM decoder to the word "
                                  "embeddings (as BERT and DNABERT do); remove the key or set it true");
  torch::manual_seed(o.seed);
  r.model = BertForMaskedLM(r.cfg);
  init_weights(*r.model, r.cfg);
  if (!r.init_dir.empty() && !o.resume) {
    const bool bin = !fs::exists(r.init_dir + "/model.safetensors");
    const std::string source = r.init_dir + (bin ? "/pytorch_model.bin" : "/model.safetensors");
    auto tensors = read_hf_tensors(r.init_dir);
    std::vector<std::string> notes;
    const bool head = prepare_mlm_init(tensors, source, notes);
    load_state(r.model, source, tensors, /*encoder_only=*/!head);
    require_tied_decoder(r.model, "pretraining from --init");
    r.say(fmt::format("initialised from {}", r.init_dir));
    for (const auto& n : notes) r.say(fmt::format("note: --init {}: {}", r.init_dir, n));
  }
  release_model_holds();  // --init's run may rotate its checkpoints again: its weights are read
  r.model->to(r.device);
  for (auto& p : r.model->parameters()) r.params.push_back(p);
  AdamWSettings adamw;
  adamw.lr = o.lr;
  adamw.beta1 = o.beta1;
  adamw.beta2 = o.beta2;
  adamw.eps = o.eps;
  adamw.weight_decay = o.weight_decay;
  r.optimizer = make_adamw(r.model->named_parameters(), adamw);
  // CUDA graphs: where they can run, and (auto) whether they pay for this model.
  r.graphs_off = decide_cuda_graphs(o.cuda_graphs, StepGraph::unavailable(r.device), r.gpus_shared,
                                    6 * matrix_parameters(shape_of(r.cfg)));
  r.fixed_shapes = r.graphs_off.empty() || o.static_step;
}

/// --out on rank 0: created (and removed again if the run fails before its first
/// checkpoint), locked for this run; a run that is there already continues only with --resume.
void open_run_directory(Run& r) {
  if (r.rank == 0) {
    r.out_dir.emplace(r.o.out, std::vector<std::string>{"checkpoints", "metrics.jsonl", "perplexity.svg"});
    try {
      r.lock.emplace(r.o.out, "genemask run");  // before anything in --out is read or written
      r.out_dir->locked();  // another run's output made there a moment ago is never removed here
    } catch (...) {
      // Another run's directory, maybe made a moment ago, is never removed here; one left
      // empty (the lock file could not be written) is nobody's.
      r.out_dir->keep_unless_empty();
      throw;
    }
    // A new or empty directory, or a run's (never a directory of other files).
    // A run of before the markers holds a checkpoint (checkpoints/step-N/state.json).
    io::claim_run_directory(r.o.out, "pretrain", "--out", {"checkpoints", "metrics.jsonl", "perplexity.svg"},
                            [](const std::string& d) {
                              std::error_code ec;
                              for (const auto& e : fs::directory_iterator(d + "/checkpoints", ec))
                                if (e.path().filename().string().rfind("step-", 0) == 0 &&
                                    fs::is_regular_file(e.path() / "state.json", ec))
                                  return true;
                              return false;
                            });
    fs::create_directories(r.o.out + "/checkpoints");
    io::create_checkpoint_readers_lock(r.o.out);  // readers share it; rotation waits for them
    // A checkpoint an earlier run of this directory began and never named (its job ended while
    // writing it, e.g. a disk that filled): a whole model and optimizer of space, which --resume
    // never reads. This run holds the directory's lock.
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(r.o.out + "/checkpoints", ec)) {
      const std::string n = e.path().filename().string();
      if (n.rfind("step-", 0) == 0 && n.size() > 4 && n.compare(n.size() - 4, 4, ".tmp") == 0 &&
          e.is_directory(ec) && !e.is_symlink(ec))
        fs::remove_all(e.path(), ec);
    }
  }
  if (!r.o.resume && latest_checkpoint(r.o.out) >= 0)
    throw io::InputError(r.o.out, "already holds checkpoints of a run: continue it with --resume, or choose a new --out");
}

/// The settings a checkpoint records and --resume compares (besides the model config). The
/// model is compared by its config's content (below), not by how --model was spelt.
nlohmann::json run_settings(const Run& r) {
  const auto digest = [](const std::string& s) { return s.empty() ? nlohmann::json() : nlohmann::json(s); };
  return {{"seed", r.o.seed},
          {"masking", to_string(r.o.masking)},
          {"model", model_name(r.o)},
          {"batch_per_rank", r.o.batch_per_rank},
          {"grad_accum", r.o.grad_accum},
          {"shards", fs::weakly_canonical(r.o.shards).string()},
          {"shards_manifest_sha256", digest(r.shards_sha256)},
          {"npmi_sha256", digest(r.npmi_sha256)},
          {"pmi_vocab_sha256", digest(r.pmi_vocab_sha256)},
          {"lr", r.o.lr},
          {"warmup", r.o.warmup},
          {"weight_decay", r.o.weight_decay},
          {"beta1", r.o.beta1},
          {"beta2", r.o.beta2},
          {"eps", r.o.eps},
          {"clip", r.o.clip},
          {"precision", precision_name(r.bf16)},
          {"packing", r.packing ? "on" : "off"},
          {"fused", numeric_fusions(fusions())},
          // How the step runs, where it changes the numbers: another device draws dropout
          // from another generator (and rounds otherwise); TF32 rounds a GPU's fp32
          // products; the fixed shapes of the CUDA graphs' step pad rows, so reductions
          // round otherwise; NCCL and MPI sum over ranks in other orders.
          {"device", r.device.is_cuda() ? "cuda" : "cpu"},
          {"tf32", r.device.is_cuda() && !r.bf16 ? nlohmann::json(r.o.tf32) : nlohmann::json()},
          {"step_shapes", r.fixed_shapes ? "fixed" : "per batch"},
          {"allreduce", to_string(r.how)},
          {"init", r.init_dir},
          {"genome_weights", r.o.genome_weights.empty() ? nlohmann::json() : nlohmann::json(r.o.genome_weights)}};
}

/// How a setting is spelt on the command line, for messages.
std::string option_of(const std::string& key) {
  if (key == "shards_manifest_sha256") return "--shards (its manifest.json)";
  if (key == "npmi_sha256") return "--npmi (its content)";
  if (key == "pmi_vocab_sha256") return "--pmi-vocab (its content)";
  if (key == "fused") return "GENEMASK_FUSED (the environment variable; its " + fusion_names(true) + ")";
  if (key == "tf32") return "--tf32/--no-tf32 (on a GPU in fp32; null where it does not apply)";
  if (key == "step_shapes") return "the step's shapes (fixed for --cuda-graphs)";
  if (key == "allreduce") return "--allreduce (the sum over ranks it chose)";
  std::string o = "--" + key;
  std::replace(o.begin(), o.end(), '_', '-');
  return o;
}

/// The SHA-256 of the inputs run_settings records; collective-free (every rank reads them).
void digest_inputs(Run& r) {
  if (!r.o.npmi.empty()) r.npmi_sha256 = io::sha256_file(r.o.npmi);
  if (!r.o.pmi_vocab.empty()) r.pmi_vocab_sha256 = io::sha256_file(r.o.pmi_vocab);
  // Held for the run: `shards --force` cannot swap the set under it (its validation split is
  // opened again at each evaluation, its shards at each epoch).
  r.shards_hold = io::hold_output_for_reading(r.o.shards, "--shards " + r.o.shards);
  io::read_manifest(r.o.shards);  // a missing or damaged manifest is named as such first
  r.shards_sha256 = io::sha256_file(r.o.shards + "/manifest.json");
}

/// The files of a checkpoint directory (all but state.json) and their SHA-256, for state.json.
nlohmann::json checkpoint_files(const std::string& dir) {
  nlohmann::json files = nlohmann::json::object();
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file() && e.path().filename() != "state.json") names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  for (const auto& n : names) files[n] = io::sha256_file(dir + "/" + n);
  return files;
}

/// Format 2: the checkpoint's files are the ones its state.json lists (same SHA-256), and its
/// run id is the one of the run's other checkpoints, so that a file (or a whole checkpoint)
/// copied in from another checkpoint or run is refused, named, instead of resumed with
/// weights, optimizer and step that do not belong together.
void check_checkpoint_files(const Run& r, const std::string& d, const nlohmann::json& st) {
  const std::string state = d + "/state.json";
  if (!st.contains("run_id") || !st["run_id"].is_string() || st["run_id"].get<std::string>().empty() ||
      !st.contains("files") || !st["files"].is_object())
    throw io::InputError(state, "is format version 2 but has no run_id or no files list: the checkpoint is damaged");
  const auto& files = st["files"];
  std::vector<std::string> needed = {"config.json", "model.safetensors", "optimizer.pt"};
  for (int k = 0; k < r.world; ++k) needed.push_back(fs::path(rng_file(d, "rng-", k)).filename().string());
  for (const auto& n : needed)
    if (!files.contains(n))
      throw io::InputError(state, fmt::format("does not list {} among the checkpoint's files: the checkpoint is damaged", n));
  const std::string id = st["run_id"].get<std::string>();
  for (int64_t step : io::checkpoint_steps(r.o.out)) {
    const std::string other = io::checkpoint_dir(r.o.out, step) + "/state.json";
    if (other == state) continue;
    const io::JsonParse parsed = io::try_read_json_file(other);
    const nlohmann::json& j = parsed.value;
    if (!parsed.ok() || !j.is_object() || !j.contains("run_id") || !j["run_id"].is_string() || j["run_id"] == id) continue;
    throw io::InputError(state, fmt::format("is of run {}, but {} is of run {}: the checkpoint was copied in from "
                                            "another run; remove it to resume from this run's own checkpoints",
                                            id, other, j["run_id"].get<std::string>()));
  }
  if (r.rank != 0) return;  // rank 0 reads each file once; its error ends the job
  for (const auto& [name, sum] : files.items()) {
    if (!sum.is_string() || !io::is_plain_name(name))
      throw io::InputError(state, fmt::format("lists a file entry {}: {} that is not a file name and SHA-256; the "
                                              "checkpoint is damaged",
                                              io::excerpt(name, 40), io::excerpt(sum.dump(), 80)));
    const std::string f = d + "/" + name;
    if (!fs::is_regular_file(f))
      throw io::InputError(f, "is missing from its checkpoint (its state.json lists it): the checkpoint is damaged; "
                              "remove the directory to resume from an earlier checkpoint");
    const std::string have = io::sha256_file(f);
    if (have != sum.get<std::string>())
      throw io::InputError(f, fmt::format("is not the file this checkpoint's state.json records (SHA-256 {}, recorded "
                                          "{}): it was copied in from another checkpoint or run, or changed; put the "
                                          "checkpoint's own file back, or remove {} to resume from an earlier checkpoint",
                                          have.substr(0, 16), sum.get<std::string>().substr(0, 16), d));
  }
}

/// --resume: the newest complete checkpoint, which must be of this format, world size,
/// settings and model config (--allow-changes accepts other settings deliberately); then
/// its weights, optimizer, data cursor and this rank's random state.
void resume_from_checkpoint(Run& r) {
  const auto& o = r.o;
  const int64_t last = latest_checkpoint(o.out);
  // A checkpoint directory newer than the newest complete one is no half-written checkpoint
  // (they are written as step-N.tmp and renamed once whole): its state.json was removed. The
  // run would replace it, files and all, when it reaches its step: refused, not passed over.
  {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(fs::path(o.out) / "checkpoints", ec)) {
      const auto step = io::checkpoint_step_of(e.path().filename().string());
      if (step && *step > last && e.is_directory(ec) && !fs::exists(e.path() / "state.json", ec))
        throw io::InputError(e.path().string(),
                             fmt::format("--resume: has no state.json, so it is not a complete checkpoint, and it is "
                                         "newer than the newest one ({}); the run would replace it at step {}: put "
                                         "its state.json back, or move the directory away, to resume",
                                         last < 0 ? "none" : fmt::format("step {}", last), *step));
    }
  }
  if (last < 0) throw io::InputError(o.out, "--resume: no complete checkpoint in checkpoints/");
  const std::string d = io::checkpoint_dir(o.out, last);
  const std::string state = d + "/state.json";
  nlohmann::json st = io::try_read_json_file(state).value;  // null when missing or not JSON
  if (st.is_discarded() || !st.is_object()) throw io::InputError(state, "is not a JSON object: the checkpoint is damaged");
  std::string format;
  int version = 0, world = 0;
  // Every field is read as what it must be, in range: an edited or damaged state.json is
  // named, never a JSON library message and never a cursor a trillion epochs on.
  const auto integer = [&](const nlohmann::json& obj, const char* key, const std::string& field, int64_t lo,
                           int64_t hi) -> int64_t {
    if (!obj.is_object() || !obj.contains(key))
      throw io::InputError(state, fmt::format("has no {}: the checkpoint is damaged", field));
    const auto& v = obj[key];
    if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) ||
        v.get<int64_t>() < lo || v.get<int64_t>() > hi)
      throw io::InputError(state, fmt::format("{} is {}, expected an integer in {}..{}: the checkpoint is damaged or "
                                              "was edited",
                                              field, io::json_excerpt(v, 40), lo, hi));
    return v.get<int64_t>();
  };
  // Checkpoints written before state.json named its format are version 1.
  if (st.contains("format") && !st["format"].is_string())
    throw io::InputError(state, "format is not a string: the checkpoint is damaged");
  format = st.value("format", std::string(kCheckpointFormat));
  version = st.contains("format_version") ? static_cast<int>(integer(st, "format_version", "format_version", 1, 1000)) : 1;
  world = static_cast<int>(integer(st, "world_size", "world_size", 1, 1 << 24));
  r.step = integer(st, "step", "step", 0, INT64_MAX);
  // Samples each rank took per step: the run's own where state.json records them (a resume
  // with a smaller batch is a change of settings, named below, not a damaged cursor).
  int64_t per_step = o.batch_per_rank * o.grad_accum;
  if (const auto b = st.find("batch_per_rank"), g = st.find("grad_accum");
      b != st.end() && g != st.end() && b->is_number_integer() && g->is_number_integer() && b->get<int64_t>() > 0 &&
      g->get<int64_t>() > 0 && b->get<int64_t>() <= INT32_MAX && g->get<int64_t>() <= INT32_MAX)
    per_step = std::max(per_step, b->get<int64_t>() * g->get<int64_t>());
  const int64_t samples_seen = r.step > INT64_MAX / std::max<int64_t>(per_step, 1) ? INT64_MAX : r.step * per_step;
  r.cursor.epoch = static_cast<uint64_t>(integer(st.value("cursor", nlohmann::json()), "epoch", "cursor.epoch", 0, samples_seen));
  // The position within the epoch is held to the shard set's samples per rank when the data
  // opens (open_training_data): a bound by steps would not hold across a batch changed with
  // --allow-changes.
  r.cursor.position =
      static_cast<uint64_t>(integer(st.value("cursor", nlohmann::json()), "position", "cursor.position", 0, INT64_MAX));
  if (st.contains("steps")) integer(st, "steps", "steps", 1, INT64_MAX);
  if (format != kCheckpointFormat || version < 1 || version > kCheckpointVersion)
    throw io::InputError(state, fmt::format("is format \"{}\" version {}; this genemask reads {} versions 1 to {}",
                                            format, version, kCheckpointFormat, kCheckpointVersion));
  if (r.step != last)
    throw io::InputError(state, fmt::format("records step {}, but it is in the checkpoint of step {} ({}): this "
                                            "state.json belongs to another checkpoint; put the checkpoint's own "
                                            "state.json back, or remove the directory to resume from an earlier one",
                                            r.step, last, d));
  if (world != r.world)
    throw io::InputError(state, fmt::format("was written by {} ranks; resume with the same number (now {})", world,
                                            r.world));
  // Before version 3 the position counted one rank's samples of the epoch, rank r taking
  // epoch positions r, r+R, ...: the stream position of the next sample is that times R.
  if (version < 3) {
    if (r.cursor.position > static_cast<uint64_t>(INT64_MAX) / static_cast<uint64_t>(world))
      throw io::InputError(state, fmt::format("cursor.position is {}: the checkpoint is damaged", r.cursor.position));
    r.cursor.position *= static_cast<uint64_t>(world);
  }
  // A run is never "continued" to an end it has passed: it would exit 0 having trained
  // nothing, its schedule decaying to a step already behind it.
  if (o.steps < r.step)
    throw io::InputError(state, fmt::format("--resume: --steps {} is below the checkpoint's step {}; give --steps {} "
                                            "or more (the run's own end: {})",
                                            o.steps, r.step, r.step,
                                            st.contains("steps") ? io::json_excerpt(st["steps"], 40) : "not recorded"));
  if (version >= 2) check_checkpoint_files(r, d, st);
  r.resumed_version = version;
  if (st.contains("genome_tokens")) r.resumed_genome_tokens = st["genome_tokens"];
  r.resumed_state = state;
  if (st.contains("shards_manifest_sha256") && st["shards_manifest_sha256"].is_string())
    r.resumed_shards_sha256 = st["shards_manifest_sha256"].get<std::string>();
  r.run_id = version >= 2 ? st["run_id"].get<std::string>() : io::random_id();
  // The run's settings: a different one would silently make another run of this one. Every
  // setting that changes what is trained is compared (settings a checkpoint of an earlier
  // version did not record are not); --allow-changes accepts a change deliberately, and each
  // accepted change is named. --steps may change (a run continued further): its schedule
  // then decays to the new end, which is said too.
  const nlohmann::json now = run_settings(r);  // named: items() of a temporary would dangle
  for (const auto& [key, value] : now.items()) {
    if (key == "model" || !st.contains(key) || st[key] == value) continue;
    // Where the shards are is no setting, what they hold is: a moved shard set with the same
    // manifest continues, an edited one is compared by its digest.
    if (key == "shards" && st.contains("shards_manifest_sha256") && st["shards_manifest_sha256"] == now["shards_manifest_sha256"])
      continue;
    // --init spelt another way ("./hf" and "/abs/hf/") is the same model directory.
    if (key == "init" && value.is_string() && st[key].is_string() && !value.get<std::string>().empty() &&
        !st[key].get<std::string>().empty()) {
      std::error_code e1, e2;
      const auto a = fs::weakly_canonical(value.get<std::string>(), e1), b = fs::weakly_canonical(st[key].get<std::string>(), e2);
      if (!e1 && !e2 && a == b) continue;
    }
    const std::string change = fmt::format("{} is {} now but {} in the run", option_of(key), io::json_excerpt(value, 80),
                                           io::json_excerpt(st[key], 80));
    if (!o.allow_changes)
      throw io::InputError(state, fmt::format("--resume: {}; resume with the run's settings, or pass --allow-changes to "
                                              "continue with the new one deliberately",
                                              change));
    r.say(fmt::format("--resume --allow-changes: {}; continuing with the new value", change));
  }
  if (st.contains("steps") && st["steps"] != nlohmann::json(o.steps))
    r.say(fmt::format("--resume: --steps is {} now but {} in the run: the learning rate now decays to 0 at step {}", o.steps,
                      io::json_excerpt(st["steps"], 40), o.steps));
  {
    const BertConfig saved = BertConfig::from_json_file(d + "/config.json");
    const auto a = nlohmann::json::parse(saved.to_json()), b = nlohmann::json::parse(r.cfg.to_json());
    for (const auto& [key, value] : a.items())
      if (b.contains(key) && b[key] != value)
        throw io::InputError(d + "/config.json",
                             fmt::format("--resume: the model's {} is {} in the run but {} in --model {}; resume "
                                         "with the run's model config",
                                         key, value.dump(), b[key].dump(), o.model));
  }
  auto imported = import_hf(d);
  {
    torch::NoGradGuard ng;
    auto src = imported->named_parameters();
    for (auto& p : r.model->named_parameters()) p.value().copy_(src[p.key()].to(r.device));
    r.model->pooler_weight.copy_(imported->pooler_weight);
    r.model->pooler_bias.copy_(imported->pooler_bias);
    r.model->has_pooler = imported->has_pooler;
  }
  // Onto this rank's device, whatever device wrote it: without one, LibTorch puts the
  // AdamW moments back on the GPU that saved them (every rank on that one GPU, or a failure
  // on a CPU-only node), so a GPU run could not continue on fewer GPUs or on CPUs.
  torch::load(*r.optimizer, d + "/optimizer.pt", r.device);
  torch::Tensor rs;
  torch::load(rs, rng_file(d, "rng-", r.rank), torch::kCPU);
  set_rng_state(torch::kCPU, rs);
  if (r.device.is_cuda()) {
    const std::string f = rng_file(d, "cuda-rng-", r.rank);
    if (fs::exists(f)) {
      torch::load(rs, f, torch::kCPU);  // a generator state is a CPU byte tensor
      set_rng_state(r.device, rs);
    } else {
      r.say(fmt::format("{} holds no GPU random state (written by a CPU run): GPU dropout continues from a new stream", d));
    }
  }
  r.say(fmt::format("resumed from {} (step {}, epoch {}, position {})", d, r.step, r.cursor.epoch, r.cursor.position));
}

/// A new run: an id, rank 0's initial weights everywhere, and a dropout stream per rank.
void start_fresh(Run& r) {
  r.run_id = io::random_id();
  broadcast_params(r.params, r.comm);
  torch::manual_seed(r.o.seed + static_cast<uint64_t>(r.rank) + 1);
}

/// The masking and this rank's share of the training data, masked per (seed, epoch, sample).
std::unique_ptr<DataLoader> open_training_data(Run& r) {
  // Samples longer than the model's position table would fail in the first forward pass
  // (an index error on the CPU, a device-side assert that poisons the context on a GPU).
  const io::ShardManifest manifest = io::read_manifest(r.o.shards);
  if (manifest.max_tokens > r.cfg.max_tokens())
    throw io::InputError(
        r.o.shards + "/manifest.json",
        fmt::format("the shards hold samples of up to {} tokens ({} positions with [CLS] and [SEP]), but the model's "
                    "max_position_embeddings is {}: make shards with --max-tokens {} or less, or use a model with "
                    "max_position_embeddings {} or more",
                    manifest.max_tokens, manifest.max_tokens + 2, r.cfg.max_position_embeddings, r.cfg.max_tokens(),
                    manifest.max_tokens + 2));
  uint64_t valid_samples = 0;
  for (const auto& sh : manifest.shards)
    if (sh.split == "valid") valid_samples += sh.samples;
  r.has_validation = valid_samples > 0 && r.o.eval_batches > 0;
  if (r.o.eval_every > 0 && r.o.eval_batches == 0)
    r.say("no evaluation: --eval-batches 0; eval_loss stays null");
  else if (!r.has_validation && r.o.eval_every > 0)
    r.say("no evaluation: the shard set has no validation sample (shards --valid-fraction 0?); eval_loss stays null");
  r.masking = load_masking(r.o.masking, r.o.npmi, r.o.pmi_vocab);
  // The checkpoint's place in its epoch against this shard set's training samples: at or
  // past their end is a damaged cursor on the run's own shards (a checkpoint of before,
  // whose epochs left out the last N mod R, may stand exactly at the end: the next epoch);
  // on another set (--resume --allow-changes) the run goes on at the start of the next
  // epoch, said.
  if (r.o.resume) {
    uint64_t train_samples = 0;
    for (const auto& sh : manifest.shards)
      if (sh.split == "train") train_samples += sh.samples;
    if (r.resumed_version < 3 && train_samples > 0 && r.cursor.position == train_samples) {
      r.cursor.epoch += 1;  // a checkpoint of before at its epoch's end: the next epoch
      r.cursor.position = 0;
    }
    if (train_samples > 0 && r.cursor.position >= train_samples) {
      const bool other_set = r.resumed_shards_sha256.empty() || r.resumed_shards_sha256 != r.shards_sha256;
      if (!other_set)
        throw io::InputError(r.resumed_state, fmt::format("cursor.position is {}, at or beyond the {} training samples "
                                                          "of its shard set {}: the checkpoint is damaged or was edited",
                                                          r.cursor.position, train_samples, r.o.shards));
      r.say(fmt::format("--resume: the run was {} samples into epoch {}, more than the {} training samples of {} "
                        "hold: continuing at the start of epoch {}",
                        r.cursor.position, r.cursor.epoch, train_samples, r.o.shards, r.cursor.epoch + 1));
      r.cursor.epoch += 1;
      r.cursor.position = 0;
    }
  }
  r.loader.shard_dir = r.o.shards;
  r.loader.rank = r.rank;
  r.loader.world = r.world;
  r.loader.batch_size = static_cast<size_t>(r.o.batch_per_rank);
  r.loader.seed = r.o.seed;
  r.loader.checks = ShardChecks{r.o.verify_shards, true, r.rank, r.world};
  r.loader.genome_weights = r.o.genome_weights;  // each rank checks its share of the files
  if (r.o.verify_shards) r.say(fmt::format("verifying the shards of {} (SHA-256, token ids)", r.o.shards));
  return std::make_unique<DataLoader>(r.loader, Masker(r.masking), r.cursor);
}

/// RUN/metrics.jsonl on rank 0, continuing from the checkpoint: lines after it (an
/// interrupted run's) go, and a line torn by a crash is dropped, not fatal.
void open_metrics(Run& r) {
  if (r.rank != 0) return;
  std::vector<std::string> kept;
  int64_t last = 0;  // the last step of the lines kept
  if (r.o.resume && fs::exists(r.metrics_path)) {
    std::ifstream in(r.metrics_path);
    std::string line;
    uint64_t lineno = 0;
    while (std::getline(in, line)) {
      ++lineno;
      if (line.empty()) continue;
      const auto j = io::try_parse_json(line).value;  // null when not JSON
      if (j.is_discarded() || !j.is_object() || !j.contains("step") || !j["step"].is_number_integer()) {
        r.say(fmt::format("{}:{}: dropped a line that is not a complete metrics record", r.metrics_path, lineno));
        continue;
      }
      if (j["step"].get<int64_t>() <= r.step) {
        kept.push_back(line);
        last = std::max(last, j["step"].get<int64_t>());
      }
    }
  }
  // The log of the steps up to the checkpoint is the one this run continues: lines missing
  // from it (a metrics.jsonl cut at a line end, or lost) stay missing from the log and the
  // plot, which is said rather than left as a silent gap.
  if (const int64_t want = r.step / r.o.log_every * r.o.log_every; r.o.resume && want > 0 && last < want)
    r.say(fmt::format("{}: the log of the run so far ends {} but the checkpoint resumed is step {} (the log is "
                      "written every {} steps): the lines of steps {}..{} are missing from it (the file was cut short, "
                      "edited or removed), and stay missing from metrics.jsonl and its plot",
                      r.metrics_path, last > 0 ? fmt::format("at step {}", last) : std::string("before step 1"),
                      r.step, r.o.log_every, std::max<int64_t>(last + 1, 1), want));
  // Written anew and renamed into place, then appended to: a metrics.jsonl that is a link (to
  // a file elsewhere, or a hard link of a `cp -al` snapshot of the run) is replaced, never
  // written through.
  {
    io::AtomicFile f(r.metrics_path);
    for (const auto& l : kept) f.stream() << l << '\n';
    f.commit();
  }
  r.metrics.emplace(r.metrics_path, /*sync=*/false);
}

void write_metrics(Run& r, const nlohmann::json& j) {
  if (r.rank != 0) return;
  r.metrics->append(io::json_text(j) + "\n");
}

/// An evaluation: the masked-token loss (nullopt when the batches hold no masked token), the
/// validation samples and masked tokens it is over (all ranks), and the split's samples.
struct Evaluation {
  std::optional<double> loss;
  uint64_t samples = 0, masked = 0, split_samples = 0;
};

/// The validation samples an evaluation takes: the first --eval-batches x --batch-per-rank of
/// the split in sample order (all of them when that is more), whatever the rank count.
uint64_t eval_sample_count(const PretrainOptions& o) {
  const auto b = static_cast<uint64_t>(o.eval_batches), per = static_cast<uint64_t>(o.batch_per_rank);
  return b > UINT64_MAX / per ? UINT64_MAX : b * per;
}

/// Masked-token loss on the validation split: its first eval_sample_count() samples, the same
/// samples and masks at every rank count (the ranks share them: rank r takes r, r+R, ...; a
/// rank past them evaluates nothing), so that runs at other rank counts log the same
/// quantity. Called only when the shard set has validation data (r.has_validation): a
/// validation shard that cannot be read is an error, not a skipped evaluation. Collective.
Evaluation evaluate(Run& r) {
  LoaderOptions vo = r.loader;
  vo.split = "valid";
  vo.shuffle = false;
  vo.genome_weights.clear();  // the validation loss is over the validation samples as they are
  vo.first_samples = eval_sample_count(r.o);
  // --verify covered both splits when the training loader opened them; else the validation
  // shards' SHA-256 once, at the first evaluation (each rank its share).
  vo.checks = ShardChecks{false, !r.o.verify_shards && !r.valid_checksums_done, r.rank, r.world};
  r.valid_checksums_done = true;
  DataLoader valid(vo, Masker(r.masking));
  torch::NoGradGuard ng;
  r.model->eval();
  uint64_t counts[2] = {0, 0};  // samples, masked tokens
  torch::Tensor acc = torch::zeros({}, torch::TensorOptions().dtype(torch::kFloat64).device(r.device));
  const auto nb = valid.batches_per_epoch();  // this rank's share, the last batch short
  for (uint64_t i = 0; i < nb; ++i) {
    const HostBatch h = stage(valid.next(), r.device.is_cuda(), r.packing, r.model->config.max_tokens() + 2);
    counts[0] += static_cast<uint64_t>(h.samples);  // not a packed row's padding segment
    counts[1] += static_cast<uint64_t>(h.masked);
    acc += summed_loss(r.model, to_device(h, r.device), r.bf16).to(torch::kFloat64);
  }
  r.model->train();
  const double sum = hpc::allreduce_sum_double(acc.item<double>(), r.comm);
  hpc::allreduce_sum_u64(counts, 2, r.comm);
  Evaluation e;
  e.samples = counts[0];
  e.masked = counts[1];
  e.split_samples = valid.dataset_size();
  if (e.masked > 0) e.loss = sum / static_cast<double>(e.masked);
  return e;
}

/// RUN/checkpoints/step-N, atomically (written as step-N.tmp, renamed): the HF-layout model,
/// the optimizer, each rank's random state and state.json (format, step, data cursor, the
/// run's settings). Only the last --keep-checkpoints stay. Collective.
std::string save_checkpoint(Run& r, int64_t at) {
  // Tests: a slow file system (GENEMASK_TEST_SLOW_CHECKPOINT_S seconds per checkpoint), to
  // check that checkpoint time stays out of tokens/s.
  if (const char* slow = std::getenv("GENEMASK_TEST_SLOW_CHECKPOINT_S"))
    std::this_thread::sleep_for(std::chrono::duration<double>(std::atof(slow)));
  const std::string final_dir = io::checkpoint_dir(r.o.out, at);
  const std::string tmp = final_dir + ".tmp";
  if (r.rank == 0) {
    fs::remove_all(tmp);
    try {
      export_hf(r.model, tmp);
      save_torch_file(*r.optimizer, tmp + "/optimizer.pt");
    } catch (...) {  // a full disk, say: no half-written step-N.tmp left behind
      std::error_code ec;
      fs::remove_all(tmp, ec);
      throw;
    }
  }
  hpc::barrier(r.comm);  // the directory exists before others write into it
  std::exception_ptr failed;  // this rank's error, rethrown as it was (an out-of-memory error stays one)
  std::string why;              // and its words, for the other ranks
  try {
    save_torch_file(rng_state(torch::kCPU), rng_file(tmp, "rng-", r.rank));
    if (r.device.is_cuda()) save_torch_file(rng_state(r.device), rng_file(tmp, "cuda-rng-", r.rank));
  } catch (const std::exception& e) {
    failed = std::current_exception();
    why = e.what();
  } catch (...) {
    failed = std::current_exception();
    why = "cannot write the random state";
  }
  // Agreed by every rank: rank 0 removes the step's directory, and every rank stops with the
  // first failing rank's reason, so that whichever line is printed says why (before, rank 0
  // waited here until mpirun killed it, and step-N.tmp stayed until the next run).
  if (const uint64_t first = hpc::allreduce_max_u64(failed ? UINT64_MAX - static_cast<uint64_t>(r.rank) : 0, r.comm)) {
    const int who = static_cast<int>(UINT64_MAX - first);
    std::error_code ec;
    if (r.rank == 0) fs::remove_all(tmp, ec);
    hpc::bcast_bytes(why, who, r.comm);
    hpc::barrier(r.comm);  // the step's directory is gone before any rank ends the job
    if (failed) std::rethrow_exception(failed);
    throw std::runtime_error(fmt::format("{} (rank {}; checkpoint step {} not written)", why, who, at));
  }
  if (r.rank == 0) {
    nlohmann::json st = {{"format", kCheckpointFormat},
                         {"format_version", kCheckpointVersion},
                         {"run_id", r.run_id},
                         {"step", at},
                         {"steps", r.o.steps},
                         {"world_size", r.world},
                         {"cursor", {{"epoch", r.cursor.epoch}, {"position", r.cursor.position}}},
                         {"init", r.init_dir},
                         {"command_line", r.o.command_line}};
    st.update(run_settings(r));
    if (!r.genome_names.empty()) {
      nlohmann::json g = nlohmann::json::object();
      for (size_t i = 0; i < r.genome_names.size(); ++i) g[r.genome_names[i]] = r.genome_tokens[i];
      st["genome_tokens"] = g;  // tokens trained on per genome up to this step
    }
    st["files"] = checkpoint_files(tmp);  // every rank's random state is there: after the barrier
    try {
      {
        io::AtomicFile f(tmp + "/state.json");
        f.stream() << io::json_text(st, 2) << '\n';
        f.commit();
      }
      // On the disk before it is named a checkpoint (and the rotation below removes older ones).
      io::sync_tree_to_disk(tmp);
      fs::remove_all(final_dir);
      io::rename_or_throw(tmp, final_dir);
    } catch (...) {  // not named a checkpoint: its space goes now
      std::error_code ec;
      fs::remove_all(tmp, ec);
      throw;
    }
    io::sync_to_disk(fs::path(final_dir).parent_path().string());
    r.out_dir->keep();  // the run has a checkpoint to resume from: a later failure keeps it
    const auto all = io::checkpoint_steps(r.o.out);
    std::vector<std::string> old;
    for (size_t i = 0; i + static_cast<size_t>(r.o.keep_checkpoints) < all.size(); ++i)
      old.push_back(io::checkpoint_dir(r.o.out, all[i]));
    // A reader (export-hf, embed, finetune of RUN) holds the checkpoints: they go at a later
    // checkpoint, never under its feet.
    if (!io::remove_checkpoints_unless_read(r.o.out, old))
      r.say(fmt::format("kept {} older checkpoint(s) beyond --keep-checkpoints {}: a reader of the run holds them; "
                        "they are removed at a later checkpoint",
                        old.size(), r.o.keep_checkpoints));
  }
  hpc::barrier(r.comm);
  return final_dir;
}

/// A number for a message: "nan" whatever its sign bit (fmt writes "-nan").
std::string shown(double v) { return std::isnan(v) ? "nan" : fmt::format("{}", v); }

/// Stops a diverged run: one line with the step, what was not finite and the last good
/// checkpoint (every checkpoint on disk is one: none is written after a non-finite step).
[[noreturn]] void stop_diverged(const Run& r, int64_t step, const std::string& what) {
  const int64_t last = latest_checkpoint(r.o.out);
  const std::string next =
      last >= 0 ? fmt::format("nothing of it was saved; the last good checkpoint is {} (step {}): continue from it "
                              "with --resume --allow-changes and a lower --lr (now {:g}) or a longer --warmup",
                              io::checkpoint_dir(r.o.out, last), last, r.o.lr)
                : fmt::format("nothing was saved (the run has no checkpoint): train again with a lower --lr (now {:g}) "
                              "or a longer --warmup",
                              r.o.lr);
  throw io::InputError(r.o.out, fmt::format("training diverged at step {}: {}; {}", step, what, next));
}

/// Watches for a diverging run without a host synchronisation per step: each step folds
/// "is the loss or the gradient norm not finite" into device scalars (the first such step,
/// its loss and norm: a few tiny kernels, no wait), and check() reads them where the loop
/// waits for the device anyway (logged steps, evaluation, checkpoints, the end).
class DivergenceWatch {
 public:
  explicit DivergenceWatch(const torch::Device& d)
      : first_(torch::full({}, -1, torch::TensorOptions().dtype(torch::kLong).device(d))),
        loss_(torch::zeros({}, torch::TensorOptions().dtype(torch::kFloat64).device(d))),
        norm_(torch::zeros({}, torch::TensorOptions().dtype(torch::kFloat64).device(d))) {}

  /// Step `step` (1-based) had this rank's share of the loss `loss` and the gradient norm `norm`.
  void record(int64_t step, const torch::Tensor& loss, const torch::Tensor& norm) {
    torch::NoGradGuard ng;
    const auto n = norm.to(torch::kFloat64);
    const auto first = torch::logical_and(torch::logical_not(torch::logical_and(torch::isfinite(loss), torch::isfinite(n))),
                                          first_.lt(0));
    loss_ = torch::where(first, loss, loss_);
    norm_ = torch::where(first, n, norm_);
    first_.masked_fill_(first, step);
  }

  /// Collective: throws (stop_diverged) when a step so far had a non-finite loss or norm.
  void check(const Run& r) const {
    const int64_t at = first_.item<int64_t>();
    if (!hpc::any_rank(at >= 0, r.comm)) return;
    const double loss = hpc::allreduce_sum_double(at >= 0 ? loss_.item<double>() : 0.0, r.comm);
    stop_diverged(r, at, fmt::format("the loss is {} and the gradient norm {}", shown(loss), shown(norm_.item<double>())));
  }

 private:
  torch::Tensor first_, loss_, norm_;
};

/// Before a checkpoint: every weight finite. A huge learning rate can overflow the weights
/// with finite gradients (weight decay multiplies them by 1 - lr * decay), and the next
/// step's loss would come too late to keep them off the disk.
void check_weights(const Run& r) {
  torch::NoGradGuard ng;
  std::vector<torch::Tensor> finite;
  for (const auto& p : r.params) finite.push_back(torch::isfinite(p).all());
  if (!hpc::any_rank(!torch::stack(finite).all().item<bool>(), r.comm)) return;
  for (const auto& p : r.model->named_parameters())
    if (const int64_t bad = non_finite_count(p.value()))
      stop_diverged(r, r.step, fmt::format("after it the weights of '{}' hold {} non-finite values", p.key(), bad));
  stop_diverged(r, r.step, "after it a weight holds non-finite values");
}

/// The optimizer steps from r.step to --steps (or a signal, or --stop-after). The next
/// step's batches are read, masked and staged in pinned memory on a second thread while the
/// GPU runs this one (on a CPU, where the cores are busy with the step, in turn); loss and
/// gradient norm stay on the device until a logged step reads them.
void train(Run& r, DataLoader& data, PretrainSummary& sum) {
  using clock = std::chrono::steady_clock;
  const auto& o = r.o;
  GradBuckets grads(r.params, r.comm, r.how);
  FusedAdamW fused(*r.optimizer);
  // Under bf16, the products read bf16 copies of the weights that each optimizer step makes
  // again (weight_copies.hpp: the same numbers as autocast's casts in every forward pass).
  std::unique_ptr<WeightCopies> copies;
  if (r.bf16 && fusions().weight_bf16) copies = bert_weight_copies(*r.model);
  fused.keep_weight_copies(copies.get());
  const UseWeightCopies use_copies(copies.get());
  r.say(fmt::format("device {}{}, all-reduce {} over {} gradient bucket(s) of up to {} MiB", r.device.str(),
                    !r.bf16  ? ""
                    : copies ? fmt::format(" (bf16 autocast; the weights' bf16 copies, {} MiB, made once per step)",
                                           copies->bytes() >> 20)
                             : " (bf16 autocast)",
                    to_string(r.how), grads.bucket_count(), grads.bucket_floats_max() * 4 >> 20));
  int64_t parameters = 0;
  for (auto& p : r.params) parameters += p.numel();
  r.say(fmt::format("model {} ({} parameters), masking {}, {} ranks x batch {} x accumulation {} = effective batch {}, "
                    "packing {}, {} threads per rank, {} training samples",
                    model_name(o), parameters, to_string(o.masking), r.world, o.batch_per_rank, o.grad_accum,
                    sum.effective_batch, r.packing ? "on" : "off", r.threads, data.dataset_size()));
  if (!data.genome_probabilities().empty()) {
    std::string shares;
    const auto& gs = data.shard_set().genomes();
    for (size_t g = 0; g < gs.size(); ++g)
      shares += fmt::format("{}{} {:.4f}", g ? ", " : "", gs[g].name, data.genome_probabilities()[g]);
    r.say(fmt::format("--genome-weights {}: each sample drawn from genome {}", o.genome_weights, shares));
  }
  r.model->train();
  const size_t ngenomes = data.shard_set().genomes().size();
  // Fetches run one after another (each is started after the previous one's get()).
  bool keep_first = !o.dump_first_batch.empty() && r.rank == 0;
  const int64_t width = r.model->config.max_tokens() + 2;
  // The graphs' fixed shapes: a micro-batch's samples in rows of the model's width.
  std::optional<StaticLimits> fixed;
  std::unique_ptr<GraphStep> graph;
  if (r.fixed_shapes) {
    fixed = StaticLimits{o.batch_per_rank, width, o.static_capacity};
    graph = std::make_unique<GraphStep>(r.model, grads, fused, r.device, r.bf16, o.clip, r.capture());
  }
  sum.cuda_graphs = r.capture() ? "on" : r.fixed_shapes ? "static (testing)" : "off (" + r.graphs_off + ")";
  const std::string shapes =
      fixed ? fmt::format("each micro-batch in rows of {} positions ({}, rounded up to a multiple of {}), its masked "
                          "positions in the fewest twentieths of them that hold them",
                          width, r.packing ? "as many as it packs into" : "one per sample",
                          (o.batch_per_rank + kRowBuckets - 1) / kRowBuckets)
            : "";
  if (r.capture())
    r.say("CUDA graphs on: " + shapes + "; a graph per shape, captured when first used (the steps that capture one "
          "are kept out of tokens/s: the summary's shape_setup_steps)");
  else if (r.fixed_shapes)
    r.say("CUDA graphs' fixed-shape step without capture (testing): " + shapes);
  else
    r.say("CUDA graphs off: " + r.graphs_off);
  auto fetch = [&data, pinned = r.device.is_cuda(), accum = o.grad_accum, ngenomes, packing = r.packing, width,
                &fixed, &keep_first] {
    StepData sd;
    sd.genome_tokens.assign(ngenomes, 0);
    for (int64_t a = 0; a < accum; ++a) {
      const Batch b = data.next();
      const auto t_stage = std::chrono::steady_clock::now();
      sd.read_s += b.produce_s;
      // Each sample's real tokens: per genome for metrics.jsonl, squared for the attention's FLOPs.
      for (size_t row = 0; row < static_cast<size_t>(b.rows); ++row) {
        uint64_t n = 0;
        for (int64_t c = 0; c < b.cols; ++c) n += static_cast<uint64_t>(b.attention_mask[row * static_cast<size_t>(b.cols) + static_cast<size_t>(c)]);
        // Per genome its 6-mers, [CLS] and [SEP] left out: the unit of the manifest's and
        // mask-stats' tokens of a genome (a share of short samples was counted higher).
        if (row < b.genome.size()) sd.genome_tokens[b.genome[row]] += n >= 2 ? n - 2 : 0;
        sd.len_sq += static_cast<double>(n) * static_cast<double>(n);
      }
      int64_t masked = 0, rows = 0;
      StaticShape shape;
      std::optional<torch::Tensor> staged;
      if (fixed) staged = stage_static(b, packing, *fixed, pinned, shape, masked, rows);
      if (staged) {
        HostBatch h;
        h.buf = std::move(*staged);
        h.masked = masked;
        h.fixed = true;
        h.shape = shape;
        sd.micro.push_back(std::move(h));
      } else {
        sd.micro.push_back(stage(b, pinned, packing, width));
      }
      if (keep_first) {
        sd.first = b;
        keep_first = false;
      }
      sd.masked += static_cast<double>(sd.micro.back().masked);
      sd.tokens += static_cast<double>(b.real_tokens());
      sd.next = b.next;
      sd.stage_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t_stage).count();
    }
    return sd;
  };
  const auto policy = r.device.is_cuda() ? std::launch::async : std::launch::deferred;
  std::future<StepData> pending = std::async(policy, fetch);
  const auto f64 = torch::TensorOptions().dtype(torch::kFloat64).device(r.device);
  std::vector<uint64_t> genome_window(ngenomes, 0), genome_since_checkpoint(ngenomes, 0);
  r.genome_names.clear();
  for (const auto& g : data.shard_set().genomes()) r.genome_names.push_back(g.name);
  r.genome_tokens.assign(ngenomes, 0);
  for (size_t g = 0; g < ngenomes; ++g) {  // the run's tokens before this resume
    const auto& rt = r.resumed_genome_tokens;
    if (rt.is_object() && rt.contains(r.genome_names[g]) && rt[r.genome_names[g]].is_number_unsigned())
      r.genome_tokens[g] = rt[r.genome_names[g]].get<uint64_t>();
  }
  auto t_window = clock::now();
  DivergenceWatch watch(r.device);
  const ModelShape shape = shape_of(r.model->config);
  // The datasheet peak of this rank's GPU in bf16; 0 (no MFU) on a CPU, in fp32, for a GPU
  // not in the table or a MIG slice. Summed over the run's GPUs, each once: ranks that share
  // a GPU share its peak.
  const double peak_here = r.device.is_cuda() && r.bf16 ? datasheet_bf16_tflops(cuda_device_name(r.device.index())) : 0;
  std::vector<double> rank_peaks(static_cast<size_t>(r.world), 0.0);
  rank_peaks[static_cast<size_t>(r.rank)] = peak_here;
  hpc::allreduce_sum_doubles(rank_peaks.data(), r.world, r.comm);
  const double peak_all = run_peak_tflops(r.rank_gpus, rank_peaks);
  const bool peak_known = peak_all > 0;
  // The window's sums (its seconds are the clock's since t_window, less evaluations and
  // checkpoints). The input pipeline's: the seconds the loop waited for a step's batches (what
  // the loader could not hide), and those each of the loader's threads worked on them (reading
  // and masking on DataLoader's, staging on the fetch's: beside the step on a GPU, in turn on
  // a CPU). The busier thread bounds the rate once its share nears 1.
  RateSums window;
  bool said_input_bound = false;
  // --profile-steps N: rank 0 profiles the N steps before the last (a resumed run those of
  // them still to do): their data, micro-batches, all-reduce and update, with the log lines
  // and checkpoints that fall among them; the last step's line, evaluation and checkpoint
  // stay outside.
  const int64_t profile_end = o.steps - 1, profile_begin = std::max(r.step, o.steps - 1 - o.profile_steps);
  std::unique_ptr<ProfileWindow> profiling;  // an early return stops it, keeping nothing
  if (o.profile_steps > 0 && profile_begin >= profile_end)
    r.say(fmt::format("--profile-steps {}: no step to profile (the run resumes at step {} of {})", o.profile_steps,
                      r.step, o.steps));
  // The profiled steps run slower (the profiler's start, its recording, and its reading of the
  // events at the end, on rank 0; the other ranks wait for it at the all-reduce): on every
  // rank, they and the step after them (whose start reads the events) are kept out of the
  // window's rates (tokens/s, model TFLOP/s, the input's shares), as evaluations and
  // checkpoints are, unless the window has no other step.
  const auto kept_out = [&](int64_t step) {
    return o.profile_steps > 0 && profile_begin < profile_end && step >= profile_begin && step <= profile_end;
  };
  RateSums out;  // the window's kept-out steps
  // Where a window of the log holds nothing but those steps, they stay in its rates: the
  // windows' steps, adjacent ones joined, for the profile's line.
  const std::vector<std::pair<int64_t, int64_t>> kept_in =
      windows_within(profile_begin + 1, profile_end + 1, r.step, o.log_every, o.steps);
  while (r.step < o.steps) {
    const auto t_step = clock::now();
    const bool keep_out = kept_out(r.step);
    if (o.profile_steps > 0 && r.rank == 0 && profile_begin < profile_end) {
      if (r.step == profile_begin) {
        profiling = std::make_unique<ProfileWindow>(r.device);
      } else if (r.step == profile_end && profiling) {
        const StepProfile p = profiling->finish(static_cast<int>(profile_end - profile_begin));
        profiling.reset();
        // Tests: a slow reading of the profiler's events (GENEMASK_TEST_SLOW_PROFILE_S seconds
        // more), to check that the window's rates keep the profiled steps out.
        if (const char* slow = std::getenv("GENEMASK_TEST_SLOW_PROFILE_S"))
          std::this_thread::sleep_for(std::chrono::duration<double>(std::atof(slow)));
        sum.profile = p.to_json();
        std::string classes;
        for (const auto& [name, secs] : p.seconds)  // idle is the GPU's: none on a CPU
          if (p.cuda || name != "idle") classes += fmt::format(", {} {:.2f}", name, secs * 1e3);
        // On a GPU also the host's waits for it (a value read, a blocking copy): each one
        // empties the GPU's queue of work.
        const std::string syncs =
            p.host_syncs_per_step >= 0 ? fmt::format("; the host waited for the GPU {:g} times a step", p.host_syncs_per_step) : "";
        std::string rates = "these steps and the next are kept out of tokens/s";
        if (!kept_in.empty()) {
          std::string where;
          int64_t in = 0;
          for (const auto& [first, last] : kept_in) {
            where += fmt::format("{}{}", where.empty() ? "" : ", ",
                                 first == last ? fmt::format("{}", first) : fmt::format("{}-{}", first, last));
            in += last - first + 1;
          }
          const bool all_in = in == profile_end - profile_begin + 1;
          rates = fmt::format("these steps and the next are kept {} tokens/s {} steps {}, whose log windows hold "
                              "no other step (--log-every {})",
                              all_in ? "in" : "out of", all_in ? "at" : "except at", where, o.log_every);
        }
        r.say(fmt::format("profile of steps {}-{} (rank 0, {}), ms per step: step {:.2f}{}{} ({})", profile_begin + 1,
                          profile_end, p.cuda ? "the GPU's kernels" : "the CPU's operators", p.step_s * 1e3, classes,
                          syncs, rates));
      }
    }
    const auto t_wait = clock::now();
    StepData sd = pending.get();
    const double waited = std::chrono::duration<double>(clock::now() - t_wait).count();
    if (r.step + 1 < o.steps) pending = std::async(policy, fetch);
    if (sd.first) dump_batch(*sd.first, o.dump_first_batch);
    const double total_masked = hpc::allreduce_sum_double(sd.masked, r.comm);
    std::vector<std::optional<StepBatch>> micro;  // nullopt: a micro-batch in the graphs' fixed layout
    for (const auto& h : sd.micro)  // every copy of an eager micro-batch queued up front
      micro.push_back(h.fixed ? std::nullopt : std::optional<StepBatch>(to_device(h, r.device)));
    grads.zero();
    if (graph) graph->begin(total_masked);
    torch::Tensor loss_acc = graph ? graph->loss_sum() : torch::zeros({}, f64);
    for (size_t i = 0; i < micro.size(); ++i) {
      if (!micro[i]) {
        graph->micro(sd.micro[i].buf, sd.micro[i].shape);
        continue;
      }
      if (graph && sum.eager_micro_batches++ == 0)
        r.say(fmt::format("step {}: a micro-batch masks {} positions, more than the graphs' buffer for its shape: it "
                          "runs eagerly (the summary counts such micro-batches)",
                          r.step + 1, sd.micro[i].masked));
      auto l = summed_loss(r.model, *micro[i], r.bf16);
      (l / std::max(1.0, total_masked)).backward();
      loss_acc.add_(l.detach().to(torch::kFloat64));
    }
    r.cursor = sd.next;
    grads.allreduce();
    const double lr = scheduled_lr(o.lr, r.step, o.warmup, o.steps);
    for (auto& g : r.optimizer->param_groups()) static_cast<torch::optim::AdamWOptions&>(g.options()).lr(lr);
    torch::Tensor grad_norm;
    if (graph) {
      grad_norm = graph->finish(lr);  // clipping and AdamW, in one graph
      sum.cuda_graphs_captured = graph->graphs();
      sum.fixed_shapes = graph->shapes();
    } else {
      grad_norm = grads.clip(o.clip);
      fused.step(lr);
    }
    watch.record(r.step + 1, loss_acc / std::max(1.0, total_masked), grad_norm);
    ++r.step;
    const bool new_shape = graph && graph->set_up();  // a fixed shape first used, a graph captured
    // Tests: a slow set-up of a new shape (GENEMASK_TEST_SLOW_SHAPE_SETUP_S seconds more), as a
    // capture on a GPU is, to check that the window's rates keep such steps out.
    if (new_shape)
      if (const char* slow = std::getenv("GENEMASK_TEST_SLOW_SHAPE_SETUP_S"))
        std::this_thread::sleep_for(std::chrono::duration<double>(std::atof(slow)));
    // Whether a rank was asked to stop, and whether one set a new shape up (capturing its
    // graph, which the other ranks waited for at the all-reduce): one collective.
    double flags[] = {io::graceful_stop_requested() ? 1.0 : 0.0, new_shape ? 1.0 : 0.0};
    hpc::allreduce_max_doubles(flags, 2, r.comm);
    const bool stop = flags[0] != 0, shape_setup = flags[1] != 0;
    RateSums this_step;
    this_step.secs = std::chrono::duration<double>(clock::now() - t_step).count();
    this_step.tokens = sd.tokens;
    this_step.flops = training_flops(shape, sd.tokens, sd.len_sq, sd.masked);
    this_step.wait = waited;
    this_step.read = sd.read_s;
    this_step.stage = sd.stage_s;
    for (const auto& h : sd.micro) {
      const int64_t rows = h.fixed ? h.shape.rows : h.rows, cols = h.fixed ? h.shape.cols : h.cols;
      this_step.rows += static_cast<double>(rows);
      this_step.positions += static_cast<double>(rows * cols);
      this_step.micro += 1;
    }
    this_step.steps = 1;
    window += this_step;
    // Kept out of the window's rates, on every rank: the profiled steps, and the steps that
    // set a fixed shape up (a graph's capture, once per shape: the run's start more than its
    // rate).
    if (keep_out || shape_setup) out += this_step;
    if (shape_setup) {
      ++sum.shape_setup_steps;
      sum.shape_setup_s += this_step.secs;
    }
    for (size_t g = 0; g < ngenomes; ++g) {
      genome_window[g] += sd.genome_tokens[g];
      genome_since_checkpoint[g] += sd.genome_tokens[g];
    }
    sum.steps_done = r.step;
    // The loss of a step that masked no token (tiny batches, a low masking rate) was not
    // measured: it is null in metrics.jsonl and the summary, never 0 (perplexity 1).
    auto step_loss = [&]() -> std::optional<double> {
      const double summed = hpc::allreduce_sum_double(loss_acc.item<double>(), r.comm);  // collective: every rank
      if (total_masked <= 0) return std::nullopt;
      return summed / total_masked;
    };
    const bool logged = r.step % o.log_every == 0 || r.step == o.steps;
    const bool stopping_after = o.stop_after >= 0 && r.step >= o.stop_after;
    const bool eval_now = o.eval_every > 0 && (r.step % o.eval_every == 0 || r.step == o.steps);
    const bool checkpoint_now =
        (o.checkpoint_every > 0 && r.step % o.checkpoint_every == 0) || r.step == o.steps || stop;
    // Where the loop waits for the device anyway: a diverged step stops the run before
    // anything of it is logged, evaluated or saved.
    if (logged || stopping_after || eval_now || checkpoint_now) watch.check(r);
    if (logged) {
      const std::optional<double> loss = step_loss();  // waits for the step
      const double norm = grad_norm.item<double>();
      if ((loss && !std::isfinite(*loss)) || !std::isfinite(norm))
        stop_diverged(r, r.step, fmt::format("the loss is {} and the gradient norm {}", shown(loss.value_or(0)), shown(norm)));
      sum.last_loss = loss;
      const auto or_null = [](const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(); };
      // The window less its kept-out steps (profiled, or setting a shape up: the same steps on
      // every rank), unless they are all it has.
      const int64_t first_step = r.step - window.steps + 1;  // the window's, for the note below
      RateSums w = window;
      w.secs = std::chrono::duration<double>(clock::now() - t_window).count();  // per rank
      if (out.steps > 0 && out.steps < w.steps) w -= out;
      window = out = RateSums{};
      t_window = clock::now();
      // Collectives on every rank whatever its own clock says, two messages: the sums over
      // ranks, and the slowest rank's input (every rank waits for it at the all-reduce).
      double all[] = {w.tokens, w.flops, w.positions, w.micro, w.rows};
      hpc::allreduce_sum_doubles(all, 5, r.comm);
      const auto [all_tokens, all_flops, all_positions, all_micro, all_rows] = all;
      const double per_s = w.secs > 0 ? 1 / w.secs : 0, per_step_ms = w.steps > 0 ? 1e3 / static_cast<double>(w.steps) : 0;
      double slowest[] = {w.wait * per_s, std::max(w.read, w.stage) * per_s, w.read * per_step_ms, w.stage * per_step_ms};
      hpc::allreduce_max_doubles(slowest, 4, r.comm);
      const double tps = all_tokens * per_s, tflops = all_flops * per_s / 1e12;
      sum.tokens_per_s = tps;
      sum.model_tflops = tflops;
      sum.mfu_datasheet.reset();
      if (peak_known) sum.mfu_datasheet = tflops / peak_all;
      // The share of the positions computed that were real tokens, and a micro-batch's mean
      // rows (all ranks): what a packed step computes beside the synthetic benchmark's full
      // rows of 512.
      const double fill = all_positions > 0 ? all_tokens / all_positions : 0;
      sum.fill = fill;
      sum.rows_per_micro_batch = all_micro > 0 ? all_rows / all_micro : 0;
      sum.input_wait = slowest[0];
      sum.loader_busy = slowest[1];
      sum.loader_read_ms = slowest[2];
      sum.loader_stage_ms = slowest[3];
      // Said once, from the second window on (the first holds the loader's start).
      if (slowest[0] > kInputBoundShare && !said_input_bound && first_step - 1 > sum.start_step) {
        said_input_bound = true;
        r.say(fmt::format("note: steps {}-{} waited for their batches {:.0f}% of the time (the loader: reading and "
                          "masking {:.1f} ms, staging {:.1f} ms a step, slowest rank): the input, not the model, bounds "
                          "the rate (the summary's input_wait)",
                          first_step, r.step, slowest[0] * 100, slowest[2], slowest[3]));
      }
      nlohmann::json genome_tokens;  // null for a shard set of one genome
      if (ngenomes > 0) {
        hpc::allreduce_sum_u64(genome_window.data(), genome_window.size(), r.comm);
        genome_tokens = nlohmann::json::object();
        for (size_t g = 0; g < ngenomes; ++g) genome_tokens[data.shard_set().genomes()[g].name] = genome_window[g];
        std::fill(genome_window.begin(), genome_window.end(), 0);
      }
      nlohmann::json line = {{"step", r.step},
                        {"loss", or_null(loss)},
                        {"perplexity", loss ? nlohmann::json(std::exp(*loss)) : nlohmann::json()},
                        {"masked_tokens", static_cast<uint64_t>(total_masked)},  // a count: an integer
                        {"lr", lr},
                        {"grad_norm", norm},
                        {"tokens_per_s", tps},
                        {"fill", fill},
                        {"rate_steps", w.steps},
                        {"input_wait", slowest[0]},
                        {"loader_busy", slowest[1]},
                        {"model_tflops", tflops},
                        {"precision", precision_name(r.bf16)},
                        {"seconds", std::chrono::duration<double>(clock::now() - r.t_start).count()}};
      if (!genome_tokens.is_null()) line["genome_tokens"] = genome_tokens;  // tokens seen per genome since the last line
      write_metrics(r, line);
      const std::string shown_loss = loss ? fmt::format("loss {:.4f}  ppl {:.2f}", *loss, std::exp(*loss))
                                          : std::string("loss n/a (no token of this step was masked)");
      r.say(fmt::format("step {}/{}  {}  lr {:.3g}  grad {:.3f}  {:.0f} tokens/s", r.step, o.steps, shown_loss, lr, norm,
                        tps));
    } else if (stopping_after) {
      sum.last_loss = step_loss();
    }
    if (stopping_after) return;  // like a kill: no checkpoint
    // Evaluation and checkpoints are not training: their time is kept out of tokens/s (the
    // window's start moves forward by it), so the rate is the training steps' alone.
    const auto t_other = clock::now();
    if (eval_now && r.has_validation) {
      const Evaluation ev = evaluate(r);
      const std::optional<double>& el = ev.loss;
      if (el && !std::isfinite(*el)) stop_diverged(r, r.step, fmt::format("the validation loss is {}", shown(*el)));
      if (el) {
        sum.last_eval_loss = el;
        sum.last_eval_samples = ev.samples;
        sum.last_eval_masked_tokens = ev.masked;
        sum.last_eval_split_samples = ev.split_samples;
        write_metrics(r, {{"step", r.step},
                          {"eval_loss", *el},
                          {"eval_perplexity", std::exp(*el)},
                          {"eval_samples", ev.samples},
                          {"eval_split_samples", ev.split_samples},
                          {"eval_masked_tokens", ev.masked}});
        r.say(fmt::format("step {}  eval loss {:.4f}  eval ppl {:.2f}  over {} of {} validation samples", r.step, *el,
                          std::exp(*el), ev.samples, ev.split_samples));
      } else {
        r.say(fmt::format("step {}  eval loss n/a (no token of {} of {} validation samples was masked)", r.step,
                          ev.samples, ev.split_samples));
      }
    }
    if (checkpoint_now) {
      check_weights(r);
      if (ngenomes > 0) {  // collective: every rank checkpoints at this step
        hpc::allreduce_sum_u64(genome_since_checkpoint.data(), ngenomes, r.comm);
        for (size_t g = 0; g < ngenomes; ++g) r.genome_tokens[g] += genome_since_checkpoint[g];
        std::fill(genome_since_checkpoint.begin(), genome_since_checkpoint.end(), 0);
      }
      sum.last_checkpoint = save_checkpoint(r, r.step);
    }
    t_window += clock::now() - t_other;
    if (stop) {
      sum.interrupted = true;
      if (r.step % o.log_every != 0) sum.last_loss = step_loss();
      r.say(fmt::format("stopping on a signal after step {}; resume with --resume", r.step));
      return;
    }
  }
}

/// RUN/perplexity.svg: the whole curve, steps before a resume included, from metrics.jsonl.
void plot_perplexity(const Run& r) {
  if (r.rank != 0) return;
  std::vector<PlotSeries> s = {{"train (logged steps)", {}}, {"validation", {}}};
  std::ifstream in(r.metrics_path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    // Records open_metrics kept; a value that is not a number (NaN was written as null by
    // earlier versions) is left out of the plot.
    const auto j = io::parse_json(line, r.metrics_path);
    if (!j.is_object() || !j.contains("step") || !j["step"].is_number()) continue;
    if (j.contains("perplexity") && j["perplexity"].is_number())
      s[0].points.emplace_back(j["step"].get<double>(), j["perplexity"].get<double>());
    if (j.contains("eval_perplexity") && j["eval_perplexity"].is_number())
      s[1].points.emplace_back(j["step"].get<double>(), j["eval_perplexity"].get<double>());
  }
  write_line_plot(r.o.out + "/perplexity.svg", "MLM perplexity (" + to_string(r.o.masking) + ", " + model_name(r.o) + ")",
                  "step", "perplexity", s, true);
}

}  // namespace

PretrainSummary pretrain(const PretrainOptions& o, MPI_Comm comm, const std::function<void(const std::string&)>& log) {
  // First thing (the CLI does it before it loads this library): a stop signal (Slurm's
  // warning, scancel) that comes during the set-up is kept, and training stops after its
  // first step with a checkpoint, instead of dying.
  io::stop_gracefully_on({SIGTERM, SIGUSR1});
  check_options(o);
  Run r(o, comm, log);
  choose_runtime(r);
  build_model(r);
  open_run_directory(r);
  digest_inputs(r);
  if (o.resume)
    resume_from_checkpoint(r);
  else
    start_fresh(r);
  const auto data = open_training_data(r);
  open_metrics(r);
  // The --steps this start trains to, in the run's marker: a continuation (--resume with more
  // --steps) stopped before its first checkpoint and log line left nothing else saying the
  // run is no longer finished, and readers took its old final checkpoint as the model.
  if (r.rank == 0) io::set_output_marker_value(o.out, "steps", o.steps);
  // The schedule warms up over --warmup steps, then decays to 0 at --steps: a warm-up as long
  // as the run never decays, and a longer one never reaches --lr (a short run with the
  // default --warmup 500 trained at ~1% of it without a word).
  if (o.warmup >= o.steps && o.steps > 0)
    r.say(fmt::format("warning: --warmup {} is {} --steps {}: the learning rate {} and never decays; give a --warmup "
                      "shorter than --steps (e.g. {})",
                      o.warmup, o.warmup == o.steps ? "equal to" : "longer than", o.steps,
                      o.warmup == o.steps ? fmt::format("reaches --lr {:g} only at the last step", o.lr)
                                          : fmt::format("rises to {:g} only (--lr {:g})",
                                                        scheduled_lr(o.lr, o.steps - 1, o.warmup, o.steps), o.lr),
                      std::max<int64_t>(1, o.steps / 10)));
  PretrainSummary sum;
  sum.start_step = r.step;
  // A resume of a run that has reached --steps runs no step: it reports where the run is
  // (its step and newest checkpoint), not 0 and no checkpoint.
  sum.steps_done = r.step;
  if (o.resume && r.step > 0) sum.last_checkpoint = io::checkpoint_dir(o.out, r.step);
  sum.ranks = r.world;
  sum.effective_batch = o.batch_per_rank * r.world * o.grad_accum;
  sum.allreduce = to_string(r.how);
  sum.precision = precision_name(r.bf16);
  const auto places = hpc::gather_bytes(
      fmt::format("{}\t{}\t{}", io::host_name(), r.local_rank, r.device.str()), 0, r.comm);
  for (const auto& p : places) {
    const size_t a = p.find('\t'), b = p.find('\t', a + 1);
    sum.layout.push_back({p.substr(0, a), p.substr(b + 1), std::stoi(p.substr(a + 1, b - a - 1))});
  }
  train(r, *data, sum);
  sum.packed_attention = packed_attention_paths_taken();
  if (o.stop_after >= 0 && r.step >= o.stop_after && !sum.interrupted) return sum;  // a simulated kill
  if (!sum.interrupted) plot_perplexity(r);
  sum.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - r.t_start).count();
  return sum;
}

}  // namespace genemask::model
