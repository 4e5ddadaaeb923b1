// genemask count: distributed exact k-mer counting, k = 1..kmax, into counts.h5.
#include <chrono>
#include <iostream>
#include <new>
#include <fmt/format.h>

#include "common.hpp"
#include "genemask/version.hpp"
#include "hpc/count.hpp"
#include "hpc/mpi.hpp"
#include "io/counts_file.hpp"
#include "io/error.hpp"
#include "io/fai.hpp"
#include "io/genome_list.hpp"
#include "io/text_source.hpp"

namespace genemask::cli {
namespace {

struct CountArgs {
  std::string genome, genomes, out;
  io::GenomeList list;  // --genomes, read once when the options are parsed
  int kmax = 10;
  bool presence15 = false;
  ProgressOptions progress;  // every 10 s by default
  bool profile = false;
  bool force = false;
};

/// When GENOME.fai exists, the records found must be the ones it lists.
void check_against_fai(const std::string& genome, const std::vector<RecordInfo>& records) {
  std::vector<std::string> names;
  std::vector<uint64_t> lengths;
  for (const auto& r : records) names.push_back(r.name), lengths.push_back(r.length);
  io::check_against_fai(genome, names, lengths);
}

/// What ran out of memory, how much it takes, and which option lowers it.
std::string count_out_of_memory(const CountArgs& a) {
  auto mib = [](uint64_t b) { return fmt::format("{:.0f} MiB", static_cast<double>(b) / (1 << 20)); };
  const auto m = hpc::count_memory(CountOptions{a.kmax, a.presence15});
  std::vector<std::string> remedies;
  if (a.kmax > 1) {
    const auto lower = hpc::count_memory(CountOptions{a.kmax - 1, a.presence15});
    remedies.push_back(fmt::format("lower --kmax (each step down divides the tables by 4: --kmax {} needs {} per rank)",
                                   a.kmax - 1, mib(lower.rank_bytes)));
  }
  if (a.presence15) remedies.push_back(fmt::format("leave out --presence15 ({})", mib(m.presence_bytes)));
  remedies.push_back("give the job more memory");
  std::string remedy;
  for (size_t i = 0; i < remedies.size(); ++i)
    remedy += (i == 0 ? "" : i + 1 == remedies.size() ? " or " : ", ") + remedies[i];
  return fmt::format("out of memory{}: counting k = 1..{} holds {} of k-mer tables per rank ({} counters for k = {}{}) "
                     "and rank 0 about {} more to combine them and build counts.h5; {}",
                     io::memory_limit_note(), a.kmax, mib(m.rank_bytes), num_kmers(a.kmax), a.kmax,
                     a.presence15 ? fmt::format(" and the {} --presence15 bitset", mib(m.presence_bytes)) : "",
                     mib(m.rank0_extra_bytes), remedy);
}

/// The summary line's figures common to --genome and --genomes. Collective (the peak RSS over
/// the ranks, taken now, after the HDF5 file was built and written: rank 0's largest
/// allocation; the counting phase alone understates it).
nlohmann::json count_summary(const CountArgs& a, const hpc::DistributedCountSummary& s, uint64_t records,
                             const nlohmann::json& kmers, double write_s, double secs) {
  const uint64_t peak_rss = hpc::allreduce_max_u64(hpc::peak_rss_bytes(), MPI_COMM_WORLD);
  const double bases = static_cast<double>(s.acgt_bases + s.other_bases);
  return {{"command", "count"},
          {"out", a.out},
          {"compression", s.compression},
          {"ranks", s.ranks},
          {"kmax", a.kmax},
          {"presence15", a.presence15},
          {"records", records},
          {"file_bytes", s.file_bytes},
          {"bases_read", s.acgt_bases + s.other_bases},
          {"acgt_bases", s.acgt_bases},
          {"other_bases", s.other_bases},
          {"kmers", kmers},
          {"count_s", s.count_s},
          {"reduce_s", s.reduce_s},
          {"write_s", write_s},
          {"seconds", secs},
          {"gbp_per_s_per_rank", s.count_s > 0 ? bases / s.count_s / 1e9 / s.ranks : 0.0},
          {"peak_rss_mib", static_cast<double>(peak_rss) / (1 << 20)}};
}

void count_and_write(const CountArgs& a, const Context& ctx) {
  using clock = std::chrono::steady_clock;
  auto t0 = clock::now();
  if (ctx.rank == 0) check_writable(a.out);
  Progress progress("count", a.progress.interval_s, ctx.rank == 0 && !a.progress.quiet);
  CountOptions opts;
  opts.kmax = a.kmax;
  opts.presence15 = a.presence15;
  auto res = hpc::count_distributed(a.genome, opts, MPI_COMM_WORLD, [&](double f) { progress.update(f); }, a.profile);
  double write_s = 0;
  nlohmann::json kmers = nlohmann::json::object();
  if (ctx.rank == 0) {
    progress.done();
    check_against_fai(a.genome, res.records);
    auto tw = clock::now();
    io::CountsMeta meta;
    meta.command_line = ctx.command_line;
    meta.genemask_version = kVersion;
    meta.source_files = {a.genome};
    meta.source_sizes = {res.summary.file_bytes};
    for (const auto& r : res.records) {
      meta.record_names.push_back(r.name);
      meta.record_lengths.push_back(r.length);
    }
    meta.acgt_bases = res.summary.acgt_bases;
    meta.other_bases = res.summary.other_bases;
    io::write_counts_file(a.out, a.kmax, res.counts.counts, res.counts.presence15, meta);
    write_s = std::chrono::duration<double>(clock::now() - tw).count();
    for (int k = 1; k <= a.kmax; ++k) kmers[std::to_string(k)] = res.counts.total(k);
  }
  const auto& s = res.summary;
  const double secs = std::chrono::duration<double>(clock::now() - t0).count();
  nlohmann::json j = count_summary(a, s, res.records.size(), kmers, write_s, secs);
  j["genome"] = a.genome;
  if (a.profile) {
    j["read_s"] = s.read_s;
    j["parse_s"] = s.parse_s;
  }
  note_genome_ends({a.genome}, ctx);
  print_summary(ctx, j);
}

/// count --genomes: each genome's counts and the pool, in one counts.h5.
void count_list_and_write(const CountArgs& a, const Context& ctx) {
  using clock = std::chrono::steady_clock;
  auto t0 = clock::now();
  const io::GenomeList& list = a.list;
  if (ctx.rank == 0) check_writable(a.out);
  Progress progress("count", a.progress.interval_s, ctx.rank == 0 && !a.progress.quiet);
  CountOptions opts;
  opts.kmax = a.kmax;
  opts.presence15 = a.presence15;
  std::vector<std::string> files;
  for (const auto& g : list.genomes) files.push_back(g.path);
  std::unique_ptr<io::CountsWriter> writer;
  if (ctx.rank == 0) writer = std::make_unique<io::CountsWriter>(a.out, a.kmax, list.genomes.size(), a.presence15);
  io::CountsMeta meta;
  nlohmann::json genomes = nlohmann::json::array();
  double write_s = 0;
  auto on_genome = [&](hpc::GenomeCounted&& gc) {
    const auto& g = list.genomes[gc.index];
    std::vector<std::string> names;
    std::vector<uint64_t> lengths;
    for (const auto& r : gc.records) names.push_back(r.name), lengths.push_back(r.length);
    io::check_against_fai(g.path, names, lengths);
    auto tw = clock::now();
    writer->add_genome({g.name, g.path, gc.index, gc.file_bytes, gc.acgt_bases, gc.other_bases, gc.records.size()},
                       gc.counts.counts);
    write_s += std::chrono::duration<double>(clock::now() - tw).count();
    meta.record_names.insert(meta.record_names.end(), names.begin(), names.end());
    meta.record_lengths.insert(meta.record_lengths.end(), lengths.begin(), lengths.end());
    meta.record_genomes.insert(meta.record_genomes.end(), names.size(), gc.index);
    genomes.push_back({{"name", g.name},
                       {"path", g.path},
                       {"compression", gc.compression},
                       {"file_bytes", gc.file_bytes},
                       {"records", gc.records.size()},
                       {"acgt_bases", gc.acgt_bases},
                       {"other_bases", gc.other_bases}});
  };
  hpc::GenomesCountSummary gs;
  auto res = hpc::count_genomes_distributed(files, opts, MPI_COMM_WORLD, on_genome, gs,
                                            [&](double f) { progress.update(f); });
  nlohmann::json kmers = nlohmann::json::object();
  if (ctx.rank == 0) {
    progress.done();
    auto tw = clock::now();
    meta.command_line = ctx.command_line;
    meta.genemask_version = kVersion;
    for (const auto& g : list.genomes) {
      meta.source_files.push_back(g.path);
      meta.source_sizes.push_back(g.size_bytes);
      meta.genome_names.push_back(g.name);
    }
    meta.acgt_bases = gs.total.acgt_bases;
    meta.other_bases = gs.total.other_bases;
    writer->finish(res.counts.counts, res.counts.presence15, meta);
    write_s += std::chrono::duration<double>(clock::now() - tw).count();
    for (int k = 1; k <= a.kmax; ++k) kmers[std::to_string(k)] = res.counts.total(k);
  }
  const auto& s = gs.total;
  const double secs = std::chrono::duration<double>(clock::now() - t0).count();
  nlohmann::json balance = nlohmann::json::array();
  for (size_t r = 0; r < gs.rank_bytes.size(); ++r)
    balance.push_back({{"rank", r}, {"file_bytes", gs.rank_bytes[r]}, {"count_s", gs.rank_count_s[r]}});
  nlohmann::json j = count_summary(a, s, meta.record_names.size(), kmers, write_s, secs);
  j["genomes_list"] = a.genomes;
  j["genomes"] = genomes;
  j["rank_balance"] = balance;
  j["spool_mib"] = static_cast<double>(gs.spool_bytes) / (1 << 20);
  if (ctx.rank == 0) {
    std::vector<std::vector<std::pair<std::string, uint64_t>>> records(list.genomes.size());
    for (size_t i = 0; i < meta.record_names.size(); ++i)
      records[meta.record_genomes[i]].emplace_back(meta.record_names[i], meta.record_lengths[i]);
    for (const auto& w : io::same_genome_warnings(list, records)) std::cerr << "warning: " << w << std::endl;
  }
  std::vector<std::string> paths;
  for (const auto& g : list.genomes) paths.push_back(g.path);
  note_genome_ends(paths, ctx);
  print_summary(ctx, j);
}

void run_count(const CountArgs& a, const Context& ctx) {
  try {  // the tables are allocated in the count and on rank 0 when writing: one message names their size
    if (!a.genomes.empty())
      count_list_and_write(a, ctx);
    else
      count_and_write(a, ctx);
  } catch (const std::bad_alloc&) {
    throw std::runtime_error(count_out_of_memory(a));
  }
}

}  // namespace

void register_count(CLI::App& app, Context& ctx) {
  auto a = std::make_shared<CountArgs>();
  auto* sub = app.add_subcommand("count", "Count all k-mers, k=1..kmax, of a genome (MPI: ranks split the file)");
  auto* one = sub->add_option("--genome", a->genome, "FASTA file: .fa, .fa.gz (gzip or bgzip)")->check(existing_file());
  auto* many = sub->add_option("--genomes", a->genomes,
                               "genome list (TSV: name, path[, weight[, genes]]; docs/formats.md): each genome's "
                               "counts and their pool in one counts.h5")
                   ->check(existing_file());
  one->excludes(many);
  sub->add_option("--out", a->out, "output counts.h5")->required();
  sub->add_option("--kmax", a->kmax, "count k = 1..kmax")->check(CLI::Range(1, kMaxDenseK))->capture_default_str();
  sub->add_flag("--presence15", a->presence15, "also store the set of 15-mers present (128 MiB per rank)");
  add_progress_options(sub, a->progress);
  add_file_force_flag(sub, a->force);
  sub->add_flag("--profile", a->profile,
                "also time a read-only and a parse-only pass (read_s, parse_s in the summary)");
  sub->footer(
      "Counts forward-strand k-mers; soft-masked (lowercase) bases count as upper case; k-mers with N or "
      "another IUPAC code are skipped. Plain and bgzip files are split among ranks by bytes; plain gzip is "
      "read whole by every rank (recompress with `bgzip` to scale).");
  sub->callback([a, &ctx] {
    if (a->genome.empty() && a->genomes.empty())
      throw CLI::RequiredError("--genome FASTA or --genomes LIST (one of them)");
    if (!a->genomes.empty() && a->profile)
      throw CLI::ValidationError("--profile", "times the read and parse of one --genome file; it does not apply to "
                                              "--genomes (the summary's rank_balance gives each rank's bytes and seconds)");
    if (!a->genomes.empty()) {
      a->list = io::read_genome_list(a->genomes);  // every refusal before the ranks start
      ctx.inputs = {{"--genomes", a->genomes}};
      for (const auto& g : a->list.genomes) ctx.inputs.push_back({"--genomes (" + g.name + ")", g.path});
      ctx.check = [a] {
        for (const auto& g : a->list.genomes) io::probe_file(g.path);
      };
    } else {
      ctx.inputs = {{"--genome", a->genome}};
      ctx.check = [a] { io::probe_file(a->genome); };  // a truncated BGZF, before any rank starts
    }
    ctx.outputs = {file_output("--out", a->out, {io::OwnFile::Kind::hdf5_format, io::kCountsFormat, "a genemask counts file"},
                               a->force)};
    ctx.run = [a, &ctx] { run_count(*a, ctx); };
  });
}

}  // namespace genemask::cli
