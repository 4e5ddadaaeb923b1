// genemask export-hf: a pretrain run's newest checkpoint in the Hugging Face layout.

#include "common.hpp"
#include "model_plugin.hpp"

namespace genemask::cli {

void register_export_hf(CLI::App& app, Context& ctx) {
  auto run = std::make_shared<std::string>();
  auto out = std::make_shared<std::string>();
  auto force = std::make_shared<bool>(false);
  auto* ex = app.add_subcommand("export-hf", "Export a run's newest checkpoint in the Hugging Face layout");
  ex->add_option("--run", *run, "run directory of `genemask pretrain` (or one checkpoint directory)")
      ->required()
      ->check(existing_directory());
  ex->add_option("--out", *out,
                 "output directory: config.json, model.safetensors, vocab.txt, tokenizer_config.json, "
                 "special_tokens_map.json (new, empty, or an earlier export with --force)")
      ->required();
  add_force_flag(ex, *force);
  ex->footer("The model appears in --out complete or not at all: it is written into --out/.genemask-staging and "
             "moved into place; --out/.genemask.json marks it as genemask's. An existing directory that is not an "
             "earlier export is never touched. A run directory must hold a finished run (its newest checkpoint at the "
             "steps it was started for, no pretrain still training it); name a checkpoint directory to export another "
             "step deliberately.");
  ex->callback([run, out, force, &ctx] {
    ctx.inputs = {{"--run", *run}};
    ctx.outputs = {{"--out", *out, io::OutputKind::directory}};
    ctx.run = [run, out, force, &ctx] {
      if (ctx.rank != 0) return;
      // The model plugin resolves the run, refuses an unfinished one, and exports it.
      io::OutputSet set(*out, {"export-hf", "--out", *force, "config.json", /*digests=*/true});
      std::string src;
      const std::string staging = set.staging();
      GENEMASK_MODEL_ENTRY(genemask_model_export_run)(run.get(), &staging, &src);
      set.publish({{"source", src}});
      print_summary(ctx, {{"command", "export-hf"}, {"checkpoint", src}, {"out", *out}});
    };
  });
}

}  // namespace genemask::cli
