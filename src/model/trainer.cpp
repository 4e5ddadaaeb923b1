#include "model/trainer.hpp"

#include <ATen/core/Generator.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/autocast_mode.h>
#include <torch/torch.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
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
#include "io/error.hpp"
#include "io/safetensors.hpp"
#include "model/bert.hpp"
#include "model/hf_io.hpp"
#include "model/runtime.hpp"

namespace fs = std::filesystem;

namespace genemask::model {
namespace {

std::atomic<bool> g_stop_requested{false};
void on_pretrain_stop_signal(int) { g_stop_requested = true; }  // internal linkage, unlike extern "C"

struct StepBatch {
  torch::Tensor ids, mask, labels;
};

StepBatch to_tensors(const Batch& b, const torch::Device& dev) {
  auto mk = [&](const std::vector<int64_t>& v) {
    return torch::from_blob(const_cast<int64_t*>(v.data()), {b.rows, b.cols}, torch::kLong).clone().to(dev);
  };
  return StepBatch{mk(b.input_ids), mk(b.attention_mask), mk(b.labels)};
}

int64_t masked_count(const Batch& b) {
  int64_t n = 0;
  for (int64_t l : b.labels) n += l != kIgnoreLabel;
  return n;
}

/// bf16 autocast on CUDA for the forward pass (weights and optimizer stay fp32).
struct AutocastScope {
  explicit AutocastScope(bool on) : on_(on) {
    if (on_) {
      at::autocast::set_autocast_dtype(at::kCUDA, at::kBFloat16);
      at::autocast::set_autocast_enabled(at::kCUDA, true);
    }
  }
  ~AutocastScope() {
    if (on_) {
      at::autocast::set_autocast_enabled(at::kCUDA, false);
      at::autocast::clear_cache();
    }
  }
  bool on_;
};
bool g_bf16 = false;

/// Sum of token losses over masked positions (not the mean: the step divides).
torch::Tensor summed_loss(BertForMaskedLM& m, const StepBatch& b) {
  AutocastScope autocast(g_bf16);
  static_assert(kIgnoreLabel == -100);
  return m->masked_lm_loss_sum(b.ids, b.mask, b.labels);
}

/// Gradients summed over ranks, a few large flat buckets at a time.
void allreduce_grads(std::vector<torch::Tensor>& params, MPI_Comm comm) {
  if (hpc::comm_size(comm) == 1) return;
  constexpr int64_t kBucket = int64_t{1} << 24;  // floats (64 MiB)
  std::vector<float> buf;
  size_t i = 0;
  while (i < params.size()) {
    size_t j = i;
    int64_t n = 0;
    while (j < params.size() && (n == 0 || n + params[j].numel() <= kBucket)) n += params[j++].numel();
    buf.resize(static_cast<size_t>(n));
    int64_t off = 0;
    for (size_t k = i; k < j; ++k) {
      auto g = params[k].grad().to(torch::kCPU, torch::kFloat32).contiguous();
      std::memcpy(buf.data() + off, g.data_ptr<float>(), static_cast<size_t>(g.numel()) * sizeof(float));
      off += g.numel();
    }
    hpc::allreduce_sum_f32(buf.data(), static_cast<uint64_t>(n), comm);
    off = 0;
    for (size_t k = i; k < j; ++k) {
      auto& g = params[k].mutable_grad();
      auto t = torch::from_blob(buf.data() + off, g.sizes(), torch::kFloat32);
      g.copy_(t);
      off += g.numel();
    }
    i = j;
  }
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

torch::Tensor rng_state() {
  at::Generator g = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(g.mutex());
  return g.get_state();
}
void set_rng_state(const torch::Tensor& t) {
  at::Generator g = at::detail::getDefaultCPUGenerator();  // a handle to the global generator
  std::lock_guard<std::mutex> lock(g.mutex());
  g.set_state(t);
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
  const auto [local_rank, local_size] = hpc::local_rank_size(comm);
  const torch::Device device = pick_rank_device(o.device, local_rank);
  if (o.precision != "fp32" && !(o.precision == "bf16" && o.device == "cuda"))
    throw std::invalid_argument("--precision bf16 needs --device cuda; on CPU use fp32");
  g_bf16 = o.precision == "bf16";
  const int threads = set_intra_op_threads(o.threads, local_size);

  const BertConfig cfg = o.model.find(".json") != std::string::npos ? BertConfig::from_json_file(o.model)
                                                                    : BertConfig::named(o.model);
  torch::manual_seed(o.seed);
  BertForMaskedLM model(cfg);
  init_weights(*model, cfg);
  model->to(device);
  std::vector<torch::Tensor> params;
  std::vector<torch::Tensor> decay, no_decay;
  for (auto& p : model->named_parameters()) {
    params.push_back(p.value());
    const bool nd = p.key().find("bias") != std::string::npos || p.key().find("LayerNorm") != std::string::npos;
    (nd ? no_decay : decay).push_back(p.value());
  }
  torch::optim::AdamWOptions dopt(o.lr);
  dopt.betas({o.beta1, o.beta2}).eps(o.eps).weight_decay(o.weight_decay);
  torch::optim::AdamWOptions nopt = dopt;
  nopt.weight_decay(0.0);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(decay, std::make_unique<torch::optim::AdamWOptions>(dopt));
  groups.emplace_back(no_decay, std::make_unique<torch::optim::AdamWOptions>(nopt));
  torch::optim::AdamW opt(groups, dopt);

  // Resume: the newest complete checkpoint.
  int64_t step = 0;
  LoaderCursor cursor;
  if (rank == 0) fs::create_directories(o.out + "/checkpoints");
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
    step = st.at("step");
    cursor.epoch = st.at("cursor").at("epoch");
    cursor.position = st.at("cursor").at("position");
    auto imported = import_hf(d);
    {
      torch::NoGradGuard ng;
      auto src = imported->named_parameters();
      for (auto& p : model->named_parameters()) p.value().copy_(src[p.key()].to(device));
    }
    torch::load(opt, d + "/optimizer.pt");
    torch::Tensor rs;
    torch::load(rs, fmt::format("{}/rng-rank{:05d}.pt", d, rank));
    set_rng_state(rs);
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
  DataLoader train(lo, Masker(mcfg), cursor);
  const int64_t effective = o.batch_per_rank * world * o.grad_accum;
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
    while (std::getline(in, line))
      if (!line.empty() && nlohmann::json::parse(line).at("step").get<int64_t>() <= step) kept.push_back(line);
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
    try {
      DataLoader valid(vo, Masker(mcfg));
      torch::NoGradGuard ng;
      model->eval();
      double sum = 0, count = 0;
      const int64_t nb = std::min<int64_t>(o.eval_batches, static_cast<int64_t>(valid.batches_per_epoch()));
      for (int64_t i = 0; i < nb; ++i) {
        Batch b = valid.next();
        count += static_cast<double>(masked_count(b));
        sum += summed_loss(model, to_tensors(b, device)).item<double>();
      }
      model->train();
      sum = hpc::allreduce_sum_double(sum, comm);
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
      export_hf(model, tmp);
      torch::save(opt, tmp + "/optimizer.pt");
    }
    hpc::barrier(comm);  // the directory exists before others write into it
    torch::save(rng_state(), fmt::format("{}/rng-rank{:05d}.pt", tmp, rank));
    hpc::barrier(comm);
    if (rank == 0) {
      nlohmann::json st = {{"step", at},
                           {"world_size", world},
                           {"cursor", {{"epoch", cursor.epoch}, {"position", cursor.position}}},
                           {"seed", o.seed},
                           {"masking", o.masking},
                           {"model", o.model},
                           {"command_line", o.command_line}};
      {
        io::AtomicFile f(tmp + "/state.json");
        f.stream() << st.dump(2) << '\n';
        f.commit();
      }
      fs::remove_all(final_dir);
      fs::rename(tmp, final_dir);
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
  model->train();
  std::vector<double> ppl_x, ppl_y, eval_x, eval_y;
  double tokens_window = 0;
  auto t_window = clock::now();
  while (step < o.steps) {
    std::vector<Batch> micro;
    double local_masked = 0, local_tokens = 0;
    for (int64_t a = 0; a < o.grad_accum; ++a) {
      micro.push_back(train.next());
      local_masked += static_cast<double>(masked_count(micro.back()));
      local_tokens += static_cast<double>(micro.back().real_tokens());
    }
    const double total_masked = hpc::allreduce_sum_double(local_masked, comm);
    opt.zero_grad();
    double loss_sum = 0;
    for (const auto& b : micro) {
      auto l = summed_loss(model, to_tensors(b, device));
      (l / std::max(1.0, total_masked)).backward();
      loss_sum += l.item<double>();
    }
    cursor = micro.back().next;
    allreduce_grads(params, comm);
    const double grad_norm = torch::nn::utils::clip_grad_norm_(params, o.clip);
    const double lr = scheduled_lr(o.lr, step, o.warmup, o.steps);
    for (auto& g : opt.param_groups()) static_cast<torch::optim::AdamWOptions&>(g.options()).lr(lr);
    opt.step();
    ++step;
    const double loss = hpc::allreduce_sum_double(loss_sum, comm) / std::max(1.0, total_masked);
    tokens_window += hpc::allreduce_sum_double(local_tokens, comm);
    sum.last_loss = loss;
    sum.steps_done = step;
    if (step % o.log_every == 0 || step == o.steps) {
      const double secs = std::chrono::duration<double>(clock::now() - t_window).count();
      const double tps = secs > 0 ? tokens_window / secs : 0;
      sum.tokens_per_s = tps;
      tokens_window = 0;
      t_window = clock::now();
      if (rank == 0) {
        nlohmann::json j = {{"step", step},
                            {"loss", loss},
                            {"perplexity", std::exp(loss)},
                            {"lr", lr},
                            {"grad_norm", grad_norm},
                            {"tokens_per_s", tps},
                            {"seconds", std::chrono::duration<double>(clock::now() - t_start).count()}};
        metrics << j.dump() << '\n';
        metrics.flush();
      }
      ppl_x.push_back(static_cast<double>(step));
      ppl_y.push_back(std::exp(loss));
      say(fmt::format("step {}/{}  loss {:.4f}  ppl {:.2f}  lr {:.3g}  grad {:.3f}  {:.0f} tokens/s", step, o.steps, loss,
                      std::exp(loss), lr, grad_norm, tps));
    }
    if (o.stop_after >= 0 && step >= o.stop_after) return sum;  // like a kill: no checkpoint
    if (o.eval_every > 0 && (step % o.eval_every == 0 || step == o.steps)) {
      const double el = evaluate();
      if (el >= 0) {
        sum.last_eval_loss = el;
        eval_x.push_back(static_cast<double>(step));
        eval_y.push_back(std::exp(el));
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
