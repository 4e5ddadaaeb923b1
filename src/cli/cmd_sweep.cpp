// stub: genemask sweep (being written)
#include "common.hpp"

namespace genemask::cli {
void register_sweep(CLI::App&, Context&) {}
}  // namespace genemask::cli
