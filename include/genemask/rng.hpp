#pragma once
// Counter-based randomness: every random decision draws from a stream keyed by
// (seed, purpose, a, b), e.g. (seed, kMaskStream, epoch, sample_index). The same key gives
// the same numbers on any rank, in any order, after any resume.
#include <cmath>
#include <cstdint>
#include <string_view>

namespace genemask {

inline constexpr uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

/// FNV-1a (64-bit) of a string: a stream key from text (a sequence, a chromosome name).
/// `basis` is FNV's offset basis; `sweep --simulate` keeps its own, so that its synthetic
/// metrics stay what they have always been.
inline constexpr uint64_t fnv1a(std::string_view s, uint64_t basis = 0xcbf29ce484222325ULL) {
  uint64_t h = basis;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ULL;
  return h;
}

enum class Stream : uint64_t { mask = 1, shard_offsets = 2, split = 3, shuffle = 4, fewshot = 5, genome = 6 };

class Rng {
 public:
  Rng(uint64_t seed, Stream purpose, uint64_t a = 0, uint64_t b = 0)
      : state_(splitmix64(splitmix64(splitmix64(seed ^ 0x6a09e667f3bcc908ULL) ^ static_cast<uint64_t>(purpose)) ^ a) ^
               splitmix64(b + 0x3c6ef372fe94f82bULL)) {}
  uint64_t next() {
    state_ += 0x9e3779b97f4a7c15ULL;
    uint64_t z = state_;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  /// Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  /// Uniform integer in [0, n) (Lemire's multiply-shift, unbiased by rejection).
  uint64_t below(uint64_t n) {
    for (;;) {
      unsigned __int128 m = static_cast<unsigned __int128>(next()) * n;
      const uint64_t low = static_cast<uint64_t>(m);
      if (low >= n || low >= (0 - n) % n) return static_cast<uint64_t>(m >> 64);
    }
  }
  /// Uniform integer in [lo, hi].
  uint64_t between(uint64_t lo, uint64_t hi) { return lo + below(hi - lo + 1); }
  /// Failures before the next success of a Bernoulli(p) process: the gap to the next
  /// mask centre. Exactly the same distribution as one coin per position.
  uint64_t geometric(double log1m_p) {
    const double u = 1.0 - uniform();  // (0, 1]
    const double g = std::floor(std::log(u) / log1m_p);
    return g > 1e18 ? uint64_t{1} << 62 : static_cast<uint64_t>(g);
  }

 private:
  uint64_t state_;
};

/// A uniform [0,1) value that is a pure function of the key (for splits).
inline double hash_uniform(uint64_t seed, Stream purpose, uint64_t a) {
  return Rng(seed, purpose, a).uniform();
}

}  // namespace genemask
