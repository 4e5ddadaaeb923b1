#pragma once
// Torch-free entry points of the model library, for the CLI.
#include <string>

namespace genemask::model {

/// Writes the newest complete checkpoint of RUN (or a checkpoint directory) into DIR (an
/// existing directory, the caller's staging directory) in the HF layout (config.json,
/// vocab.txt, model.safetensors), after loading and checking it. Returns the checkpoint used.
std::string export_run(const std::string& run_or_checkpoint, const std::string& out_dir);

}  // namespace genemask::model
