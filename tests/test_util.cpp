#include "test_util.hpp"

#include <sys/resource.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "io/error.hpp"

namespace genemask::test {

TempDir::TempDir() {
  std::string tmpl = (std::filesystem::temp_directory_path() / "genemask-test-XXXXXX").string();
  if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
  path_ = tmpl;
}
TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

void write_file(const std::string& path, const std::string& content) {
  std::ofstream o(path, std::ios::binary);
  o << content;
}

std::string read_file(const std::string& path) {
  std::ifstream i(path, std::ios::binary);
  std::stringstream ss;
  ss << i.rdbuf();
  return ss.str();
}

void write_gzip(const std::string& path, const std::string& content, int members) {
  std::string out;
  size_t per = content.size() / static_cast<size_t>(members) + 1;
  for (int m = 0; m < members; ++m) {
    size_t off = static_cast<size_t>(m) * per;
    if (off > content.size()) off = content.size();
    size_t len = std::min(per, content.size() - off);
    z_stream zs{};
    deflateInit2(&zs, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
    std::string buf(deflateBound(&zs, len) + 64, '\0');
    zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(content.data() + off));
    zs.avail_in = static_cast<uInt>(len);
    zs.next_out = reinterpret_cast<Bytef*>(buf.data());
    zs.avail_out = static_cast<uInt>(buf.size());
    deflate(&zs, Z_FINISH);
    buf.resize(zs.total_out);
    deflateEnd(&zs);
    out += buf;
  }
  write_file(path, out);
}

namespace {
void put16(std::string& s, uint32_t v) {
  s.push_back(static_cast<char>(v & 0xff));
  s.push_back(static_cast<char>((v >> 8) & 0xff));
}
void put32(std::string& s, uint32_t v) {
  put16(s, v & 0xffff);
  put16(s, v >> 16);
}
std::string bgzf_block(const char* data, size_t len) {
  z_stream zs{};
  deflateInit2(&zs, 6, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY);
  std::string comp(deflateBound(&zs, len) + 16, '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data));
  zs.avail_in = static_cast<uInt>(len);
  zs.next_out = reinterpret_cast<Bytef*>(comp.data());
  zs.avail_out = static_cast<uInt>(comp.size());
  deflate(&zs, Z_FINISH);
  comp.resize(zs.total_out);
  deflateEnd(&zs);
  std::string b = {'\x1f', '\x8b', '\x08', '\x04', 0, 0, 0, 0, 0, '\xff', 6, 0, 'B', 'C', 2, 0};
  put16(b, static_cast<uint32_t>(comp.size() + 25));  // BSIZE = total block size - 1
  b += comp;
  put32(b, static_cast<uint32_t>(crc32(0, reinterpret_cast<const Bytef*>(data), static_cast<uInt>(len))));
  put32(b, static_cast<uint32_t>(len));
  return b;
}
}  // namespace

void write_bgzf(const std::string& path, const std::string& content, size_t block_bytes) {
  std::string out;
  for (size_t off = 0; off < content.size(); off += block_bytes)
    out += bgzf_block(content.data() + off, std::min(block_bytes, content.size() - off));
  out += bgzf_block("", 0);
  write_file(path, out);
}

std::vector<std::string> Genome::upper() const {
  std::vector<std::string> out;
  for (const auto& r : records) {
    std::string s = r.second;
    for (auto& c : s)
      if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 32);
    out.push_back(s);
  }
  return out;
}

Genome random_genome(std::mt19937_64& rng, const GenomeSpec& spec) {
  Genome g;
  std::uniform_int_distribution<size_t> len(spec.min_len, spec.max_len);
  std::uniform_int_distribution<int> pct(0, 99);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  const char* bases = "ACGT";
  const char* iupac = "RYSWKMBDHV";
  const std::string nl = spec.crlf ? "\r\n" : "\n";
  for (int r = 0; r < spec.records; ++r) {
    size_t n = len(rng);
    std::string s;
    bool lower = false;
    while (s.size() < n) {
      int p = pct(rng);
      if (spec.lowercase && p < 2) lower = !lower;
      const double u = unit(rng);
      char c;
      if (spec.gaps && u < spec.gap_rate) {
        size_t run = 1 + rng() % 40;  // an N gap
        for (size_t i = 0; i < run && s.size() < n; ++i) s.push_back(lower ? 'n' : 'N');
        continue;
      } else if (spec.gaps && u < spec.gap_rate + spec.iupac_rate) {
        c = iupac[rng() % 10];
      } else {
        c = bases[rng() % 4];
      }
      s.push_back(lower ? static_cast<char>(c + 32) : c);
    }
    std::string name = "rec" + std::to_string(r);
    g.records.emplace_back(name, s);
    g.fasta += ">" + name + " description " + std::to_string(r) + nl;
    if (spec.blank_lines && r > 0) g.fasta += nl;
    size_t w = spec.line_width > 0 ? static_cast<size_t>(spec.line_width)
               : spec.line_width == 0 ? 1 + rng() % 120
                                      : std::max<size_t>(s.size(), 1);
    for (size_t off = 0; off < s.size(); off += w) g.fasta += s.substr(off, w) + nl;
    if (spec.blank_lines) g.fasta += nl;
  }
  return g;
}

NoMoreFiles::NoMoreFiles() {
  struct rlimit rl {};
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0) throw std::runtime_error("getrlimit failed");
  old_soft_ = rl.rlim_cur;
  const int fd = ::dup(0);  // the lowest free descriptor
  if (fd < 0) throw std::runtime_error("dup failed");
  ::close(fd);
  limit_ = static_cast<uint64_t>(fd);
  rl.rlim_cur = static_cast<rlim_t>(fd);
  if (::setrlimit(RLIMIT_NOFILE, &rl) != 0) throw std::runtime_error("setrlimit failed");
}

NoMoreFiles::~NoMoreFiles() {
  struct rlimit rl {};
  ::getrlimit(RLIMIT_NOFILE, &rl);
  rl.rlim_cur = static_cast<rlim_t>(old_soft_);
  ::setrlimit(RLIMIT_NOFILE, &rl);
}

std::string progress_problem(const std::vector<double>& seen) {
  if (seen.empty()) return "no progress reported";
  for (size_t i = 0; i < seen.size(); ++i) {
    if (!(seen[i] >= 0 && seen[i] <= 1)) return "value " + std::to_string(i) + " is " + std::to_string(seen[i]);
    if (i > 0 && seen[i] < seen[i - 1])
      return "value " + std::to_string(i) + " (" + std::to_string(seen[i]) + ") is below the one before (" +
             std::to_string(seen[i - 1]) + ")";
  }
  if (seen.back() < 1 - 1e-9) return "ends at " + std::to_string(seen.back());
  return std::string();
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const io::InputError& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace genemask::test
