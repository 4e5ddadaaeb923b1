#pragma once
// Masking settings from the ranking tables of `genemask npmi` (npmi.tsv, the GRANK list)
// and `genemask pmi-vocab` (pmi_vocab.tsv). HDF5-, MPI- and Torch-free: the Python
// package builds it too.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "genemask/corpus/masking.hpp"
#include "io/rank_tables.hpp"

namespace genemask {

/// GRANK rank of each 6-mer by counter code, from npmi.tsv rows (read_npmi_tsv checked them).
/// Throws io::InputError naming `source` when the table ranks k-mers of another length.
std::vector<uint32_t> grank_of(const std::vector<io::NpmiRow>& rows, const std::string& source);
/// The vocabulary units (k, counter code) of pmi_vocab.tsv rows; io::InputError when empty.
std::vector<std::pair<int, uint64_t>> pmi_units_of(const std::vector<io::PmiVocabRow>& rows, const std::string& source);

/// Masking settings from the files of `genemask npmi` / `genemask pmi-vocab`: the one the
/// strategy needs is required (std::invalid_argument naming the option when missing).
MaskingConfig load_masking(MaskingKind kind, const std::string& npmi_tsv, const std::string& pmi_vocab_tsv);

}  // namespace genemask
