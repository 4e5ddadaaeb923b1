#include "io/text_source.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <isa-l/crc.h>
#include <isa-l/igzip_lib.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <initializer_list>
#include <fmt/format.h>
#include <vector>

#include "io/error.hpp"

namespace genemask::io {
namespace {

constexpr size_t kPlainBlockBytes = 4u << 20;
constexpr size_t kGzInBytes = 1u << 20;
constexpr size_t kGzOutBytes = 4u << 20;
constexpr size_t kBgzfHeaderBytes = 18;
constexpr size_t kBgzfMaxBlockBytes = 65536;

/// A heap buffer that is not zero-filled (the readers overwrite it before use).
class RawBuffer {
 public:
  explicit RawBuffer(size_t n) : p_(new char[n]), n_(n) {}
  char* data() { return p_.get(); }
  const char* data() const { return p_.get(); }
  size_t size() const { return n_; }

 private:
  std::unique_ptr<char[]> p_;
  size_t n_;
};

class Fd {
 public:
  explicit Fd(const std::string& path) : path_(path) {
    check_input_type(path);  // a FIFO would block open(2) until a writer comes, and cannot be read twice
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) throw InputError(path, fmt::format("cannot open: {}", open_error_reason(errno)));
  }
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  /// Reads up to n bytes at offset; returns the count (0 at EOF).
  size_t pread_some(void* buf, size_t n, uint64_t offset) const {
    for (;;) {
      ssize_t got = ::pread(fd_, buf, n, static_cast<off_t>(offset));
      if (got >= 0) return static_cast<size_t>(got);
      if (errno == EINTR) continue;
      throw InputError(path_, fmt::format("read error at byte {}: {}", offset, std::strerror(errno)));
    }
  }
  /// Reads exactly n bytes unless EOF comes first; returns the count.
  size_t pread_full(void* buf, size_t n, uint64_t offset) const {
    size_t done = 0;
    while (done < n) {
      size_t got = pread_some(static_cast<char*>(buf) + done, n - done, offset + done);
      if (got == 0) break;
      done += got;
    }
    return done;
  }
  uint64_t size() const {
    struct stat st {};
    if (::fstat(fd_, &st) != 0) throw InputError(path_, fmt::format("cannot stat: {}", std::strerror(errno)));
    return static_cast<uint64_t>(st.st_size);
  }

 private:
  std::string path_;
  int fd_ = -1;
};

class PlainReader final : public TextReader {
 public:
  PlainReader(const FileInfo& info, uint64_t start) : fd_(info.path), pos_(start), buf_(kPlainBlockBytes) {}
  bool next(TextBlock& out) override {
    size_t got = fd_.pread_full(buf_.data(), buf_.size(), pos_);
    if (got == 0) return false;
    out = TextBlock{buf_.data(), got, pos_};
    pos_ += got;
    return true;
  }
  uint64_t file_pos() const override { return pos_; }

 private:
  Fd fd_;
  uint64_t pos_;
  RawBuffer buf_;
};

/// Plain (possibly multi-member) gzip stream, decompressed from the start with ISA-L
/// (about 3x faster than zlib's inflate).
class GzipReader final : public TextReader {
 public:
  explicit GzipReader(const FileInfo& info) : info_(info), fd_(info.path), in_(kGzInBytes), out_(kGzOutBytes) {
    isal_inflate_init(&st_);
    st_.crc_flag = ISAL_GZIP;
  }

