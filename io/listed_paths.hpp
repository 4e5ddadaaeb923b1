#pragma once
// Relative paths written in a file that lists others (a genome list, a sweep plan) are read
// from that file's directory as given. A file reached through a symbolic link to it has a
// second directory they could mean, the one the link leads to: where a path names another
// existing file from there, which one its author meant cannot be told, and the readers refuse
// it rather than read one of the two without a word.
#include <string>

namespace genemask::io {

/// The directory part of a path, with its '/' ("" for a bare name).
std::string directory_of(const std::string& path);

class ListedPaths {
 public:
  /// `listing`: the file the paths are written in; `noun`: what it is called in messages
  /// ("list", "plan").
  ListedPaths(const std::string& listing, std::string noun);

  /// "" when `written` (as in the file), read as `resolved`, has one meaning; else the rest of
  /// a one-line refusal naming both files and what to do.
  std::string ambiguity(const std::string& written, const std::string& resolved) const;

  /// For a refusal of `written` not found from the file's directory as given: "" or a
  /// parenthesis saying where it is from the directory the link leads to.
  std::string elsewhere(const std::string& written) const;

 private:
  std::string noun_;
  std::string target_dir_;  // the directory the link leads to, with its '/'; "" when the same
};

}  // namespace genemask::io
