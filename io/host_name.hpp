#pragma once
// This machine's host name without allocating: for code on its way out of a failing job
// (the MPI time-out watch), where io::host_name()'s std::string could throw.

#include <cstddef>

namespace genemask::io {

/// Writes this machine's host name (gethostname), or "localhost" when it has none, into
/// `buf` of `size` bytes (at least 1), always terminated; allocates nothing. io::host_name()
/// (atomic_file.hpp) is this as a std::string.
void host_name_into(char* buf, std::size_t size) noexcept;

}  // namespace genemask::io
