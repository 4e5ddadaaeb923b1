// genemask._core: the Python binding of genemask's C++ core (nanobind). The Python layer
// (genemask/__init__.py, genemask/hf.py) checks dtypes and converts inputs; this file checks
// shapes and values, runs the core with the GIL released, and returns numpy arrays.
#include <unistd.h>
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/filesystem.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "genemask/corpus/genome_sampling.hpp"
#include "genemask/corpus/masking.hpp"
#include "genemask/corpus/masking_tables.hpp"
#include "genemask/corpus/tokenizer.hpp"
#include "genemask/kmer/kmer.hpp"
#include "genemask/kmer/kmer_count.hpp"
#include "genemask/kmer/pmi.hpp"
#include "genemask/version.hpp"
#include "io/count_checks.hpp"
#include "io/error.hpp"
#include "io/rank_tables.hpp"
#include "io/shard_manifest.hpp"
#include "io/task_table.hpp"
#include "io/text_source.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace genemask::py {
namespace {

template <class T>
using Array = nb::ndarray<nb::numpy, T>;
template <class T>
using In2D = nb::ndarray<const T, nb::ndim<2>, nb::c_contig, nb::device::cpu>;
template <class T>
using In1D = nb::ndarray<const T, nb::ndim<1>, nb::c_contig, nb::device::cpu>;

/// A numpy array that owns `v` (moved to the heap; freed with the array).
template <class T>
Array<T> to_numpy(std::vector<T>&& v, std::vector<size_t> shape) {
  auto* heap = new std::vector<T>(std::move(v));
  nb::capsule owner(heap, [](void* p) noexcept { delete static_cast<std::vector<T>*>(p); });
  return Array<T>(heap->data(), shape.size(), shape.data(), owner);
}
/// Flags as a numpy bool array (std::vector<bool> has no storage to share).
Array<bool> to_numpy_flags(const std::vector<uint8_t>& flags) {
  static_assert(sizeof(bool) == 1);
  auto* heap = new std::vector<uint8_t>(flags);
  nb::capsule owner(heap, [](void* p) noexcept { delete static_cast<std::vector<uint8_t>*>(p); });
  const size_t n = heap->size();
  return Array<bool>(reinterpret_cast<bool*>(heap->data()), 1, &n, owner);
}
template <class T>
Array<T> to_numpy(std::vector<T>&& v) {
  const size_t n = v.size();
  return to_numpy(std::move(v), {n});
}

// ---------------------------------------------------------------- tokenizer

/// The tokens of a sequence given as text, by the CLI's rule for a table's sequence: bases
/// (A, C, G, T, N and IUPAC codes, any case), or DNABERT's 6-mer text ("ACGTAC CGTACG ...")
/// when it has a space. Any other character (a line end, a digit, U) would make [UNK] 6-mers
/// without a word: a ValueError naming the sequence and the position; so is a sequence of
/// fewer than 6 bases (no 6-mer).
std::vector<uint16_t> tokens_of_text(const std::string& text, std::optional<size_t> index) {
  try {
    const std::string bases = io::sequence_text_to_bases(text);
    if (bases.size() < 6)  // no 6-mer: the CLI refuses such a sequence (it was [CLS] [SEP] here)
      throw std::invalid_argument(fmt::format("a sequence of {} bases: at least 6 (one 6-mer) are needed", bases.size()));
    return tokenize(bases);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(fmt::format("{}{}{}", index ? fmt::format("sequence {}: ", *index) : std::string(),
                                            text.find(' ') != std::string::npos ? "6-mer text (it has a space): " : "",
                                            e.what()));
  }
}

Array<int64_t> tokenize_one(const std::string& bases, bool add_special_tokens) {
  std::vector<uint16_t> ids;
  {
    nb::gil_scoped_release unlocked;
    ids = tokens_of_text(bases, std::nullopt);
    if (add_special_tokens) ids = frame(ids);
  }
  return to_numpy(std::vector<int64_t>(ids.begin(), ids.end()));
}

/// Rows padded with [PAD] to the longest (or to `length`); sequences with more tokens than
/// `length` are an error unless `truncate` (then the tokens are cut, [SEP] kept).
std::pair<Array<int64_t>, Array<int64_t>> tokenize_batch(const std::vector<std::string>& seqs, bool add_special_tokens,
                                                         std::optional<size_t> length, bool truncate) {
  std::vector<std::vector<uint16_t>> rows(seqs.size());
  size_t cols = 0;
  std::vector<int64_t> ids, mask;
  {
    nb::gil_scoped_release unlocked;
    const size_t extra = add_special_tokens ? 2 : 0;
    for (size_t i = 0; i < seqs.size(); ++i) {
      rows[i] = tokens_of_text(seqs[i], i);
      if (length && rows[i].size() + extra > *length) {
        if (!truncate)
          throw std::invalid_argument(fmt::format("sequence {} has {} tokens, more than max_length={} allows; pass "
                                                  "truncation=True to cut it",
                                                  i, rows[i].size() + extra, *length));
        if (*length < extra) throw std::invalid_argument(fmt::format("max_length={} leaves no room for [CLS] and [SEP]", *length));
        rows[i].resize(*length - extra);
      }
      if (add_special_tokens) rows[i] = frame(rows[i]);
      cols = std::max(cols, rows[i].size());
    }
    if (length) cols = *length;
    // Two int64 arrays of rows x cols: a max_length far past any model (2**40) is named, not
    // a bare std::bad_alloc.
    const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
    const double need = 16.0 * static_cast<double>(rows.size()) * static_cast<double>(cols);
    const double have = pages > 0 && page > 0 ? static_cast<double>(pages) * static_cast<double>(page) : 0;
    if (have > 0 && need > have)
      throw std::invalid_argument(fmt::format(
          "max_length={} pads {} sequence(s) to {} tokens: {:.1f} GiB for input_ids and attention_mask, more than this "
          "machine's {:.1f} GiB of memory; pass the max_length of your model (512 for DNABERT-6 models)",
          length ? *length : cols, rows.size(), cols, need / (1u << 30), have / (1u << 30)));
    ids.assign(rows.size() * cols, kPad);
    mask.assign(rows.size() * cols, 0);
    for (size_t i = 0; i < rows.size(); ++i)
      for (size_t j = 0; j < rows[i].size(); ++j) {
        ids[i * cols + j] = rows[i][j];
        mask[i * cols + j] = 1;
      }
  }
  return {to_numpy(std::move(ids), {rows.size(), cols}), to_numpy(std::move(mask), {rows.size(), cols})};
}

std::vector<uint16_t> checked_ids(const In1D<int64_t>& ids) {
  std::vector<uint16_t> out(ids.shape(0));
  const int64_t* p = ids.data();
  for (size_t i = 0; i < out.size(); ++i) {
    if (p[i] < 0 || p[i] >= kVocabSize)
      throw std::invalid_argument(fmt::format("token id {} at position {} is outside the vocabulary (0..{})", p[i], i,
                                          kVocabSize - 1));
    out[i] = static_cast<uint16_t>(p[i]);
  }
  return out;
}

// ---------------------------------------------------------------- tables

/// A ranking table in memory, rank order, with the file it came from (for messages).
template <class Row>
struct Table {
  std::vector<Row> rows;
  std::string source;
};

/// npmi.tsv: the GRANK list.
struct NpmiTable : Table<io::NpmiRow> {
  int k() const { return rows.empty() ? 0 : static_cast<int>(rows.front().kmer.size()); }
};

/// pmi_vocab.tsv: the Gene-PMI-VOC vocabulary.
struct PmiVocab : Table<io::PmiVocabRow> {};

template <class T, class Row>
T load_table(const std::string& path, std::vector<Row> (*read)(const std::string&)) {
  T t;
  {
    nb::gil_scoped_release unlocked;
    t.rows = read(path);
  }
  t.source = path;
  return t;
}

/// Pickling (a DataLoader's spawned workers, copy.deepcopy): the source and the rows, every
/// value exact (a Python float is the double).
using NpmiState = std::tuple<std::string, std::vector<std::tuple<uint64_t, std::string, uint64_t, double, double, bool>>>;
using PmiVocabState = std::tuple<std::string, std::vector<std::tuple<uint64_t, std::string, uint64_t, double>>>;

NpmiState npmi_state(const NpmiTable& t) {
  NpmiState s{t.source, {}};
  for (const auto& r : t.rows) std::get<1>(s).emplace_back(r.rank, r.kmer, r.count, r.pmi, r.npmi, r.below_min_count);
  return s;
}

void set_npmi_state(NpmiTable& t, const NpmiState& s) {
  new (&t) NpmiTable();
  t.source = std::get<0>(s);
  for (const auto& [rank, kmer, count, pmi, npmi, below] : std::get<1>(s))
    t.rows.push_back(io::NpmiRow{rank, kmer, count, pmi, npmi, below});
}

PmiVocabState pmi_vocab_state(const PmiVocab& v) {
  PmiVocabState s{v.source, {}};
  for (const auto& r : v.rows) std::get<1>(s).emplace_back(r.rank, r.kmer, r.count, r.pmi);
  return s;
}

void set_pmi_vocab_state(PmiVocab& v, const PmiVocabState& s) {
  new (&v) PmiVocab();
  v.source = std::get<0>(s);
  for (const auto& [rank, kmer, count, pmi] : std::get<1>(s)) v.rows.push_back(io::PmiVocabRow{rank, kmer, count, pmi});
}

template <class T>
std::vector<std::string> kmers(const T& t) {
  std::vector<std::string> v;
  v.reserve(t.rows.size());
  for (const auto& r : t.rows) v.push_back(r.kmer);
  return v;
}

template <class T>
size_t table_size(const T& t) {
  return t.rows.size();
}

template <class Row, class T, class Get>
Array<T> column(const std::vector<Row>& rows, Get get) {
  std::vector<T> v;
  v.reserve(rows.size());
  for (const auto& r : rows) v.push_back(static_cast<T>(get(r)));
  return to_numpy(std::move(v));
}

// ---------------------------------------------------------------- k-mers

/// DIR/manifest.json read and checked as `pretrain` reads it (io::read_manifest: the output
/// marker, every field, each shard once, the totals; and the vocabulary), as a dict shaped
/// like the file (a null "genes", a genome's null "weight" where the file has none).
nb::dict read_manifest(const std::string& dir) {
  const io::ShardManifest m = io::read_manifest(dir);
  check_vocab_sha256(dir + "/manifest.json", m.vocab_sha256);
  const auto text_or_none = [](const std::string& s) -> nb::object {
    return s.empty() ? nb::object(nb::none()) : nb::object(nb::str(s.c_str()));
  };
  const auto split_pair = [](uint64_t train, uint64_t valid) {
    nb::dict d;
    d["train"] = train;
    d["valid"] = valid;
    return d;
  };
  nb::dict d, recipe;
  d["format"] = io::kManifestFormat;
  d["format_version"] = io::kManifestVersion;
  d["source_genome"] = m.source_genome;
  d["genome_bytes"] = m.genome_bytes;
  d["genes"] = text_or_none(m.genes);
  d["seed"] = m.seed;
  d["valid_fraction"] = m.valid_fraction;
  recipe["max_offset"] = m.max_offset;
  recipe["full_prob"] = m.full_prob;
  recipe["min_tokens"] = m.min_tokens;
  recipe["max_tokens"] = m.max_tokens;
  d["recipe"] = recipe;
  d["vocab_sha256"] = m.vocab_sha256;
  d["command_line"] = m.command_line;
  d["genemask_version"] = m.genemask_version;
  d["candidates"] = m.candidates;
  d["dropped_non_acgt"] = m.dropped_non_acgt;
  nb::list chroms, genomes, shards;
  for (const auto& c : m.chromosomes) {
    nb::dict e;
    e["name"] = c.name;
    e["length"] = c.length;
    e["genome"] = c.genome;
    chroms.append(e);
  }
  for (const auto& g : m.genomes) {
    nb::dict e;
    e["name"] = g.name;
    e["path"] = g.path;
    e["genes"] = text_or_none(g.genes);
    e["file_bytes"] = g.file_bytes;
    e["mtime_ns"] = g.mtime_ns;
    e["weight"] = g.weight > 0 ? nb::object(nb::float_(g.weight)) : nb::none();
    e["records"] = g.records;
    e["bases"] = g.bases;
    e["samples"] = split_pair(g.samples_train, g.samples_valid);
    e["tokens"] = split_pair(g.tokens_train, g.tokens_valid);
    genomes.append(e);
  }
  for (const auto& s : m.shards) {
    nb::dict e;
    e["file"] = s.file;
    e["split"] = s.split;
    e["sha256"] = s.sha256;
    e["samples"] = s.samples;
    e["tokens"] = s.tokens;
    e["first_sample"] = s.first_sample;
    e["last_sample"] = s.last_sample;
    shards.append(e);
  }
  d["chromosomes"] = chroms;
  if (!m.genomes.empty()) d["genomes"] = genomes;
  d["shards"] = shards;
  return d;
}

/// A progress callback for long work run with the GIL released: about every 0.1 s it takes the
/// GIL and runs Python's signal handlers, so that Ctrl-C (KeyboardInterrupt, or a handler's
/// exception) stops the work there, not after it has run to its end; the exception leaves the
/// work (which writes nothing) and reaches the caller.
ProgressFn interruptible() {
  using clock = std::chrono::steady_clock;
  auto last = std::make_shared<clock::time_point>(clock::now());
  return [last](uint64_t) {
    const auto now = clock::now();
    if (now - *last < std::chrono::milliseconds(100)) return;
    *last = now;
    nb::gil_scoped_acquire locked;
    if (PyErr_CheckSignals() != 0) throw nb::python_error();
  };
}

std::vector<Array<uint64_t>> count_kmers(const std::string& path, int kmax) {
  if (kmax < 1 || kmax > kMaxDenseK)
    throw std::invalid_argument(fmt::format("kmax must be in 1..{}, got {}", kMaxDenseK, kmax));
  KmerCounts counts;
  {
    nb::gil_scoped_release unlocked;
    const io::FileInfo info = io::probe_file(path);
    CountOptions opts;
    opts.kmax = kmax;
    RankCounts rc = count_owned(info, io::partition(info, 0, 1), opts, interruptible());
    stitch_records(info, rc.segments);  // the CLI's checks: duplicate names, empty records
    counts = finalize_counts(rc);
  }
  std::vector<Array<uint64_t>> out;
  for (int k = 1; k <= kmax; ++k) out.push_back(to_numpy(std::move(counts.counts[static_cast<size_t>(k)])));
  return out;
}

/// counts[i] are the (i+1)-mer counts, 4^(i+1) of them, in counter-code order.
std::vector<std::vector<uint64_t>> checked_counts(const std::vector<In1D<uint64_t>>& counts, int kneeded) {
  if (static_cast<int>(counts.size()) < kneeded)
    throw std::invalid_argument(fmt::format("k={} needs the counts of k = 1..{}; got k = 1..{}", kneeded, kneeded,
                                            counts.size()));
  std::vector<std::vector<uint64_t>> c(static_cast<size_t>(kneeded) + 1);
  for (int k = 1; k <= kneeded; ++k) {
    const auto& a = counts[static_cast<size_t>(k - 1)];
    if (a.shape(0) != num_kmers(k))
      throw std::invalid_argument(fmt::format("counts of k={} must have 4^{} = {} entries, got {}", k, k, num_kmers(k),
                                              a.shape(0)));
    c[static_cast<size_t>(k)].assign(a.data(), a.data() + a.shape(0));
  }
  // The CLI's checks of counts.h5: tables of one genome, summing within 64 bits.
  io::check_count_tables("counts", c);
  return c;
}

NpmiTable npmi(const std::vector<In1D<uint64_t>>& counts, int k, uint64_t min_count) {
  if (k < 2 || k > kMaxDenseK) throw std::invalid_argument(fmt::format("k must be in 2..{}, got {}", kMaxDenseK, k));
  if (min_count < 2) throw std::invalid_argument(fmt::format("min_count must be at least 2, got {}", min_count));
  auto c = checked_counts(counts, k);
  NpmiTable t;
  t.source = "<counts>";
  nb::gil_scoped_release unlocked;
  PmiCalculator calc(c, k);
  for (const auto& e : npmi_ranking(calc, k, min_count))
    t.rows.push_back(io::NpmiRow{e.rank, decode_kmer(e.code, k), e.count, e.pmi, e.npmi, e.below_min_count});
  return t;
}

PmiVocab pmi_vocab(const std::vector<In1D<uint64_t>>& counts, int kmin, int kmax, uint64_t min_count, uint64_t size) {
  if (kmin < 2 || kmax > kMaxDenseK || kmin > kmax)
    throw std::invalid_argument(fmt::format("need 2 <= kmin <= kmax <= {}, got kmin={} kmax={}", kMaxDenseK, kmin, kmax));
  if (size == 0) throw std::invalid_argument("size must be positive");
  auto c = checked_counts(counts, kmax);
  PmiVocab v;
  v.source = "<counts>";
  nb::gil_scoped_release unlocked;
  PmiCalculator calc(c, kmax);
  for (const auto& e : pmi_vocabulary(calc, kmin, kmax, min_count, size))
    v.rows.push_back(io::PmiVocabRow{e.rank, decode_kmer(e.code, e.k), e.count, e.pmi});
  return v;
}

// ---------------------------------------------------------------- masking

class PyMasker {
 public:
  PyMasker(const std::string& strategy, const NpmiTable* table, const PmiVocab* vocab, double center_prob,
           double mask_token_prob, double random_token_prob)
      : masker_(config(strategy, table, vocab, center_prob, mask_token_prob, random_token_prob)) {}

