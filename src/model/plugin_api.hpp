#pragma once
// The entry points of libgenemask_model.so (the LibTorch part), declared once. plugin.cpp
// defines them against these declarations (a definition whose signature drifts does not
// compile: C linkage allows no overloads), and the CLI calls them through
// GENEMASK_MODEL_ENTRY(name), which casts the dlsym'd address to exactly this type.
// Torch-free: the options and summaries are plain structs. Exceptions propagate to the
// caller (same C++ runtime).
#include <mpi.h>

#include <functional>
#include <string>
#include <vector>

#include "model/embed.hpp"
#include "model/finetune.hpp"
#include "model/predict.hpp"
#include "model/runtime_info.hpp"
#include "model/trainer.hpp"
#include "model/variants.hpp"

namespace genemask::model {
/// Progress lines from a long call (rank 0); may be empty.
using LogFn = std::function<void(const std::string&)>;
}  // namespace genemask::model

extern "C" {
/// genemask --version: LibTorch, its CUDA build and the GPUs visible.
void genemask_model_runtime_info(genemask::model::RuntimeInfo* out);
/// Collective: `genemask pretrain`.
void genemask_model_pretrain(const genemask::model::PretrainOptions* o, MPI_Comm comm,
                             const genemask::model::LogFn* log, genemask::model::PretrainSummary* out);
/// Collective: `genemask embed`.
void genemask_model_embed(const genemask::model::EmbedOptions* o, MPI_Comm comm, genemask::model::EmbedSummary* out);
/// Collective: `genemask predict`.
void genemask_model_predict(const genemask::model::PredictOptions* o, MPI_Comm comm,
                            genemask::model::PredictSummary* out);
/// `genemask export-hf`: the checkpoint exported goes to *used.
void genemask_model_export_run(const std::string* run, const std::string* out_dir, std::string* used);
/// One fine-tuning run (`genemask finetune`, a sweep job); `log` may be null.
void genemask_model_finetune(const genemask::model::FinetuneOptions* o, const genemask::model::LogFn* log,
                             genemask::model::FinetuneSummary* out);
/// `genemask variants`: the model's probabilities for each ref/alt pair; `log` may be null.
void genemask_model_variants(const genemask::model::VariantScoreOptions* o, const std::vector<std::string>* ref,
                             const std::vector<std::string>* alt, const genemask::model::LogFn* log,
                             genemask::model::VariantScores* out);
}
