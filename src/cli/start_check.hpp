#pragma once
// The ranks of a job agree before a command starts (src/cli/start_check.cpp).
#include <string>

namespace genemask::cli {

/// Collective on MPI_COMM_WORLD when size > 1 (every rank calls it once, before the
/// command's first collective). `my_error` is this rank's reason not to start ("" when it
/// can). Returns "" when every rank may start, else the one-line reason every rank stops
/// with: ranks given other arguments than rank 0, each rank's error (a file one node lacks),
/// or a rank that sees another file behind the same argument (size and modification time).
std::string agree_to_start(int rank, int size, int argc, char** argv, const std::string& my_error);

}  // namespace genemask::cli
