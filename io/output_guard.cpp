#include "io/output_guard.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <exception>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <stdexcept>
#include <utility>

#include "genemask/version.hpp"
#include "io/atomic_file.hpp"
#include "io/dir_lock.hpp"
#include "io/error.hpp"
#include "io/json.hpp"
#include "io/plain_names.hpp"
#include "io/sha256.hpp"

namespace genemask::io {
namespace fs = std::filesystem;
namespace {

constexpr const char* kMarkerFormat = "genemask-output";
constexpr int kMarkerVersion = 1;
constexpr const char* kStaging = ".genemask-staging";
constexpr const char* kStagingRemoved = ".genemask-staging-removed";  // a failed run's, while it is removed
constexpr const char* kLockName = ".genemask.lock";

struct Identity {
  dev_t dev = 0;
  ino_t ino = 0;
  bool operator==(const Identity& o) const { return dev == o.dev && ino == o.ino; }
};

std::optional<struct stat> stat_of(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  return st;
}

Identity identity(const struct stat& st) { return Identity{st.st_dev, st.st_ino}; }

/// "a character device" for a file type that is neither a regular file nor a directory.
std::string special_kind(mode_t mode) {
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

/// The identities of the existing directories that hold `path` (its parent, the parent's
/// parent, ... up to /), symlinks resolved; and of `path` itself when it exists.
struct Place {
  std::optional<Identity> self;
  std::vector<std::pair<Identity, std::string>> above;  // innermost first
};

Place place_of(const std::string& path) {
  Place p;
  fs::path q = fs::absolute(path).lexically_normal();
  if (!q.has_filename() && q.has_parent_path() && q != q.root_path()) q = q.parent_path();  // "out/"
  if (auto st = stat_of(q.string())) p.self = identity(*st);
  // The nearest existing directory above `path`, resolved, then every directory above it.
  fs::path up = q.parent_path();
  while (!up.empty() && !stat_of(up.string()) && up != up.parent_path()) up = up.parent_path();
  char buf[PATH_MAX];
  fs::path real = ::realpath(up.string().c_str(), buf) ? fs::path(buf) : up;
  for (fs::path d = real;; d = d.parent_path()) {
    if (auto st = stat_of(d.string())) p.above.emplace_back(identity(*st), d.string());
    if (d == d.parent_path() || d.empty()) break;
  }
  return p;
}

struct Registered {
  NamedPath named;
  Identity id;
  bool dir = false;
};

std::mutex g_mutex;
std::vector<std::optional<Registered>> g_inputs;  // slots; InputsInUse owns a range
// The file outputs as check_outputs found them when the command started, by absolute path:
// absent (nullopt) or the file there. TempOutput::commit holds its target to that state.
std::map<std::string, std::optional<Identity>> g_outputs_at_start;

std::string output_key(const std::string& path) { return fs::absolute(path).lexically_normal().string(); }

std::string quoted(const NamedPath& p) { return p.option.empty() ? p.path : p.option + " " + p.path; }

std::string now_utc() {
  const std::time_t t = std::time(nullptr);
  std::tm tm {};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

/// True when `path` is one of the inputs in use (InputsInUse).
bool is_input_in_use(const std::string& path) {
  const auto st = stat_of(path);
  if (!st) return false;
  std::lock_guard<std::mutex> g(g_mutex);
  for (const auto& r : g_inputs)
    if (r && r->id == identity(*st)) return true;
  return false;
}

/// The entries of `dir` that are not genemask's own bookkeeping (lock, marker, staging), nor,
/// with `skip_inputs`, an input of the running command (`sweep --plan DIR/plan.yaml --out
/// DIR`: a run directory, claimed and written into, never replaced). A directory a command
/// fills whole holds the user's data even where that data is the command's input
/// (`shards --genome data/g.fa --out data` made the user's folder a shard set).
std::vector<std::string> user_entries(const std::string& dir, bool skip_inputs) {
  std::vector<std::string> names;
  DIR* d = ::opendir(dir.c_str());
  if (!d) throw std::runtime_error(fmt::format("cannot read the directory {}: {}", dir, std::strerror(errno)));
  while (const dirent* e = ::readdir(d)) {
    const std::string n = e->d_name;
    if (n == "." || n == ".." || n == kLockName || n == kOutputMarker || n == kStaging || n == kStagingRemoved ||
        n == kReadersLock)
      continue;
    // The marker's temporary, left by a process killed while writing it (the caller holds
    // DIR's lock, so no live writer has one): genemask's, not the user's.
    if (n.rfind(std::string(kOutputMarker) + ".tmp.", 0) == 0) continue;
    if (skip_inputs && is_input_in_use(dir + "/" + n)) continue;
    names.push_back(n);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

void write_marker(const std::string& dir, const nlohmann::json& marker) {
  AtomicFile f(dir + "/" + kOutputMarker);
  f.stream() << json_text(marker, 2) << '\n';
  f.commit();
}

nlohmann::json new_marker(const std::string& command, bool complete, const std::vector<std::string>& entries) {
  return nlohmann::ordered_json{{"format", kMarkerFormat},
                                {"format_version", kMarkerVersion},
                                {"command", command},
                                {"complete", complete},
                                {"entries", entries},
                                {"genemask_version", kVersion},
                                {"written", now_utc()},
                                {"host", host_name()},
                                {"pid", static_cast<long>(::getpid())}};
}

/// The paths under `dir` (files, links and directories, not followed), relative to it,
/// sorted: what a marker records of an entry that is a directory.
std::vector<std::string> tree_of(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec))
    out.push_back(it->path().lexically_relative(dir).string());
  if (ec) throw std::runtime_error(fmt::format("cannot read the directory {}: {}", dir, ec.message()));
  std::sort(out.begin(), out.end());
  return out;
}

/// Throws when DIR/NAME is a directory holding a path `tree` does not list (a file the user put
/// there), which removing DIR/NAME would take with it. `listed`: whether the marker's own tree
/// lists NAME's paths; else (a marker of before the trees) `tree` holds what the new output
/// writes there only, and the message says so.
void check_tree_is_known(const std::string& dir, const std::string& name, const nlohmann::json& tree,
                         bool listed = true) {
  const std::string target = dir + "/" + name;
  if (!fs::is_directory(fs::symlink_status(target))) return;
  std::set<std::string> known;
  if (tree.contains(name) && tree[name].is_array())
    for (const auto& x : tree[name])
      if (x.is_string()) known.insert(x.get<std::string>());
  // Why the entry is not taken for genemask's: the marker lists what it wrote there, or (a
  // marker of an earlier genemask) lists nothing there, and this command does not write it.
  const std::string why = listed ? fmt::format("is not genemask's ({} lists what it wrote in {})", kOutputMarker, target)
                                 : fmt::format("may not be genemask's ({}, written by an earlier genemask, does not list "
                                               "what it wrote in {}, and this command does not write it)",
                                               kOutputMarker, target);
  for (const auto& x : tree_of(target))
    if (!known.count(x))
      throw std::runtime_error(
          fmt::format("{}/{} {}, so {} is not replaced; move it out and run the command again", target, x, why, target));
}

}  // namespace

void check_outputs(const std::vector<NamedPath>& inputs, const std::vector<NamedOutput>& outputs) {
  struct In {
    const NamedPath* named;
    Identity id;
    bool dir;
  };
  std::vector<In> ins;
  for (const auto& i : inputs) {
    if (i.path.empty()) continue;
    if (auto st = stat_of(i.path)) ins.push_back(In{&i, identity(*st), S_ISDIR(st->st_mode)});
  }
  struct Seen {
    const NamedOutput* out;
    std::string key, abs;
    Place place;
  };
  std::vector<Seen> seen;
  for (const auto& o : outputs) {
    if (o.path.empty()) continue;
    const NamedPath named{o.option, o.path};
    // A link to nothing: the output would be renamed over the link (or the directory made
    // fail with "File exists"), and "it appeared while this command ran" said at the end.
    if (struct stat lst{}; ::lstat(o.path.c_str(), &lst) == 0 && S_ISLNK(lst.st_mode) && !stat_of(o.path)) {
      std::error_code ec;
      const auto target = fs::read_symlink(o.path, ec);
      throw std::runtime_error(fmt::format("{} is a symbolic link to nothing ({}): remove the link, or give another "
                                           "name",
                                           quoted(named), ec ? std::string("unreadable") : target.string()));
    }
    if (auto st = stat_of(o.path)) {
      const bool dir = S_ISDIR(st->st_mode), reg = S_ISREG(st->st_mode);
      if (!dir && !reg)
        throw std::runtime_error(fmt::format(
            "{} is {}, not a {}: genemask writes its outputs as new files that it renames into place, so it never "
            "writes to devices, pipes or sockets; give a {} name",
            quoted(named), special_kind(st->st_mode), o.kind == OutputKind::file ? "regular file" : "directory",
            o.kind == OutputKind::file ? "file" : "directory"));
      if (o.kind == OutputKind::file && dir)
        throw std::runtime_error(fmt::format("{} is a directory; give a file name", quoted(named)));
      if (o.kind == OutputKind::directory && !dir)
        throw std::runtime_error(
            fmt::format("{} exists and is not a directory; give the name of a new or empty directory", quoted(named)));
    }
    const Place p = place_of(o.path);
    for (const auto& in : ins) {
      if (p.self && *p.self == in.id)
        throw std::runtime_error(fmt::format(
            "{} is {} {}, an input of this command: genemask never writes over its inputs; choose another {}",
            quoted(named), in.dir ? "the directory" : "the file", quoted(*in.named), o.option));
      if (!in.dir) continue;
      for (const auto& [id, where] : p.above)
        if (id == in.id)
          throw std::runtime_error(fmt::format(
              "{} lies inside {}, an input directory of this command: genemask never writes into its inputs; "
              "choose an {} outside it",
              quoted(named), quoted(*in.named), o.option));
    }
    // Two outputs under one name: the same file (existing), or the same path (new).
    const std::string abs = fs::absolute(o.path).lexically_normal().string();
    const std::string key = p.self ? fmt::format("id:{}:{}", p.self->dev, p.self->ino) : "path:" + abs;
    for (const auto& s : seen)
      if (s.key == key)
        throw std::runtime_error(fmt::format("{} and {} are the same {}: give each output its own name",
                                             quoted(NamedPath{s.out->option, s.out->path}), quoted(named),
                                             p.self ? (o.kind == OutputKind::file ? "file" : "directory") : "path"));
    // One output inside another's directory: the directory is written whole (staged and
    // renamed into place, or claimed as a run's), and the other would be inside it, or make it
    // look taken ("not empty") before it is written. By path, or by identity where both exist.
    const auto inside = [](const Seen& outer, const Seen& inner) {
      if (outer.out->kind != OutputKind::directory) return false;
      const std::string prefix = outer.abs.back() == '/' ? outer.abs : outer.abs + "/";
      if (inner.abs.compare(0, prefix.size(), prefix) == 0) return true;
      return outer.place.self && std::any_of(inner.place.above.begin(), inner.place.above.end(),
                                             [&](const auto& a) { return a.first == *outer.place.self; });
    };
    const Seen me{&o, key, abs, p};
    for (const auto& s : seen)
      for (const auto& [outer, inner] : {std::pair{&s, &me}, std::pair{&me, &s}})
        if (inside(*outer, *inner))
          throw std::runtime_error(fmt::format("{} lies inside {}, another output of this command: give each output "
                                               "a place of its own, outside the other",
                                               quoted(NamedPath{inner->out->option, inner->out->path}),
                                               quoted(NamedPath{outer->out->option, outer->out->path})));
    seen.push_back(me);
    if (o.kind == OutputKind::file) {
      std::lock_guard<std::mutex> g(g_mutex);
      g_outputs_at_start[output_key(o.path)] = p.self;
    }
  }
}

OutputAtStart output_at_start(const std::string& path) {
  std::optional<Identity> then;
  {
    std::lock_guard<std::mutex> g(g_mutex);
    const auto it = g_outputs_at_start.find(output_key(path));
    if (it == g_outputs_at_start.end()) return OutputAtStart::unknown;
    then = it->second;
  }
  const auto st = stat_of(path);
  const std::optional<Identity> now = st ? std::optional<Identity>(identity(*st)) : std::nullopt;
  if (!then && now) throw another_writers_output(path, "appeared");
  if (then && !(now && *now == *then)) throw another_writers_output(path, now ? "was replaced" : "was removed");
  return then ? OutputAtStart::present : OutputAtStart::absent;
}

bool is_output_at_start(const std::string& path, const std::string& file) {
  std::optional<Identity> then;
  {
    std::lock_guard<std::mutex> g(g_mutex);
    const auto it = g_outputs_at_start.find(output_key(path));
    if (it == g_outputs_at_start.end()) return false;
    then = it->second;
  }
  struct stat st {};
  return then && ::lstat(file.c_str(), &st) == 0 && identity(st) == *then;
}

std::runtime_error another_writers_output(const std::string& path, const char* how) {
  return std::runtime_error(fmt::format("{} {} while this command ran: another command wrote it, and genemask never "
                                        "writes over another writer's output; this command's result was not kept: "
                                        "run it again once the other has finished, or choose another name",
                                        path, how));
}

void output_written(const std::string& path) {
  std::lock_guard<std::mutex> g(g_mutex);
  const auto it = g_outputs_at_start.find(output_key(path));
  if (it == g_outputs_at_start.end()) return;
  const auto st = stat_of(path);
  it->second = st ? std::optional<Identity>(identity(*st)) : std::nullopt;
}

InputsInUse::InputsInUse(const std::vector<NamedPath>& inputs) {
  std::lock_guard<std::mutex> g(g_mutex);
  first_ = g_inputs.size();
  for (const auto& i : inputs) {
    if (i.path.empty()) continue;
    if (auto st = stat_of(i.path)) g_inputs.emplace_back(Registered{i, identity(*st), S_ISDIR(st->st_mode)});
  }
  count_ = g_inputs.size() - first_;
}

InputsInUse::~InputsInUse() {
  std::lock_guard<std::mutex> g(g_mutex);
  for (size_t i = first_; i < first_ + count_ && i < g_inputs.size(); ++i) g_inputs[i].reset();
  while (!g_inputs.empty() && !g_inputs.back()) g_inputs.pop_back();
}

void check_writable_target(const std::string& path) {
  if (auto st = stat_of(path); st && !S_ISREG(st->st_mode) && !S_ISDIR(st->st_mode))
    throw std::runtime_error(fmt::format(
        "cannot write {}: it is {}; genemask writes its outputs as new files that it renames into place, so it "
        "never writes to devices, pipes or sockets",
        path, special_kind(st->st_mode)));
  std::vector<Registered> inputs;
  {
    std::lock_guard<std::mutex> g(g_mutex);
    for (const auto& r : g_inputs)
      if (r) inputs.push_back(*r);
  }
  if (inputs.empty()) return;
  const Place p = place_of(path);
  for (const auto& in : inputs) {
    if (p.self && *p.self == in.id)
      throw std::runtime_error(fmt::format("cannot write {}: it is {}, an input of this command; genemask never "
                                           "writes over its inputs",
                                           path, quoted(in.named)));
    if (!in.dir) continue;
    for (const auto& [id, where] : p.above)
      if (id == in.id)
        throw std::runtime_error(fmt::format("cannot write {}: it lies inside {}, an input directory of this command; "
                                             "genemask never writes into its inputs",
                                             path, quoted(in.named)));
  }
}

namespace {
/// Throws when removing `path` (recursively) would remove an input in use: it is one, or
/// holds one.
void check_removable(const std::string& path) {
  check_writable_target(path);
  const auto st = stat_of(path);
  if (!st || !S_ISDIR(st->st_mode)) return;
  std::vector<Registered> inputs;
  {
    std::lock_guard<std::mutex> g(g_mutex);
    for (const auto& r : g_inputs)
      if (r) inputs.push_back(*r);
  }
  for (const auto& in : inputs)
    for (const auto& [id, where] : place_of(in.named.path).above)
      if (id == identity(*st))
        throw std::runtime_error(fmt::format("cannot replace {}: it holds {}, an input of this command; move the "
                                             "input elsewhere first",
                                             path, quoted(in.named)));
}
}  // namespace

std::optional<nlohmann::json> read_output_marker(const std::string& dir) {
  const std::string path = dir + "/" + kOutputMarker;
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (text.size() > (1u << 20)) throw InputError(path, "is larger than 1 MiB: not a genemask output marker");
  // The strict parser (a key given twice is no marker genemask wrote).
  const JsonParse parsed = try_parse_json(text);
  const nlohmann::json& j = parsed.value;
  const auto is_string_array = [](const nlohmann::json& a) {
    return a.is_array() && std::all_of(a.begin(), a.end(), [](const nlohmann::json& e) { return e.is_string(); });
  };
  if (!parsed.ok() || !j.is_object() || j.value("format", "") != kMarkerFormat || !j.contains("command") ||
      !j["command"].is_string() || !j.contains("complete") || !j["complete"].is_boolean() || !j.contains("entries") ||
      !is_string_array(j["entries"]))
    throw InputError(path, "is not a genemask output marker (format genemask-output with command, complete and "
                           "entries); it was changed by hand: remove the directory's content yourself, or choose "
                           "another directory");
  for (const auto& e : j["entries"]) {
    const std::string n = e.get<std::string>();
    if (!is_plain_name(n))
      throw InputError(path, fmt::format("lists the entry '{}', which is not a plain name in the directory", excerpt(n, 80)));
  }
  return j;
}

std::map<std::string, std::string> verify_output_files(const std::string& dir,
                                                       const std::function<bool(const std::string&)>& which) {
  std::map<std::string, std::string> out;
  const auto m = read_output_marker(dir);
  if (!m || !m->contains("files")) return out;
  const std::string marker = dir + "/" + kOutputMarker;
  const auto& files = (*m)["files"];
  if (!files.is_object())
    throw InputError(marker, "its \"files\" is not an object of file names and SHA-256: the marker was changed by hand");
  const std::string cmd = (*m)["command"].get<std::string>();
  for (const auto& [name, sum] : files.items()) {
    if (!sum.is_string() || !is_plain_relative_path(name))
      throw InputError(marker, fmt::format("lists a file entry {} that is not a file name and SHA-256", excerpt(name, 40)));
    out[name] = sum.get<std::string>();
    if (which && !which(name)) continue;
    const std::string f = dir + "/" + name;
    if (!fs::is_regular_file(f))
      throw InputError(f, fmt::format("is missing: {} lists it as written by `genemask {}`; write the output again",
                                      marker, cmd));
    const std::string have = sha256_file(f);
    if (have != sum.get<std::string>())
      throw InputError(f, fmt::format("is not the file `genemask {}` wrote (SHA-256 {}, recorded in {} {}): it was "
                                      "cut short, changed or replaced since; copy the whole output again, or write "
                                      "it again",
                                      cmd, have.substr(0, 16), marker, sum.get<std::string>().substr(0, 16)));
  }
  return out;
}

namespace {
/// The command of DIR's marker when the marker says its publication was cut short.
std::optional<std::string> incomplete_output_command(const std::string& dir) {
  const auto m = read_output_marker(dir);
  if (m && !(*m)["complete"].get<bool>()) return (*m)["command"].get<std::string>();
  return std::nullopt;
}
}  // namespace

void check_output_complete(const std::string& dir) {
  if (const auto cmd = incomplete_output_command(dir))
    throw InputError(dir, fmt::format("is an incomplete output of `genemask {}` (it stopped while moving its files "
                                      "into place): run that command again (it replaces an incomplete output)",
                                      *cmd));
}

void check_file_in_complete_output(const std::string& file) {
  // The nearest directory above FILE with a marker: its parent (DIR/train.tsv) or one
  // further up (DIR/fewshot/10/train.tsv, where only DIR has a marker).
  const fs::path abs = fs::absolute(file).lexically_normal();
  std::string dir;
  for (fs::path d = abs.parent_path();; d = d.parent_path()) {
    if (fs::exists(fs::symlink_status(d / kOutputMarker))) {
      dir = d.string();
      break;
    }
    if (d == d.parent_path()) return;  // in no genemask output
  }
  const auto m = read_output_marker(dir);
  if (!m) return;
  const std::string rel = abs.lexically_relative(dir).generic_string();
  const bool in_parent = rel.find('/') == std::string::npos;
  const std::string top = rel.substr(0, rel.find('/'));
  const auto& entries = (*m)["entries"];
  const bool written = std::find(entries.begin(), entries.end(), top) != entries.end();
  if (!in_parent && !written) return;  // a file of the user's inside an output
  const std::string cmd = (*m)["command"].get<std::string>();
  if (!(*m)["complete"].get<bool>())
    throw InputError(file, fmt::format("is in {}, an incomplete output of `genemask {}` (it stopped while moving its "
                                       "files into place, so its files may be of two runs): run that command again "
                                       "(it replaces an incomplete output)",
                                       dir, cmd));
  // A table the marker records a SHA-256 of (`dataset` outputs) is read only as written: a
  // copy cut at a line end has every line whole, and read as a smaller task before.
  verify_output_files(dir, [&](const std::string& name) { return name == rel; });
}

OutputSet::OutputSet(std::string dir, Options options)
    : dir_(std::move(dir)), o_(std::move(options)), exceptions_(std::uncaught_exceptions()) {
  while (dir_.size() > 1 && dir_.back() == '/') dir_.pop_back();
  const std::string what = o_.option + " " + dir_;
  if (auto st = stat_of(dir_)) {
    if (!S_ISDIR(st->st_mode))
      throw std::runtime_error(fmt::format("{} exists and is not a directory; give the name of a new or empty directory",
                                           what));
  } else if (errno == ENOENT || errno == ENOTDIR) {
    fs::path p = fs::absolute(dir_).lexically_normal();
    if (!p.has_filename()) p = p.parent_path();
    fs::path top;
    for (fs::path q = p; !q.empty() && !fs::exists(fs::symlink_status(q)); q = q.parent_path()) {
      top = q;
      if (q == q.parent_path()) break;
    }
    std::error_code ec;
    fs::create_directories(p, ec);
    if (ec) throw std::runtime_error(fmt::format("cannot create {}: {}", what, ec.message()));
    if (!top.empty()) created_ = top.string();
    // A signal from here on removes DIR and the parents made for it, each only while empty
    // (the lock file and the staging directory, registered later, go first).
    if (!created_.empty()) {
      chain_ = empty_dir_chain(dir_, created_);
      marker_path_ = dir_ + "/" + kOutputMarker;
      cleanup_slots_ = register_made_dirs(chain_, dir_);
    }
  } else {
    throw std::runtime_error(fmt::format("cannot use {}: {}", what, std::strerror(errno)));
  }
  try {
    check_writable_target(dir_);
    lock_ = std::make_unique<DirLock>(dir_, "genemask " + o_.command);
    remove_stale_temporaries(dir_ + "/" + kOutputMarker);  // of a run killed while writing it
    const std::vector<std::string> others = user_entries(dir_, /*skip_inputs=*/false);
    if (const auto marker = read_output_marker(dir_)) {
      const std::string cmd = (*marker)["command"].get<std::string>();
      const bool complete = (*marker)["complete"].get<bool>();
      if (cmd != o_.command)
        throw std::runtime_error(fmt::format("{} holds the output of `genemask {}`, not of `genemask {}`: choose "
                                             "another {}",
                                             what, cmd, o_.command, o_.option));
      if (complete && !o_.force)
        throw std::runtime_error(fmt::format("{} holds an earlier output of `genemask {}` (written {}): pass --force "
                                             "to replace it, or choose another {}",
                                             what, cmd, marker->value("written", "at an unknown time"), o_.option));
      if (!complete)
        std::cerr << fmt::format("genemask: {} holds an output of `genemask {}` that was never completed; it is "
                                 "replaced",
                                 dir_, cmd)
                  << std::endl;
      for (const auto& e : (*marker)["entries"]) {
        const std::string n = e.get<std::string>();
        if (fs::exists(fs::symlink_status(dir_ + "/" + n))) old_entries_.push_back(n);
      }
      if (o_.readers_lock) {  // a reader of the earlier output (pretrain on a shard set) must not see it swapped
        const std::string path = dir_ + "/" + kReadersLock;
        readers_fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
        if (readers_fd_ >= 0 && ::flock(readers_fd_, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK)
          throw std::runtime_error(fmt::format("{} is being read by another genemask command (a pretrain or "
                                               "mask-stats on it): replacing it now would change its data under "
                                               "that run; wait for it to end, or choose another {}",
                                               what, o_.option));
      }
      if (const auto t = marker->find("tree"); t != marker->end() && t->is_object()) {
        old_tree_ = *t;
        for (const auto& n : old_entries_) check_tree_is_known(dir_, n, old_tree_);  // before the work
      }
    } else if (!others.empty()) {
      throw std::runtime_error(fmt::format(
          "{} is not empty ({} entr{}, first '{}') and holds no output of genemask (no {}): genemask fills only new "
          "or empty directories; choose another {}, or empty it yourself",
          what, others.size(), others.size() == 1 ? "y" : "ies", others.front(), kOutputMarker, o_.option));
    }
    staging_ = staging_for(dir_);
    removing_ = dir_ + "/" + kStagingRemoved;
    std::error_code ec;
    fs::remove_all(staging_, ec);  // a staging directory left by a killed run (we hold the lock)
    fs::remove_all(removing_, ec);
    if (!fs::create_directory(staging_, ec) || ec)
      throw std::runtime_error(fmt::format("cannot create {}: {}", staging_, ec ? ec.message() : "it exists"));
    removing_slot_ = register_cleanup(removing_, CleanupKind::part);
    // Named on its own when DIR was there before; in a DIR made here, DIR is named.
    staging_slot_ = register_cleanup(staging_, created_.empty() ? CleanupKind::tree : CleanupKind::part);
  } catch (...) {
    // As in the destructor: each slot is dropped once its removal is done.
    if (!staging_.empty() && lock_) remove_staging();
    drop_staging_cleanup();
    if (lock_) remove_created();  // what this run made, never another writer's output
    else remove_empty_chain(chain_);  // the lock file not written: nobody's
    for (int slot : cleanup_slots_) unregister_cleanup(slot);
    lock_.reset();
    throw;
  }
}

void OutputSet::remove_created() {
  // What this run put in a DIR it made (the entries it moved there, its marker), the lock
  // file, then DIR and the parents made for it, each only while empty: anything another
  // writer or the user put in DIR meanwhile stays, and DIR with it.
  // Every name was made ahead: this allocates nothing, and runs after an out-of-memory
  // error too.
  if (created_.empty()) return;  // an earlier DIR keeps what was moved, under an "incomplete" marker
  for (const auto& p : moved_) remove_tree(p);
  if (wrote_marker_) ::unlink(marker_path_.c_str());
  lock_.reset();
  remove_empty_chain(chain_);
}

std::string OutputSet::staging_for(const std::string& dir) {
  std::string d = dir;
  while (d.size() > 1 && d.back() == '/') d.pop_back();
  return d + "/" + kStaging;
}

OutputSet::~OutputSet() {
  if (readers_fd_ >= 0) ::close(readers_fd_);
  if (!published_) {
    // The removal runs with the signal cleanup still registered, so that a signal meanwhile
    // finishes it instead of leaving DIR behind: mpirun ends every rank with SIGTERM once one
    // aborts, and the other ranks abort as soon as the staging directory they write into
    // is gone. The staging directory's slot goes once it is removed (after the lock is
    // released, another run may make a staging directory there); the directories' slots
    // only remove them while empty.
    if (!staging_.empty()) remove_staging();
    drop_staging_cleanup();
    // Testing hook: a pause here, for a signal to come between the two removals
    // (tests/io/output_guard_test.cpp).
    hold_for_tests("GENEMASK_TEST_HOLD_CLEANUP");
    if (lock_) remove_created();
  }  // published: publish() dropped the staging slots
  for (int slot : cleanup_slots_) unregister_cleanup(slot);
  lock_.reset();
}

void OutputSet::remove_staging() noexcept {
  // Renamed away first: the other ranks' next file in it then fails at once (and they abort),
  // instead of the removal chasing what they keep writing. Allocates nothing.
  if (::rename(staging_.c_str(), removing_.c_str()) == 0) remove_tree(removing_);
  else remove_tree(staging_);
}

void OutputSet::drop_staging_cleanup() noexcept {
  unregister_cleanup(std::exchange(staging_slot_, -1));
  unregister_cleanup(std::exchange(removing_slot_, -1));
}

void OutputSet::prepare() {
  if (prepared_) return;
  std::vector<std::string> fresh;
  {
    DIR* d = ::opendir(staging_.c_str());
    if (!d) throw std::runtime_error(fmt::format("cannot read {}: {}", staging_, std::strerror(errno)));
    while (const dirent* e = ::readdir(d)) {
      const std::string n = e->d_name;
      if (n != "." && n != "..") fresh.push_back(n);
    }
    ::closedir(d);
  }
  // Readers open read_first first: it goes last (and, of the old output, first).
  std::sort(fresh.begin(), fresh.end(), [&](const std::string& a, const std::string& b) {
    if ((a == o_.read_first) != (b == o_.read_first)) return b == o_.read_first;
    return a < b;
  });
  const std::set<std::string> old(old_entries_.begin(), old_entries_.end());
  for (const auto& n : fresh) {
    const std::string target = dir_ + "/" + n;
    if (!old.count(n) && fs::exists(fs::symlink_status(target)))
      throw std::runtime_error(fmt::format("{} is in the way: genemask did not write it (it is not listed in {}/{}), "
                                           "so it is not replaced; move it away and run the command again",
                                           target, dir_, kOutputMarker));
    check_writable_target(target);
  }
  for (const auto& n : old_entries_) check_removable(dir_ + "/" + n);
  // What each directory entry holds, so that a replacement removes only what genemask wrote:
  // a file the user put inside one (fewshot/notes.txt, plots/mine.svg) is not removed with
  // it. Markers written before the trees were recorded are held against the new output's.
  nlohmann::json fresh_tree = nlohmann::json::object();  // the new output's, for its marker too
  for (const auto& n : fresh)
    if (fs::is_directory(fs::symlink_status(staging_ + "/" + n))) fresh_tree[n] = tree_of(staging_ + "/" + n);
  nlohmann::json tree = old_tree_.is_object() ? old_tree_ : nlohmann::json::object();
  for (const auto& [n, t] : fresh_tree.items()) {
    if (!tree.contains(n) || !tree[n].is_array()) tree[n] = t;
    else for (const auto& x : t) tree[n].push_back(x);  // both, until the old one is gone
  }
  for (const auto& n : old_entries_)
    check_tree_is_known(dir_, n, tree, old_tree_.is_object() && old_tree_.contains(n));
  // The new files on the disk before any of them is moved into place and the marker says
  // "complete" (its own write is synced, and DIR with it).
  for (const auto& n : fresh) sync_tree_to_disk(staging_ + "/" + n);
  fresh_ = std::move(fresh);
  fresh_tree_ = std::move(fresh_tree);
  tree_ = std::move(tree);
  prepared_ = true;
}

void OutputSet::publish(const nlohmann::json& extra) {
  move_into_place();
  complete(extra);
}

void OutputSet::move_into_place() {
  if (moved_into_place_) return;
  prepare();
  const std::vector<std::string>& fresh = fresh_;
  const nlohmann::json& tree = tree_;
  const std::set<std::string> old(old_entries_.begin(), old_entries_.end());
  std::vector<std::string> all = old_entries_;
  for (const auto& n : fresh)
    if (!old.count(n)) all.push_back(n);
  nlohmann::json cut_short = new_marker(o_.command, false, all);  // a cut-short publication says so
  if (!tree.empty()) cut_short["tree"] = tree;
  wrote_marker_ = true;
  write_marker(dir_, cut_short);
  const std::set<std::string> fresh_set(fresh.begin(), fresh.end());
  std::vector<std::string> gone = old_entries_;
  std::stable_partition(gone.begin(), gone.end(), [&](const std::string& n) { return n == o_.read_first; });
  for (const auto& n : gone) {
    const std::string target = dir_ + "/" + n;
    // A file that comes again is replaced by the rename below, atomically; the rest goes now.
    if (fresh_set.count(n) && n != o_.read_first && !fs::is_directory(fs::symlink_status(target))) continue;
    std::error_code ec;
    fs::remove_all(target, ec);
    if (ec) throw std::runtime_error(fmt::format("cannot remove {} (of the earlier output): {}", target, ec.message()));
  }
  // A signal while the files move: DIR keeps what was moved, under a marker that says
  // "incomplete" (readers refuse it; the next run of the command replaces it).
  for (const auto& n : fresh) {
    moved_.push_back(dir_ + "/" + n);  // before the rename: pushing allocates, the removal must not
    rename_or_throw(staging_ + "/" + n, dir_ + "/" + n);
  }
  moved_into_place_ = true;
}

void OutputSet::complete(const nlohmann::json& extra) {
  move_into_place();
  if (published_) return;
  const std::vector<std::string>& fresh = fresh_;
  const nlohmann::json& fresh_tree = fresh_tree_;
  nlohmann::json m = new_marker(o_.command, true, fresh);
  if (!fresh_tree.empty()) m["tree"] = fresh_tree;
  for (const auto& [k, v] : extra.items()) m[k] = v;
  if (o_.digests) {  // of the files as they now are in DIR, which readers check (verify_output_files)
    nlohmann::json files = nlohmann::json::object();
    for (const auto& n : fresh) {
      if (fs::is_regular_file(fs::symlink_status(dir_ + "/" + n))) files[n] = sha256_file(dir_ + "/" + n);
      if (!fresh_tree.contains(n)) continue;
      for (const auto& x : fresh_tree[n]) {  // and of the files inside a directory entry (fewshot/10/train.tsv)
        const std::string rel = n + "/" + x.get<std::string>();
        if (fs::is_regular_file(fs::symlink_status(dir_ + "/" + rel))) files[rel] = sha256_file(dir_ + "/" + rel);
      }
    }
    m["files"] = files;
  }
  for (int slot : cleanup_slots_) unregister_cleanup(slot);  // complete now: nothing for a signal to remove
  cleanup_slots_.clear();
  drop_staging_cleanup();
  if (o_.readers_lock) {  // before the marker: a reader of the complete output finds it
    const std::string path = dir_ + "/" + kReadersLock;
    const int fd = ::open(path.c_str(), O_RDONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) throw std::runtime_error(fmt::format("cannot create {}: {}", path, std::strerror(errno)));
    ::close(fd);
  }
  write_marker(dir_, m);
  ::rmdir(staging_.c_str());
  if (readers_fd_ >= 0) ::close(readers_fd_);
  readers_fd_ = -1;
  published_ = true;
  lock_.reset();
}

void OutputSet::withdraw() noexcept {
  if (!published_) return;
  try {
    set_output_marker_value(dir_, "complete", false);
  } catch (...) {  // a disk that refuses this small write too: the output stays marked complete
  }
}

std::string random_id() {
  std::random_device rd;
  std::string id;
  for (int i = 0; i < 4; ++i) id += fmt::format("{:08x}", static_cast<uint32_t>(rd()));
  return id;
}

void set_output_marker_value(const std::string& dir, const std::string& key, const nlohmann::json& value) {
  auto m = read_output_marker(dir);
  if (!m) throw std::runtime_error(fmt::format("{}/{} is missing", dir, kOutputMarker));
  (*m)[key] = value;
  write_marker(dir, *m);
}

std::shared_ptr<void> shared_flock(const std::string& path, bool wait, bool* busy) {
  if (busy) *busy = false;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return nullptr;
  while (::flock(fd, LOCK_SH | (wait ? 0 : LOCK_NB)) != 0) {
    if (errno == EINTR) continue;
    if (busy) *busy = errno == EWOULDBLOCK;
    ::close(fd);
    return nullptr;  // or a file system without locks: readers go unlocked, as writers do
  }
  return std::shared_ptr<void>(new int(fd), [](void* p) {
    auto* f = static_cast<int*>(p);
    ::close(*f);  // drops the lock
    delete f;
  });
}

std::shared_ptr<void> hold_output_for_reading(const std::string& dir, const std::string& what) {
  bool busy = false;
  auto hold = shared_flock(dir + "/" + kReadersLock, /*wait=*/false, &busy);
  if (busy)
    throw std::runtime_error(fmt::format("{} is being replaced by another genemask command (shards --force): "
                                         "wait for it to end, then run this again",
                                         what));
  return hold;
}

void claim_run_directory(const std::string& dir, const std::string& command, const std::string& option,
                         const std::vector<std::string>& legacy_entries,
                         const std::function<bool(const std::string&)>& legacy_proof) {
  remove_stale_temporaries(dir + "/" + kOutputMarker);  // of a run killed while writing it
  const std::vector<std::string> others = user_entries(dir, /*skip_inputs=*/true);
  if (const auto marker = read_output_marker(dir)) {
    const std::string cmd = (*marker)["command"].get<std::string>();
    if (cmd != command)
      throw std::runtime_error(fmt::format("{} {} holds the output of `genemask {}`, not a `genemask {}` directory: "
                                           "choose another {}",
                                           option, dir, cmd, command, option));
    return;
  }
  // A directory of before the markers: only the command's own entries, and the proof that
  // it wrote them (a user's folder that happens to hold a "metrics.jsonl" or a "runs" is not).
  const bool legacy = !others.empty() && legacy_proof &&
                      std::all_of(others.begin(), others.end(),
                                  [&](const std::string& n) {
                                    return std::find(legacy_entries.begin(), legacy_entries.end(), n) !=
                                           legacy_entries.end();
                                  }) &&
                      legacy_proof(dir);
  if (!others.empty() && !legacy)
    throw std::runtime_error(fmt::format(
        "{} {} is not empty ({} entr{}, first '{}') and is not a `genemask {}` directory (no {}): choose a new or "
        "empty directory",
        option, dir, others.size(), others.size() == 1 ? "y" : "ies", io::printable(others.front()), command,
        kOutputMarker));
  write_marker(dir, new_marker(command, true, {}));
}

void own_append_file(const std::string& path) {
  struct stat lst{};
  if (::lstat(path.c_str(), &lst) != 0) return;  // none yet: the append creates it
  if (!S_ISLNK(lst.st_mode) && !(S_ISREG(lst.st_mode) && lst.st_nlink > 1)) return;
  if (S_ISLNK(lst.st_mode)) {
    struct stat st{};
    if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode))
      throw std::runtime_error(fmt::format("cannot append to {}: it is a symbolic link to no regular file; genemask "
                                           "appends only to a file of its own: remove the link",
                                           path));
  }
  // A copy of its own, renamed over the name: the link's target, or the other names of a
  // hard-linked file (a `cp -al` snapshot), keep what they hold.
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(fmt::format("cannot read {}: {}", path, open_error_reason(errno)));
  AtomicFile f(path);
  f.stream() << in.rdbuf();
  if (in.bad()) throw std::runtime_error(fmt::format("cannot read {}: {}", path, std::strerror(errno)));
  f.commit();
}

}  // namespace genemask::io
