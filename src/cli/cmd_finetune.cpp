// genemask finetune: one few-shot fine-tuning run (LibTorch code in libgenemask_model.so).
// A single-process command: under mpirun with several ranks it refuses (the sweep is the
// parallel driver), rather than running the same job N times.
#include <filesystem>
#include <fmt/format.h>
#include <iostream>
#include <optional>

#include "common.hpp"
#include "io/atomic_file.hpp"
#include "model/finetune.hpp"
#include "model_plugin.hpp"

namespace genemask::cli {
namespace {

void run_finetune(model::FinetuneOptions o, bool force, const Context& ctx) {
  if (ctx.size > 1) {
    refuse_multi_rank(ctx, fmt::format(
        "finetune is a single-process command and was started on {} MPI ranks: run it without mpirun "
        "(use --threads for more cores), or run many jobs with `genemask sweep`",
        ctx.size));
  }
  o.command_line = ctx.command_line;
  // Each directory is written into its staging directory and appears complete, or not at all.
  io::OutputSet out_dir(o.out, {"finetune", "--out", force, "metrics.json"});
  std::optional<io::OutputSet> model_dir;
  if (!o.save_model.empty())
    model_dir.emplace(o.save_model,
                      io::OutputSet::Options{"finetune --save-model", "--save-model", force, "config.json", /*digests=*/true});
  o.out = out_dir.staging();
  if (model_dir) o.save_model = model_dir->staging();
  const model::LogFn log = [](const std::string& line) { std::cerr << "[finetune] " << line << std::endl; };
  model::FinetuneSummary s;
  GENEMASK_MODEL_ENTRY(genemask_model_finetune)(&o, &log, &s);
  // Both checked and on the disk before either is published: a failure there (a full disk)
  // publishes neither; both moved into place (marked incomplete) before either's marker says
  // complete; the model first, since metrics.json names it, and withdrawn if --out then fails:
  // a failed command leaves no complete output, and its rerun needs no --force.
  if (model_dir) model_dir->prepare();
  out_dir.prepare();
  if (model_dir) model_dir->move_into_place();
  out_dir.move_into_place();
  if (model_dir) model_dir->complete();
  try {
    out_dir.complete();
  } catch (...) {
    if (model_dir) model_dir->withdraw();
    throw;
  }
  o.out = out_dir.dir();
  nlohmann::json summary = {{"command", "finetune"},
                             {"model", s.model_source},
                             {"train", o.train},
                             {"test", o.test},
                             {"out", o.out},
                             {"shots", o.shots},
                             {"seed", o.seed},
                             {"regime", s.regime},
                             {"epochs", s.epochs},
                             {"steps", s.steps},
                             {"lr", s.lr},
                             {"batch", s.batch},
                             {"truncated", s.truncated},
                             {"unknown_only", s.unknown_only},
                             {"pooler_loaded", s.pooler_loaded},
                             {"seconds", s.seconds},
                             {"train_examples_per_s", s.train_examples_per_s}};
  s.metrics.to_json(summary);
  print_summary(ctx, summary);
}

}  // namespace

void register_finetune(CLI::App& app, Context& ctx) {
  auto o = std::make_shared<model::FinetuneOptions>();
  auto* sub = app.add_subcommand("finetune", "Few-shot fine-tuning of a BERT sequence classifier, and its test metrics");
  sub->add_option("--model", o->model,
                  "\"random\", a model directory (config.json + model.safetensors or pytorch_model.bin) or a "
                  "`genemask pretrain` run (newest checkpoint)")
      ->required()
      ->check(non_empty_name());
  auto* config_opt = sub->add_option("--config", o->config, "architecture of --model random: logo, dnabert or a config.json")
      ->capture_default_str();
  sub->add_option("--train", o->train, "training table: released 6-mer TSV or sequence,label CSV/TSV")
      ->required()
      ->check(existing_file());
  sub->add_option("--test", o->test, "test table (same formats); its labels must be classes of --train")
      ->required()
      ->check(existing_file());
  sub->add_option("--out", o->out, "output directory: metrics.json, predictions.tsv (new, empty, or an earlier finetune's with --force)")->required();
  sub->add_option("--shots", o->shots, "sequences per class sampled from --train (0: --train as given)")
      ->capture_default_str();
  sub->add_option("--seed", o->seed, "seed: the shots, classifier initialisation, dropout, batch order")
      ->capture_default_str();
  sub->add_option("--lr", o->lr, "peak learning rate (0: by regime)")->capture_default_str();
  sub->add_option("--epochs", o->epochs, "epochs (0: by regime)")->capture_default_str();
  sub->add_option("--batch", o->batch, "batch size (0: by regime)")->capture_default_str();
  sub->add_option("--warmup-fraction", o->warmup_fraction, "linear warm-up over this fraction of the steps")
      ->capture_default_str();
  sub->add_option("--weight-decay", o->weight_decay, "AdamW weight decay (not on bias/LayerNorm)")->capture_default_str();
  sub->add_option("--dropout", o->dropout, "hidden, attention and classifier dropout")->capture_default_str();
  sub->add_option("--clip", o->clip, "gradient-norm clipping (0: off)")->capture_default_str();
  sub->add_option("--eval-batch", o->eval_batch, "test sequences per forward pass")
      ->check(positive())
      ->capture_default_str();
  sub->add_option("--save-model", o->save_model,
                  "also write the fine-tuned classifier here (HF layout: config.json, model.safetensors, vocab.txt, "
                  "tokenizer_config.json, special_tokens_map.json)");
  sub->add_option("--threads", o->threads, "intra-op threads (0: all cores; capped at the cores available)")->capture_default_str();
  sub->add_option("--device", o->device, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}))->capture_default_str();
  auto* gpu = add_gpu_option(sub, o->device_index);
  sub->add_option("--precision", o->precision, kPrecisionHelp)->check(CLI::IsMember({"fp32", "bf16", "auto"}))->capture_default_str();
  sub->footer(
      "Regimes (the paper's, by n = --shots, or the smallest class of a --train used as given): n < 500: lr 4e-4, "
      "20 epochs, batch 5; n >= 500: lr 5e-5, 5 epochs, batch 15. Both: linear warm-up over 10% of the steps then "
      "linear decay to 0, AdamW betas (0.9, 0.999), eps 1e-8, weight decay 0.01, dropout 0.1, gradient clipping 1.0. "
      "--lr/--epochs/--batch override one setting. The same seed and --threads give the same predictions. "
      "Single-process: under mpirun with several ranks it refuses; use `genemask sweep` for many runs.");
  auto force = std::make_shared<bool>(false);
  add_force_flag(sub, *force, "--out and --save-model");
  sub->callback([o, force, config_opt, gpu, &ctx] {
    // A pretrained model brings its own config.json: a --config beside it would be ignored.
    if (o->model != "random" && config_opt->count() > 0)
      throw CLI::ValidationError("--config", fmt::format("applies to --model random only; the model {} has its own "
                                                         "config.json",
                                                         o->model));
    // --model and --config name a directory or file, or "random", "logo", "dnabert".
    ctx.inputs = {{"--model", o->model}, {"--config", o->config}, {"--train", o->train}, {"--test", o->test}};
    ctx.outputs = {{"--out", o->out, io::OutputKind::directory},
                   {"--save-model", o->save_model, io::OutputKind::directory}};
    ctx.check = [gpu, o] { check_gpu_option(gpu, o->device); };  // after the numbers' own checks
    ctx.run = [o, force, &ctx] { run_finetune(*o, *force, ctx); };
  });
}

}  // namespace genemask::cli
