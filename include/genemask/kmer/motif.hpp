#pragma once
// IUPAC consensus motifs -> GRANK ranks of the 6-mers they match (paper Table 5).
//
// A motif such as "nTATAAAr" or "ksCTGGGm" has a core: the part in brackets when there are
// brackets ("nCyy[CCTCC]n", the paper's bold), else the span from its first to its last
// upper-case letter (the whole motif when it is all one case; '*' is ignored). The core is
// matched against the ranked k-mers:
//  - core of length k: the k-mers the core expands to (IUPAC codes expanded);
//  - shorter core: every k-mer that contains an expansion of the core;
//  - longer core: the k-mers of each length-k window of the core.
// Matches are listed best rank first, the first `top` of them (0 = all).
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace genemask {

struct MotifHit {
  std::string kmer;
  uint64_t rank = 0;
};

struct MotifResult {
  std::string motif;
  std::string core;  // upper-case
  std::vector<MotifHit> hits;
  uint64_t matched = 0;  // k-mers matched before `top` was applied
};

/// rank_of maps each k-mer (upper-case, all the same length k) to its rank.
/// Throws std::invalid_argument for a motif with a non-IUPAC character or no letters.
MotifResult match_motif(const std::string& motif, const std::unordered_map<std::string, uint64_t>& rank_of, int k,
                        size_t top);

/// The bases an IUPAC code stands for ("ACGT" for N), upper-case; empty if not IUPAC.
std::string iupac_bases(char code);

}  // namespace genemask
