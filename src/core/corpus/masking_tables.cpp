#include "genemask/corpus/masking_tables.hpp"

#include <fmt/format.h>
#include <stdexcept>

#include "genemask/kmer/kmer.hpp"
#include "io/error.hpp"

namespace genemask {

std::vector<uint32_t> grank_of(const std::vector<io::NpmiRow>& rows, const std::string& source) {
  if (rows.empty()) throw io::InputError(source, "the ranking is empty");
  if (rows.front().kmer.size() != 6)
    throw io::InputError(source, fmt::format("ranks {}-mers; GeneMask needs the 6-mer ranking (genemask npmi --k 6)",
                                             rows.front().kmer.size()));
  std::vector<uint32_t> grank(4096, 0);
  for (const auto& r : rows) {
    uint64_t code;
    encode_kmer(r.kmer, code);
    grank[code] = static_cast<uint32_t>(r.rank);
  }
  return grank;
}

std::vector<std::pair<int, uint64_t>> pmi_units_of(const std::vector<io::PmiVocabRow>& rows, const std::string& source) {
  std::vector<std::pair<int, uint64_t>> units;
  units.reserve(rows.size());
  for (const auto& r : rows) {
    uint64_t code;
    encode_kmer(r.kmer, code);
    units.emplace_back(static_cast<int>(r.kmer.size()), code);
  }
  if (units.empty()) throw io::InputError(source, "the vocabulary is empty");
  return units;
}

MaskingConfig load_masking(MaskingKind kind, const std::string& npmi_tsv, const std::string& pmi_vocab_tsv) {
  MaskingConfig cfg;
  cfg.kind = kind;
  if (cfg.kind == MaskingKind::genemask) {
    if (npmi_tsv.empty()) throw std::invalid_argument("--masking genemask needs --npmi npmi.tsv (from genemask npmi)");
    cfg.grank = grank_of(io::read_npmi_tsv(npmi_tsv), npmi_tsv);
  }
  if (cfg.kind == MaskingKind::pmi_vocab) {
    if (pmi_vocab_tsv.empty())
      throw std::invalid_argument("--masking pmi-vocab needs --pmi-vocab pmi_vocab.tsv (from genemask pmi-vocab)");
    cfg.pmi_units = pmi_units_of(io::read_pmi_vocab_tsv(pmi_vocab_tsv), pmi_vocab_tsv);
  }
  return cfg;
}

}  // namespace genemask