  bool next(TextBlock& out) override {
    if (finished_) return false;
    st_.next_out = reinterpret_cast<uint8_t*>(out_.data());
    st_.avail_out = static_cast<uint32_t>(out_.size());
    while (st_.avail_out > 0) {
      if (st_.block_state == ISAL_BLOCK_FINISH) {
        // End of a member. ISA-L may hold bytes of what follows in its bit buffer: give
        // them back, then start the next member (multi-member gzip) if there is one.
        const uint32_t held = static_cast<uint32_t>(st_.read_in_length / 8);
        uint8_t* next_in = st_.next_in - held;
        uint32_t avail_in = st_.avail_in + held;
        isal_inflate_reset(&st_);
        st_.crc_flag = ISAL_GZIP;
        st_.next_in = next_in;
        st_.avail_in = avail_in;
        in_member_ = false;
      }
      if (st_.avail_in == 0) {
        size_t got = fd_.pread_some(in_.data(), in_.size(), in_pos_);
        in_pos_ += got;
        if (got == 0) {
          if (in_member_) {
            throw InputError(info_.path, fmt::format("truncated gzip stream: the file ends inside compressed data "
                                                     "(at byte {}); re-download or re-compress the file",
                                                     in_pos_));
          }
          finished_ = true;
          break;
        }
        st_.next_in = reinterpret_cast<uint8_t*>(in_.data());
        st_.avail_in = static_cast<uint32_t>(got);
      }
      if (!in_member_ && st_.next_in[0] != 0x1f) {
        const uint64_t at = in_pos_ - st_.avail_in;
        if (const uint64_t zeros = zeros_to_the_end(at); zeros > 0)
          throw InputError(info_.path,
                           fmt::format("{} zero bytes follow the last gzip member (from byte {} to the end): a "
                                       "download that reserved the file's size and stopped leaves zeros where data "
                                       "should be, so the file may be cut short; download it again (a whole file so "
                                       "padded is read once the zeros are dropped: `gzip -dc F | gzip > F2`)",
                                       zeros, at));
        throw InputError(info_.path, fmt::format("corrupt gzip data near byte {}: data after the end of the gzip "
                                                 "stream is not gzip",
                                                 at));
      }
      in_member_ = true;
      const uint32_t before_in = st_.avail_in, before_out = st_.avail_out;
      int rc = isal_inflate(&st_);
      if (rc < 0) {
        uint64_t at = in_pos_ - st_.avail_in;
        throw InputError(info_.path, fmt::format("corrupt gzip data near byte {} ({})", at,
                                                 rc == ISAL_INCORRECT_CHECKSUM ? "CRC mismatch" : "invalid deflate data"));
      }
      if (st_.block_state != ISAL_BLOCK_FINISH && st_.avail_in == before_in && st_.avail_out == before_out &&
          st_.avail_in > 0)
        throw InputError(info_.path, fmt::format("corrupt gzip data near byte {}", in_pos_ - st_.avail_in));
    }
    size_t produced = out_.size() - st_.avail_out;
    if (produced == 0) return false;
    out = TextBlock{out_.data(), produced, upos_};
    upos_ += produced;
    return true;
  }
  uint64_t file_pos() const override { return in_pos_ - st_.avail_in; }

 private:
  /// The bytes from `at` to the file's end when every one of them is zero; else 0.
  uint64_t zeros_to_the_end(uint64_t at) const {
    std::vector<char> chunk(1 << 16);
    uint64_t pos = at;
    while (true) {
      const size_t got = fd_.pread_some(chunk.data(), chunk.size(), pos);
      if (got == 0) return pos - at;
      for (size_t i = 0; i < got; ++i)
        if (chunk[i] != 0) return 0;
      pos += got;
    }
  }

  FileInfo info_;
  Fd fd_;
  RawBuffer in_, out_;
  inflate_state st_{};
  uint64_t in_pos_ = 0, upos_ = 0;
  bool in_member_ = false, finished_ = false;
};

bool is_bgzf_header(const unsigned char* h) {
  return h[0] == 0x1f && h[1] == 0x8b && h[2] == 8 && (h[3] & 4) && h[10] == 6 && h[11] == 0 && h[12] == 'B' &&
         h[13] == 'C' && h[14] == 2 && h[15] == 0;
}
size_t bgzf_block_size(const unsigned char* h) { return static_cast<size_t>(h[16] | (h[17] << 8)) + 1; }

/// The empty block every BGZF file ends with (SAM/BAM specification, 4.1.2): without it the
/// file was cut, possibly at a block boundary, where nothing else would show it.
constexpr std::array<unsigned char, 28> kBgzfEof = {0x1f, 0x8b, 0x08, 0x04, 0x00, 0x00, 0x00, 0x00, 0x00, 0xff,
                                                    0x06, 0x00, 0x42, 0x43, 0x02, 0x00, 0x1b, 0x00, 0x03, 0x00,
                                                    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};

/// BGZF: one text block per BGZF block, starting at a block boundary.
class BgzfReader final : public TextReader {
 public:
  BgzfReader(const FileInfo& info, uint64_t start_coffset)
      : info_(info), fd_(info.path), pos_(start_coffset), buf_(4u << 20), out_(kBgzfMaxBlockBytes) {}

