#include "io/listed_paths.hpp"

#include <sys/stat.h>

#include <cstdlib>
#include <fmt/format.h>

#include "io/error.hpp"

namespace genemask::io {

std::string directory_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? std::string() : path.substr(0, slash + 1);
}

namespace {
bool relative(const std::string& written) { return !written.empty() && written[0] != '/'; }
}  // namespace

ListedPaths::ListedPaths(const std::string& listing, std::string noun) : noun_(std::move(noun)) {
  char* real = ::realpath(listing.c_str(), nullptr);
  if (!real) return;
  const std::string target = directory_of(real);
  std::free(real);
  // A link to a directory above the file leads to that same directory: one meaning.
  const std::string here = directory_of(listing).empty() ? "." : directory_of(listing);
  struct stat a {}, b {};
  if (::stat(here.c_str(), &a) == 0 && ::stat(target.c_str(), &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino)
    return;
  target_dir_ = target;
}

std::string ListedPaths::ambiguity(const std::string& written, const std::string& resolved) const {
  if (target_dir_.empty() || !relative(written)) return {};
  const std::string other = target_dir_ + written;
  struct stat a {}, b {};
  if (::stat(resolved.c_str(), &a) != 0 || ::stat(other.c_str(), &b) != 0) return {};
  if (a.st_dev == b.st_dev && a.st_ino == b.st_ino) return {};
  return fmt::format("the relative path '{}' names {} from the {}'s directory as given, but the {} is reached through "
                     "a symbolic link, and from the directory it leads to ({}) it names another file, {}; write the "
                     "path absolute, or give the {} by its real path",
                     printable(written), printable(resolved), noun_, noun_, printable(target_dir_), printable(other),
                     noun_);
}

std::string ListedPaths::elsewhere(const std::string& written) const {
  if (target_dir_.empty() || !relative(written)) return {};
  const std::string other = target_dir_ + written;
  struct stat b {};
  if (::stat(other.c_str(), &b) != 0) return {};
  return fmt::format(" (the {} is reached through a symbolic link, and relative paths are read from the link's "
                     "directory; from the directory it leads to, the path names {}: give the {} by its real path)",
                     noun_, printable(other), noun_);
}

}  // namespace genemask::io
