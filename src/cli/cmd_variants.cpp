// stub: genemask variants (being written)
#include "common.hpp"

namespace genemask::cli {
void register_variants(CLI::App&, Context&) {}
}  // namespace genemask::cli
