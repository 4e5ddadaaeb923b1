// stub: genemask dataset splice (being written)
#include "common.hpp"

namespace genemask::cli {
void register_dataset_splice(CLI::App&, Context&) {}
}  // namespace genemask::cli
