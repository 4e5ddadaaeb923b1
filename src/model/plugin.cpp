// The entry points of libgenemask_model.so (declared in plugin_api.hpp), loaded by the
// genemask binary with dlopen only when a command runs a model (LibTorch adds ~0.5 s of
// start-up to every process that links it).
#include "model/plugin_api.hpp"

#include <c10/util/Exception.h>

#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "model/export.hpp"
#include "model/runtime.hpp"

using namespace genemask::model;

namespace {

/// Runs an entry point's body. LibTorch's c10::Error::what() holds its C++ stack trace, many
/// lines long; what reaches the user's one error line is the message alone (its first line).
/// `doing` says what genemask was doing ("pretrain", ...) in front of LibTorch's words, so that
/// a bare "index out of range in self" still says where it came from.
template <class F>
void guarded(const char* doing, F&& body) {
  try {
    body();
  } catch (const c10::Error& e) {
    const std::string msg = e.what_without_backtrace();
    throw std::runtime_error(fmt::format("{}: LibTorch: {}", doing, msg.substr(0, msg.find('\n'))));
  }
}

}  // namespace

extern "C" {

void genemask_model_runtime_info(RuntimeInfo* out) {
  guarded("reading the LibTorch runtime", [&] { *out = runtime_info(); });
}

void genemask_model_pretrain(const PretrainOptions* o, MPI_Comm comm, const LogFn* log, PretrainSummary* out) {
  guarded("pretrain", [&] { *out = pretrain(*o, comm, *log); });
}

void genemask_model_embed(const EmbedOptions* o, MPI_Comm comm, EmbedSummary* out) {
  guarded("embed", [&] { *out = embed(*o, comm); });
}

void genemask_model_predict(const PredictOptions* o, MPI_Comm comm, PredictSummary* out) {
  guarded("predict", [&] { *out = predict(*o, comm); });
}

void genemask_model_export_run(const std::string* run, const std::string* out_dir, std::string* used) {
  guarded("export-hf", [&] { *used = export_run(*run, *out_dir); });
}

void genemask_model_finetune(const FinetuneOptions* o, const LogFn* log, FinetuneSummary* out) {
  guarded("finetune", [&] { *out = finetune(*o, log ? *log : LogFn()); });
}

void genemask_model_variants(const VariantScoreOptions* o, const std::vector<std::string>* ref,
                             const std::vector<std::string>* alt, const LogFn* log, VariantScores* out) {
  guarded("variants", [&] { *out = score_variants(*o, *ref, *alt, log ? *log : LogFn()); });
}
}