  bool next(TextBlock& out) override {
    for (;;) {
      if (!ensure(kBgzfHeaderBytes)) {
        if (avail() != 0)
          throw InputError(info_.path, fmt::format("truncated BGZF block header at byte {}", pos_));
        return false;
      }
      const auto* h = reinterpret_cast<const unsigned char*>(buf_.data() + off_);
      if (!is_bgzf_header(h))
        throw InputError(info_.path, fmt::format("corrupt BGZF data: no block header at byte {}", pos_));
      size_t bsize = bgzf_block_size(h);
      if (!ensure(bsize))
        throw InputError(info_.path, fmt::format("truncated BGZF block at byte {} (needs {} bytes, file has {}); "
                                                 "the file is incomplete",
                                                 pos_, bsize, avail()));
      const auto* b = reinterpret_cast<const unsigned char*>(buf_.data() + off_);
      uint32_t crc = static_cast<uint32_t>(b[bsize - 8] | (b[bsize - 7] << 8) | (b[bsize - 6] << 16)) |
                     (static_cast<uint32_t>(b[bsize - 5]) << 24);
      uint32_t isize = static_cast<uint32_t>(b[bsize - 4] | (b[bsize - 3] << 8) | (b[bsize - 2] << 16)) |
                       (static_cast<uint32_t>(b[bsize - 1]) << 24);
      if (isize > kBgzfMaxBlockBytes)
        throw InputError(info_.path, fmt::format("corrupt BGZF block at byte {}: size {}", pos_, isize));
      isal_inflate_init(&st_);
      st_.crc_flag = ISAL_DEFLATE;
      st_.next_in = const_cast<uint8_t*>(b + kBgzfHeaderBytes);
      st_.avail_in = static_cast<uint32_t>(bsize - kBgzfHeaderBytes - 8);
      st_.next_out = reinterpret_cast<uint8_t*>(out_.data());
      st_.avail_out = static_cast<uint32_t>(out_.size());
      int rc = isal_inflate_stateless(&st_);
      size_t produced = out_.size() - st_.avail_out;
      if (rc != ISAL_DECOMP_OK || produced != isize ||
          crc32_gzip_refl(0, reinterpret_cast<const uint8_t*>(out_.data()), produced) != crc)
        throw InputError(info_.path, fmt::format("corrupt BGZF block at byte {} (bad deflate data or CRC)", pos_));
      uint64_t block_start = pos_;
      off_ += bsize;
      pos_ += bsize;
      if (produced == 0) continue;  // empty blocks, e.g. the EOF marker
      out = TextBlock{out_.data(), produced, block_start << 16};
      return true;
    }
  }
  uint64_t file_pos() const override { return pos_; }

 private:
  size_t avail() const { return len_ - off_; }
  /// Makes at least n bytes available at off_ unless EOF; returns whether it succeeded.
  bool ensure(size_t n) {
    if (avail() >= n) return true;
    std::memmove(buf_.data(), buf_.data() + off_, avail());
    len_ = avail();
    off_ = 0;
    while (len_ < n) {
      size_t got = fd_.pread_some(buf_.data() + len_, buf_.size() - len_, pos_ + len_);
      if (got == 0) return false;
      len_ += got;
    }
    return true;
  }

  FileInfo info_;
  Fd fd_;
  uint64_t pos_;
  RawBuffer buf_;
  size_t off_ = 0, len_ = 0;
  RawBuffer out_;
  inflate_state st_{};
};

}  // namespace

const char* to_string(Compression c) {
  switch (c) {
    case Compression::none: return "none";
    case Compression::gzip: return "gzip";
    case Compression::bgzf: return "bgzf";
  }
  return "?";
}

