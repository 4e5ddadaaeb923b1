#include "common.hpp"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fmt/format.h>
#include <iostream>
#include <stdexcept>
#include <string_view>
#include <unistd.h>

#include "hpc/mpi.hpp"
#include "io/atomic_file.hpp"
#include "io/error.hpp"
#include "io/json.hpp"
#include "io/text_source.hpp"

namespace genemask::cli {

void refuse_multi_rank(const Context& ctx, const std::string& message) {
  if (ctx.rank == 0) throw std::runtime_error(message);
  hpc::barrier(MPI_COMM_WORLD);  // ended by rank 0's MPI_Abort
  std::exit(1);
}

void print_summary(const Context& ctx, const nlohmann::json& summary) {
  if (ctx.rank != 0) return;
  // An input whose last line had no line end may have been cut short: said on stderr when it
  // was read, and here beside the numbers that came from it (a command's ranks each read the
  // tables and lists it reads line by line, so rank 0's record holds them all).
  std::cout << io::json_text(io::with_unterminated_inputs(summary)) << std::endl;
}

namespace {
io::FdStreamBuf* g_stdout = nullptr;  // never freed: std::cout flushes it at exit
}  // namespace

void route_standard_output() {
  if (g_stdout) return;
  g_stdout = new io::FdStreamBuf;
  g_stdout->attach(STDOUT_FILENO);
  std::cout.rdbuf(g_stdout);
}

std::string standard_output_problem() {
  std::cout.flush();
  errno = 0;
  const bool flushed = std::fflush(stdout) == 0;
  int err = g_stdout && g_stdout->error() ? g_stdout->error() : flushed ? 0 : errno;
  bool failed = err != 0 || !flushed || std::ferror(stdout) || std::cout.bad();
  if (!failed) {
    const int fd = ::dup(STDOUT_FILENO);
    if (fd >= 0 && ::close(fd) != 0) {
      err = errno;
      failed = true;
    }
  }
  if (!failed || err == EBADF) return "";  // all written, or no standard output to write to
  char target[4096];
  const ssize_t n = ::readlink("/proc/self/fd/1", target, sizeof target - 1);
  return fmt::format("cannot write the standard output{}: {}",
                     n > 0 ? fmt::format(" ({})", std::string_view(target, static_cast<size_t>(n))) : std::string(),
                     err ? io::write_error_reason(err) : "a write failed; what was printed is incomplete");
}

Progress::Progress(std::string label, double interval_s, bool enabled)
    : label_(std::move(label)), interval_s_(interval_s), enabled_(enabled) {
  start_ = last_ = std::chrono::steady_clock::now();
}

void Progress::update(double fraction) {
  if (!enabled_) return;
  auto now = std::chrono::steady_clock::now();
  if (std::chrono::duration<double>(now - last_).count() < interval_s_) return;
  last_ = now;
  const double el = std::chrono::duration<double>(now - start_).count();
  const double eta = fraction > 0.001 ? el * (1.0 - fraction) / fraction : 0.0;
  std::cerr << fmt::format("[genemask {}] {:5.1f}%  elapsed {:.0f} s  ETA {:.0f} s", label_, 100.0 * fraction, el, eta)
            << std::endl;
}

void Progress::done() {
  if (!enabled_) return;
  const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  std::cerr << fmt::format("[genemask {}] done in {:.1f} s", label_, el) << std::endl;
}

namespace {
CLI::Validator number_at_least(bool strict) {
  return CLI::Validator(
      [strict](std::string& text) -> std::string {
        double v = 0;
        if (!CLI::detail::lexical_cast(text, v)) return fmt::format("'{}' is not a number", text);
        if (!std::isfinite(v)) return fmt::format("{} is not a finite number", text);
        if (strict ? !(v > 0) : !(v >= 0)) return fmt::format("{} is {}", text, strict ? "not positive" : "negative");
        return std::string();
      },
      strict ? "POSITIVE" : "NON-NEGATIVE");
}
}  // namespace

CLI::Option* add_masking_option(CLI::App* sub, MaskingKind& kind) {
  return sub
      ->add_option_function<std::string>(
          "--masking", [&kind](const std::string& name) { kind = parse_masking(name); }, "masking strategy")
      ->check(CLI::IsMember(masking_names()))
      ->default_str(to_string(kind));
}

CLI::Option* add_force_flag(CLI::App* sub, bool& force, const std::string& option) {
  return sub->add_flag("--force", force,
                       "replace an earlier output of this command in " + option +
                           " (a directory genemask wrote: .genemask.json); without it, an existing non-empty " + option +
                           " is refused, and nothing genemask did not write is ever removed");
}

void report_error_now(Context& ctx, const std::exception& e) {
  if (ctx.error_reported) return;
  std::cerr.flush();
  io::write_error_line(ctx.program.c_str(), e.what());
  ctx.error_reported = true;
}

void add_progress_options(CLI::App* sub, ProgressOptions& o) {
  sub->add_option("--progress-interval", o.interval_s, "seconds between progress lines on stderr (> 0; --quiet for none)")
      ->capture_default_str()
      ->check(positive());
  sub->add_flag("--quiet", o.quiet, "no progress lines");
}

CLI::Option* add_gpu_option(CLI::App* sub, int& index) {
  return sub->add_option("--gpu", index, "GPU ordinal for --device cuda (0 = the first visible GPU)")
      ->check(non_negative())
      ->capture_default_str();
}

void check_gpu_option(const CLI::Option* gpu, const std::string& device) {
  if (gpu->count() > 0 && device != "cuda")
    throw CLI::ValidationError("--gpu", fmt::format("chooses a GPU for --device cuda; the device is {}: give --device "
                                                    "cuda, or leave --gpu out",
                                                    device));
}

namespace {
CLI::Validator existing(io::InputKind kind) {
  const bool dir = kind == io::InputKind::directory;
  return CLI::Validator(
      [kind, dir](std::string& path) -> std::string {
        const std::string why = io::input_problem(path, kind);
        if (why.empty()) return std::string();
        if (why == "does not exist") return fmt::format("{} does not exist: {}", dir ? "Directory" : "File", path);
        return io::printable(path) + " " + why;
      },
      dir ? "DIR" : "FILE");
}
}  // namespace

CLI::Validator existing_file() { return existing(io::InputKind::file); }
CLI::Validator existing_directory() { return existing(io::InputKind::directory); }

CLI::Option* add_file_force_flag(CLI::App* sub, bool& force, const std::string& option) {
  return sub->add_flag("--force", force,
                       "replace an existing " + option + " that is not an earlier output of this command (an earlier "
                       "output of it is replaced without --force); never a file inside a directory genemask manages");
}

void note_genome_ends(const std::vector<std::string>& paths, const Context& ctx) {
  if (ctx.rank != 0) return;
  for (const auto& p : paths) io::note_fasta_end(io::probe_file(p));
}

CLI::Option* add_counts_genome_option(CLI::App* sub, std::string& genome) {
  sub->footer(
      "Counts of a genome list (`genemask count --genomes`) hold each genome's counts and their pool. Without "
      "--genome the pool is used: every probability comes from the summed counts, as if the genomes were one "
      "corpus, so each genome weighs in by its size (a large genome dominates, and a k-mer frequent in a small "
      "one can rank low). --genome NAME uses that genome alone.");
  return sub
      ->add_option("--genome", genome,
                   "with counts of a genome list (`count --genomes`): use this genome's counts instead of the pool "
                   "(the default: the sum of every genome's counts)")
      ->check(non_empty_name());
}

io::NamedOutput file_output(const std::string& option, const std::string& path, io::OwnFile own, bool force,
                            bool force_flag) {
  io::NamedOutput o{option, path, io::OutputKind::file, std::move(own)};
  o.force = force;
  o.has_force = force_flag;
  return o;
}

CLI::Validator non_empty_name() {
  return CLI::Validator([](std::string& s) { return s.empty() ? std::string("an empty name names nothing") : std::string(); },
                        "NAME");
}

CLI::Validator non_negative() { return number_at_least(false); }
CLI::Validator positive() { return number_at_least(true); }

void check_writable(const std::string& path) {
  const std::string probe = io::temp_name_for(path, ".probe");
  FILE* f = std::fopen(probe.c_str(), "wb");
  if (!f)
    throw std::runtime_error(fmt::format("cannot write output {}: {} (does the directory exist?)", path,
                                         std::strerror(errno)));
  std::fclose(f);
  std::remove(probe.c_str());
}

}  // namespace genemask::cli
