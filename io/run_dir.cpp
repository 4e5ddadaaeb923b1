#include "io/run_dir.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <nlohmann/json.hpp>

#include "io/error.hpp"
#include "io/output_guard.hpp"

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
  std::ifstream in(checkpoint / "state.json");
  const auto j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_object() && j.contains("steps") && j["steps"].is_number_integer()) return j["steps"].get<int64_t>();
  return -1;
}

}  // namespace

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
      r.run_steps = recorded_run_steps(leaf);
      r.run = leaf.parent_path().parent_path().string();
    }
    return r;
  }
  const auto steps = checkpoint_steps(path);
  if (steps.empty())
    throw InputError(path, "no complete checkpoint (checkpoints/step-*/state.json) and no model.safetensors");
  r.run = path;
  r.step = steps.back();
  r.dir = checkpoint_dir(path, r.step);
  r.run_steps = recorded_run_steps(r.dir);
  return r;
}

}  // namespace genemask::io
