// genemask: one binary, one subcommand per pipeline stage. Every rank runs main; rank 0
// prints the JSON summary. A failure on any rank prints one line and aborts the job.
#include <mpi.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <fmt/format.h>
#include <iostream>
#include <set>
#include <string>

#include "common.hpp"
#include "hpc/mpi.hpp"
#include "io/atomic_file.hpp"
#include "io/error.hpp"
#include "io/file_outputs.hpp"
#include "io/h5.hpp"
#include "io/output_guard.hpp"
#include "io/parse_number.hpp"
#include "model_plugin.hpp"
#include "start_check.hpp"

namespace {

/// The app and each subcommand chosen on the command line, outermost first.
template <class F>
void for_each_chosen(const CLI::App& app, F&& f) {
  for (const CLI::App* sub = &app; sub;) {
    f(*sub);
    const auto subs = sub->get_subcommands();
    sub = subs.empty() ? nullptr : subs.front();
  }
}

/// Each value given to an option whose type name begins with `type` ("FLOAT", "UINT": the
/// option's C++ type, as CLI11 names it), in the chosen subcommands: f(option, text).
template <class F>
void for_each_value_of_type(const CLI::App& app, const char* type, F&& f) {
  for_each_chosen(app, [&](const CLI::App& sub) {
    for (const CLI::Option* opt : sub.get_options())
      if (opt->get_type_name().rfind(type, 0) == 0)
        for (const std::string& text : opt->results()) f(*opt, text);
  });
}

/// Every number an option takes is a finite decimal: CLI11 reads "nan" and "inf" as doubles,
/// and a NaN passes every range check (all comparisons with it are false), so that
/// `--valid-fraction nan` would write `null` into a manifest and `--drop-above nan` would drop
/// nothing; it also reads C's hexadecimal floats ("0x1p-3"). One check for every
/// floating-point option of the chosen subcommands, the ones added later too.
void check_decimal_numbers(const CLI::App& app) {
  for_each_value_of_type(app, "FLOAT", [](const CLI::Option& opt, const std::string& text) {
    if (!genemask::io::parse_decimal_double(text))
      throw CLI::ValidationError(opt.get_name(),
                                 fmt::format("{} is not a finite number written in decimal (e.g. 0.5, 2, 1e-4)", text));
  });
}

/// Every value of an integer option (a seed, a count, a size) is a decimal number that fits.
/// CLI11 2.1 converts with strtoull/strtoll in base 0: "010" is octal 8 and "0x10" is 16, so
/// that `--kmax 010` counted 8-mers and `--seed 010` ran with seed 8; and strtoull reads "-1"
/// as 2^64 - 1 (and "-5" as 2^64 - 5) and clamps a number past 2^64 - 1 to it, so that
/// `--seed -1` ran with seed 18446744073709551615. Decimal digits only (a '-' first for a
/// signed option), no leading 0; one check for every integer option of the chosen
/// subcommands, the ones added later too.
void check_integer_numbers(const CLI::App& app) {
  // A leading 0 (after the sign): CLI11 would read the number as octal.
  const auto check_no_leading_zero = [](const CLI::Option& opt, const std::string& text, std::string_view digits) {
    if (digits.size() > 1 && digits[0] == '0')
      throw CLI::ValidationError(opt.get_name(), fmt::format("'{}': write the number without its leading 0 (a leading "
                                                             "0 would be read as octal, 010 as 8)",
                                                             text));
  };
  for_each_value_of_type(app, "UINT", [&](const CLI::Option& opt, const std::string& text) {
    if (!genemask::io::parse_decimal_u64(text))
      throw CLI::ValidationError(opt.get_name(),
                                 fmt::format("'{}' is not a whole number from 0 to 18446744073709551615 (2^64 - 1)", text));
    check_no_leading_zero(opt, text, text);
  });
  for_each_value_of_type(app, "INT", [&](const CLI::Option& opt, const std::string& text) {
    if (!genemask::io::parse_decimal_i64(text))
      throw CLI::ValidationError(opt.get_name(), fmt::format("'{}' is not a whole number in decimal (e.g. 8 or -1)", text));
    check_no_leading_zero(opt, text, std::string_view(text).substr(text[0] == '-'));
  });
}

/// CLI11 reads a value "[a,b]" of a list option (--train, --genomes, ...) as the list a, b,
/// its container syntax: a path or name that begins with '[' and ends with ']' would be split
/// (or lose its brackets) without a word. Every argument of that shape must reach the command
/// as it was typed, held whole by an option or as a subcommand's own argument (motifs takes
/// "[AC][GT]" patterns); one that did not is refused.
void check_bracketed_values(const CLI::App& app, int argc, char** argv) {
  std::set<std::string> whole;
  for_each_chosen(app, [&](const CLI::App& sub) {
    for (const CLI::Option* opt : sub.get_options())
      for (const std::string& text : opt->results()) whole.insert(text);
    for (const std::string& text : sub.remaining()) whole.insert(text);
  });
  for (int i = 1; i < argc; ++i) {
    std::string text = argv[i];
    if (text.rfind("--", 0) == 0 && text.find('=') != std::string::npos) text = text.substr(text.find('=') + 1);
    if (text.size() < 2 || text.front() != '[' || text.back() != ']' || whole.count(text)) continue;
    throw CLI::ValidationError(
        fmt::format("'{}': a value in brackets is read as a list of its comma-separated parts; give the values "
                    "without brackets, each after its option, or a path as ./{}",
                    text, text));
  }
}

std::string join_argv(int argc, char** argv) {
  std::string s;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    if (i) s += ' ';
    s += a.find_first_of(" \t'\"") == std::string::npos ? a : "'" + a + "'";
  }
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  genemask::io::h5::skip_library_cleanup_at_exit();
  genemask::cli::route_standard_output();
  genemask::cli::Context ctx;
  ctx.command_line = join_argv(argc, argv);
  std::unique_ptr<genemask::hpc::MpiEnv> mpi;
  try {
    mpi = std::make_unique<genemask::hpc::MpiEnv>(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "genemask: error: " << e.what() << std::endl;
    return 1;
  }
  ctx.rank = mpi->rank();
  ctx.size = mpi->size();

  CLI::App app{"genemask: GeneMask pretraining and few-shot evaluation for DNA language models"};
  app.set_version_flag("--version", genemask::cli::version_text,
                       "Print the genemask and LibTorch versions, the CUDA build and the GPUs visible, then exit");
  app.require_subcommand(1);
  genemask::cli::register_count(app, ctx);
  genemask::cli::register_npmi(app, ctx);
  genemask::cli::register_pmi_vocab(app, ctx);
  genemask::cli::register_motifs(app, ctx);
  genemask::cli::register_shards(app, ctx);
  genemask::cli::register_mask_stats(app, ctx);
  genemask::cli::register_vocab(app, ctx);
  genemask::cli::register_pretrain(app, ctx);
  genemask::cli::register_embed(app, ctx);
  genemask::cli::register_export_hf(app, ctx);
  genemask::cli::register_finetune(app, ctx);
  genemask::cli::register_predict(app, ctx);
  genemask::cli::register_sweep(app, ctx);
  genemask::cli::register_report(app, ctx);
  genemask::cli::register_dataset(app, ctx);
  genemask::cli::register_overlap(app, ctx);
  genemask::cli::register_variants(app, ctx);

  // A write past `ulimit -f` fails with EFBIG instead of killing the process without a
  // word (SIGXFSZ): the writers then report it and remove their temporaries.
  ::signal(SIGXFSZ, SIG_IGN);

  // This rank's reason not to start: a usage error, or an output the command must not write
  // (over or inside an input, a device).
  std::string error;
  int error_code = 0, help_code = -1;
  try {
    app.parse(argc, argv);
    check_decimal_numbers(app);
    check_integer_numbers(app);
    check_bracketed_values(app, argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version print as CLI11 formats them; a bad option is one error line.
    const bool help = dynamic_cast<const CLI::CallForHelp*>(&e) || dynamic_cast<const CLI::CallForAllHelp*>(&e) ||
                      dynamic_cast<const CLI::CallForVersion*>(&e);
    if (help) {
      help_code = ctx.rank == 0 ? app.exit(e) : e.get_exit_code();
    } else {
      std::string usage = "genemask";
      for (const auto* sub = app.get_subcommands().empty() ? nullptr : app.get_subcommands().front(); sub;
           sub = sub->get_subcommands().empty() ? nullptr : sub->get_subcommands().front())
        usage += " " + sub->get_name();
      std::string what = e.what();
      // CLI11's words for an option given twice ("--kmax: At Most 1 required but received 2").
      if (const size_t at = what.find(": At Most 1 required but received "); at != std::string::npos)
        what = what.substr(0, at) + ": given " + what.substr(at + 34) + " times; give it once";
      error = what + " (see " + usage + " --help)";
      error_code = genemask::cli::kExitUsage;
    }
  } catch (const std::exception& e) {  // a subcommand's callback that reads an input (a genome list)
    error = e.what();
    error_code = 1;
  }
  if (error.empty() && help_code < 0) {
    try {
      // Inputs are regular files or directories (a FIFO is refused before anything opens it).
      for (const auto& in : ctx.inputs)
        if (const std::string why = genemask::io::input_type_problem(in.path, genemask::io::InputKind::file_or_directory);
            !in.path.empty() && !why.empty())
          throw std::runtime_error(in.option + " " + in.path + " " + why);
      std::string command;
      const CLI::App* leaf = nullptr;
      for (const CLI::App* sub = app.get_subcommands().empty() ? nullptr : app.get_subcommands().front(); sub;
           sub = sub->get_subcommands().empty() ? nullptr : sub->get_subcommands().front()) {
        command += (command.empty() ? "" : " ") + sub->get_name();
        leaf = sub;
      }
      // An output given as '' (an unset shell variable): refused now, not after the work
      // (an empty path means "not given" below).
      for (const auto& out : ctx.outputs)
        if (const CLI::Option* opt = leaf && out.path.empty() ? leaf->get_option_no_throw(out.option) : nullptr;
            opt && opt->count() > 0)
          throw std::runtime_error(out.option + " is empty: an empty name names nothing; give a " +
                                   (out.kind == genemask::io::OutputKind::file ? "file" : "directory") + " name");
      genemask::io::check_outputs(ctx.inputs, ctx.outputs);
      genemask::io::check_replaceable_outputs(ctx.outputs, command);
      if (ctx.check) ctx.check();
    } catch (const CLI::Error& e) {  // an option that conflicts with another (--gpu without cuda)
      error = e.what();
      error_code = genemask::cli::kExitUsage;
    } catch (const std::exception& e) {
      error = e.what();
      error_code = 1;
    }
  }
  // Every rank of a job starts, or none: a rank that stopped alone would leave the others
  // waiting in their first collective.
  std::string verdict;
  try {
    verdict = genemask::cli::agree_to_start(ctx.rank, ctx.size, argc, argv, error);
  } catch (const std::exception& e) {
    verdict = e.what();
  }
  if (!verdict.empty()) {
    if (ctx.rank == 0) genemask::io::write_error_line("genemask", verdict.c_str());
    return error_code ? error_code : 1;
  }
  if (help_code >= 0) return help_code;

  // A signal that stops a command removes its unfinished outputs and says so; pretrain and
  // sweep replace the handlers of the signals they stop on gracefully (the name is copied).
  ctx.program = ctx.size > 1 ? "genemask[rank " + std::to_string(ctx.rank) + "]" : std::string("genemask");
  const std::string& program = ctx.program;
  genemask::io::install_signal_cleanup(program.c_str(), ctx.rank == 0);
  // One line, whatever bytes the input put into the message, in one write(2) so that the
  // lines of several ranks on one terminal or pipe do not interleave; it needs no memory when
  // none is left (io::write_error_line), which is often the error being reported.
  const auto fail = [&](const char* what) noexcept {
    std::cerr.flush();
    if (!ctx.error_reported) genemask::io::write_error_line(program.c_str(), what);
    if (ctx.size > 1) genemask::hpc::abort_job(1);
    return 1;
  };
  try {
    const genemask::io::InputsInUse protect(ctx.inputs);  // no output may replace or enter them
    if (ctx.run) ctx.run();
    // What went to the standard output (a summary line, `motifs`' table, redirected to a
    // file by a job script) is an output too: one cut short by a full disk fails the command.
    if (const std::string why = genemask::cli::standard_output_problem(); !why.empty()) throw std::runtime_error(why);
  } catch (const std::bad_alloc&) {
    // Out of memory with nothing to say where (a message could not even be built on the way
    // here): words that need no memory, with the address-space limit where there is one.
    char what[512];
    struct rlimit limit {};
    if (::getrlimit(RLIMIT_AS, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY)
      std::snprintf(what, sizeof what,
                    "out of memory under a virtual memory limit of %llu MiB (ulimit -v); use a smaller batch or fewer "
                    "threads, raise the limit, or run where more memory is available",
                    static_cast<unsigned long long>(limit.rlim_cur >> 20));
    else
      std::snprintf(what, sizeof what,
                    "out of memory; use a smaller batch or fewer threads, or run where more memory is available (a "
                    "limit such as Slurm's --mem may be what ran out)");
    return fail(what);
  } catch (const std::exception& e) {
    return fail(e.what());
  }
  return ctx.exit_code;
}
