#pragma once
// k-mer codes used by the counter: 2 bits per base, A=0 C=1 G=2 T=3, first base most
// significant. (The DNABERT vocabulary uses another order; see tokenizer.hpp.)
#include <cstdint>
#include <string>
#include <string_view>

namespace genemask {

inline constexpr int kMaxDenseK = 12;  // 4^12 counters = 64 MiB as uint32

inline constexpr uint64_t num_kmers(int k) { return uint64_t{1} << (2 * k); }
inline constexpr uint64_t kmer_mask(int k) { return k >= 32 ? ~uint64_t{0} : num_kmers(k) - 1; }

/// "ACGT..." for a code of length k.
std::string decode_kmer(uint64_t code, int k);
/// Code of an upper/lower-case ACGT string; returns false on any other character.
bool encode_kmer(std::string_view s, uint64_t& code);

}  // namespace genemask