namespace {
/// The compressed format whose magic bytes `h` (the file's first `n` bytes) begin with, other
/// than gzip; nullptr for none. bzip2's "BZh" is held to its block (or end-of-stream) magic
/// that follows, so a text that begins with "BZh1" is not taken for one.
const char* other_compression(const unsigned char* h, size_t n) {
  const auto starts = [&](std::initializer_list<unsigned char> m, size_t at = 0) {
    return n >= at + m.size() && std::equal(m.begin(), m.end(), h + at);
  };
  if (starts({'B', 'Z', 'h'}) && n >= 4 && h[3] >= '1' && h[3] <= '9' &&
      (starts({0x31, 0x41, 0x59, 0x26, 0x53, 0x59}, 4) || starts({0x17, 0x72, 0x45, 0x38, 0x50, 0x90}, 4)))
    return "bzip2";
  if (starts({0xfd, '7', 'z', 'X', 'Z', 0x00})) return "xz";
  if (starts({0x28, 0xb5, 0x2f, 0xfd})) return "zstd";
  if (starts({'P', 'K', 0x03, 0x04})) return "zip";
  return nullptr;
}
}  // namespace

void note_fasta_end(const FileInfo& info) {
  if (info.compression != Compression::none || info.size_bytes == 0) return;
  const Fd fd(info.path);
  char last = '\n';
  if (fd.pread_full(&last, 1, info.size_bytes - 1) == 1 && last != '\n')
    warn_unterminated_file(info.path, "its last record may be partial, and records after it missing,");
}

FileInfo probe_file(const std::string& path) {
  Fd fd(path);
  FileInfo info;
  info.path = path;
  info.size_bytes = fd.size();
  std::array<unsigned char, kBgzfHeaderBytes> h{};
  size_t got = fd.pread_full(h.data(), h.size(), 0);
  if (got >= 2 && h[0] == 0x1f && h[1] == 0x8b) {
    info.compression = (got == h.size() && is_bgzf_header(h.data())) ? Compression::bgzf : Compression::gzip;
  } else if (const char* other = other_compression(h.data(), got)) {
    // Read as text, its bytes were "invalid base" errors at lines of each rank's share.
    throw InputError(path, fmt::format("is compressed with {}, which genemask does not read (it reads plain text, gzip "
                                       "and bgzip); decompress it, or recompress it with bgzip",
                                       other));
  }
  if (info.compression == Compression::bgzf) {
    // Every rank checks the end, whichever blocks it reads: a rank whose share ends before a
    // cut would otherwise count its share of a truncated file as if it were whole.
    std::array<unsigned char, kBgzfEof.size()> tail{};
    const bool has_eof = info.size_bytes >= tail.size() &&
                         fd.pread_full(tail.data(), tail.size(), info.size_bytes - tail.size()) == tail.size() &&
                         tail == kBgzfEof;
    if (!has_eof)
      throw InputError(path, fmt::format("BGZF (bgzip) file without its end-of-file block: it is truncated (it ends "
                                         "at byte {}, cut before its end), or other data follows its blocks (a gzip "
                                         "file appended to it, as `cat a.fa.bgz b.fa.gz` makes); download or compress "
                                         "it again. A whole file written by an old bgzip without that block, or such a "
                                         "concatenation, can be re-compressed with `gzip -dc F | bgzip > F2`",
                                         info.size_bytes));
  }
  return info;
}

std::unique_ptr<TextReader> open_text(const FileInfo& info, uint64_t start_voffset) {
  switch (info.compression) {
    case Compression::none: return std::make_unique<PlainReader>(info, start_voffset);
    case Compression::bgzf: return std::make_unique<BgzfReader>(info, start_voffset >> 16);
    case Compression::gzip:
      if (start_voffset != 0) throw std::logic_error("plain gzip can only be read from the start");
      return std::make_unique<GzipReader>(info);
  }
  throw std::logic_error("unknown compression");
}

uint64_t bgzf_block_at_or_after(const FileInfo& info, uint64_t coffset) {
  if (coffset == 0) return 0;
  Fd fd(info.path);
  const uint64_t size = info.size_bytes;
  std::vector<unsigned char> win(256u << 10);
  std::array<unsigned char, kBgzfHeaderBytes> next{};
  for (uint64_t base = coffset; base < size; base += win.size() - kBgzfHeaderBytes) {
    size_t got = fd.pread_full(win.data(), win.size(), base);
    if (got < kBgzfHeaderBytes) break;
    for (size_t i = 0; i + kBgzfHeaderBytes <= got; ++i) {
      if (win[i] != 0x1f || !is_bgzf_header(&win[i])) continue;
      // Confirm: the next block must start right after this one (or the file ends there).
      uint64_t after = base + i + bgzf_block_size(&win[i]);
      if (after == size) return base + i;
      if (after < size && fd.pread_full(next.data(), next.size(), after) == next.size() &&
          is_bgzf_header(next.data()))
        return base + i;
    }
  }
  return size;
}

