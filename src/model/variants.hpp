#pragma once
// `genemask variants`: probabilities of one class of a fine-tuned classifier for pairs of
// sequences (reference and alternative allele windows). Torch-free header: the CLI reads
// the variants, ranks and compares; libgenemask_model.so only scores.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace genemask::model {

struct VariantScoreOptions {
  std::string model;        // directory from `genemask finetune --save-model` (config.json with id2label)
  std::string class_name;   // class scored: a name of id2label, or an index; empty = index 1
  int64_t batch = 64;       // sequences per forward pass (batched by length)
  int threads = 0;          // intra-op threads; 0 = all cores
  std::string device = "cpu";
  int device_index = 0;
  std::string precision = "auto";  // fp32, bf16 (autocast) or auto (bf16 where the device has bf16 hardware)
  // Where pair i came from ("v.vcf:12 (rs7)"), for messages; empty: "pair i".
  std::vector<std::string> origins;
};

struct VariantScores {
  std::vector<double> p_ref, p_alt;   // P(class) per pair, in input order
  std::vector<std::string> class_names;
  int class_index = 1;
  uint64_t truncated = 0;             // sequences cut to 510 6-mers
  uint64_t same_tokens = 0;           // pairs whose ref and alt differ but read the same tokens ([UNK] over the variant)
  double seconds = 0, sequences_per_s = 0;
  int threads = 0;
  std::string precision;  // the one used: fp32 or bf16
};

/// Scores ref[i] and alt[i] (bases; at least 6 each). Not collective: one process.
VariantScores score_variants(const VariantScoreOptions& o, const std::vector<std::string>& ref,
                             const std::vector<std::string>& alt, const std::function<void(const std::string&)>& log);

}  // namespace genemask::model
