#pragma once
// The DNABERT/GeneMask pretraining-corpus recipe, as candidate segments of a chromosome.
// Candidates depend only on (seed, chromosome index, chromosome length, gene boundaries),
// never on the bases, so every rank can number them globally without reading the genome;
// a candidate that contains a non-ACGT base is dropped later (never joined across gaps).
//
// Per chromosome: skip o bases, o uniform in [1, max_offset]; then consecutive
// non-overlapping segments of L+5 bases (L 6-mer tokens), L = max_tokens with probability
// full_prob, else uniform in [min_tokens, max_tokens]; stop when a segment would run past
// the end. GB variant: a segment that would cross a gene boundary is cut at it (kept when
// it still has min_tokens tokens) and the next segment starts at the boundary.
#include <cstdint>
#include <vector>

namespace genemask {

struct SegmentRecipe {
  uint64_t seed = 42;
  uint32_t max_offset = 1000;
  double full_prob = 0.5;
  uint32_t min_tokens = 5;
  uint32_t max_tokens = 510;
};

struct Candidate {
  uint64_t start = 0;  // 0-based first base in the chromosome
  uint32_t bases = 0;  // tokens + 5
};

/// Calls f(candidate) for each candidate in order. `boundaries`: sorted 0-based positions.
template <class F>
void for_each_candidate(uint64_t length, uint64_t chrom_index, const SegmentRecipe& r,
                        const std::vector<uint64_t>& boundaries, F&& f);

std::vector<Candidate> candidates(uint64_t length, uint64_t chrom_index, const SegmentRecipe& r,
                                  const std::vector<uint64_t>& boundaries = {});
uint64_t count_candidates(uint64_t length, uint64_t chrom_index, const SegmentRecipe& r,
                          const std::vector<uint64_t>& boundaries = {});

}  // namespace genemask

#include "genemask/corpus/segments_impl.hpp"
