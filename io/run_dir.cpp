#include "io/run_dir.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <nlohmann/json.hpp>

#include "io/error.hpp"
#include "io/json.hpp"
#include "io/output_guard.hpp"
#include "io/parse_number.hpp"
#include "io/plain_names.hpp"
#include "io/sha256.hpp"

namespace fs = std::filesystem;

namespace genemask::io {

std::optional<int64_t> checkpoint_step_of(std::string_view name) {
  constexpr std::string_view kPrefix = "step-";
  if (name.substr(0, kPrefix.size()) != kPrefix) return std::nullopt;
  const std::string_view digits = name.substr(kPrefix.size());
  if (digits.empty() || digits.size() > 19 ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return std::nullopt;
  int64_t step = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), step);
  if (ec != std::errc() || end != digits.data() + digits.size()) return std::nullopt;  // out of range
  return step;
}

std::string checkpoint_dir(const std::string& run, int64_t step) {
  return fmt::format("{}/checkpoints/step-{:08d}", run, step);
}

std::vector<int64_t> checkpoint_steps(const std::string& run) {
  std::vector<int64_t> steps;
  const fs::path d = fs::path(run) / "checkpoints";
  std::error_code ec;
  if (!fs::is_directory(d, ec)) return steps;
  for (const auto& e : fs::directory_iterator(d)) {
    const auto step = checkpoint_step_of(e.path().filename().string());
    if (step && e.is_directory(ec) && fs::exists(e.path() / "state.json", ec)) steps.push_back(*step);
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

std::string lock_holder(const std::string& dir) {
  const std::string path = dir + "/.genemask.lock";
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  std::string holder;
  if (::flock(fd, LOCK_SH | LOCK_NB) != 0) {  // an exclusive lock is held: a live run
    char buf[256] = {};
    const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
    holder.assign(buf, n > 0 ? static_cast<size_t>(n) : 0);
    while (!holder.empty() && (holder.back() == '\n' || holder.back() == '\0')) holder.pop_back();
    if (holder.empty()) holder = "holder unknown";
  }
  ::close(fd);  // drops the shared lock, if it was taken
  return holder;
}

namespace {

/// The run's --steps as a checkpoint's state.json records it (written since format 2), or -1.
int64_t recorded_run_steps(const fs::path& checkpoint) {
  const JsonParse parsed = try_read_json_file((checkpoint / "state.json").string());
  const nlohmann::json& j = parsed.value;
  if (parsed.ok() && j.is_object() && j.contains("steps") && j["steps"].is_number_integer()) return j["steps"].get<int64_t>();
  return -1;
}

}  // namespace

namespace {

/// A shared lock on RUN/checkpoints/.genemask-readers.lock for as long as the result lives;
/// null when the run has no such file (a run of an older genemask: nothing to share).
std::shared_ptr<void> hold_checkpoints(const std::string& run) {
  return shared_flock(run + "/checkpoints/" + kCheckpointReadersLock, /*wait=*/true);
}

/// The files of a checkpoint that readers load: all but the optimizer and random states.
bool read_by_model_readers(const std::string& name) {
  return name != "optimizer.pt" && name.rfind("rng-", 0) != 0 && name.rfind("cuda-rng-", 0) != 0;
}

/// Checks the files of checkpoint `r.dir` that readers load against its state.json (format
/// 2 records their SHA-256); fills r.weights_sha256.
void verify_checkpoint(ResolvedModel& r) {
  const std::string state = r.dir + "/state.json";
  const JsonParse parsed = try_read_json_file(state);
  if (!parsed.ok() || !parsed.value.is_object())
    throw InputError(state, fmt::format("is not a JSON object ({}): the checkpoint is damaged; use an earlier one",
                                        parsed.ok() ? "another JSON value" : parsed.error));
  const nlohmann::json& st = parsed.value;
  // Format 1 recorded no digests; from format 2 on, a state.json without them was edited (the
  // checkpoint's files would go unchecked: another step's weights read as this step's).
  const bool v2 = st.contains("format_version") &&
                  !(st["format_version"].is_number_integer() && st["format_version"].get<int64_t>() == 1);
  if (!st.contains("files")) {
    if (!v2) return;
    throw InputError(state, "is format version 2 or later but has no \"files\" (the SHA-256 of the checkpoint's "
                            "files): the checkpoint is damaged or its state.json was edited; use another checkpoint");
  }
  if (!st["files"].is_object())
    throw InputError(state, "its \"files\" is not an object of file names and SHA-256: the checkpoint is damaged");
  const std::string weights_name = fs::path(r.weights).filename().string();
  if (!st["files"].contains(weights_name))
    throw InputError(state, fmt::format("does not list {} among the checkpoint's files: the checkpoint is damaged, or "
                                        "its weights were replaced",
                                        weights_name));
  for (const auto& [name, sum] : st["files"].items()) {
    if (!sum.is_string() || !is_plain_name(name))
      throw InputError(state, fmt::format("lists a file entry {}: {} that is not a file name and SHA-256; the "
                                          "checkpoint is damaged",
                                          excerpt(name, 40), json_excerpt(sum, 80)));
    if (!read_by_model_readers(name)) continue;
    const std::string f = r.dir + "/" + name;
    if (!fs::is_regular_file(f))
      throw InputError(f, "is missing from its checkpoint (its state.json lists it): the checkpoint is damaged; use an "
                          "earlier checkpoint");
    const std::string have = sha256_file(f);
    if (have != sum.get<std::string>())
      throw InputError(f, fmt::format("is not the file its checkpoint's state.json records (SHA-256 {}, recorded {}): "
                                      "it was changed, or copied in from another checkpoint or run; put the "
                                      "checkpoint's own file back, or use another checkpoint",
                                      have.substr(0, 16), sum.get<std::string>().substr(0, 16)));
    if (name == weights_name) r.weights_sha256 = have;
  }
}

}  // namespace

namespace {
/// The highest "step" among the last lines of RUN/metrics.jsonl (the last MiB: a step's lines
/// are short), -1 when there is none. A last line torn by a kill (no line end) counts by the
/// step it begins with; another line that is not a record is skipped.
int64_t last_logged_step(const std::string& run) {
  std::ifstream in(run + "/metrics.jsonl", std::ios::binary | std::ios::ate);
  if (!in) return -1;
  const std::streamoff size = in.tellg();
  const std::streamoff from = std::max<std::streamoff>(0, size - (1 << 20));
  in.seekg(from);
  std::string tail(static_cast<size_t>(size - from), '\0');
  in.read(tail.data(), static_cast<std::streamsize>(tail.size()));
  int64_t best = -1;
  size_t begin = 0;
  if (from > 0) {  // past the line the window cuts
    const size_t nl = tail.find('\n');
    if (nl == std::string::npos) return -1;
    begin = nl + 1;
  }
  for (;;) {
    const size_t end = tail.find('\n', begin);
    const std::string line = tail.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
    const auto j = try_parse_json(line).value;
    if (j.is_object() && j.contains("step") && j["step"].is_number_integer()) {
      best = std::max(best, j["step"].get<int64_t>());
    } else if (const size_t key = line.find("\"step\":"); end == std::string::npos && key != std::string::npos) {
      // A torn last line: its step, when the line holds it whole (a character follows its digits).
      size_t first = key + 7;
      while (first < line.size() && line[first] == ' ') ++first;
      size_t last = first;
      while (last < line.size() && line[last] >= '0' && line[last] <= '9') ++last;
      if (const auto n = parse_decimal_u64(std::string_view(line).substr(first, last - first)); n && last < line.size())
        best = std::max(best, static_cast<int64_t>(*n));
    }
    if (end == std::string::npos) break;
    begin = end + 1;
  }
  return best;
}
}  // namespace

std::string unfinished_run_reason(const ResolvedModel& m, const std::string& given, const std::string& other) {
  if (m.run.empty() || m.dir == given) return "";  // a model or checkpoint directory named explicitly
  const std::string holder = lock_holder(given);
  if (!holder.empty())
    return fmt::format("the run \"{}\" is still being trained (a live genemask pretrain holds its lock: {}); its newest "
                       "checkpoint (step {}) is not its final model: wait for the run to end, or {}",
                       given, holder, m.step, other);
  if (m.run_steps > 0 && m.step < m.run_steps)
    return fmt::format("the run \"{}\" has not finished: its newest checkpoint is step {} of the {} steps it was started "
                       "for; finish it with `genemask pretrain ... --resume`, or {}",
                       given, m.step, m.run_steps, other);
  if (m.started_steps > m.step && m.logged_step <= m.step)
    return fmt::format("the run \"{}\" has not finished: it was last started for {} steps (pretrain --resume --steps "
                       "{}) and stopped before its next checkpoint (its newest is step {}); finish it with `genemask "
                       "pretrain ... --resume`, or {}",
                       given, m.started_steps, m.started_steps, m.step, other);
  if (m.logged_step > m.step)
    return fmt::format("the run \"{}\" has not finished: its metrics.jsonl logs step {}, past its newest checkpoint (step "
                       "{}): it was continued (pretrain --resume with more --steps) and stopped before its next "
                       "checkpoint; finish it with `genemask pretrain ... --resume`, or {}",
                       given, m.logged_step, m.step, other);
  if (m.marker_missing)
    return fmt::format("the run \"{}\" has no {} (copied without its hidden files, e.g. `cp -r RUN/* DEST`?): the "
                       "--steps of its latest start are recorded there, so whether it stopped before its next "
                       "checkpoint cannot be told, and its newest checkpoint (step {}) is not known to be its final "
                       "model; copy the run with its hidden files (cp -a RUN DEST), or {}",
                       given, kOutputMarker, m.step, other);
  return "";
}

ResolvedModel resolve_model(const std::string& path) {
  check_output_complete(path);  // an export whose publication was cut short
  ResolvedModel r;
  std::error_code ec;
  if (fs::exists(path + "/model.safetensors", ec) || fs::exists(path + "/pytorch_model.bin", ec)) {
    r.dir = path;
    // A checkpoint named explicitly: RUN/checkpoints/step-N with its state.json.
    const fs::path p = fs::path(path).lexically_normal();
    const fs::path leaf = p.has_filename() ? p : p.parent_path();
    const auto step = checkpoint_step_of(leaf.filename().string());
    if (step && leaf.parent_path().filename() == "checkpoints" && fs::exists(leaf / "state.json", ec)) {
      r.step = *step;
      r.run = leaf.parent_path().parent_path().string();
      r.hold = hold_checkpoints(r.run);
      if (!fs::exists(leaf / "state.json", ec))
        throw InputError(path, "was removed by its run's checkpoint rotation (pretrain --keep-checkpoints) before it "
                               "could be read: name a newer checkpoint, or the run itself for its newest");
      r.run_steps = recorded_run_steps(leaf);
    }
  } else {
    for (const char* index : {"model.safetensors.index.json", "pytorch_model.bin.index.json"})
      if (fs::exists(path + "/" + index, ec))
        throw InputError(path, fmt::format("is a sharded checkpoint ({}), which genemask does not read: save the model "
                                           "in one file (transformers: save_pretrained(DIR, max_shard_size=\"100GB\"))",
                                           index));
    // Under the readers lock: the newest checkpoint cannot be rotated away between the
    // listing and the reading.
    r.hold = hold_checkpoints(path);
    const auto steps = checkpoint_steps(path);
    if (steps.empty())
      throw InputError(path, "no complete checkpoint (checkpoints/step-*/state.json) and no model.safetensors");
    r.run = path;
    r.step = steps.back();
    r.dir = checkpoint_dir(path, r.step);
    r.run_steps = recorded_run_steps(r.dir);
    r.logged_step = last_logged_step(path);
    const auto mk = read_output_marker(path);
    if (mk && mk->contains("steps") && (*mk)["steps"].is_number_integer()) r.started_steps = (*mk)["steps"].get<int64_t>();
    r.marker_missing = !mk && fs::exists(path + "/checkpoints/" + kCheckpointReadersLock, ec);
  }
  r.weights = r.dir + (fs::exists(r.dir + "/model.safetensors", ec) ? "/model.safetensors" : "/pytorch_model.bin");
  if (r.step >= 0) {
    verify_checkpoint(r);
  } else {
    // A model directory genemask wrote (export-hf, finetune --save-model) records its files'
    // SHA-256 in its marker: the files a reader loads are checked against it.
    const auto recorded = verify_output_files(r.dir, read_by_model_readers);
    if (auto it = recorded.find(fs::path(r.weights).filename().string()); it != recorded.end())
      r.weights_sha256 = it->second;
  }
  return r;
}

std::string model_weights_sha256(const ResolvedModel& m) {
  return m.weights_sha256.empty() ? sha256_file(m.weights) : m.weights_sha256;
}

void create_checkpoint_readers_lock(const std::string& run) {
  const std::string path = run + "/checkpoints/" + kCheckpointReadersLock;
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) throw InputError(path, fmt::format("cannot create the readers' lock file: {}", open_error_reason(errno)));
  ::close(fd);
}

bool remove_checkpoints_unless_read(const std::string& run, const std::vector<std::string>& dirs) {
  if (dirs.empty()) return true;
  const std::string path = run + "/checkpoints/" + kCheckpointReadersLock;
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) throw InputError(path, fmt::format("cannot open the readers' lock file: {}", open_error_reason(errno)));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK) {
    ::close(fd);
    return false;
  }
  for (const auto& d : dirs) fs::remove_all(d);
  ::close(fd);
  return true;
}

}  // namespace genemask::io
