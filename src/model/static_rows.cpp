#include "model/static_rows.hpp"

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

}  // namespace genemask::model
