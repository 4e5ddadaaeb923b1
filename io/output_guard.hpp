#pragma once
// What genemask promises about the user's files (README, "What genemask promises about your
// files"), in one place:
//  - an output is never one of the command's inputs, nor inside an input directory: compared
//    by file identity (device and inode), so symlinks, hard links, "./" and absolute
//    spellings are all seen through;
//  - an existing output is a regular file or a directory as the option says, never a device,
//    a FIFO or a socket (`--out /dev/null` would otherwise become a regular file);
//  - a directory is filled only when it is new or empty, and an earlier output of the same
//    command in it is replaced only with --force; genemask recognises its own outputs by the
//    marker file DIR/.genemask.json, and removes nothing that the marker does not list;
//  - one writer per output directory (io/dir_lock.hpp), and a directory's files appear as
//    one unit: they are written into DIR/.genemask-staging, moved into place, and the marker,
//    which readers check, is written last.
// The checks are plain stat(2) calls: no MPI, no Torch.
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace genemask::io {

class DirLock;

/// A path as the command line names it: the option and the value ("--genome", "g.fa").
struct NamedPath {
  std::string option;
  std::string path;
};

enum class OutputKind { file, directory };

/// How a command's file output is recognised as an earlier output of that command, which it
/// may replace without --force (io/file_outputs.hpp reads it).
struct OwnFile {
  enum class Kind {
    none,                  // never recognised: an existing file is replaced only with --force
    hdf5_format,           // an HDF5 file whose root attribute "format" is `value`
    first_line,            // a text file whose first line is `value`
    first_line_prefix,     // a text file whose first line starts with `value`
    safetensors_metadata,  // a safetensors file whose __metadata__ has "genemask": `value`
    sha256,                // a file whose SHA-256 is `value` (a fixed output: vocab.txt, whose first
                           // line every BERT vocabulary shares)
  };
  Kind kind = Kind::none;
  std::string value;
  std::string what;  // for messages: "a genemask counts file"
};

struct NamedOutput {
  std::string option;
  std::string path;
  OutputKind kind = OutputKind::file;
  OwnFile own{};            // file outputs: how an earlier output of this command is recognised
  bool force = false;       // the command's --force was given
  bool has_force = false;   // the command has a --force (messages offer it)
};

/// Refuses (throws std::runtime_error naming both options and paths):
///  - an output that is one of the inputs, or lies inside an input that is a directory;
///  - an output that exists and is not of its kind (a file where a directory is expected,
///    a device, FIFO or socket anywhere);
///  - two outputs that are the same path.
/// Inputs that do not exist are skipped (their own checks report them).
void check_outputs(const std::vector<NamedPath>& inputs, const std::vector<NamedOutput>& outputs);

/// A file output of this command (check_outputs) as it was when the command started.
enum class OutputAtStart { unknown, absent, present };

/// Before a finished file output is renamed into place: how `path` was when the command
/// started (unknown: not one of its checked outputs). Throws when it has changed since (it
/// was absent and now exists, or it is another file or gone): another command wrote it
/// meanwhile, and a rename would silently replace that writer's output. A rename over an
/// `absent` target must not replace a file either (TempOutput::commit uses RENAME_NOREPLACE).
OutputAtStart output_at_start(const std::string& path);
/// Whether `file` is the very file (device and inode) that the output `path` was when the
/// command started: the file a replacement displaced (TempOutput::commit's exchange).
bool is_output_at_start(const std::string& path, const std::string& file);

/// The error for an output that another command wrote (`how`: "appeared", "was replaced",
/// "was removed") while this one ran.
std::runtime_error another_writers_output(const std::string& path, const char* how);

/// After this command renamed its output to `path`: the file there is its own from now on.
void output_written(const std::string& path);

/// The inputs of the running command, for the lifetime of this object: every TempOutput,
/// AtomicFile, HDF5 file and OutputSet refuses to write over one of them or into one of
/// them. A backstop for outputs whose names a command makes itself (DIR/plan.json).
class InputsInUse {
 public:
  explicit InputsInUse(const std::vector<NamedPath>& inputs);
  ~InputsInUse();
  InputsInUse(const InputsInUse&) = delete;
  InputsInUse& operator=(const InputsInUse&) = delete;

 private:
  size_t first_ = 0, count_ = 0;
};

/// Throws when writing, replacing or removing `path` would touch an input in use (it is one,
/// or lies inside one), or when `path` exists and is not a regular file, a directory or a
/// symlink to one of them.
void check_writable_target(const std::string& path);

/// The marker of a directory genemask wrote: DIR/.genemask.json.
inline constexpr const char* kOutputMarker = ".genemask.json";
/// DIR/.genemask-readers.lock of an output that long-running commands read (a shard set):
/// readers hold a shared flock on it while they read; a replacement (--force) needs it
/// exclusively, so it never swaps the data under a reader.
inline constexpr const char* kReadersLock = ".genemask-readers.lock";

/// A shared flock on PATH, held while the result lives; null when PATH does not exist, the
/// file system has no locks, or (wait false) an exclusive holder has it: *busy says which.
std::shared_ptr<void> shared_flock(const std::string& path, bool wait, bool* busy = nullptr);

/// A shared lock on DIR/.genemask-readers.lock, held while the result lives; null when DIR
/// has no such file (an output of an earlier genemask) or the file system has no locks.
/// Throws when a replacement of DIR holds it (`shards --force` running): `what` names DIR.
std::shared_ptr<void> hold_output_for_reading(const std::string& dir, const std::string& what);

/// DIR/.genemask.json, or nullopt when DIR has none. A marker that is not one of ours
/// (not JSON, other format) is an InputError.
std::optional<nlohmann::json> read_output_marker(const std::string& dir);
/// Sets `key` of DIR's marker (which must exist) to `value`, rewriting it atomically.
void set_output_marker_value(const std::string& dir, const std::string& key, const nlohmann::json& value);

/// The files of DIR that its marker records a SHA-256 for ("files", written by an OutputSet
/// with `digests`), checked: those `which` accepts (all when null) must have it, or an
/// InputError names the file ("changed after `genemask export-hf` wrote it"). Returns the
/// recorded digests ({} when the marker records none: an output of before, or no marker).
std::map<std::string, std::string> verify_output_files(const std::string& dir,
                                                       const std::function<bool(const std::string&)>& which = nullptr);

/// Readers of a genemask directory call this first: an output whose publication was cut
/// short (marker "complete": false) is an InputError that says to run the command again.
void check_output_complete(const std::string& dir);
/// The same for a file read on its own (a task table of `genemask dataset`), in the nearest
/// directory above it with a marker (DIR/train.tsv, DIR/fewshot/10/train.tsv): a file of an
/// output whose marker says incomplete may be of another run than its neighbours (the
/// publication replaces them one by one), and one whose SHA-256 differs from the marker's
/// "files" was cut short or changed; either is an InputError naming the file. A file of the
/// user's inside the output (not under one of its entries) is not checked.
void check_file_in_complete_output(const std::string& file);

/// A command's output directory whose files are published as one unit.
///
/// The constructor creates DIR (with its parents) or accepts an existing directory that is
/// empty, or that holds an earlier output of the same command (marker) and `force` is set,
/// or an output of it that never completed; anything else is refused with a message that
/// says what to do. It takes DIR's run lock, and makes an empty DIR/.genemask-staging: the
/// command writes its files there (staging()). publish() moves them into DIR, removing the
/// files of the earlier output first (only those its marker lists), and writes the marker
/// last. Until publish(), DIR's earlier content is untouched; an object destroyed without
/// publish() removes the staging directory, and, when it created DIR, what it moved into DIR
/// and its marker, then DIR (and the parents made for it) while empty: a file anyone else put
/// in DIR meanwhile, or another run's output, keeps DIR. A signal that stops the process
/// (install_signal_cleanup) removes the staging directory and the lock file, then DIR while
/// empty (a signal during publish() leaves DIR with a marker that says "incomplete").
class OutputSet {
 public:
  struct Options {
    std::string command;     // "export-hf", "dataset promoter", ...: must match to replace
    std::string option = "--out";
    bool force = false;      // replace an earlier complete output of the same command
    std::string read_first;  // the file readers open first (manifest.json): removed first, placed last
    bool digests = false;    // record every file's SHA-256 in the marker ("files"): verify_output_files
    /// DIR gets a readers' lock (kReadersLock); replacing DIR while a reader holds it is refused.
    bool readers_lock = false;
  };
  OutputSet(std::string dir, Options options);
  ~OutputSet();
  OutputSet(const OutputSet&) = delete;
  OutputSet& operator=(const OutputSet&) = delete;

  /// DIR/.genemask-staging: where the files of DIR are written (the same on every rank).
  static std::string staging_for(const std::string& dir);
  const std::string& dir() const { return dir_; }
  const std::string& staging() const { return staging_; }
  /// True when DIR held an earlier output that publish() replaces.
  bool replaces() const { return !old_entries_.empty(); }
  /// Everything publish() does before DIR changes: the staged files listed, checked against
  /// DIR (in the way, not writable) and synced to the disk. A command with two outputs
  /// prepares both before it publishes either, so that a failure of that work (a full disk,
  /// an I/O error) publishes neither. publish() calls it when it was not called.
  void prepare();
  /// Moves the staged files into DIR and writes the marker (with `extra` fields merged in):
  /// move_into_place(), then complete().
  void publish(const nlohmann::json& extra = nlohmann::json::object());
  /// publish() in two steps, for a command with two outputs: both sets' files are moved (under
  /// markers that say "incomplete", which readers refuse and the next run replaces) before
  /// either's marker says "complete", so that a failure while moving leaves neither complete.
  void move_into_place();
  void complete(const nlohmann::json& extra = nlohmann::json::object());
  /// After complete(): the marker says "incomplete" again (best effort, nothing thrown), for
  /// a command whose other output then failed: readers refuse this one, and the next run of
  /// the command replaces it without --force.
  void withdraw() noexcept;

 private:
  void remove_created();
  void remove_staging() noexcept;
  void drop_staging_cleanup() noexcept;
  std::string dir_, staging_, created_;
  std::string removing_;  // DIR/.genemask-staging-removed: the staging directory's name while it is removed
  Options o_;
  std::vector<std::string> old_entries_;
  std::vector<std::string> moved_;  // the entries publish() moved into DIR so far (whole paths)
  bool wrote_marker_ = false;       // publish() wrote DIR's marker
  std::string marker_path_;         // DIR/.genemask.json; with chain_, made ahead: the removal
  std::vector<std::string> chain_;  // allocates nothing (DIR and the parents made for it)
  nlohmann::json old_tree_;  // the earlier marker's "tree": the paths inside its directory entries
  bool prepared_ = false;    // prepare() ran: fresh_, fresh_tree_ and tree_ hold its results
  std::vector<std::string> fresh_;  // the staged entries, in publication order
  nlohmann::json fresh_tree_;       // what each staged directory entry holds
  nlohmann::json tree_;             // the marker's "tree" while both outputs' entries are in DIR
  int readers_fd_ = -1;      // the readers' lock, held exclusively while an earlier output is replaced
  std::unique_ptr<DirLock> lock_;
  std::vector<int> cleanup_slots_;  // DIR and the parents made for it: a fatal signal removes them while empty
  int staging_slot_ = -1;           // the staging directory: a fatal signal removes it
  int removing_slot_ = -1;          // and removing_
  int exceptions_ = 0;
  bool published_ = false, moved_into_place_ = false;
};

/// 128 random bits in hex: the id of a pretrain run or of a sweep directory.
std::string random_id();

/// For commands that keep writing into one directory across runs (pretrain's run, sweep's
/// DIR): DIR must be new, empty, or already one of this command's: its marker, or, for
/// directories written before markers existed, nothing but `legacy_entries` (such as
/// "checkpoints") and `legacy_proof(DIR)` true (the command's own files are there). A new or
/// empty DIR gets the marker. Call with DIR's lock held.
void claim_run_directory(const std::string& dir, const std::string& command, const std::string& option,
                         const std::vector<std::string>& legacy_entries,
                         const std::function<bool(const std::string&)>& legacy_proof);

/// Before appending to PATH: when it is a symbolic link or a file with other hard links (a
/// `cp -al` snapshot of a run), PATH becomes a copy of its own (renamed into place), so that
/// appending changes no other name's file. A link to no regular file is refused.
void own_append_file(const std::string& path);

}  // namespace genemask::io
