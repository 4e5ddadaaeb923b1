// Few-shot sampling. Each class draws from its own counter-based stream (seed, fewshot,
// class), so a class's sample does not depend on how many rows other classes have, on the
// rank that runs the job, or on the order in which jobs run.
#include "genemask/tasks/fewshot.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <unordered_set>

#include "genemask/rng.hpp"
#include "io/parse_number.hpp"

namespace genemask::fewshot {
namespace {

/// A label as an integer: decimal digits with an optional '-', the whole label (as the
/// other readers of numbers take them: "+1", " 1" and "0x1" are text).
bool parse_integer(const std::string& s, long long& v) {
  const auto x = io::parse_decimal_i64(s);
  if (x) v = *x;
  return x.has_value();
}

}  // namespace

std::vector<std::string> class_names(const std::vector<std::string>& labels) {
  std::vector<std::string> names(labels.begin(), labels.end());
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  bool numeric = true;
  long long v = 0;
  for (const auto& n : names) numeric = numeric && parse_integer(n, v);
  if (numeric) {
    // "2" < "10" numerically; "01" and "1" stay distinct classes, ordered by value then text.
    std::stable_sort(names.begin(), names.end(), [](const std::string& a, const std::string& b) {
      long long x = 0, y = 0;
      parse_integer(a, x);
      parse_integer(b, y);
      return x < y;
    });
  }
  return names;
}

std::vector<size_t> sample_per_class(const std::vector<int>& class_of_row, const std::vector<std::string>& sequences,
                                     int classes, size_t n, uint64_t seed, const std::vector<std::string>& names) {
  if (class_of_row.size() != sequences.size())
    throw std::invalid_argument("sample_per_class: class_of_row and sequences differ in length");
  // Candidates of each class in file order; a sequence repeated within a class counts once
  // (its first row).
  std::vector<std::vector<size_t>> rows(static_cast<size_t>(std::max(classes, 0)));
  std::vector<std::unordered_set<std::string>> seen(rows.size());
  for (size_t i = 0; i < class_of_row.size(); ++i) {
    const int c = class_of_row[i];
    if (c < 0 || c >= classes)
      throw std::invalid_argument("sample_per_class: class index " + std::to_string(c) + " out of range");
    if (seen[static_cast<size_t>(c)].insert(sequences[i]).second) rows[static_cast<size_t>(c)].push_back(i);
  }
  auto name = [&](size_t c) { return "'" + (c < names.size() ? names[c] : std::to_string(c)) + "'"; };
  std::vector<size_t> out;
  std::unordered_set<std::string> taken;  // a sequence listed under two labels goes to one class only
  for (size_t c = 0; c < rows.size(); ++c) {
    auto& r = rows[c];
    if (r.size() < n)
      throw std::invalid_argument("class " + name(c) + " has " + std::to_string(r.size()) +
                                  " distinct sequences, fewer than the " + std::to_string(n) + " shots asked for");
    // Partial Fisher-Yates over the candidates, skipping sequences an earlier class took.
    Rng rng(seed, Stream::fewshot, c);
    size_t got = 0;
    for (size_t i = 0; i < r.size() && got < n; ++i) {
      std::swap(r[i], r[i + rng.below(r.size() - i)]);
      if (!taken.insert(sequences[r[i]]).second) continue;
      out.push_back(r[i]);
      ++got;
    }
    if (got < n)
      throw std::invalid_argument("class " + name(c) + " has " + std::to_string(got) +
                                  " sequences not also listed under another class, fewer than the " +
                                  std::to_string(n) + " shots asked for");
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace genemask::fewshot
