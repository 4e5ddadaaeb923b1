#pragma once
// `genemask embed`: per-sequence embeddings from a model (Torch-free header).
#include <mpi.h>

#include <string>

namespace genemask::model {

struct EmbedOptions {
  std::string model, input, out, command_line;
  int64_t batch = 32;
  int threads = 0;
  std::string device = "cpu";
  std::string precision = "fp32";  // or bf16 (autocast) on cuda
};

struct EmbedSummary {
  uint64_t sequences = 0, truncated = 0, hidden = 0;
  double seconds = 0, seq_per_s = 0;
  int ranks = 1;
  std::string model_dir;
};

/// Collective. Reads FASTA (records) or a task table (rows), embeds rank r's share
/// (sequences i with i % R == r) in length-sorted batches, gathers on rank 0, and writes
/// HDF5: /cls and /mean float32 [N, hidden] in input order, /ids. [CLS] is the first
/// position's last hidden state; mean is the average over the 6-mer tokens ([CLS], [SEP]
/// and padding excluded). Sequences longer than 515 bases use their first 510 tokens.
EmbedSummary embed(const EmbedOptions& o, MPI_Comm comm);

}  // namespace genemask::model
