// genemask pretrain: MLM pretraining, data-parallel over MPI ranks. The LibTorch code lives
// in libgenemask_model.so, loaded on first use, so other subcommands start without it.
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <optional>

#include "common.hpp"
#include "genemask/corpus/genome_sampling.hpp"
#include "io/atomic_file.hpp"
#include "model/trainer.hpp"
#include "model_plugin.hpp"

namespace genemask::cli {
namespace {

/// A number that may not have been measured: null then, never a stand-in 0.
nlohmann::json or_null(const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(); }

void run_pretrain(model::PretrainOptions o, Context& ctx) {
  o.command_line = ctx.command_line;
  const model::LogFn log = [](const std::string& line) { std::cerr << "[pretrain] " << line << std::endl; };
  model::PretrainSummary s;
  // Testing hook: a pause before the model library loads, for a signal to come then
  // (tests/cli/test_pretrain.py).
  if (std::getenv("GENEMASK_TEST_HOLD_START")) {
    std::cerr << "genemask: holding before the model library loads" << std::endl;
    io::hold_for_tests("GENEMASK_TEST_HOLD_START");
  }
  GENEMASK_MODEL_ENTRY(genemask_model_pretrain)(&o, MPI_COMM_WORLD, &log, &s);
  nlohmann::json layout = nlohmann::json::array();
  for (const auto& p : s.layout)
    layout.push_back({{"host", p.host}, {"local_rank", p.local_rank}, {"device", p.device}});
  nlohmann::json summary = {{"command", "pretrain"},
                            {"out", o.out},
                            {"masking", to_string(o.masking)},
                            {"model", model::model_name(o)},
                            {"init", o.init},
                            {"ranks", s.ranks},
                            {"effective_batch", s.effective_batch},
                            {"allreduce", s.allreduce},
                            {"layout", layout},
                            {"precision", s.precision},
                            {"packing", o.packing},
                            {"cuda_graphs", s.cuda_graphs},
                            {"packed_attention", s.packed_attention},
                            {"eager_micro_batches", s.eager_micro_batches},
                            {"cuda_graphs_captured", s.cuda_graphs_captured},
                            {"fixed_shapes", s.fixed_shapes},
                            {"shape_setup_steps", s.shape_setup_steps},
                            {"shape_setup_s", s.shape_setup_s},
                            {"start_step", s.start_step},
                            {"steps_done", s.steps_done},
                            {"loss", or_null(s.last_loss)},
                            {"eval_loss", or_null(s.last_eval_loss)},
                            {"eval_samples", s.last_eval_samples},
                            {"eval_split_samples", s.last_eval_split_samples},
                            {"eval_masked_tokens", s.last_eval_masked_tokens},
                            {"tokens_per_s", or_null(s.tokens_per_s)},
                            {"fill", or_null(s.fill)},
                            {"rows_per_micro_batch", or_null(s.rows_per_micro_batch)},
                            {"input_wait", or_null(s.input_wait)},
                            {"loader_busy", or_null(s.loader_busy)},
                            {"loader_ms_per_step", {{"read", or_null(s.loader_read_ms)}, {"stage", or_null(s.loader_stage_ms)}}},
                            {"model_tflops", or_null(s.model_tflops)},
                            {"mfu_datasheet", or_null(s.mfu_datasheet)},
                            {"seconds", s.seconds},
                            {"interrupted", s.interrupted},
                            {"checkpoint", s.last_checkpoint}};
  // --profile-steps: the profile of rank 0's steps, as train_bench writes it (null: none).
  summary["profile"] = s.profile.empty() ? nlohmann::json() : nlohmann::json::parse(s.profile);
  print_summary(ctx, summary);
  if (s.interrupted) {
    if (ctx.rank == 0)
      std::cerr << "genemask: pretraining stopped by a signal at step " << s.steps_done << " of "
                << o.steps << " (exit status " << kExitStopped << "); continue with --resume" << std::endl;
    ctx.exit_code = kExitStopped;
  }
}

}  // namespace

void register_pretrain(CLI::App& app, Context& ctx) {
  auto o = std::make_shared<model::PretrainOptions>();
  auto* sub = app.add_subcommand("pretrain", "MLM pretraining of a BERT model, data-parallel over MPI ranks");
  sub->add_option("--shards", o->shards, "shard directory from `genemask shards`")->required()->check(existing_directory());
  add_masking_option(sub, o->masking);
  sub->add_option("--npmi", o->npmi, "npmi.tsv (genemask masking)")->check(existing_file());
  sub->add_option("--pmi-vocab", o->pmi_vocab, "pmi_vocab.tsv (pmi-vocab masking)")->check(existing_file());
  auto* model_opt = sub->add_option("--model", o->model, "dnabert, logo or an HF-style config.json")->capture_default_str();
  sub->add_option("--init", o->init,
                  "continue pretraining from this model: an HF-format directory (config.json + model.safetensors "
                  "or pytorch_model.bin, e.g. DNABERT-6's release) or a pretrain run; its config replaces --model")
      ->check(existing_directory())
      ->excludes(model_opt);
  sub->add_option("--out", o->out, "run directory (checkpoints/, metrics.jsonl, perplexity.svg)")->required();
  sub->add_option("--steps", o->steps, "optimizer steps")->capture_default_str();
  sub->add_option("--warmup", o->warmup, "linear warm-up steps")->capture_default_str();
  sub->add_option("--lr", o->lr, "peak learning rate")->capture_default_str();
  sub->add_option("--batch-per-rank", o->batch_per_rank, "sequences per micro-batch per rank")->capture_default_str();
  sub->add_option("--grad-accum", o->grad_accum, "micro-batches per step (HGA: 12)")->capture_default_str();
  sub->add_option("--weight-decay", o->weight_decay, "AdamW weight decay (not on bias/LayerNorm)")->capture_default_str();
  sub->add_option("--seed", o->seed, "seed (initialisation, data order, masks)")->capture_default_str();
  sub->add_option("--eval-every", o->eval_every, "steps between validation runs (0 = never)")->capture_default_str();
  sub->add_option("--eval-batches", o->eval_batches, "validation batches of --batch-per-rank, over all ranks: the loss is over the validation "
                  "split's first N x --batch-per-rank samples (all of them when fewer), at any rank count")->capture_default_str();
  sub->add_option("--checkpoint-every", o->checkpoint_every, "steps between checkpoints")->capture_default_str();
  sub->add_option("--keep-checkpoints", o->keep_checkpoints, "checkpoints kept")->capture_default_str();
  sub->add_option("--log-every", o->log_every, "steps between metrics lines")->capture_default_str();
  sub->add_flag("--resume", o->resume, "continue from the newest checkpoint in --out");
  sub->add_flag("--allow-changes", o->allow_changes,
                "with --resume: accept a seed, masking, model, batch or shard set other than the run's");
  sub->add_flag("--verify", o->verify_shards,
                "before training, check every shard's SHA-256 against the manifest and every token id (the ranks "
                "share the files); token ids and offsets are always checked as samples are read");
  sub->add_option("--genome-weights", o->genome_weights,
                  "shards of a genome list: how often each genome is drawn: bases (in proportion to its size), "
                  "uniform, list (the genome list's weights) or temperature:T (p ~ bases^(1/T)); an epoch is as many "
                  "draws as the split has samples. Default: every sample once per epoch")
      ->check([](const std::string& v) {
        try {
          parse_genome_weighting(v);
          return std::string();
        } catch (const std::invalid_argument& e) {
          return std::string(e.what());
        }
      });
  sub->add_option("--device", o->device, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}))->capture_default_str();
  sub->add_option("--precision", o->precision, kPrecisionHelp)->check(CLI::IsMember({"fp32", "bf16", "auto"}))->capture_default_str();
  sub->add_option("--threads", o->threads, "intra-op threads per rank (0: cores / ranks per node; capped at the cores available)")->capture_default_str();
  sub->add_option("--allreduce", o->allreduce,
                  "gradient sum over ranks: nccl (a GPU per rank), mpi, or auto (nccl where it can, else mpi)")
      ->check(CLI::IsMember({"auto", "nccl", "mpi"}))
      ->capture_default_str();
  sub->add_option("--packing", o->packing,
                  "on: a micro-batch's samples packed several to a row of the model's width, attention within "
                  "each sample (no compute on padding); off: one sample per row, padded to the longest")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  sub->add_option("--cuda-graphs", o->cuda_graphs,
                  "auto: on a GPU, each step of a model of up to 100 million matrix-product FLOPs per token (logo, "
                  "not dnabert) replayed as CUDA graphs (fixed shapes, a graph per row count, captured when first "
                  "used); the eager step otherwise, with a line saying why; on: graphs for any model, or an error "
                  "where they cannot run; off: the eager step")
      ->check(CLI::IsMember({"auto", "on", "off"}))
      ->capture_default_str();
  sub->add_flag("--tf32,!--no-tf32", o->tf32, "TF32 for fp32 matrix products on a GPU (default on)");
  sub->add_option("--profile-steps", o->profile_steps,
                  "N: the N steps before the last under LibTorch's profiler on rank 0 (where a step's time goes: "
                  "matrix products, attention, elementwise, optimizer, copies, and on a GPU its idle time), in the "
                  "log and the summary's \"profile\"; 0: none")
      ->check(non_negative())
      ->capture_default_str();
  sub->add_option("--stop-after", o->stop_after, "testing: stop after this step without a checkpoint")->group("");
  sub->add_flag("--static-step", o->static_step, "testing: the CUDA graphs' fixed-shape step, run without capture")
      ->group("");
  sub->add_option("--static-capacity", o->static_capacity, "testing: the fixed-shape step's masked rows")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 20))
      ->group("");
  sub->add_option("--dump-first-batch", o->dump_first_batch, "the first micro-batch (ids, masks, labels, sample indices) to a safetensors file, "
                  "to check a data pipeline against this one (docs/formats.md)");
  sub->footer("AdamW (betas 0.9/0.98, eps 1e-6), linear warm-up and decay, gradient clipping 1.0. SIGTERM or "
              "SIGUSR1 (Slurm's warning signal) writes a checkpoint and exits; --resume continues exactly.");
  sub->callback([o, &ctx] {
    // SIGTERM and SIGUSR1 (Slurm's warning) stop pretraining with a checkpoint: from here on,
    // not only once the model library is loaded (seconds under load), so that a warning
    // during the start is kept too (training then stops after its first step).
    io::stop_gracefully_on({SIGTERM, SIGUSR1});
    // --model names a config file or a built-in architecture ("logo"): only a file is an input.
    ctx.inputs = {{"--shards", o->shards}, {"--npmi", o->npmi}, {"--pmi-vocab", o->pmi_vocab},
                  {"--model", o->model}, {"--init", o->init}};
    ctx.outputs = {{"--out", o->out, io::OutputKind::directory},
                   file_output("--dump-first-batch", o->dump_first_batch,
                               {io::OwnFile::Kind::safetensors_metadata, "first-batch", "a dumped first batch"}, false,
                               /*force_flag=*/false)};
    ctx.run = [o, &ctx] { run_pretrain(*o, ctx); };
  });
}

}  // namespace genemask::cli
