#pragma once
// Which existing paths a command may write (README, "What genemask promises about your files"):
//  - a file output that exists is replaced only when it is recognisably an earlier output of
//    the same command (its format, read from the file), or with the command's --force;
//  - nothing is ever written inside a directory genemask manages for another purpose (a
//    shard set, a pretrain run or one of its checkpoints, an export, a sweep, a report...),
//    --force or not.
// Directories named as outputs are guarded by io::OutputSet and claim_run_directory
// (output_guard.hpp); this is the part those do not see: single files, and places nested
// inside another command's directory.
#include <optional>
#include <string>
#include <vector>

#include "io/output_guard.hpp"

namespace genemask::io {

/// The directory above `path` (its parent, the parent's parent, ...; existing ones, symlinks
/// resolved; `path` itself excluded) that genemask manages, described as "DIR, the output of
/// `genemask shards`", or nullopt when there is none. Managed: a directory with a
/// .genemask.json marker, a shard set's manifest.json, or a checkpoint's state.json.
std::optional<std::string> managed_directory_above(const std::string& path);

/// Whether the existing file `path` is an earlier output as `own` describes it. Reads at most
/// the file's first line, its HDF5 root attributes or its safetensors header; a file that
/// cannot be read or parsed is not one.
bool is_own_output(const std::string& path, const OwnFile& own);

/// Refuses (std::runtime_error naming the option, the path and what to do):
///  - any output that lies inside a directory genemask manages (managed_directory_above);
///  - a file output that exists and is not recognisably this command's earlier output
///    (is_own_output), unless its `force` is set.
/// `command` names the command in messages ("count", "dataset promoter").
void check_replaceable_outputs(const std::vector<NamedOutput>& outputs, const std::string& command);

}  // namespace genemask::io
