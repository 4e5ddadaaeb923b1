// The entry points of libgenemask_model.so (declared in plugin_api.hpp), loaded by the
// genemask binary with dlopen only when a command runs a model (LibTorch adds ~0.5 s of
// start-up to every process that links it).
#include "model/plugin_api.hpp"

#include <c10/util/Exception.h>

#include <cctype>
#include <new>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "io/error.hpp"
#include "model/export.hpp"
#include "model/runtime.hpp"

using namespace genemask::model;

namespace {

/// Runs an entry point's body. LibTorch's c10::Error::what() holds its C++ stack trace, many
/// lines long; what reaches the user's one error line is the message alone (its first line).
/// `doing` says what genemask was doing ("pretrain", ...) in front of LibTorch's words, so that
/// a bare "index out of range in self" still says where it came from.
/// The sentence for LibTorch running out of memory ("[enforce fail at alloc_cpu.cpp:127] data.
/// DefaultCPUAllocator: not enough memory: you tried to allocate 3221225472 bytes", or CUDA's
/// "CUDA out of memory. Tried to allocate 2.00 GiB ..."), or "" when `msg` is another error.
std::string out_of_memory(const char* doing, const std::string& msg) {
  const bool cpu = msg.find("DefaultCPUAllocator") != std::string::npos || msg.find("not enough memory") != std::string::npos;
  const bool gpu = msg.find("CUDA out of memory") != std::string::npos || msg.find("out of memory") != std::string::npos;
  if (!cpu && !gpu) return "";
  std::string size;
  // "you tried to allocate 1073741824 bytes. Error code 12 (Cannot allocate memory)": the
  // "allocate " followed by a number.
  size_t at = msg.find("allocate ");
  while (at != std::string::npos && !(at + 9 < msg.size() && std::isdigit(static_cast<unsigned char>(msg[at + 9]))))
    at = msg.find("allocate ", at + 1);
  if (at != std::string::npos) {
    size_t end = at + 9;
    while (end < msg.size() && (std::isdigit(static_cast<unsigned char>(msg[end])) || msg[end] == '.')) ++end;
    const std::string digits = msg.substr(at + 9, end - at - 9);
    if (!digits.empty() && msg.compare(end, 6, " bytes") == 0)
      size = fmt::format(" {:.1f} MiB more", std::stod(digits) / (1 << 20));
    else if (!digits.empty() && end < msg.size() && msg[end] == ' ') {  // "2.00 GiB."
      size_t unit_end = end + 1;
      while (unit_end < msg.size() && std::isalpha(static_cast<unsigned char>(msg[unit_end]))) ++unit_end;
      size = fmt::format(" {} {} more", digits, msg.substr(end + 1, unit_end - end - 1));
    }
  }
  if (cpu && !gpu)
    return fmt::format("{}: out of memory: LibTorch could not allocate{}{}; use a smaller batch (--batch or "
                       "--batch-per-rank) or fewer threads, or run where more memory is available",
                       doing, size, genemask::io::memory_limit_note());
  return fmt::format("{}: out of GPU memory: LibTorch could not allocate{} on the GPU; use a smaller batch (--batch or "
                     "--batch-per-rank), bf16 (--precision bf16), or a GPU with more memory",
                     doing, size);
}

template <class F>
void guarded(const char* doing, F&& body) {
  try {
    body();
  } catch (const c10::Error& e) {
    const std::string msg = e.what_without_backtrace();
    if (std::string oom = out_of_memory(doing, msg); !oom.empty()) throw std::runtime_error(oom);
    throw std::runtime_error(fmt::format("{}: LibTorch: {}", doing, msg.substr(0, msg.find('\n'))));
  } catch (const std::bad_alloc&) {
    throw std::runtime_error(fmt::format("{}: out of memory{}; use a smaller batch or run where more memory is available",
                                         doing, genemask::io::memory_limit_note()));
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
