#pragma once
#include <algorithm>

#include "genemask/rng.hpp"

namespace genemask {

template <class F>
void for_each_candidate(uint64_t length, uint64_t chrom_index, const SegmentRecipe& r,
                        const std::vector<uint64_t>& boundaries, F&& f) {
  Rng rng(r.seed, Stream::shard_offsets, chrom_index);
  uint64_t pos = rng.between(1, r.max_offset);
  auto next_boundary = std::upper_bound(boundaries.begin(), boundaries.end(), pos);
  const uint64_t min_bases = r.min_tokens + 5;
  while (true) {
    const uint32_t tokens = rng.uniform() < r.full_prob ? r.max_tokens
                                                        : static_cast<uint32_t>(rng.between(r.min_tokens, r.max_tokens));
    uint64_t end = pos + tokens + 5;
    if (end > length) break;
    while (next_boundary != boundaries.end() && *next_boundary <= pos) ++next_boundary;
    if (next_boundary != boundaries.end() && *next_boundary < end) {
      // Cut at the gene boundary; the next segment starts there.
      end = *next_boundary;
      if (end - pos >= min_bases) f(Candidate{pos, static_cast<uint32_t>(end - pos)});
      pos = end;
      continue;
    }
    f(Candidate{pos, static_cast<uint32_t>(end - pos)});
    pos = end;
  }
}

inline std::vector<Candidate> candidates(uint64_t length, uint64_t chrom_index, const SegmentRecipe& r,
                                         const std::vector<uint64_t>& boundaries) {
  std::vector<Candidate> out;
  for_each_candidate(length, chrom_index, r, boundaries, [&](const Candidate& c) { out.push_back(c); });
  return out;
}

inline uint64_t count_candidates(uint64_t length, uint64_t chrom_index, const SegmentRecipe& r,
                                 const std::vector<uint64_t>& boundaries) {
  uint64_t n = 0;
  for_each_candidate(length, chrom_index, r, boundaries, [&](const Candidate&) { ++n; });
  return n;
}

}  // namespace genemask
