#pragma once
// Pieces shared by the `genemask dataset` builders' subcommands (cmd_dataset.cpp,
// cmd_dataset_splice.cpp): the output options, the single-process rule, the summary.
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "common.hpp"
#include "genemask/tasks/task_dataset.hpp"
#include "io/atomic_file.hpp"

namespace genemask::cli {

/// Dataset builders run on one process (several ranks would race on the same files): true
/// on a single process; under mpirun rank 0 throws and the other ranks return false.
bool dataset_single_process(const Context& ctx, const char* builder);

/// --out, --seed, [--train-fraction], --shots.
void add_dataset_output_options(CLI::App* sub, dataset::OutputOptions& o, bool with_fraction);

/// The output directory (new, empty, or an earlier build of this builder with --force), locked;
/// sets o.write_dir to its staging directory. publish() it once the files are written.
std::unique_ptr<io::OutputSet> prepare_dataset_output(dataset::OutputOptions& o);

/// stderr: "[dataset B] wrote OUT", `details`, the counts per class and drop reason;
/// stdout: the JSON summary (summary.json's content, plus `extra`).
void finish_dataset(const Context& ctx, const dataset::DatasetStats& st, const dataset::OutputOptions& o,
                    const std::string& details = "", const nlohmann::json& extra = nlohmann::json::object());

void register_dataset_splice(CLI::App& dataset, Context& ctx);

}  // namespace genemask::cli
