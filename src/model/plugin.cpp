// The entry points of libgenemask_model.so (declared in plugin_api.hpp), loaded by the
// genemask binary with dlopen only when a command runs a model (LibTorch adds ~0.5 s of
// start-up to every process that links it).
#include "model/plugin_api.hpp"

#include "model/export.hpp"
#include "model/runtime.hpp"

using namespace genemask::model;

extern "C" {

void genemask_model_runtime_info(RuntimeInfo* out) { *out = runtime_info(); }

void genemask_model_pretrain(const PretrainOptions* o, MPI_Comm comm, const LogFn* log, PretrainSummary* out) {
  *out = pretrain(*o, comm, *log);
}

void genemask_model_embed(const EmbedOptions* o, MPI_Comm comm, EmbedSummary* out) { *out = embed(*o, comm); }

void genemask_model_predict(const PredictOptions* o, MPI_Comm comm, PredictSummary* out) { *out = predict(*o, comm); }

void genemask_model_export_run(const std::string* run, const std::string* out_dir, std::string* used) {
  *used = export_run(*run, *out_dir);
}

void genemask_model_finetune(const FinetuneOptions* o, const LogFn* log, FinetuneSummary* out) {
  *out = finetune(*o, log ? *log : LogFn());
}

void genemask_model_variants(const VariantScoreOptions* o, const std::vector<std::string>* ref,
                             const std::vector<std::string>* alt, const LogFn* log, VariantScores* out) {
  *out = score_variants(*o, *ref, *alt, log ? *log : LogFn());
}
}
