// Before a command starts, the ranks of a job agree: same arguments, the same files behind
// them, and no rank with an error (a file missing on one node, a refused output). Without
// this, a rank that stops alone leaves the others waiting forever in their first collective.
#include "start_check.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <ctime>
#include <vector>
#include <fmt/format.h>
#include <map>
#include <nlohmann/json.hpp>

#include "hpc/mpi.hpp"
#include "io/atomic_file.hpp"
#include "io/error.hpp"
#include "io/sha256.hpp"

namespace genemask::cli {
namespace {

/// A fingerprint of a file's content: SHA-256 of its size, its first and last 64 KiB and 16
/// blocks of 4 KiB spread between them (at most 192 KiB read, whatever the size), as 16 hex
/// digits. Two nodes that see the same size and time but other bytes (a stale copy, a file
/// rewritten within the time stamp's resolution) almost always differ here.
std::string content_fingerprint(int fd, uint64_t size) {
  std::string sample = std::to_string(size) + ":";
  std::vector<char> buf(64u << 10);
  const auto take = [&](uint64_t off, size_t n) {
    const ssize_t got = ::pread(fd, buf.data(), std::min<size_t>(n, buf.size()), static_cast<off_t>(off));
    if (got > 0) sample.append(buf.data(), static_cast<size_t>(got));
  };
  take(0, 64u << 10);
  if (size > (128u << 10)) {
    for (uint64_t k = 1; k <= 16; ++k) take(size / 17 * k, 4u << 10);
    take(size - (64u << 10), 64u << 10);
  } else if (size > (64u << 10)) {
    take(64u << 10, static_cast<size_t>(size - (64u << 10)));
  }
  return io::sha256_hex(sample).substr(0, 16);
}

/// What a rank sees at an argument that names a path: "missing", "directory" (with the
/// fingerprints of the files that describe a genemask directory), or "<size> bytes, modified
/// <time>, content <fingerprint>" for a file.
std::string describe_path(const std::string& arg) {
  struct stat st {};
  if (::stat(arg.c_str(), &st) != 0) return "missing";
  if (S_ISDIR(st.st_mode)) {
    std::string d = "a directory";
    for (const char* f : {"manifest.json", ".genemask.json", "config.json", "state.json", "plan.json"}) {
      const std::string path = arg + "/" + f;
      struct stat fs {};
      if (::stat(path.c_str(), &fs) != 0 || !S_ISREG(fs.st_mode)) continue;
      const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
      if (fd < 0) continue;
      d += fmt::format(" ({} {})", f, content_fingerprint(fd, static_cast<uint64_t>(fs.st_size)));
      ::close(fd);
    }
    return d;
  }
  if (!S_ISREG(st.st_mode)) return "not a regular file";
  // open(2) revalidates cached attributes on NFS (close-to-open consistency): a node that
  // saw an older version of the file sees this one's size and time.
  const int fd = ::open(arg.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  std::string content = "unreadable";
  if (fd >= 0) {
    ::fstat(fd, &st);
    content = content_fingerprint(fd, static_cast<uint64_t>(st.st_size));
    ::close(fd);
  }
  std::tm tm {};
  gmtime_r(&st.st_mtim.tv_sec, &tm);
  char when[32];
  std::strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &tm);
  return fmt::format("{} bytes, modified {}.{:09d} UTC, content {}", static_cast<unsigned long long>(st.st_size), when,
                     st.st_mtim.tv_nsec, content);
}

/// The value part of an argument: "g.fa" of "g.fa" and of "--genome=g.fa".
std::string value_of(const std::string& arg) {
  if (arg.rfind("--", 0) == 0) {
    const size_t eq = arg.find('=');
    return eq == std::string::npos ? "" : arg.substr(eq + 1);
  }
  return arg;
}

std::string ranks_text(const std::vector<int>& ranks) {
  std::string s = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size() && i < 8; ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  if (ranks.size() > 8) s += fmt::format(" and {} more", ranks.size() - 8);
  return s;
}

std::string joined(const nlohmann::json& args) {
  std::string s;
  for (const auto& a : args) s += (s.empty() ? "" : " ") + a.get<std::string>();
  return io::excerpt(s, 300);
}

}  // namespace

std::string agree_to_start(int rank, int size, int argc, char** argv, const std::string& my_error) {
  if (size <= 1) return my_error;
  nlohmann::json me = {{"host", io::host_name()}, {"error", my_error}, {"args", nlohmann::json::array()},
                       {"paths", nlohmann::json::array()}};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    me["args"].push_back(a);
    const std::string v = value_of(a);
    me["paths"].push_back(v.empty() ? "" : describe_path(v));
  }
  // Arguments from a file may hold any bytes: JSON with invalid UTF-8 is dumped escaped.
  const std::string mine = me.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  const std::vector<std::string> all = hpc::gather_bytes(mine, 0, MPI_COMM_WORLD);
  std::string verdict;
  if (rank == 0) {
    std::vector<nlohmann::json> r;
    for (const auto& s : all) r.push_back(nlohmann::json::parse(s));
    const auto where = [&](int k) { return fmt::format("rank {} on {}", k, r[k]["host"].get<std::string>()); };
    // 1. Other arguments: the cause of everything else (a different input, a usage error).
    std::vector<int> other_args;
    for (int k = 1; k < size; ++k)
      if (r[k]["args"] != r[0]["args"]) other_args.push_back(k);
    if (!other_args.empty()) {
      const int k = other_args.front();
      verdict = fmt::format(
          "{} {} started with other arguments than rank 0 (rank 0: `{}`; {}: `{}`): every rank of a genemask job "
          "must get the same command line",
          ranks_text(other_args), other_args.size() == 1 ? "was" : "were", joined(r[0]["args"]), where(k),
          joined(r[k]["args"]));
    }
    // 2. An error on any rank: each distinct message once, with the ranks that had it.
    if (verdict.empty()) {
      std::map<std::string, std::vector<int>> errors;
      for (int k = 0; k < size; ++k)
        if (!r[k]["error"].get<std::string>().empty()) errors[r[k]["error"].get<std::string>()].push_back(k);
      if (errors.size() == 1 && errors.begin()->second.size() == static_cast<size_t>(size)) {
        verdict = errors.begin()->first;  // every rank: as a single process says it
      } else {
        for (const auto& [msg, ranks] : errors) {
          const std::string who =
              ranks.size() == 1 ? where(ranks.front()) : ranks_text(ranks);
          verdict += (verdict.empty() ? "" : "; ") + who + ": " + msg;
        }
      }
    }
    // 3. The same spelling, another file: another node's copy, a stale mount, another cwd.
    if (verdict.empty()) {
      const auto& p0 = r[0]["paths"];
      for (size_t i = 0; i < p0.size() && verdict.empty(); ++i) {
        if (p0[i].get<std::string>().empty()) continue;
        std::vector<int> differ;
        for (int k = 1; k < size; ++k)
          if (r[k]["paths"][i] != p0[i]) differ.push_back(k);
        if (differ.empty()) continue;
        const int k = differ.front();
        verdict = fmt::format(
            "{} {} {} differently from rank 0 (rank 0: {}; {}: {}): every rank must read the same inputs, from a file "
            "system that all nodes share, in the same working directory",
            ranks_text(differ), differ.size() == 1 ? "sees" : "see", value_of(r[0]["args"][i].get<std::string>()),
            p0[i].get<std::string>(), where(k), r[k]["paths"][i].get<std::string>());
      }
    }
  }
  hpc::bcast_bytes(verdict, 0, MPI_COMM_WORLD);
  return verdict;
}

}  // namespace genemask::cli
