#include "io/fasta.hpp"

#include <unordered_map>
#include <utility>

#include "io/fasta_scan.hpp"

namespace genemask::io {

void fail_at(const FileInfo& info, uint64_t voffset, const std::string& message) {
  throw InputError(info.path, line_of_voffset(info, voffset), message);
}

void fail_cr_only(const FileInfo& info, uint64_t voffset) {
  fail_at(info, voffset,
          "a carriage return (CR, byte 0x0d) inside a header line: the file's line ends are CR only (classic Mac OS), "
          "so it reads as one header and no sequence; convert them to LF, e.g. tr '\\r' '\\n' < IN > OUT");
}

void fail_invalid_base(const FileInfo& info, uint64_t voffset, unsigned char byte, const std::string& record) {
  fail_at(info, voffset,
          fmt::format("invalid base {} in {} (allowed: ACGT, N and IUPAC codes, '-', '*')", describe_byte(byte),
                      record.empty() ? std::string("sequence") : fmt::format("record '{}'", record)));
}

std::string duplicate_record_problem(std::string_view name, std::string_view first_name, uint64_t first_line) {
  return fmt::format("duplicate record name '{}' (first seen on line {}); record names must be unique{}", name,
                     first_line,
                     name != first_name
                         ? " (outputs write a byte that is not UTF-8 as \\xNN, so the two are written alike)"
                         : "");
}

namespace {

class RecordHandler {
 public:
  RecordHandler(const FileInfo& info, const FastaVisitor& v) : info_(info), v_(v) {}

  void header(std::string_view name, uint64_t voff, bool) {
    end_record();
    auto [it, inserted] = seen_.emplace(record_name_key(name), std::make_pair(voff, records_.size()));
    if (!inserted)
      fail_at(info_, voff,
              duplicate_record_problem(name, records_[it->second.second].name,
                                       line_of_voffset(info_, it->second.first)));
    records_.push_back(FastaRecordSummary{std::string(name), 0});
    header_voff_ = voff;
    open_ = true;
    if (v_.on_record) v_.on_record(records_.back().name);
  }

  bool bases(const char* p, size_t n, uint64_t voff, bool) {
    if (records_.empty()) fail_at(info_, voff, "not a FASTA file: sequence before the first '>' header");
    buf_.clear();
    for (size_t i = 0; i < n; ++i) {
      const unsigned char c = static_cast<unsigned char>(p[i]);
      const uint8_t cls = kSeqClass[c];
      if (cls == kSkip) continue;
      if (cls == kInvalid) fail_invalid_base(info_, voff + i, c, records_.back().name);
      buf_.push_back(static_cast<char>(c >= 'a' && c <= 'z' ? c - 32 : c));
    }
    records_.back().length += buf_.size();
    if (!buf_.empty() && v_.on_bases) v_.on_bases(buf_);
    return true;
  }

  void end_owned() {}
  void begin_owned(bool, uint64_t) {}
  void block_done(uint64_t) {}
  void finish() { end_record(); }
  std::vector<FastaRecordSummary> take() { return std::move(records_); }

 private:
  void end_record() {
    if (!open_) return;
    if (records_.back().length == 0)
      fail_at(info_, header_voff_, fmt::format("record '{}' has no sequence", records_.back().name));
    open_ = false;
    if (v_.on_record_end) v_.on_record_end();
  }

  const FileInfo& info_;
  const FastaVisitor& v_;
  std::vector<FastaRecordSummary> records_;
  std::unordered_map<std::string, std::pair<uint64_t, size_t>> seen_;  // name key -> (voffset, record)
  std::string buf_;
  uint64_t header_voff_ = 0;
  bool open_ = false;
};

}  // namespace

std::vector<FastaRecordSummary> read_fasta(const std::string& path, const FastaVisitor& visitor) {
  FileInfo info = probe_file(path);
  RecordHandler h(info, visitor);
  scan_fasta(info, Ownership{}, h);
  note_fasta_end(info);  // read whole, without a word: its last record may be cut
  return h.take();
}

std::vector<std::pair<std::string, std::string>> read_fasta_all(const std::string& path) {
  std::vector<std::pair<std::string, std::string>> out;
  FastaVisitor v;
  v.on_record = [&](const std::string& name) { out.emplace_back(name, std::string()); };
  v.on_bases = [&](std::string_view b) { out.back().second.append(b); };
  read_fasta(path, v);
  return out;
}

}  // namespace genemask::io
