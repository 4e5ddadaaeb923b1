// stub: genemask report (being written)
#include "common.hpp"

namespace genemask::cli {
void register_report(CLI::App&, Context&) {}
}  // namespace genemask::cli
