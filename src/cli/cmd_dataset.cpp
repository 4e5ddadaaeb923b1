// stub: genemask dataset (being written)
#include "common.hpp"

namespace genemask::cli {
void register_dataset_splice(CLI::App& dataset, Context& ctx);  // cmd_dataset_splice.cpp

void register_dataset(CLI::App& app, Context& ctx) {
  auto* ds = app.add_subcommand("dataset", "Build a few-shot task from a genome: promoter, splice or enhancer");
  ds->require_subcommand(1);
  register_dataset_splice(*ds, ctx);
}
}  // namespace genemask::cli
