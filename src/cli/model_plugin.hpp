#pragma once
// Finds and loads libgenemask_model.so (the LibTorch part) next to the genemask binary,
// or at $GENEMASK_MODEL_LIB.
#include <string>

namespace genemask::cli {
/// The address of `symbol` in the model library; throws with a remedy when it is missing.
void* model_symbol(const char* symbol);
/// `genemask --version`: genemask, LibTorch, its CUDA build, and the GPUs visible now.
std::string version_text();
}  // namespace genemask::cli
