// stub: genemask overlap (being written)
#include "common.hpp"

namespace genemask::cli {
void register_overlap(CLI::App&, Context&) {}
}  // namespace genemask::cli