  /// input_ids [B, L]; attention_mask [B, L] marks each row's real tokens, a prefix (None:
  /// the tokens before the first [PAD]). A row may start with [CLS] and end with [SEP];
  /// between them only 6-mer ids and [UNK].
  std::pair<Array<int64_t>, Array<int64_t>> mask(const In2D<int64_t>& input_ids,
                                                 const std::optional<In2D<int64_t>>& attention_mask, uint64_t seed,
                                                 uint64_t epoch, const In1D<int64_t>& sample_index) {
    const size_t rows = input_ids.shape(0), cols = input_ids.shape(1);
    if (sample_index.shape(0) != rows)
      throw std::invalid_argument(fmt::format("sample_index has {} entries for {} rows", sample_index.shape(0), rows));
    if (attention_mask && (attention_mask->shape(0) != rows || attention_mask->shape(1) != cols))
      throw std::invalid_argument(fmt::format("attention_mask has shape ({}, {}), input_ids ({}, {})",
                                              attention_mask->shape(0), attention_mask->shape(1), rows, cols));
    const int64_t* att = attention_mask ? attention_mask->data() : nullptr;
    std::vector<int64_t> ids, labels;
    {
      nb::gil_scoped_release unlocked;  // the arguments hold their arrays alive meanwhile
      const int64_t* in = input_ids.data();
      ids.resize(rows * cols);
      labels.resize(rows * cols);
      // The checks below are written as reductions over whole rows, which the compiler
      // vectorises; the offending position is looked for only when a check fails.
      std::vector<uint16_t> row16(cols);
      for (size_t r = 0; r < rows; ++r) {
        const int64_t* row = in + r * cols;
        // ids to 16 bits, and whether any had bits above 15 (negative, or >= 32768) ...
        uint64_t high = 0;
        for (size_t j = 0; j < cols; ++j) {
          high |= static_cast<uint64_t>(row[j]) & ~uint64_t{0x7fff};
          row16[j] = static_cast<uint16_t>(row[j]);
        }
        // ... or above the vocabulary
        int16_t top = 0;
        for (size_t j = 0; j < cols; ++j) top = std::max(top, static_cast<int16_t>(row16[j]));
        if (high != 0 || top >= static_cast<int16_t>(kVocabSize))
          for (size_t j = 0; j < cols; ++j)
            if (static_cast<uint64_t>(row[j]) >= kVocabSize)
              throw std::invalid_argument(fmt::format("input_ids[{}, {}] = {} is outside the vocabulary (0..{})", r, j,
                                                      row[j], kVocabSize - 1));
        size_t len = 0;
        if (att) {
          // 0s and 1s only, and the 1s a prefix: the sum of the first `ones` entries is `ones`.
          const int64_t* a = att + r * cols;
          uint64_t ones = 0, other = 0;
          for (size_t j = 0; j < cols; ++j) {
            ones += static_cast<uint64_t>(a[j]) & 1;
            other |= static_cast<uint64_t>(a[j]) & ~uint64_t{1};
          }
          uint64_t prefix = 0;
          for (size_t j = 0; j < ones; ++j) prefix += static_cast<uint64_t>(a[j]) & 1;
          if (other != 0)
            for (size_t j = 0; j < cols; ++j)
              if (a[j] != 0 && a[j] != 1)
                throw std::invalid_argument(fmt::format("attention_mask must hold only 0 and 1; row {} holds {}", r, a[j]));
          if (prefix != ones)
            throw std::invalid_argument(fmt::format("attention_mask row {} is not 1s then 0s: pad on the right", r));
          len = ones;
        } else {
          // Padding is on the right: after the first [PAD], only [PAD]. A left-padded row, or
          // one with a [PAD] inside, would otherwise be cut at its first [PAD] and go unmasked.
          len = static_cast<size_t>(std::find(row16.begin(), row16.end(), kPad) - row16.begin());
          const auto after = std::find_if(row16.begin() + static_cast<std::ptrdiff_t>(len), row16.end(),
                                          [](uint16_t t) { return t != kPad; });
          if (after != row16.end())
            throw std::invalid_argument(fmt::format(
                "input_ids[{}, {}] is {} after the [PAD] at column {}: without attention_mask, rows are padded on the "
                "right (give attention_mask, or pad on the right)",
                r, after - row16.begin(), token_text(*after), len));
        }
        if (sample_index.data()[r] < 0)
          throw std::invalid_argument(fmt::format("row {}: sample index {} is negative", r, sample_index.data()[r]));
        size_t lo = 0, hi = len;
        if (hi > lo && row16[lo] == kCls) ++lo;
        if (hi > lo && row16[hi - 1] == kSep) --hi;
        const uint16_t* tokens = row16.data() + lo;
        const size_t n = hi - lo;
        uint16_t special = 0;  // a [PAD], [CLS], [SEP] or [MASK] between them
        for (size_t j = 0; j < n; ++j) special |= static_cast<uint16_t>((tokens[j] < kFirstKmerToken) & (tokens[j] != kUnk));
        if (special)
          for (size_t j = 0; j < n; ++j)
            if (tokens[j] != kUnk && tokens[j] < kFirstKmerToken)
              throw std::invalid_argument(fmt::format(
                  "input_ids[{}, {}] is {} inside the sample: only 6-mer ids and [UNK] may lie between [CLS] and [SEP] "
                  "(is the attention mask right? was the batch masked already?)",
                  r, lo + j, token_text(tokens[j])));
        int64_t* out = ids.data() + r * cols;
        int64_t* lab = labels.data() + r * cols;
        std::copy(row, row + lo, out);
        std::fill(lab, lab + lo, kIgnoreLabel);
        masker_.mask_into(tokens, n, seed, epoch, static_cast<uint64_t>(sample_index.data()[r]), out + lo, lab + lo);
        std::copy(row + hi, row + cols, out + hi);
        std::fill(lab + hi, lab + cols, kIgnoreLabel);
      }
    }
    return {to_numpy(std::move(ids), {rows, cols}), to_numpy(std::move(labels), {rows, cols})};
  }