Ownership partition(const FileInfo& info, int rank, int nranks, uint64_t gzip_chunk_bytes) {
  Ownership own;
  own.rank = rank;
  own.nranks = nranks;
  auto cut = [&](int r) -> uint64_t {
    return static_cast<uint64_t>((static_cast<unsigned __int128>(info.size_bytes) * static_cast<unsigned>(r)) /
                                 static_cast<unsigned>(nranks));
  };
  switch (info.compression) {
    case Compression::none:
      own.begin = rank == 0 ? 0 : cut(rank);
      own.end = rank == nranks - 1 ? UINT64_MAX : cut(rank + 1);
      break;
    case Compression::bgzf:
      own.begin = rank == 0 ? 0 : bgzf_block_at_or_after(info, cut(rank)) << 16;
      own.end = rank == nranks - 1 ? UINT64_MAX : bgzf_block_at_or_after(info, cut(rank + 1)) << 16;
      break;
    case Compression::gzip:
      own.kind = Ownership::Kind::round_robin;
      own.chunk_bytes = gzip_chunk_bytes;
      break;
  }
  return own;
}

bool strip_utf8_bom(std::string& first_line) {
  if (first_line.compare(0, 3, "\xEF\xBB\xBF") != 0) return false;
  first_line.erase(0, 3);
  return true;
}

void check_no_zero_byte(const std::string& path, uint64_t lineno, std::string_view line) {
  const size_t at = line.find('\0');
  if (at == std::string_view::npos) return;
  const size_t zeros = line.find_first_not_of('\0', at);
  throw InputError(path, lineno,
                   fmt::format("{} zero byte(s) from byte {} of the line{}: a text table holds none; they are binary "
                               "data, or the zeros that a download which reserved the file's size and stopped leaves "
                               "where the rest should be: download the file again, or give the right one",
                               (zeros == std::string_view::npos ? line.size() : zeros) - at, at + 1,
                               zeros == std::string_view::npos ? " to its end" : ""));
}

bool for_each_line(const std::string& path, const std::function<void(const std::string&, uint64_t)>& fn,
                   const std::string& stop_prefix) {
  auto reader = open_text(probe_file(path), 0);
  std::string line;
  uint64_t lineno = 0;
  // False once the stop line is reached.
  auto process = [&]() {
    ++lineno;
    if (lineno == 1) strip_utf8_bom(line);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    check_no_zero_byte(path, lineno, line);
    if (!stop_prefix.empty() && line.rfind(stop_prefix, 0) == 0) return false;
    fn(line, lineno);
    line.clear();
    return true;
  };
  TextBlock b;
  while (reader->next(b)) {
    for (size_t i = 0; i < b.size; ++i) {
      if (b.data[i] != '\n') {
        line.push_back(b.data[i]);
      } else if (!process()) {
        return false;
      }
    }
  }
  if (line.empty()) return false;
  return process();  // false when it is the stop line
}

void for_each_table_line(const std::string& path, const std::function<void(const std::string&, uint64_t)>& fn,
                         std::string_view what) {
  uint64_t last = 0;
  const bool unterminated = for_each_line(path, [&](const std::string& line, uint64_t lineno) {
    last = lineno;
    fn(line, lineno);
  });
  if (unterminated) warn_unterminated_last_line(path, last, what);
}

uint64_t line_of_voffset(const FileInfo& info, uint64_t voffset) {
  auto reader = open_text(info, 0);
  TextBlock b;
  uint64_t lines = 1;
  while (reader->next(b)) {
    if (voffset < b.voff_base) break;
    size_t upto = voffset - b.voff_base < b.size ? static_cast<size_t>(voffset - b.voff_base) : b.size;
    for (size_t i = 0; i < upto; ++i) lines += b.data[i] == '\n';
    if (upto < b.size) break;
  }
  return lines;
}

}  // namespace genemask::io
