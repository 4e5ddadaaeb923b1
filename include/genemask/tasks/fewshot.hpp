#pragma once
// Few-shot sampling and label handling for fine-tuning (Torch-free).
#include <cstdint>
#include <string>
#include <vector>

namespace genemask::fewshot {

/// Class names in index order: numerically when every label is an integer ("0","1","2"),
/// else lexicographically.
std::vector<std::string> class_names(const std::vector<std::string>& labels);

/// Row indices of n rows per class, drawn without replacement by a counter-based stream
/// keyed by (seed, class), never two rows with the same sequence; returned in file order.
/// Throws std::invalid_argument naming the class (by `names[c]` when given, else its index)
/// when it has fewer than n distinct rows. A sequence listed under two classes goes to the
/// first class that draws it.
std::vector<size_t> sample_per_class(const std::vector<int>& class_of_row, const std::vector<std::string>& sequences,
                                     int classes, size_t n, uint64_t seed, const std::vector<std::string>& names = {});

}  // namespace genemask::fewshot
