// stub: genemask finetune (being written)
#include "common.hpp"

namespace genemask::cli {
void register_finetune(CLI::App&, Context&) {}
}  // namespace genemask::cli
