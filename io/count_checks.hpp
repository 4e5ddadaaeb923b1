#pragma once
// Checks of k-mer count tables that every reader makes, wherever the tables come from
// (counts.h5, or arrays handed to the Python package): header-only, so the Python extension,
// which does not link HDF5, shares them with the CLI.
#include <cstdint>
#include <fmt/format.h>
#include <string>
#include <utility>
#include <vector>

#include "io/error.hpp"

namespace genemask::io {

/// The k-mer of `code` (2 bits a base, A C G T, first base most significant).
inline std::string kmer_bases_of(uint64_t code, int k) {
  std::string s(static_cast<size_t>(k), 'A');
  for (int i = k - 1; i >= 0; --i, code >>= 2) s[static_cast<size_t>(i)] = "ACGT"[code & 3];
  return s;
}

/// Every occurrence of a k-mer is an occurrence of its first k-1 bases and of its last k-1:
/// the k-mers that begin (or end) with a (k-1)-mer x can be no more than x's count. Counts
/// edited or mixed from two files that keep each table's total pass the total's check, not
/// this one. `c` must sum within 64 bits (checked before).
inline void check_against_shorter(const std::string& path, const std::string& ds, int k, const std::vector<uint64_t>& c,
                                  const std::vector<uint64_t>& shorter) {
  std::vector<uint64_t> begin(shorter.size()), end(shorter.size());
  const uint64_t low = shorter.size() - 1;
  for (uint64_t y = 0; y < c.size(); ++y) {
    begin[y >> 2] += c[y];
    end[y & low] += c[y];
  }
  for (uint64_t x = 0; x < shorter.size(); ++x)
    for (const auto& [sum, how] : {std::pair{begin[x], "begin"}, std::pair{end[x], "end"}})
      if (sum > shorter[x])
        throw InputError(path, fmt::format("{}: the {}-mers that {} with {} number {}, more than the {} times {} "
                                           "occurs (its {}-mer count): the counts are not of one genome; the file is "
                                           "damaged or was edited",
                                           ds, k, how, kmer_bases_of(x, k - 1), sum, shorter[x],
                                           kmer_bases_of(x, k - 1), k - 1));
}

/// The checks for tables given in memory (counts[k], k = 1..counts.size() - 1; counts[0]
/// unused): each table sums within 64 bits and agrees with the (k-1)-mer table.
inline void check_count_tables(const std::string& source, const std::vector<std::vector<uint64_t>>& counts) {
  for (size_t k = 1; k < counts.size(); ++k) {
    const auto& c = counts[k];
    uint64_t sum = 0;
    for (size_t i = 0; i < c.size(); ++i)
      if (__builtin_add_overflow(sum, c[i], &sum))
        throw InputError(source, fmt::format("the {}-mer counts overflow 64 bits at entry {} (count {})", k, i, c[i]));
    if (k >= 2) check_against_shorter(source, fmt::format("k{}", k), static_cast<int>(k), c, counts[k - 1]);
  }
}

}  // namespace genemask::io
