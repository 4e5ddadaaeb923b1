#pragma once
// `genemask embed`: per-sequence embeddings from a model (Torch-free header).
#include <mpi.h>

#include <functional>
#include <string>

namespace genemask::model {

struct EmbedOptions {
  std::string model, input, out, command_line;
  int64_t batch = 32;              // windows per forward pass
  int64_t layer = -1;              // hidden layer: 0 = embeddings, L = last; negative from the end
  std::string pooling = "both";    // cls | mean | both
  bool per_token = false;          // also /tokens + /offsets: a vector per 6-mer
  int64_t stride = 0;              // tokens between window starts of long sequences; 0 = half
  int threads = 0;
  std::string device = "cpu";
  std::string precision = "auto";  // fp32, bf16 (autocast) or auto (bf16 where the device has bf16 hardware)
  std::function<void(double)> progress;  // rank 0, after each batch: the share of its windows done (null: none)
};

struct EmbedSummary {
  uint64_t sequences = 0, long_sequences = 0, windows = 0, hidden = 0, tokens = 0;
  uint64_t unknown_only = 0;  // sequences whose tokens are all [UNK] (SequenceInputs::unknown_only)
  uint64_t unknown_only_windows = 0;  // windows of long sequences whose tokens are all [UNK]
  int64_t layer = 0, window_tokens = 0, stride = 0;
  double seconds = 0, seq_per_s = 0;
  int ranks = 1;
  std::string model_dir;
  std::string precision;  // the one used: fp32 or bf16
};

/// Collective. Reads FASTA (records) or a table (rows; labels optional), embeds rank r's
/// share (sequences i with i % R == r) in length-sorted batches, gathers on rank 0, and
/// writes HDF5 in input order: /ids, /windows, and per `pooling` /cls and /mean float32
/// [N, hidden] (the hidden state of layer `layer` at [CLS]; its mean over the 6-mer tokens,
/// [CLS], [SEP] and padding excluded); with `per_token`, /tokens float32 [T, hidden] (one
/// vector per 6-mer) and /offsets uint64 [N + 1] (sequence i's rows are
/// offsets[i]..offsets[i+1]). A sequence of more 6-mers than the model takes (510, or
/// max_position_embeddings - 2) runs in windows of that many tokens `stride` apart, the
/// last ending at its end: a token's vector is the mean over the windows that hold it,
/// [CLS] the mean of the windows' [CLS], and mean the mean of its token vectors. /cls and
/// /mean are summed window by window: memory is one batch of windows plus O(hidden) per
/// sequence, whatever its length; only per_token grows with the tokens. Work that cannot
/// fit in the memory available is refused before it starts (an InputError naming the input).
EmbedSummary embed(const EmbedOptions& o, MPI_Comm comm);

}  // namespace genemask::model
