#include "model/trainer.hpp"

#include <ATen/core/Generator.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <atomic>
#include <chrono>
#include <future>
#include <cmath>
#include <csignal>
#include <optional>
#include <cstring>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <nlohmann/json.hpp>
#include <mutex>
#include <thread>

#include "genemask/loader.hpp"
#include "genemask/svg_plot.hpp"
#include "hpc/mpi.hpp"
#include "io/atomic_file.hpp"
#include "io/dir_lock.hpp"
#include "io/error.hpp"
#include "io/safetensors.hpp"
#include "model/bert.hpp"
#include "model/grad_sync.hpp"
#include "model/hf_io.hpp"
#include "model/optim.hpp"
#include "model/runtime.hpp"

namespace fs = std::filesystem;

namespace genemask::model {
namespace {

std::atomic<bool> g_stop_requested{false};
void on_pretrain_stop_signal(int) { g_stop_requested = true; }  // internal linkage, unlike extern "C"

/// One micro-batch on the host in one int64 buffer (pinned for a GPU, so that the copy is
/// asynchronous): input ids | attention mask | flat indices of the masked positions | their
/// target ids. The masked positions are found here, so the device never synchronises to
/// find them.
struct HostBatch {
  torch::Tensor buf;
  int64_t rows = 0, cols = 0, masked = 0;
  bool padded = false;
};

HostBatch stage(const Batch& b, bool pinned) {
  HostBatch h;
  h.rows = b.rows;
  h.cols = b.cols;
  const int64_t n = b.rows * b.cols;
  for (int64_t l : b.labels) h.masked += l != kIgnoreLabel;
  h.padded = static_cast<int64_t>(b.real_tokens()) < n;
  h.buf = torch::empty({2 * n + 2 * h.masked}, torch::TensorOptions().dtype(torch::kLong).pinned_memory(pinned));
  int64_t* p = h.buf.data_ptr<int64_t>();
  std::copy(b.input_ids.begin(), b.input_ids.end(), p);
  std::copy(b.attention_mask.begin(), b.attention_mask.end(), p + n);
  int64_t* rows = p + 2 * n;
  int64_t* targets = rows + h.masked;
  for (int64_t i = 0, k = 0; i < n; ++i)
    if (b.labels[static_cast<size_t>(i)] != kIgnoreLabel) {
      rows[k] = i;
      targets[k++] = b.labels[static_cast<size_t>(i)];
    }
  return h;
}

struct StepBatch {
  torch::Tensor ids, mask, rows, targets;  // mask undefined: no padding
};

/// Testing: a staged micro-batch as safetensors (input_ids, attention_mask, labels with -100
/// where unmasked), for an independent loss computation.
void dump_batch(const HostBatch& h, const std::string& path) {
  const int64_t n = h.rows * h.cols;
  const int64_t* p = h.buf.data_ptr<int64_t>();
  std::vector<int64_t> labels(static_cast<size_t>(n), kIgnoreLabel);
  for (int64_t k = 0; k < h.masked; ++k) labels[static_cast<size_t>(p[2 * n + k])] = p[2 * n + h.masked + k];
  auto tensor = [&](const char* name, const int64_t* data) {
    io::StTensor t;
    t.name = name;
    t.dtype = "I64";
    t.shape = {h.rows, h.cols};
    t.data.resize(static_cast<size_t>(n) * sizeof(int64_t));
    std::memcpy(t.data.data(), data, t.data.size());
    return t;
  };
  io::write_safetensors(path, {tensor("input_ids", p), tensor("attention_mask", p + n), tensor("labels", labels.data())});
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
  return s;
}

/// The micro-batches of one optimizer step, staged on the host.
struct StepData {
  std::vector<HostBatch> micro;
  double masked = 0, tokens = 0;
  LoaderCursor next;
};

/// Sum of token losses over masked positions (not the mean: the step divides).
torch::Tensor summed_loss(BertForMaskedLM& m, const StepBatch& b, bool bf16) {
  Autocast autocast(bf16);
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
  const auto steps = checkpoint_steps(out);
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

}  // namespace

double scheduled_lr(double peak, int64_t step, int64_t warmup, int64_t steps) {
  if (step < warmup) return peak * static_cast<double>(step + 1) / static_cast<double>(warmup);
  if (steps <= warmup) return peak;
  return peak * std::max(0.0, static_cast<double>(steps - step - 1) / static_cast<double>(steps - warmup));
}

PretrainSummary pretrain(const PretrainOptions& o, MPI_Comm comm, const std::function<void(const std::string&)>& log) {
  // First thing: a stop signal (Slurm's warning, scancel) that comes during the set-up is
  // kept, and training stops after its first step with a checkpoint, instead of dying.
  std::signal(SIGTERM, on_pretrain_stop_signal);
  std::signal(SIGUSR1, on_pretrain_stop_signal);
  using clock = std::chrono::steady_clock;
  const auto t_start = clock::now();
  const int rank = hpc::comm_rank(comm), world = hpc::comm_size(comm);
  hpc::check_slurm_world(world);
  auto say = [&](const std::string& s) {
    if (rank == 0 && log) log(s);
  };
  if (o.steps <= 0 || o.batch_per_rank <= 0 || o.grad_accum <= 0)
    throw std::invalid_argument("--steps, --batch-per-rank and --grad-accum must be positive");
  // NaN compares false: every check is written so that NaN fails it.
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
  if (o.warmup < 0 || o.log_every <= 0 || o.checkpoint_every < 0 || o.eval_every < 0 || o.eval_batches < 0)
    throw std::invalid_argument("--warmup, --checkpoint-every, --eval-every and --eval-batches must be >= 0, --log-every > 0");
  const auto [local_rank, local_size] = hpc::local_rank_size(comm);
  const bool bf16 = wants_bf16(o.precision, o.device);
  const torch::Device device = pick_rank_device(o.device, local_rank);
  use_device(device, o.tf32);  // before any CUDA work
  const AllReduce how = choose_allreduce(o.allreduce, device, device.is_cuda() ? runtime_info().gpus : 0, local_size, comm);
  const int threads = set_intra_op_threads(o.threads, local_size);

  // --init: the architecture and weights of an HF-format model (or a run's newest
  // checkpoint); the optimizer, schedule and masking are this run's own.
  const std::string init_dir = o.init.empty() ? "" : resolve_model_dir(o.init);
  const BertConfig cfg = !init_dir.empty() ? BertConfig::from_json_file(init_dir + "/config.json")
                         : o.model.find(".json") != std::string::npos ? BertConfig::from_json_file(o.model)
                                                                        : BertConfig::named(o.model);
  torch::manual_seed(o.seed);
  BertForMaskedLM model(cfg);
  init_weights(*model, cfg);
  if (!init_dir.empty() && !o.resume) {
    const bool bin = !fs::exists(init_dir + "/model.safetensors");
    load_state(model, init_dir + (bin ? "/pytorch_model.bin" : "/model.safetensors"), read_hf_tensors(init_dir));
    say(fmt::format("initialised from {}", init_dir));
  }
  model->to(device);
  std::vector<torch::Tensor> params;
  for (auto& p : model->parameters()) params.push_back(p);
  AdamWSettings adamw;
  adamw.lr = o.lr;
  adamw.beta1 = o.beta1;
  adamw.beta2 = o.beta2;
  adamw.eps = o.eps;
  adamw.weight_decay = o.weight_decay;
  auto optimizer = make_adamw(model->named_parameters(), adamw);
  torch::optim::AdamW& opt = *optimizer;

  // Resume: the newest complete checkpoint.
  int64_t step = 0;
  LoaderCursor cursor;
  std::optional<io::OutputDir> out_dir;  // a new --out goes again if the run fails before its first checkpoint
  std::optional<io::DirLock> lock;
  if (rank == 0) {
    out_dir.emplace(o.out);
    fs::create_directories(o.out + "/checkpoints");
    lock.emplace(o.out, "genemask run");  // before anything in --out is read or written
  }
  if (!o.resume && latest_checkpoint(o.out) >= 0)
    throw io::InputError(o.out, "already holds checkpoints of a run: continue it with --resume, or choose a new --out");
  if (o.resume) {
    const int64_t last = latest_checkpoint(o.out);
    if (last < 0) throw io::InputError(o.out, "--resume: no complete checkpoint in checkpoints/");
    const std::string d = checkpoint_dir(o.out, last);
    std::ifstream in(d + "/state.json");
    nlohmann::json st;
    in >> st;
    if (st.at("world_size").get<int>() != world)
      throw io::InputError(d + "/state.json", fmt::format("was written by {} ranks; resume with the same number (now {})",
                                                          st.at("world_size").get<int>(), world));
    // The run's settings: a different one would silently make another run of this one.
    const nlohmann::json now = {{"seed", o.seed}, {"masking", o.masking}, {"model", o.model},
                                {"batch_per_rank", o.batch_per_rank}, {"grad_accum", o.grad_accum},
                                {"shards", fs::weakly_canonical(o.shards).string()}};
    for (const auto& [key, value] : now.items()) {
      if (!st.contains(key) || st[key] == value || o.allow_changes) continue;
      throw io::InputError(d + "/state.json",
                           fmt::format("--resume: --{} is {} now but {} in the run; resume with the run's settings, or "
                                       "pass --allow-changes to continue with the new one deliberately",
                                       key == "batch_per_rank" ? "batch-per-rank" : key == "grad_accum" ? "grad-accum" : key,
                                       value.dump(), st[key].dump()));
    }
    {
      const BertConfig saved = BertConfig::from_json_file(d + "/config.json");
      const auto a = nlohmann::json::parse(saved.to_json()), b = nlohmann::json::parse(cfg.to_json());
      for (const auto& [key, value] : a.items())
        if (b.contains(key) && b[key] != value)
          throw io::InputError(d + "/config.json",
                               fmt::format("--resume: the model's {} is {} in the run but {} in --model {}; resume "
                                           "with the run's model config",
                                           key, value.dump(), b[key].dump(), o.model));
    }
    step = st.at("step");
    cursor.epoch = st.at("cursor").at("epoch");
    cursor.position = st.at("cursor").at("position");
    auto imported = import_hf(d);
    {
      torch::NoGradGuard ng;
      auto src = imported->named_parameters();
      for (auto& p : model->named_parameters()) p.value().copy_(src[p.key()].to(device));
      model->pooler_weight.copy_(imported->pooler_weight);
      model->pooler_bias.copy_(imported->pooler_bias);
      model->has_pooler = imported->has_pooler;
    }
    torch::load(opt, d + "/optimizer.pt");
    torch::Tensor rs;
    torch::load(rs, rng_file(d, "rng-", rank));
    set_rng_state(torch::kCPU, rs);
    if (device.is_cuda()) {
      const std::string f = rng_file(d, "cuda-rng-", rank);
      if (fs::exists(f)) {
        torch::load(rs, f);
        set_rng_state(device, rs);
      } else {
        say(fmt::format("{} holds no GPU random state (written by a CPU run): GPU dropout continues from a new "
                        "stream",
                        d));
      }
    }
    say(fmt::format("resumed from {} (step {}, epoch {}, position {})", d, step, cursor.epoch, cursor.position));
  } else {
    broadcast_params(params, comm);
    torch::manual_seed(o.seed + static_cast<uint64_t>(rank) + 1);  // distinct dropout per rank
  }

  // Data: this rank's share, masked per (seed, epoch, sample index).
  MaskingConfig mcfg = load_masking(o.masking, o.npmi, o.pmi_vocab);
  LoaderOptions lo;
  lo.shard_dir = o.shards;
  lo.rank = rank;
  lo.world = world;
  lo.batch_size = static_cast<size_t>(o.batch_per_rank);
  lo.seed = o.seed;
  lo.checks = ShardChecks{o.verify_shards, rank, world};  // each rank checks its share of the files
  if (o.verify_shards) say(fmt::format("verifying the shards of {} (SHA-256, token ids)", o.shards));
  DataLoader train(lo, Masker(mcfg), cursor);
  const int64_t effective = o.batch_per_rank * world * o.grad_accum;
  GradBuckets grads(params, comm, how);
  FusedAdamW fused(opt);
  say(fmt::format("device {}{}, all-reduce {} over {} gradient bucket(s) of up to {} MiB",
                  device.str(), bf16 ? " (bf16 autocast)" : "", to_string(how), grads.bucket_count(),
                  grads.bucket_floats_max() * 4 >> 20));
  say(fmt::format("model {} ({} parameters), masking {}, {} ranks x batch {} x accumulation {} = effective batch {}, "
                  "{} threads per rank, {} training samples",
                  o.model, [&] {
                    int64_t n = 0;
                    for (auto& p : params) n += p.numel();
                    return n;
                  }(),
                  o.masking, world, o.batch_per_rank, o.grad_accum, effective, threads, train.dataset_size()));

  // metrics.jsonl continues from the checkpoint: later lines of an interrupted run go.
  const std::string metrics_path = o.out + "/metrics.jsonl";
  std::vector<std::string> kept;
  if (rank == 0 && o.resume && fs::exists(metrics_path)) {
    std::ifstream in(metrics_path);
    std::string line;
    uint64_t lineno = 0, torn = 0;
    while (std::getline(in, line)) {
      ++lineno;
      if (line.empty()) continue;
      // A line cut by a crash (or mangled) is dropped, not fatal: the run must stay resumable.
      const auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (j.is_discarded() || !j.is_object() || !j.contains("step") || !j["step"].is_number_integer()) {
        ++torn;
        say(fmt::format("{}:{}: dropped a line that is not a complete metrics record", metrics_path, lineno));
        continue;
      }
      if (j["step"].get<int64_t>() <= step) kept.push_back(line);
    }
    (void)torn;
  }
  std::ofstream metrics;
  if (rank == 0) {
    metrics.open(metrics_path, std::ios::trunc);
    for (const auto& l : kept) metrics << l << '\n';
    metrics.flush();
  }

  auto evaluate = [&]() -> double {
    LoaderOptions vo = lo;
    vo.split = "valid";
    vo.shuffle = false;
    vo.checks = {};  // --verify covered both splits when the training loader opened them
    try {
      DataLoader valid(vo, Masker(mcfg));
      torch::NoGradGuard ng;
      model->eval();
      double count = 0;
      torch::Tensor acc = torch::zeros({}, torch::TensorOptions().dtype(torch::kFloat64).device(device));
      const int64_t nb = std::min<int64_t>(o.eval_batches, static_cast<int64_t>(valid.batches_per_epoch()));
      for (int64_t i = 0; i < nb; ++i) {
        const HostBatch h = stage(valid.next(), device.is_cuda());
        count += static_cast<double>(h.masked);
        acc += summed_loss(model, to_device(h, device), bf16).to(torch::kFloat64);
      }
      model->train();
      const double sum = hpc::allreduce_sum_double(acc.item<double>(), comm);
      count = hpc::allreduce_sum_double(count, comm);
      return count > 0 ? sum / count : -1;
    } catch (const io::InputError& e) {
      model->train();
      say(fmt::format("evaluation skipped: {}", e.what()));
      return -1;
    }
  };

  auto save_checkpoint = [&](int64_t at) {
    const std::string final_dir = checkpoint_dir(o.out, at);
    const std::string tmp = final_dir + ".tmp";
    if (rank == 0) {
      fs::remove_all(tmp);
      try {
        export_hf(model, tmp);
        torch::save(opt, tmp + "/optimizer.pt");
      } catch (...) {  // a full disk, say: no half-written step-N.tmp left behind
        std::error_code ec;
        fs::remove_all(tmp, ec);
        throw;
      }
    }
    hpc::barrier(comm);  // the directory exists before others write into it
    torch::save(rng_state(torch::kCPU), rng_file(tmp, "rng-", rank));
    if (device.is_cuda()) torch::save(rng_state(device), rng_file(tmp, "cuda-rng-", rank));
    hpc::barrier(comm);
    if (rank == 0) {
      nlohmann::json st = {{"step", at},
                           {"world_size", world},
                           {"cursor", {{"epoch", cursor.epoch}, {"position", cursor.position}}},
                           {"seed", o.seed},
                           {"masking", o.masking},
                           {"model", o.model},
                           {"init", init_dir},
                           {"batch_per_rank", o.batch_per_rank},
                           {"grad_accum", o.grad_accum},
                           {"shards", fs::weakly_canonical(o.shards).string()},
                           {"command_line", o.command_line}};
      {
        io::AtomicFile f(tmp + "/state.json");
        f.stream() << st.dump(2) << '\n';
        f.commit();
      }
      fs::remove_all(final_dir);
      fs::rename(tmp, final_dir);
      out_dir->keep();  // the run has a checkpoint to resume from: a later failure keeps it
      // Keep the last K.
      const auto all = checkpoint_steps(o.out);
      for (size_t i = 0; i + static_cast<size_t>(o.keep_checkpoints) < all.size(); ++i)
        fs::remove_all(checkpoint_dir(o.out, all[i]));
    }
    hpc::barrier(comm);
    return final_dir;
  };

  PretrainSummary sum;
  sum.start_step = step;
  sum.ranks = world;
  sum.effective_batch = effective;
  sum.allreduce = to_string(how);
  model->train();
  // The next step's batches are read, masked and staged in pinned memory on a second thread
  // while the GPU runs this one (on a CPU, where the cores are busy with the step, in turn).
  auto fetch = [&train, pinned = device.is_cuda(), accum = o.grad_accum] {
    StepData sd;
    for (int64_t a = 0; a < accum; ++a) {
      const Batch b = train.next();
      sd.micro.push_back(stage(b, pinned));
      sd.masked += static_cast<double>(sd.micro.back().masked);
      sd.tokens += static_cast<double>(b.real_tokens());
      sd.next = b.next;
    }
    return sd;
  };
  const auto policy = device.is_cuda() ? std::launch::async : std::launch::deferred;
  std::future<StepData> pending = std::async(policy, fetch);
  const auto f64 = torch::TensorOptions().dtype(torch::kFloat64).device(device);
  double tokens_window = 0;
  auto t_window = clock::now();
  while (step < o.steps) {
    StepData sd = pending.get();
    if (step + 1 < o.steps) pending = std::async(policy, fetch);
    if (!o.dump_first_batch.empty() && step == sum.start_step && rank == 0) dump_batch(sd.micro.front(), o.dump_first_batch);
    const double total_masked = hpc::allreduce_sum_double(sd.masked, comm);
    std::vector<StepBatch> micro;
    for (const auto& h : sd.micro) micro.push_back(to_device(h, device));  // every copy queued up front
    grads.zero();
    // Loss and norm stay on the device: read once per logged step, not per micro-batch.
    torch::Tensor loss_acc = torch::zeros({}, f64);
    for (const auto& b : micro) {
      auto l = summed_loss(model, b, bf16);
      (l / std::max(1.0, total_masked)).backward();
      loss_acc += l.detach().to(torch::kFloat64);
    }
    cursor = sd.next;
    grads.allreduce();
    const torch::Tensor grad_norm = grads.clip(o.clip);
    const double lr = scheduled_lr(o.lr, step, o.warmup, o.steps);
    for (auto& g : opt.param_groups()) static_cast<torch::optim::AdamWOptions&>(g.options()).lr(lr);
    fused.step(lr);
    ++step;
    tokens_window += sd.tokens;
    sum.steps_done = step;
    auto step_loss = [&] { return hpc::allreduce_sum_double(loss_acc.item<double>(), comm) / std::max(1.0, total_masked); };
    if (step % o.log_every == 0 || step == o.steps) {
      const double loss = step_loss();  // waits for the step
      sum.last_loss = loss;
      const double secs = std::chrono::duration<double>(clock::now() - t_window).count();
      const double tps = secs > 0 ? hpc::allreduce_sum_double(tokens_window, comm) / secs : 0;
      const double norm = grad_norm.item<double>();
      sum.tokens_per_s = tps;
      tokens_window = 0;
      t_window = clock::now();
      if (rank == 0) {
        nlohmann::json j = {{"step", step},
                            {"loss", loss},
                            {"perplexity", std::exp(loss)},
                            {"lr", lr},
                            {"grad_norm", norm},
                            {"tokens_per_s", tps},
                            {"seconds", std::chrono::duration<double>(clock::now() - t_start).count()}};
        metrics << j.dump() << '\n';
        metrics.flush();
      }
      say(fmt::format("step {}/{}  loss {:.4f}  ppl {:.2f}  lr {:.3g}  grad {:.3f}  {:.0f} tokens/s", step, o.steps, loss,
                      std::exp(loss), lr, norm, tps));
    } else if (o.stop_after >= 0 && step >= o.stop_after) {
      sum.last_loss = step_loss();
    }
    if (o.stop_after >= 0 && step >= o.stop_after) return sum;  // like a kill: no checkpoint
    if (o.eval_every > 0 && (step % o.eval_every == 0 || step == o.steps)) {
      const double el = evaluate();
      if (el >= 0) {
        sum.last_eval_loss = el;
        if (rank == 0) {
          metrics << nlohmann::json({{"step", step}, {"eval_loss", el}, {"eval_perplexity", std::exp(el)}}).dump() << '\n';
          metrics.flush();
        }
        say(fmt::format("step {}  eval loss {:.4f}  eval ppl {:.2f}", step, el, std::exp(el)));
      }
    }
    const bool stop = hpc::any_rank(g_stop_requested.load(), comm);
    if ((o.checkpoint_every > 0 && step % o.checkpoint_every == 0) || step == o.steps || stop)
      sum.last_checkpoint = save_checkpoint(step);
    if (stop) {
      sum.interrupted = true;
      if (step % o.log_every != 0) sum.last_loss = step_loss();
      say(fmt::format("stopping on a signal after step {}; resume with --resume", step));
      break;
    }
  }
  if (rank == 0 && !sum.interrupted) {
    std::vector<PlotSeries> s = {{"train (logged steps)", {}}, {"validation", {}}};
    // The whole curve, including steps before a resume, from metrics.jsonl.
    std::ifstream in(metrics_path);
    std::string line;
    while (std::getline(in, line)) {
      if (line.empty()) continue;
      auto j = nlohmann::json::parse(line);
      if (j.contains("perplexity")) s[0].points.emplace_back(j["step"].get<double>(), j["perplexity"].get<double>());
      if (j.contains("eval_perplexity")) s[1].points.emplace_back(j["step"].get<double>(), j["eval_perplexity"].get<double>());
    }
    write_line_plot(o.out + "/perplexity.svg", "MLM perplexity (" + o.masking + ", " + o.model + ")", "step",
                    "perplexity", s, true);
  }
  sum.seconds = std::chrono::duration<double>(clock::now() - t_start).count();
  return sum;
}

}  // namespace genemask::model
