#pragma once
// Distributed corpus building: `genemask shards`.
#include <mpi.h>

#include <functional>
#include <string>

#include "genemask/corpus/shard_build.hpp"
#include "io/genome_list.hpp"
#include "io/shard_manifest.hpp"

namespace genemask::hpc {

struct ShardsRequest {
  std::string genome, out_dir, genes, command_line;
  io::GenomeList list;  // --genomes: used instead of genome/genes when it has genomes
  ShardBuildOptions options;  // out_dir/rank/vocab are filled in
};

struct ShardsResult {
  ShardBuildStats totals;       // summed over ranks (files: all, on rank 0)
  io::ShardManifest manifest;   // rank 0
  double seconds = 0, scan_s = 0, build_s = 0;
  uint64_t file_bytes = 0, shard_bytes = 0;
  int ranks = 1;
  // --genes (rank 0): "gene" lines, or mRNA/transcript spans when the file has none.
  std::string gene_source;
  uint64_t gene_transcripts = 0;
  struct GeneCounts {
    uint64_t genes = 0, unknown_sequence_genes = 0, unknown_sequences = 0;
  } genes;  // --genes (rank 0): genes read, and those on sequences the genome lacks
};

/// Collective. With a genome list, ranks split the concatenated files by bytes (as count
/// does), chromosomes are numbered across the list in list order, every sample records its
/// genome, and the manifest lists the genomes with their samples and tokens.
/// Writes DIR/*.h5 shards (each rank its own) and DIR/manifest.json (rank 0, last).
/// `progress(fraction)` is called on rank 0 as its share advances through both passes.
ShardsResult build_shards(const ShardsRequest& req, MPI_Comm comm, const std::function<void(double)>& progress = {});

}  // namespace genemask::hpc