  std::string strategy() const { return to_string(masker_.config().kind); }
  double center_prob() const { return masker_.center_prob(); }

 private:
  static MaskingConfig config(const std::string& strategy, const NpmiTable* table, const PmiVocab* vocab,
                              double center_prob, double mask_token_prob, double random_token_prob) {
    MaskingConfig cfg;
    cfg.kind = parse_masking(strategy);
    cfg.center_prob = center_prob;
    if (!(mask_token_prob >= 0 && random_token_prob >= 0 && mask_token_prob + random_token_prob <= 1))
      throw std::invalid_argument(fmt::format("mask_token_prob={} and random_token_prob={} must be >= 0 and sum to <= 1",
                                              mask_token_prob, random_token_prob));
    cfg.mask_token_prob = mask_token_prob;
    cfg.random_token_prob = random_token_prob;
    if (cfg.kind == MaskingKind::genemask) {
      if (!table) throw std::invalid_argument("strategy 'genemask' needs npmi= (an NpmiTable or the path of npmi.tsv)");
      cfg.grank = grank_of(table->rows, table->source);
    }
    if (cfg.kind == MaskingKind::pmi_vocab) {
      if (!vocab)
        throw std::invalid_argument("strategy 'pmi-vocab' needs pmi_vocab= (a PmiVocab or the path of pmi_vocab.tsv)");
      cfg.pmi_units = pmi_units_of(vocab->rows, vocab->source);
    }
    return cfg;
  }

