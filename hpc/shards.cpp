#include "hpc/shards.hpp"

#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <fmt/format.h>
#include <iostream>
#include <set>

#include "genemask/corpus/tokenizer.hpp"
#include "genemask/version.hpp"
#include "hpc/mpi.hpp"
#include "hpc/serialize.hpp"
#include "io/annotation.hpp"
#include "io/fai.hpp"
#include "io/error.hpp"

namespace genemask::hpc {

ShardsResult build_shards(const ShardsRequest& req, MPI_Comm comm) {
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  const int rank = comm_rank(comm), size = comm_size(comm);
  const io::FileInfo info = io::probe_file(req.genome);
  const io::Ownership own = io::partition(info, rank, size);

  // Pass 1: where every owned stretch lies; rank 0 stitches and shares.
  std::vector<RecordSegment> mine = scan_records(info, own);
  auto all = gather_serialized(mine, 0, comm);
  std::vector<RecordInfo> records;
  std::vector<StretchStart> starts;
  std::vector<std::vector<uint64_t>> boundaries;
  std::string result_gene_source;
  uint64_t result_gene_transcripts = 0;
  ShardsResult::GeneCounts genes;
  if (rank == 0) {
    std::vector<RecordSegment> flat;
    for (auto& v : all) flat.insert(flat.end(), v.begin(), v.end());
    records = stitch_records(info, flat);
    {
      std::vector<std::string> names;
      std::vector<uint64_t> lengths;
      for (const auto& r : records) names.push_back(r.name), lengths.push_back(r.length);
      io::check_against_fai(req.genome, names, lengths);  // a FASTA cut short of its index
    }
    starts = locate_stretches(std::move(flat));
    if (!req.genes.empty()) {
      std::vector<std::string> names;
      std::vector<uint64_t> lengths;
      for (const auto& r : records) {
        names.push_back(r.name);
        lengths.push_back(r.length);
      }
      io::GeneSource src;
      io::GeneBoundaryStats gs;
      boundaries = io::gene_boundaries(req.genes, names, lengths, &src, &gs);
      result_gene_source = src.from_transcripts ? "mRNA/transcript spans (no gene lines)" : "gene lines";
      result_gene_transcripts = src.transcripts;
      genes.genes = gs.genes;
      genes.unknown_sequence_genes = gs.unknown_sequence_genes;
      genes.unknown_sequences = gs.unknown_sequences.size();
      if (src.from_transcripts)
        std::cerr << fmt::format("[shards] no 'gene' features in {}: using the spans of its {} mRNA/transcript lines "
                                 "(overlapping ones merged per strand) as the genes",
                                 req.genes, src.transcripts)
                  << std::endl;
      if (gs.unknown_sequence_genes > 0)
        std::cerr << fmt::format("[shards] {} of the {} genes in {} lie on {} sequence(s) the genome does not have "
                                 "(first: {}); their boundaries are not used",
                                 gs.unknown_sequence_genes, gs.genes, req.genes, gs.unknown_sequences.size(),
                                 gs.unknown_sequences.front())
                  << std::endl;
    }
    std::filesystem::create_directories(req.out_dir);  // the CLI's: io::OutputSet's staging directory
  }
  bcast_serialized(records, 0, comm);
  bcast_serialized(starts, 0, comm);
  bcast_serialized(boundaries, 0, comm);
  const auto t1 = clock::now();

  // Pass 2: every rank cuts, tokenizes and writes the candidates that start in its text.
  ShardBuildOptions o = req.options;
  o.out_dir = req.out_dir;
  o.rank = rank;
  o.vocab_sha256 = vocab_sha256();
  const std::vector<ChromPlan> plan = plan_chromosomes(records, o.recipe, boundaries);
  ShardBuildStats local = build_owned_shards(info, own, plan, starts, o);
  const auto t2 = clock::now();

  auto stats = gather_serialized(local, 0, comm);
  ShardsResult res;
  res.gene_source = result_gene_source;
  res.gene_transcripts = result_gene_transcripts;
  res.genes = genes;
  res.ranks = size;
  res.scan_s = allreduce_max_double(std::chrono::duration<double>(t1 - t0).count(), comm);
  res.build_s = allreduce_max_double(std::chrono::duration<double>(t2 - t1).count(), comm);
  res.file_bytes = info.size_bytes;
  if (rank == 0) {
    auto& T = res.totals;
    for (const auto& s : stats) {
      T.candidates += s.candidates;
      T.kept += s.kept;
      T.dropped_non_acgt += s.dropped_non_acgt;
      T.samples_train += s.samples_train;
      T.samples_valid += s.samples_valid;
      T.tokens_train += s.tokens_train;
      T.tokens_valid += s.tokens_valid;
      T.files.insert(T.files.end(), s.files.begin(), s.files.end());
    }
    if (T.samples_train + T.samples_valid == 0) {
      uint64_t bases = 0;
      for (const auto& r : records) bases += r.length;
      throw io::InputError(req.genome, fmt::format("gives no sample: none of its {} candidate segment(s) is all A, C, "
                                                   "G and T ({} dropped for N or other codes; {} record(s) of {} "
                                                   "bases in all); a corpus needs stretches of at least --min-tokens "
                                                   "{} 6-mers without N",
                                                   T.candidates, T.dropped_non_acgt, records.size(), bases,
                                                   o.recipe.min_tokens));
    }
    std::sort(T.files.begin(), T.files.end(), [](const ShardFileInfo& a, const ShardFileInfo& b) {
      if (a.split != b.split) return a.split == "train";
      return a.first_sample < b.first_sample;
    });
    auto& m = res.manifest;
    m.source_genome = req.genome;
    m.genome_bytes = info.size_bytes;
    m.genes = req.genes;
    m.command_line = req.command_line;
    m.genemask_version = kVersion;
    m.vocab_sha256 = o.vocab_sha256;
    m.seed = o.recipe.seed;
    m.valid_fraction = o.valid_fraction;
    m.max_offset = o.recipe.max_offset;
    m.full_prob = o.recipe.full_prob;
    m.min_tokens = o.recipe.min_tokens;
    m.max_tokens = o.recipe.max_tokens;
    m.candidates = T.candidates;
    m.dropped_non_acgt = T.dropped_non_acgt;
    for (const auto& r : records) m.chromosomes.push_back(io::ManifestChrom{r.name, r.length});
    for (const auto& f : T.files) {
      m.shards.push_back(io::ManifestShard{f.file, f.split, f.sha256, f.samples, f.tokens, f.first_sample, f.last_sample});
      struct stat st {};
      if (::stat((req.out_dir + "/" + f.file).c_str(), &st) == 0) res.shard_bytes += static_cast<uint64_t>(st.st_size);
    }
    io::write_manifest(req.out_dir, m);
  }
  res.seconds = std::chrono::duration<double>(clock::now() - t0).count();
  return res;
}

}  // namespace genemask::hpc
