#include "model/inputs.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <new>
#include <stdexcept>
#include <string_view>

#include "genemask/corpus/tokenizer.hpp"
#include "io/error.hpp"
#include "io/fasta.hpp"
#include "io/task_table.hpp"
#include "io/text_source.hpp"
#include "model/resources.hpp"

namespace genemask::model {

namespace {

/// What reading `path` holds in memory at most: its bases (every rank reads all of them),
/// and while a record grows, the string it grows into (up to twice its bases). A compressed
/// file is not measured here (its size says little); running out of memory while reading it
/// is reported by read_sequences.
void check_read_memory(const std::string& path, bool compressed) {
  std::error_code ec;
  const uintmax_t bytes = std::filesystem::file_size(path, ec);
  if (ec || compressed) return;
  check_memory(path, 2 * static_cast<uint64_t>(bytes),
               fmt::format("reading its {} bytes of sequence (each rank holds all of them)", bytes),
               "split it into smaller files, or run where more memory is available (a Slurm job: --mem)");
}

}  // namespace

bool has_acgt_kmer(std::string_view seq) {
  size_t run = 0;
  for (char c : seq) {
    switch (c) {
      case 'A': case 'C': case 'G': case 'T': case 'a': case 'c': case 'g': case 't':
        if (++run == static_cast<size_t>(kTokenK)) return true;
        break;
      default: run = 0;
    }
  }
  return false;
}

bool unknown_only_window(std::string_view seq, int64_t start, int64_t len) {
  return !has_acgt_kmer(seq.substr(static_cast<size_t>(start), static_cast<size_t>(len + kTokenK - 1)));
}

void warn_unknown_only_windows(uint64_t windows, const std::string& path, const std::string& what) {
  if (windows == 0) return;
  std::cerr << fmt::format("warning: {}: {} window(s) of long sequences have tokens that are all [UNK] (a run of N or "
                           "other codes as long as a window): their {} say nothing of their bases and are averaged "
                           "into their sequences' with the others (unknown_only_windows in the summary); trim such "
                           "runs, or cut the sequences at them",
                           path, windows, what)
            << std::endl;
}

void warn_unknown_only(const SequenceInputs& in, const std::string& path, const std::string& what) {
  if (in.unknown_only.empty()) return;
  const size_t i = in.unknown_only.front();
  const std::string first =
      in.lines[i] ? fmt::format("{}:{}", path, in.lines[i]) : fmt::format("record '{}' of {}", in.ids[i], path);
  std::cerr << fmt::format("warning: {} of the {} sequences ({} the first) have no 6-mer of A, C, G and T alone: their "
                           "tokens are all [UNK], so their {} say nothing of their bases (unknown_only_sequences in "
                           "the summary)",
                           in.unknown_only.size(), in.seqs.size(), first, what)
            << std::endl;
}

SequenceInputs read_sequences(const std::string& path) {
  try {
    return read_sequences_unchecked(path);
  } catch (const std::bad_alloc&) {
    std::error_code ec;
    const uintmax_t bytes = std::filesystem::file_size(path, ec);
    const MemoryBudget m = available_memory();
    throw io::InputError(path, fmt::format("ran out of memory while reading its {} bytes ({:.2f} GiB were available, "
                                           "{}); split it into smaller files, or run where more memory is available",
                                           ec ? 0 : bytes, static_cast<double>(m.bytes) / (1 << 30), m.limited_by));
  }
}

SequenceInputs read_sequences_unchecked(const std::string& path) {
  io::check_input_type(path);
  std::ifstream in(path);
  if (!in) throw io::InputError(path, "cannot open");
  char c = 0;
  while (in.get(c) && (c == '\n' || c == '\r' || c == ' ')) {
  }
  // A byte-order mark before '>' (an editor's "UTF-8 with BOM"): the file is a FASTA whose
  // first record the FASTA reader would not find; said, rather than read as a table.
  if (c == '\xEF') {
    char bom[3] = {0, 0, 0};
    if (in.get(bom[0]) && in.get(bom[1]) && bom[0] == '\xBB' && bom[1] == '\xBF' && in.get(bom[2]) && bom[2] == '>')
      throw io::InputError(path, std::string(io::kFastaByteOrderMarkProblem));
  }
  SequenceInputs out;
  const bool compressed = io::probe_file(path).compression != io::Compression::none;
  check_read_memory(path, compressed);
  if (c == '>' || compressed) {
    // The task tables' rules: bases (IUPAC codes included), and some A, C, G or T. A genome's
    // FASTA may hold alignment gaps ('-') and stops ('*'); a sequence to score may not: each
    // would become an [UNK] 6-mer and be scored as if it were sequence.
    bool any_base = false;
    for (auto& [name, seq] : io::read_fasta_all(path)) {
      const size_t bad = io::first_non_base(seq);
      if (bad != std::string::npos) {
        const bool gap = seq[bad] == '-' || seq[bad] == '*';
        throw io::InputError(path, fmt::format("record '{}': {}{}", name, io::non_base_problem(seq, bad),
                                               gap ? ": alignment gaps and stops are not sequence; remove them" : ""));
      }
      any_base = any_base || seq.find_first_of("ACGTacgt") != std::string::npos;
      out.ids.push_back(name);
      out.seqs.push_back(std::move(seq));
      out.lines.push_back(0);
    }
    if (!out.seqs.empty() && !any_base)
      throw io::InputError(path, fmt::format("none of its {} records has an A, C, G or T (all N or other IUPAC codes): "
                                             "nothing to score; is this the file you meant?",
                                             out.seqs.size()));
  } else {
    for (auto& r : io::read_task_table(path, /*label_required=*/false)) {
      out.ids.push_back(fmt::format("line{}", r.line));
      out.seqs.push_back(std::move(r.sequence));
      out.lines.push_back(r.line);
    }
  }
  for (size_t i = 0; i < out.seqs.size(); ++i) {
    if (!has_acgt_kmer(out.seqs[i])) out.unknown_only.push_back(i);
    if (out.seqs[i].size() >= 6) continue;
    const std::string msg =
        fmt::format("sequence '{}' has {} bases; at least 6 (one 6-mer) are needed", out.ids[i], out.seqs[i].size());
    if (out.lines[i]) throw io::InputError(path, out.lines[i], msg);
    throw io::InputError(path, msg);
  }
  return out;
}

std::vector<int64_t> window_starts(int64_t n, int64_t width, int64_t stride) {
  if (width < 1 || stride < 1 || stride > width)
    throw std::invalid_argument(fmt::format("window stride {} must be in 1..{}", stride, width));
  std::vector<int64_t> starts{0};
  while (starts.back() + width < n) starts.push_back(std::min(starts.back() + stride, n - width));
  return starts;
}

int64_t window_stride(int64_t stride_option, int64_t width) {
  const int64_t stride = stride_option > 0 ? stride_option : std::max<int64_t>(1, width / 2);
  if (stride > width)
    throw std::invalid_argument(fmt::format("--stride {} is longer than a window ({} tokens)", stride, width));
  return stride;
}

WindowPlan plan_windows(const std::vector<std::string>& seqs, const std::vector<size_t>& mine, int64_t width,
                        int64_t stride) {
  WindowPlan p;
  p.per_sequence.resize(mine.size());
  for (size_t j = 0; j < mine.size(); ++j) {
    const std::string& q = seqs[mine[j]];
    const int64_t n = static_cast<int64_t>(q.size()) - (kTokenK - 1);  // >= 1: read_sequences checks
    const auto starts = window_starts(n, width, stride);
    p.per_sequence[j] = static_cast<uint32_t>(starts.size());
    p.long_sequences += starts.size() > 1;
    for (int64_t st : starts) {
      p.windows.push_back({j, st, std::min(width, n - st)});
      p.unknown_only_windows += starts.size() > 1 && unknown_only_window(q, st, p.windows.back().len);
    }
  }
  return p;
}

void fill_window_rows(const std::vector<std::string>& seqs, const std::vector<size_t>& mine, const Window* w,
                      int64_t rows, int64_t cols, int64_t* ids, int64_t* mask) {
  for (int64_t r = 0; r < rows; ++r) {
    const Window& x = w[r];
    if (x.len + 2 > cols) throw std::invalid_argument(fmt::format("a window of {} tokens in rows of {}", x.len, cols));
    const auto t = tokenize(std::string_view(seqs[mine[x.seq]])
                                .substr(static_cast<size_t>(x.start), static_cast<size_t>(x.len + kTokenK - 1)));
    int64_t* id = ids + r * cols;
    id[0] = kCls;
    for (int64_t k = 0; k < x.len; ++k) id[k + 1] = t[static_cast<size_t>(k)];
    id[x.len + 1] = kSep;
    std::fill(mask + r * cols, mask + r * cols + x.len + 2, int64_t{1});
  }
}

}  // namespace genemask::model
