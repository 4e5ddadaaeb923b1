#pragma once
// Shared pieces of the thin subcommands: context, summaries, progress, output checks.
#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "genemask/corpus/masking.hpp"
#include "io/output_guard.hpp"

namespace genemask::cli {

struct Context {
  int rank = 0;
  int size = 1;
  std::string command_line;      // argv joined, for provenance attributes
  std::function<void()> run;     // set by the chosen subcommand
  int exit_code = 0;             // returned by main after run() (see kExitStopped)
  // Set by the chosen subcommand's callback: the files it reads and writes. Before run(),
  // every rank checks them (io::check_outputs: no output over or inside an input, no device
  // as an output), and during run() the inputs are protected (io::InputsInUse).
  std::vector<io::NamedPath> inputs;
  std::vector<io::NamedOutput> outputs;
  // Cheap checks of the inputs' content that every rank runs before the ranks agree to start
  // (a BGZF without its end-of-file block): an error there is one line from rank 0, not one
  // per rank and an abort.
  std::function<void()> check;
  // The head of this process's error line ("genemask", or "genemask[rank R]" in a job of
  // several ranks), and whether the error of this run was printed already (report_error_now).
  std::string program = "genemask";
  bool error_reported = false;
};

/// Prints the error line of `e` now (once; main then only ends the job). For a multi-rank
/// command whose unwinding would remove what the other ranks still write into (rank 0's
/// staging directory): its own error goes out before their "No such file" and before the
/// job's abort can end this process.
void report_error_now(Context& ctx, const std::exception& e);

/// Exit status of a usage error: an unknown, missing, repeated or conflicting option, or a
/// value out of its range (what `--help` describes), for every subcommand. 1 is any other
/// error (an input, an output, the machine).
inline constexpr int kExitUsage = 2;

/// Exit status of a command stopped early by SIGTERM/SIGINT/SIGUSR1 after saving what it
/// needs to continue (pretrain: a checkpoint, for --resume; sweep: the finished jobs, for a
/// restart). Non-zero so that scripts and Slurm dependencies do not take it for a finished run.
inline constexpr int kExitStopped = 3;

/// Prints the one-line JSON summary (rank 0 only).
void print_summary(const Context& ctx, const nlohmann::json& summary);

/// std::cout writes to the standard output through a buffer that keeps the errno of a refused
/// write (the C library's does not): called first thing in main.
void route_standard_output();
/// Flushes the standard output and says why what was written to it did not all arrive ("" when
/// it did, or when it is not open at all): "cannot write the standard output (PATH): No space
/// left on device (the disk is full)". A file it is redirected to on NFS reports write errors
/// only when a descriptor of it is closed: a duplicate is closed, so stdout stays usable.
std::string standard_output_problem();

/// The help of every --precision option.
inline constexpr const char* kPrecisionHelp =
    "auto (the default): bf16 where the device has bf16 matrix hardware (a GPU of compute capability 8.0+, a CPU with "
    "AMX-BF16 or AVX512-BF16, see --version), else fp32; fp32; or bf16 (autocast: fp32 weights, optimizer and loss; "
    "on a CPU without those instructions many times slower). The summary names the precision used";

/// Rank-0 progress lines on stderr, at most every interval_s seconds.
/// --progress-interval S (> 0, default `interval_s`) and --quiet: progress lines on stderr for a
/// long command (count, shards, embed, predict).
struct ProgressOptions {
  double interval_s = 10;
  bool quiet = false;
};
void add_progress_options(CLI::App* sub, ProgressOptions& o);

class Progress {
 public:
  Progress(std::string label, double interval_s, bool enabled);
  void update(double fraction);  // 0..1
  void done();

