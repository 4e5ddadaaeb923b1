#include "hpc/shards.hpp"

#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <fmt/format.h>
#include <iostream>
#include <set>
#include <algorithm>
#include <iterator>

#include "genemask/corpus/tokenizer.hpp"
#include "genemask/version.hpp"
#include "hpc/count.hpp"
#include "hpc/mpi.hpp"
#include "hpc/serialize.hpp"
#include "io/annotation.hpp"
#include "io/fai.hpp"
#include "io/error.hpp"

namespace genemask::hpc {

ShardsResult build_shards(const ShardsRequest& req, MPI_Comm comm, const std::function<void(double)>& progress) {
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  const int rank = comm_rank(comm), size = comm_size(comm);
  const bool multi = !req.list.genomes.empty();
  std::vector<std::string> paths, genes_files;
  if (multi) {
    for (const auto& g : req.list.genomes) paths.push_back(g.path), genes_files.push_back(g.genes);
  } else {
    paths = {req.genome};
    genes_files = {req.genes};
  }
  const size_t nfiles = paths.size();
  std::vector<io::FileInfo> infos;
  for (const auto& p : paths) infos.push_back(io::probe_file(p));
  std::vector<FilePart> parts;
  if (multi) {
    parts = partition_files(infos, rank, size);
  } else {
    parts.push_back(FilePart{0, io::partition(infos[0], rank, size), infos[0].size_bytes});
  }

  // Progress: pass 1 (a parse) takes about a sixth of the time of pass 2 (measured on chr22).
  const PartsProgress shown(infos, parts, rank == 0 ? progress : std::function<void(double)>(), {1.0, 6.0});

  // Pass 1: where every owned stretch lies, per file; rank 0 stitches and shares.
  std::vector<std::vector<RecordSegment>> mine(nfiles);
  for (size_t i = 0; i < parts.size(); ++i) {
    const auto& p = parts[i];
    auto segs = scan_records(infos[p.file], p.own, shown.at(i, 0));
    mine[p.file].insert(mine[p.file].end(), segs.begin(), segs.end());
  }
  auto all = gather_serialized(mine, 0, comm);
  std::vector<RecordInfo> records;
  std::vector<uint32_t> record_genome;
  std::vector<std::vector<StretchStart>> starts(nfiles);
  std::vector<std::vector<uint64_t>> boundaries;
  std::string result_gene_source;
  uint64_t result_gene_transcripts = 0;
  ShardsResult::GeneCounts genes;
  const bool any_genes =
      std::any_of(genes_files.begin(), genes_files.end(), [](const std::string& g) { return !g.empty(); });
  if (rank == 0) {
    for (size_t f = 0; f < nfiles; ++f) {
      std::vector<RecordSegment> flat;
      for (auto& v : all) flat.insert(flat.end(), v[f].begin(), v[f].end());
      const auto file_records = stitch_records(infos[f], flat);
      std::vector<std::string> names;
      std::vector<uint64_t> lengths;
      for (const auto& r : file_records) names.push_back(r.name), lengths.push_back(r.length);
      io::check_against_fai(paths[f], names, lengths);  // a FASTA cut short of its index
      const uint32_t first_chrom = static_cast<uint32_t>(records.size());
      starts[f] = locate_stretches(std::move(flat));
      for (auto& st : starts[f]) st.chrom += first_chrom;
      records.insert(records.end(), file_records.begin(), file_records.end());
      record_genome.insert(record_genome.end(), file_records.size(), static_cast<uint32_t>(f));
      if (!any_genes) continue;
      if (genes_files[f].empty()) {
        boundaries.resize(records.size());  // no boundaries for this genome's records
        continue;
      }
      io::GeneSource src;
      io::GeneBoundaryStats gs;
      auto b = io::gene_boundaries(genes_files[f], names, lengths, &src, &gs);
      boundaries.resize(first_chrom);
      boundaries.insert(boundaries.end(), std::make_move_iterator(b.begin()), std::make_move_iterator(b.end()));
      boundaries.resize(records.size());
      const std::string source = src.from_transcripts ? "mRNA/transcript spans (no gene lines)"
                                 : src.transcripts > 0 ? "gene lines and mRNA/transcript spans"
                                                       : "gene lines";
      if (result_gene_source.empty()) result_gene_source = source;
      else if (result_gene_source != source) result_gene_source = "gene lines and mRNA/transcript spans";
      result_gene_transcripts += src.transcripts;
      genes.genes += gs.genes;
      genes.unknown_sequence_genes += gs.unknown_sequence_genes;
      genes.unknown_sequences += gs.unknown_sequences.size();
      const std::string whose = multi ? fmt::format(" (genome {})", req.list.genomes[f].name) : "";
      if (src.from_transcripts)
        std::cerr << fmt::format("[shards] no 'gene' features in {}{}: using the spans of its {} mRNA/transcript lines "
                                 "(overlapping ones merged per strand) as the genes",
                                 genes_files[f], whose, src.transcripts)
                  << std::endl;
      else if (src.transcripts > 0)
        std::cerr << fmt::format("[shards] {} mRNA/transcript line(s) of {}{} lie outside every gene line: their {} "
                                 "locus/loci (overlapping ones merged per strand) are used as genes too",
                                 src.transcripts, genes_files[f], whose, src.transcript_loci)
                  << std::endl;
      if (gs.unknown_sequence_genes > 0)
        std::cerr << fmt::format("[shards] {} of the {} genes in {}{} lie on {} sequence(s) the genome does not have "
                                 "(first: {}); their boundaries are not used",
                                 gs.unknown_sequence_genes, gs.genes, genes_files[f], whose,
                                 gs.unknown_sequences.size(), gs.unknown_sequences.front())
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
  o.genomes = multi ? static_cast<uint32_t>(nfiles) : 0;
  const std::vector<ChromPlan> plan = plan_chromosomes(records, o.recipe, boundaries);
  std::vector<OwnedText> texts;
  for (size_t i = 0; i < parts.size(); ++i)
    texts.push_back(OwnedText{&infos[parts[i].file], parts[i].own, &starts[parts[i].file],
                              static_cast<uint32_t>(parts[i].file), shown.at(i, 1)});
  ShardBuildStats local = build_owned_shards(texts, plan, o);
  const auto t2 = clock::now();

  auto stats = gather_serialized(local, 0, comm);
  ShardsResult res;
  res.gene_source = result_gene_source;
  res.gene_transcripts = result_gene_transcripts;
  res.genes = genes;
  res.ranks = size;
  res.scan_s = allreduce_max_double(std::chrono::duration<double>(t1 - t0).count(), comm);
  res.build_s = allreduce_max_double(std::chrono::duration<double>(t2 - t1).count(), comm);
  res.file_bytes = 0;
  for (const auto& i : infos) res.file_bytes += i.size_bytes;
  if (rank == 0) {
    auto& T = res.totals;
    for (auto* v : {&T.genome_samples_train, &T.genome_samples_valid, &T.genome_tokens_train, &T.genome_tokens_valid})
      v->assign(o.genomes, 0);
    for (const auto& s : stats) {
      T.candidates += s.candidates;
      T.kept += s.kept;
      T.dropped_non_acgt += s.dropped_non_acgt;
      T.samples_train += s.samples_train;
      T.samples_valid += s.samples_valid;
      T.tokens_train += s.tokens_train;
      T.tokens_valid += s.tokens_valid;
      T.files.insert(T.files.end(), s.files.begin(), s.files.end());
      for (size_t g = 0; g < o.genomes && g < s.genome_samples_train.size(); ++g) {
        T.genome_samples_train[g] += s.genome_samples_train[g];
        T.genome_samples_valid[g] += s.genome_samples_valid[g];
        T.genome_tokens_train[g] += s.genome_tokens_train[g];
        T.genome_tokens_valid[g] += s.genome_tokens_valid[g];
      }
    }
    const std::string source = multi ? req.list.path : req.genome;
    if (T.samples_train + T.samples_valid == 0) {
      uint64_t bases = 0, longest = 0;
      for (const auto& r : records) bases += r.length, longest = std::max<uint64_t>(longest, r.length);
      // No segment at all: every record is shorter than its start offset and one segment (the
      // genome may be all A, C, G and T: its N is not the cause).
      if (T.candidates == 0)
        throw io::InputError(source, fmt::format("gives no sample: no segment fits in any of its {} record(s) (the "
                                                 "longest {} bases): each record first skips a start offset drawn "
                                                 "from [1, --max-offset {}], then needs --min-tokens {} 6-mers; "
                                                 "lower --max-offset (or --min-tokens), or give a longer genome",
                                                 records.size(), longest, o.recipe.max_offset, o.recipe.min_tokens));
      throw io::InputError(source, fmt::format("gives no sample: none of its {} candidate segment(s) is all A, C, "
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
    m.source_genome = source;
    m.genome_bytes = res.file_bytes;
    m.genes = multi ? std::string() : req.genes;
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
    for (size_t r = 0; r < records.size(); ++r)
      m.chromosomes.push_back(io::ManifestChrom{records[r].name, records[r].length, record_genome[r]});
    if (multi) {
      for (size_t f = 0; f < nfiles; ++f) {
        const auto& g = req.list.genomes[f];
        io::ManifestGenome mg;
        mg.name = g.name;
        mg.path = g.path;
        mg.genes = g.genes;
        mg.file_bytes = infos[f].size_bytes;
        struct stat st {};
        if (::stat(g.path.c_str(), &st) == 0)
          mg.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
        mg.weight = g.weight;
        for (size_t r = 0; r < records.size(); ++r)
          if (record_genome[r] == f) ++mg.records, mg.bases += records[r].length;
        mg.samples_train = T.genome_samples_train[f];
        mg.samples_valid = T.genome_samples_valid[f];
        mg.tokens_train = T.genome_tokens_train[f];
        mg.tokens_valid = T.genome_tokens_valid[f];
        if (mg.samples_train + mg.samples_valid == 0)
          std::cerr << fmt::format("[shards] warning: genome {} ({}) gives no sample ({} record(s) of {} bases): "
                                   "pretraining cannot weight it; leave it out of the list or check the file",
                                   g.name, g.path, mg.records, mg.bases)
                    << std::endl;
        m.genomes.push_back(std::move(mg));
      }
    }
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