  Masker masker_;
};

}  // namespace
}  // namespace genemask::py

NB_MODULE(_core, m) {
  using namespace genemask;
  using namespace genemask::py;
  m.doc() = "genemask's C++ core: tokenizer, k-mer counts, NPMI and the masking strategies";
  m.attr("__version__") = kVersion;
  // nanobind lists the instances still alive when the interpreter ends. A DataLoader worker
  // (spawn) that returned torch tensors ends with the collator's Masker still referenced by
  // torch's shutdown, and the list is printed for objects that were never leaked; refcounts
  // are tested in python/tests (test_masker's pickling and workers).
  nb::set_leak_warnings(false);
  nb::exception<io::InputError>(m, "InputError", PyExc_ValueError);

  m.attr("VOCAB_SIZE") = kVocabSize;
  m.attr("PAD") = kPad;
  m.attr("UNK") = kUnk;
  m.attr("CLS") = kCls;
  m.attr("SEP") = kSep;
  m.attr("MASK") = kMask;
  m.attr("FIRST_KMER_TOKEN") = kFirstKmerToken;
  m.attr("MAX_TOKENS") = kMaxTokens;
  m.attr("MAX_DENSE_K") = kMaxDenseK;

  m.def("vocab", &vocab_tokens, "The 4101 tokens in id order (DNABERT's vocab.txt).");
  m.def("token_text", [](int64_t id) {
    if (id < 0 || id >= kVocabSize) throw std::invalid_argument(fmt::format("token id {} is outside 0..{}", id, kVocabSize - 1));
    return token_text(static_cast<uint16_t>(id));
  }, "id"_a);
  m.def("tokenize", &tokenize_one, "bases"_a, "add_special_tokens"_a, "DNABERT-6 ids of one sequence.");
  m.def("tokenize_batch", &tokenize_batch, "seqs"_a, "add_special_tokens"_a, "length"_a.none(), "truncate"_a,
        "(ids, attention_mask) of sequences, padded with [PAD].");
  m.def("decode", [](const In1D<int64_t>& ids) { return decode(checked_ids(ids)); }, "ids"_a);
  m.def("write_hf_tokenizer", [](const std::string& dir, int model_max_length) {
    nb::gil_scoped_release unlocked;
    write_hf_tokenizer(dir, model_max_length);
  }, "dir"_a, "model_max_length"_a, "Writes vocab.txt, tokenizer_config.json and special_tokens_map.json (BertTokenizer).");
  m.def("kmer_to_token", [](uint32_t code) {
    if (code >= 4096) throw std::invalid_argument(fmt::format("6-mer code {} is outside 0..4095", code));
    return kmer_to_token(code);
  }, "code"_a);

  nb::class_<NpmiTable>(m, "NpmiTable", "The GRANK list of `genemask npmi` (npmi.tsv): all 4^k k-mers by NPMI, rank 1 highest.")
      .def_static("load", [](const std::filesystem::path& path) { return load_table<NpmiTable>(path.string(), io::read_npmi_tsv); },
                  "path"_a, "Reads npmi.tsv (a str or os.PathLike); InputError (file:line, value) when malformed.")
      .def("__getstate__", &npmi_state)
      .def("__setstate__", &set_npmi_state)
      .def_prop_ro("k", &NpmiTable::k, "k-mer length")
      .def_ro("source", &NpmiTable::source)
      .def("__len__", &table_size<NpmiTable>)
      .def_prop_ro("rank", [](const NpmiTable& t) { return column<io::NpmiRow, uint64_t>(t.rows, [](auto& r) { return r.rank; }); }, nb::rv_policy::move)
      .def_prop_ro("kmer", &kmers<NpmiTable>, nb::rv_policy::move)
      .def_prop_ro("count", [](const NpmiTable& t) { return column<io::NpmiRow, uint64_t>(t.rows, [](auto& r) { return r.count; }); }, nb::rv_policy::move)
      .def_prop_ro("pmi", [](const NpmiTable& t) { return column<io::NpmiRow, double>(t.rows, [](auto& r) { return r.pmi; }); }, nb::rv_policy::move)
      .def_prop_ro("npmi", [](const NpmiTable& t) { return column<io::NpmiRow, double>(t.rows, [](auto& r) { return r.npmi; }); }, nb::rv_policy::move)
      .def_prop_ro("below_min_count", [](const NpmiTable& t) {
        std::vector<uint8_t> flags;
        for (const auto& r : t.rows) flags.push_back(r.below_min_count ? 1 : 0);
        return to_numpy_flags(flags);
      }, nb::rv_policy::move)
      .def("grank", [](const NpmiTable& t) { return to_numpy(grank_of(t.rows, t.source)); },
           "Rank of each 6-mer by 2-bit code (A=0 C=1 G=2 T=3), what GeneMask masking uses; InputError unless k = 6.");

  nb::class_<PmiVocab>(m, "PmiVocab", "The Gene-PMI-VOC vocabulary of `genemask pmi-vocab` (pmi_vocab.tsv), by PMI_k.")
      .def_static("load", [](const std::filesystem::path& path) { return load_table<PmiVocab>(path.string(), io::read_pmi_vocab_tsv); },
                  "path"_a, "Reads pmi_vocab.tsv (a str or os.PathLike); InputError (file:line, value) when malformed.")
      .def("__getstate__", &pmi_vocab_state)
      .def("__setstate__", &set_pmi_vocab_state)
      .def_ro("source", &PmiVocab::source)
      .def("__len__", &table_size<PmiVocab>)
      .def_prop_ro("rank", [](const PmiVocab& v) { return column<io::PmiVocabRow, uint64_t>(v.rows, [](auto& r) { return r.rank; }); }, nb::rv_policy::move)
      .def_prop_ro("kmer", &kmers<PmiVocab>, nb::rv_policy::move)
      .def_prop_ro("k", [](const PmiVocab& v) { return column<io::PmiVocabRow, int64_t>(v.rows, [](auto& r) { return r.kmer.size(); }); }, nb::rv_policy::move)
      .def_prop_ro("count", [](const PmiVocab& v) { return column<io::PmiVocabRow, uint64_t>(v.rows, [](auto& r) { return r.count; }); }, nb::rv_policy::move)
      .def_prop_ro("pmi", [](const PmiVocab& v) { return column<io::PmiVocabRow, double>(v.rows, [](auto& r) { return r.pmi; }); }, nb::rv_policy::move);

  m.def(
      "genome_probabilities",
      [](const std::string& weights, const std::vector<std::string>& names, const std::vector<uint64_t>& bases,
         const std::vector<double>& list_weights, const std::vector<uint64_t>& samples) {
        if (bases.size() != names.size() || list_weights.size() != names.size() || samples.size() != names.size())
          throw std::invalid_argument("names, bases, list_weights and samples must have one entry per genome");
        return genome_probabilities(parse_genome_weighting(weights), GenomeTable{names, bases, list_weights, samples});
      },
      "weights"_a, "names"_a, "bases"_a, "list_weights"_a, "samples"_a,
      "Probability of each genome under --genome-weights (bases | uniform | list | temperature:T), as `pretrain`.");
  m.def(
      "epoch_permutation",
      [](uint64_t n, uint64_t seed, uint64_t epoch, bool shuffle) {
        if (n > UINT32_MAX) throw std::invalid_argument("more than 2^32 samples");
        return to_numpy(epoch_permutation(n, seed, epoch, shuffle));
      },
      "n"_a, "seed"_a, "epoch"_a, "shuffle"_a = true, "The order of an epoch without genome weights, as `pretrain`.");
  m.def(
      "weighted_epoch_order",
      [](const In1D<uint32_t>& sample_genome, const std::vector<double>& probabilities, uint64_t seed, uint64_t epoch) {
        std::vector<uint32_t> g(sample_genome.data(), sample_genome.data() + sample_genome.shape(0));
        std::vector<uint32_t> out;
        {
          nb::gil_scoped_release unlocked;
          out = weighted_epoch_order(g, probabilities, seed, epoch);
        }
        return to_numpy(std::move(out));
      },
      "sample_genome"_a, "probabilities"_a, "seed"_a, "epoch"_a,
      "The order of an epoch with genome weights (samples in sample_index order), as `pretrain`.");
  m.def("read_manifest", &read_manifest, "dir"_a,
        "DIR/manifest.json of a shard set, checked as `genemask pretrain` checks it; InputError naming the file, "
        "the field and the value.");
  m.def("count_kmers", &count_kmers, "path"_a, "kmax"_a, "Counts of k = 1..kmax (list index k-1), as `genemask count`.");
  m.def("npmi", &npmi, "counts"_a, "k"_a, "min_count"_a, "The NPMI ranking of k-mers, as `genemask npmi`.");
  m.def("pmi_vocab", &pmi_vocab, "counts"_a, "kmin"_a, "kmax"_a, "min_count"_a, "size"_a,
        "The PMI vocabulary, as `genemask pmi-vocab`.");

  nb::class_<PyMasker>(m, "Masker", "A masking strategy of genemask's core (genemask.Masker wraps it).")
      .def(nb::init<const std::string&, const NpmiTable*, const PmiVocab*, double, double, double>(), "strategy"_a,
           "npmi"_a.none(), "pmi_vocab"_a.none(), "center_prob"_a, "mask_token_prob"_a, "random_token_prob"_a)
      .def("mask", &PyMasker::mask, "input_ids"_a, "attention_mask"_a.none(), "seed"_a, "epoch"_a, "sample_index"_a,
           "(masked ids, labels) of int64 rows [B, L]; the GIL is released.")
      .def_prop_ro("strategy", &PyMasker::strategy)
      .def_prop_ro("center_prob", &PyMasker::center_prob);
}
