// genemask export-hf: a pretrain run's newest checkpoint in the Hugging Face layout.
#include "common.hpp"
#include "model_plugin.hpp"

namespace genemask::cli {

void register_export_hf(CLI::App& app, Context& ctx) {
  auto run = std::make_shared<std::string>();
  auto out = std::make_shared<std::string>();
  auto* ex = app.add_subcommand("export-hf", "Export a run's newest checkpoint in the Hugging Face layout");
  ex->add_option("--run", *run, "run directory of `genemask pretrain` (or one checkpoint directory)")
      ->required()
      ->check(CLI::ExistingDirectory);
  ex->add_option("--out", *out, "output directory: config.json, vocab.txt, model.safetensors")->required();
  ex->callback([run, out, &ctx] {
    ctx.run = [run, out, &ctx] {
      if (ctx.rank != 0) return;
      std::string src;
      GENEMASK_MODEL_ENTRY(genemask_model_export_run)(run.get(), out.get(), &src);
      print_summary(ctx, {{"command", "export-hf"}, {"checkpoint", src}, {"out", *out}});
    };
  });
}

}  // namespace genemask::cli
