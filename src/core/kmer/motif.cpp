#include "genemask/kmer/motif.hpp"

#include <algorithm>
#include <cctype>
#include <fmt/format.h>
#include <set>
#include <stdexcept>

namespace genemask {

std::string iupac_bases(char code) {
  switch (std::toupper(static_cast<unsigned char>(code))) {
    case 'A': return "A";
    case 'C': return "C";
    case 'G': return "G";
    case 'T': case 'U': return "T";
    case 'R': return "AG";
    case 'Y': return "CT";
    case 'S': return "CG";
    case 'W': return "AT";
    case 'K': return "GT";
    case 'M': return "AC";
    case 'B': return "CGT";
    case 'D': return "AGT";
    case 'H': return "ACT";
    case 'V': return "ACG";
    case 'N': return "ACGT";
    default: return "";
  }
}

namespace {

// All strings matching a pattern of IUPAC codes.
void expand(const std::string& pattern, size_t i, std::string& cur, std::set<std::string>& out) {
  if (i == pattern.size()) {
    out.insert(cur);
    return;
  }
  for (char b : iupac_bases(pattern[i])) {
    cur.push_back(b);
    expand(pattern, i + 1, cur, out);
    cur.pop_back();
  }
}

}  // namespace

MotifResult match_motif(const std::string& motif, const std::unordered_map<std::string, uint64_t>& rank_of, int k,
                        size_t top) {
  std::string m;
  size_t open = std::string::npos, close = std::string::npos;  // [core] marks the core explicitly
  for (char c : motif) {
    if (c == '*' || std::isspace(static_cast<unsigned char>(c))) continue;
    if (c == '[' || c == ']') {
      if ((c == '[' && open != std::string::npos) || (c == ']' && (open == std::string::npos || close != std::string::npos)))
        throw std::invalid_argument(fmt::format("motif '{}': use one pair of brackets to mark the core, e.g. nCyy[CCTCC]n", motif));
      (c == '[' ? open : close) = m.size();
      continue;
    }
    if (iupac_bases(c).empty())
      throw std::invalid_argument(
          fmt::format("motif '{}': '{}' is not an IUPAC nucleotide code (use A C G T (U) R Y S W K M B D H V N)", motif, c));
    m.push_back(c);
  }
  if (m.empty()) throw std::invalid_argument(fmt::format("motif '{}' has no bases", motif));
  size_t first = m.size(), last = 0;
  bool has_lower = false;
  for (size_t i = 0; i < m.size(); ++i) {
    if (std::isupper(static_cast<unsigned char>(m[i]))) {
      first = std::min(first, i);
      last = i;
    } else {
      has_lower = true;
    }
  }
  if ((open == std::string::npos) != (close == std::string::npos) || (open != std::string::npos && close == open))
    throw std::invalid_argument(fmt::format("motif '{}': unbalanced or empty [core] brackets", motif));
  std::string core = open != std::string::npos          ? m.substr(open, close - open)
                     : (first == m.size() || !has_lower) ? m
                                                          : m.substr(first, last - first + 1);
  for (auto& c : core) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));

  std::set<std::string> kmers;
  const size_t K = static_cast<size_t>(k);
  if (core.size() >= K) {
    for (size_t w = 0; w + K <= core.size(); ++w) {
      std::string cur;
      expand(core.substr(w, K), 0, cur, kmers);
    }
  } else {
    for (size_t off = 0; off + core.size() <= K; ++off) {
      std::string pattern = std::string(off, 'N') + core + std::string(K - off - core.size(), 'N');
      std::string cur;
      expand(pattern, 0, cur, kmers);
    }
  }
  MotifResult res;
  res.motif = motif;
  res.core = core;
  for (const auto& km : kmers) {
    auto it = rank_of.find(km);
    if (it != rank_of.end()) res.hits.push_back(MotifHit{km, it->second});
  }
  std::sort(res.hits.begin(), res.hits.end(), [](const MotifHit& a, const MotifHit& b) { return a.rank < b.rank; });
  res.matched = res.hits.size();
  if (top && res.hits.size() > top) res.hits.resize(top);
  return res;
}

}  // namespace genemask
