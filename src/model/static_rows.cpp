#include "model/static_rows.hpp"

#include <cmath>
#include <fmt/format.h>
#include <stdexcept>

namespace genemask::model {

std::pair<torch::Tensor, torch::Tensor> pad_masked_rows(const torch::Tensor& rows, const torch::Tensor& targets,
                                                        int64_t capacity) {
  const int64_t n = rows.numel();
  if (targets.numel() != n)
    throw std::invalid_argument(fmt::format("pad_masked_rows: {} rows but {} targets", n, targets.numel()));
  if (capacity < n)
    throw std::invalid_argument(
        fmt::format("the micro-batch masks {} positions, more than its fixed buffer of {} rows", n, capacity));
  auto r = torch::zeros({capacity}, rows.options());
  auto t = torch::full({capacity}, -100, targets.options());
  r.narrow(0, 0, n).copy_(rows.reshape({-1}));
  t.narrow(0, 0, n).copy_(targets.reshape({-1}));
  return {r, t};
}

int64_t masked_rows_capacity(int64_t batch_rows, int64_t tokens_per_row, double max_fraction) {
  if (batch_rows <= 0 || tokens_per_row <= 0 || !(max_fraction > 0 && max_fraction <= 1))
    throw std::invalid_argument(fmt::format("masked_rows_capacity: rows {}, tokens {}, fraction {}", batch_rows,
                                            tokens_per_row, max_fraction));
  const auto per_row = static_cast<int64_t>(std::ceil(static_cast<double>(tokens_per_row) * max_fraction - 1e-9));
  return std::max<int64_t>(1, batch_rows * std::max<int64_t>(1, per_row));
}

}  // namespace genemask::model
