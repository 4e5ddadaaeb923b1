#pragma once
// Finds and loads libgenemask_model.so (the LibTorch part) next to the genemask binary,
// or at $GENEMASK_MODEL_LIB.
#include <string>

#include "model/plugin_api.hpp"

namespace genemask::cli {
/// The address of `symbol` in the model library; throws with a remedy when it is missing.
void* model_symbol(const char* symbol);

/// The model library's entry point `name` (declared in model/plugin_api.hpp), typed as it
/// is declared there: GENEMASK_MODEL_ENTRY(genemask_model_embed)(&options, comm, &summary).
#define GENEMASK_MODEL_ENTRY(name) (reinterpret_cast<decltype(&::name)>(::genemask::cli::model_symbol(#name)))
/// `genemask --version`: genemask, LibTorch, its CUDA build, and the GPUs visible now.
std::string version_text();
}  // namespace genemask::cli
