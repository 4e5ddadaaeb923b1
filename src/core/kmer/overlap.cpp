#include "genemask/kmer/overlap.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace genemask::overlap {

KmerSet::KmerSet(int k) : k_(k) {
  if (k < 1 || k > 31) throw std::invalid_argument("k-mer length " + std::to_string(k) + " must be in 1..31");
}

void KmerSet::add_sequence(std::string_view seq) {
  if (finished_) throw std::logic_error("KmerSet::add_sequence after finish()");
  struct Collect {
    std::vector<uint64_t>* out;
    // sequence_overlap asks about every valid k-mer: record it instead of answering.
    bool contains(uint64_t code) const {
      out->push_back(code);
      return false;
    }
  } collect{&codes_};
  sequence_overlap(seq, k_, false, collect);
}

void KmerSet::finish() {
  std::sort(codes_.begin(), codes_.end());
  codes_.erase(std::unique(codes_.begin(), codes_.end()), codes_.end());
  codes_.shrink_to_fit();
  finished_ = true;
}

bool KmerSet::contains(uint64_t code) const { return std::binary_search(codes_.begin(), codes_.end(), code); }

uint64_t reverse_complement(uint64_t code, int k) {
  uint64_t r = 0;
  for (int i = 0; i < k; ++i) {
    r = (r << 2) | (3 - (code & 3));  // complement: A<->T (0<->3), C<->G (1<->2)
    code >>= 2;
  }
  return r;
}

double percentile(std::vector<double> values, double q) {
  if (!(q >= 0 && q <= 100)) throw std::invalid_argument("percentile " + std::to_string(q) + " must be in [0, 100]");
  values.erase(std::remove_if(values.begin(), values.end(), [](double v) { return std::isnan(v); }), values.end());
  if (values.empty()) return std::nan("");
  std::sort(values.begin(), values.end());
  const double h = static_cast<double>(values.size() - 1) * q / 100.0;
  const size_t lo = static_cast<size_t>(std::floor(h));
  const size_t hi = std::min(lo + 1, values.size() - 1);
  return values[lo] + (h - static_cast<double>(lo)) * (values[hi] - values[lo]);
}

}  // namespace genemask::overlap