 private:
  std::string label_;
  double interval_s_;
  bool enabled_;
  std::chrono::steady_clock::time_point start_, last_;
};

/// Refuses a single-process command started on several ranks: rank 0 throws `message`
/// (main then aborts the job); the other ranks wait in a barrier that rank 0 never reaches,
/// so that no rank finalizes MPI while rank 0 aborts (that race can leave mpiexec hanging).
[[noreturn]] void refuse_multi_rank(const Context& ctx, const std::string& message);

/// Fails early (before long work) when `path` cannot be created: missing directory,
/// no permission.
void check_writable(const std::string& path);

/// Option checks whose messages read as sentences ("--flank: -5 is negative") rather than
/// CLI11's "Value -5 not in range 0.000000 to 1797...(300 digits)".
CLI::Validator non_negative();  // a number >= 0
CLI::Validator positive();      // a number > 0

/// Input paths, checked with stat(2) and named with the system's reason: "File does not exist:
/// g.fa", a symlink loop, no permission, a FIFO or device (never opened: a FIFO would block),
/// a directory for a file. Replace CLI11's ExistingFile/ExistingDirectory, whose message
/// for all of these is "File does not exist".
CLI::Validator existing_file();
/// A name that is not empty (an empty --genome read as "no genome": the pool, without a word).
CLI::Validator non_empty_name();
CLI::Validator existing_directory();

/// --force: an existing directory that holds an earlier output of this command (genemask's
/// marker) is replaced; without it such a directory is refused. Nothing else is replaced.
CLI::Option* add_force_flag(CLI::App* sub, bool& force, const std::string& option = "--out");

/// --gpu N (a GPU ordinal, >= 0) of a single-process command with --device. Call
/// check_gpu_option in the subcommand's callback: --gpu without --device cuda is refused (it
/// was ignored, without a word).
CLI::Option* add_gpu_option(CLI::App* sub, int& index);
void check_gpu_option(const CLI::Option* gpu, const std::string& device);

/// --force for a command whose output is a file: replace --out even when it is not an earlier
/// output of this command (which is replaced without it).
CLI::Option* add_file_force_flag(CLI::App* sub, bool& force, const std::string& option = "--out");

/// A file output that an earlier output of the same command (recognised by `own`) may be, and
/// that --force replaces whatever it is (force_flag: the command has one).
io::NamedOutput file_output(const std::string& option, const std::string& path, io::OwnFile own, bool force,
                            bool force_flag = true);

/// After a command whose ranks read genome FASTAs in parts (count, shards) has read them
/// whole, before its summary: on rank 0, a plain FASTA whose last line has no line end said
/// and listed in the summary (io::note_fasta_end), as a cut table is.
void note_genome_ends(const std::vector<std::string>& paths, const Context& ctx);

/// --genome NAME of a command that reads counts.h5 (npmi, pmi-vocab): with counts of a genome
/// list, that genome's counts instead of the pool; also sets the footer that says so.
CLI::Option* add_counts_genome_option(CLI::App* sub, std::string& genome);

/// --masking NAME, parsed here into the strategy (genemask/corpus/masking.hpp names them).
CLI::Option* add_masking_option(CLI::App* sub, MaskingKind& kind);

void register_count(CLI::App& app, Context& ctx);
void register_npmi(CLI::App& app, Context& ctx);
void register_pmi_vocab(CLI::App& app, Context& ctx);
void register_motifs(CLI::App& app, Context& ctx);
void register_shards(CLI::App& app, Context& ctx);
void register_mask_stats(CLI::App& app, Context& ctx);
void register_vocab(CLI::App& app, Context& ctx);
void register_pretrain(CLI::App& app, Context& ctx);  // runs via libgenemask_model.so
void register_export_hf(CLI::App& app, Context& ctx);  // runs via libgenemask_model.so
void register_embed(CLI::App& app, Context& ctx);      // runs via libgenemask_model.so
void register_finetune(CLI::App& app, Context& ctx);  // runs via libgenemask_model.so
void register_predict(CLI::App& app, Context& ctx);   // runs via libgenemask_model.so
void register_sweep(CLI::App& app, Context& ctx);
void register_report(CLI::App& app, Context& ctx);
void register_dataset(CLI::App& app, Context& ctx);
void register_overlap(CLI::App& app, Context& ctx);
void register_variants(CLI::App& app, Context& ctx);  // runs via libgenemask_model.so

}  // namespace genemask::cli
