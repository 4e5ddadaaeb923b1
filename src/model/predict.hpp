#pragma once
// `genemask predict`: class probabilities of unlabelled sequences from a fine-tuned
// classifier (Torch-free header).
#include <mpi.h>

#include <functional>
#include <string>

namespace genemask::model {

struct PredictOptions {
  std::string model, input, out, command_line;
  int64_t batch = 64;   // windows per forward pass
  int64_t stride = 0;   // tokens between window starts for long sequences; 0 = half a window
  int threads = 0;
  std::string device = "cpu", precision = "auto";
  std::function<void(double)> progress;  // rank 0, after each batch: the share of its windows done (null: none)
};

struct PredictSummary {
  uint64_t sequences = 0, windows = 0, long_sequences = 0, classes = 0;
  uint64_t unknown_only = 0;  // sequences whose tokens are all [UNK] (SequenceInputs::unknown_only)
  uint64_t unknown_only_windows = 0;  // windows of long sequences whose tokens are all [UNK]
  int64_t window_tokens = 0, stride = 0;
  double seconds = 0, seq_per_s = 0;
  int ranks = 1;
  std::string precision;  // the one used: fp32 or bf16
};

/// Collective. Reads FASTA or a sequence table (labels, if any, are ignored), scores rank
/// r's share (sequences i with i % R == r) in length-sorted batches of windows, gathers on
/// rank 0 and writes a TSV: id, windows, prob_<class> for each class of id2label, and the
/// predicted class (the most probable), one row per sequence in input order. A sequence of
/// more 6-mers than the model takes (510, or max_position_embeddings - 2) is scored in
/// windows of that many tokens, `stride` apart, the last one ending at its end; its
/// probabilities are the mean over its windows.
PredictSummary predict(const PredictOptions& o, MPI_Comm comm);

}  // namespace genemask::model
