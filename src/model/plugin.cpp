// C entry points of the Torch library, loaded by the genemask binary with dlopen only when
// a training command runs (LibTorch adds ~0.5 s of start-up to every process that links it).
// Exceptions propagate to the caller (same C++ runtime).
#include "model/embed.hpp"
#include "model/export.hpp"
#include "model/finetune.hpp"
#include "model/predict.hpp"
#include "model/runtime.hpp"
#include "model/trainer.hpp"
#include "model/variants.hpp"

extern "C" {

void genemask_model_runtime_info(genemask::model::RuntimeInfo* out) { *out = genemask::model::runtime_info(); }

void genemask_model_pretrain(const genemask::model::PretrainOptions* o, MPI_Comm comm,
                             const std::function<void(const std::string&)>* log, genemask::model::PretrainSummary* out) {
  *out = genemask::model::pretrain(*o, comm, *log);
}

void genemask_model_embed(const genemask::model::EmbedOptions* o, MPI_Comm comm, genemask::model::EmbedSummary* out) {
  *out = genemask::model::embed(*o, comm);
}

void genemask_model_predict(const genemask::model::PredictOptions* o, MPI_Comm comm, genemask::model::PredictSummary* out) {
  *out = genemask::model::predict(*o, comm);
}

void genemask_model_export_run(const std::string* run, const std::string* out_dir, std::string* used) {
  *used = genemask::model::export_run(*run, *out_dir);
}

void genemask_model_finetune(const genemask::model::FinetuneOptions* o, const std::function<void(const std::string&)>* log,
                             genemask::model::FinetuneSummary* out) {
  *out = genemask::model::finetune(*o, log ? *log : std::function<void(const std::string&)>());
}

void genemask_model_variants(const genemask::model::VariantScoreOptions* o, const std::vector<std::string>* ref,
                             const std::vector<std::string>* alt, const std::function<void(const std::string&)>* log,
                             genemask::model::VariantScores* out) {
  *out = genemask::model::score_variants(*o, *ref, *alt, log ? *log : std::function<void(const std::string&)>());
}
}
