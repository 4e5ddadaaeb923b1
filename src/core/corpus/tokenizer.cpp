#include "genemask/corpus/tokenizer.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "io/atomic_file.hpp"
#include "io/error.hpp"
#include "io/sha256.hpp"
#include "io/task_table.hpp"

namespace genemask {
namespace {

// Position of each base in DNABERT's alphabet order A<T<C<G, indexed by counter code
// (A=0 C=1 G=2 T=3).
constexpr uint32_t kDnabertRank[4] = {0, 2, 3, 1};
constexpr char kDnabertBase[4] = {'A', 'T', 'C', 'G'};
constexpr uint32_t kCodeOfDnabert[4] = {0, 3, 1, 2};

struct Tables {
  std::array<uint16_t, 4096> to_token{};
  std::array<uint32_t, 4096> to_kmer{};
  Tables() {
    for (uint32_t code = 0; code < 4096; ++code) {
      uint32_t id = 0;
      for (int i = 5; i >= 0; --i) id = id * 4 + kDnabertRank[(code >> (2 * i)) & 3];
      to_token[code] = static_cast<uint16_t>(kFirstKmerToken + id);
      to_kmer[id] = code;
    }
  }
};
const Tables& tables() {
  static const Tables t;
  return t;
}

int base_code(char c) {
  switch (c) {
    case 'A': case 'a': return 0;
    case 'C': case 'c': return 1;
    case 'G': case 'g': return 2;
    case 'T': case 't': return 3;
    default: return -1;
  }
}

}  // namespace

uint16_t kmer_to_token(uint32_t code) { return tables().to_token[code & 4095]; }
uint32_t token_to_kmer(uint16_t id) {
  if (id < kFirstKmerToken || id >= kVocabSize) throw std::invalid_argument(fmt::format("token {} is not a 6-mer", id));
  return tables().to_kmer[id - kFirstKmerToken];
}
bool is_special(uint16_t id) { return id < kFirstKmerToken; }

std::string token_text(uint16_t id) {
  static const char* kSpecial[] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
  if (id < kFirstKmerToken) return kSpecial[id];
  if (id >= kVocabSize) throw std::invalid_argument(fmt::format("token id {} is outside the vocabulary", id));
  uint32_t v = id - kFirstKmerToken;
  std::string s(6, 'A');
  for (int i = 5; i >= 0; --i) {
    s[static_cast<size_t>(i)] = kDnabertBase[v & 3];
    v >>= 2;
  }
  return s;
}

std::vector<std::string> vocab_tokens() {
  std::vector<std::string> v;
  v.reserve(kVocabSize);
  for (uint16_t id = 0; id < kVocabSize; ++id) v.push_back(token_text(id));
  return v;
}

static std::string vocab_text() {
  std::string s;
  for (const auto& t : vocab_tokens()) s += t + "\n";
  return s;
}

void write_vocab(const std::string& path) {
  io::AtomicFile f(path);
  f.stream() << vocab_text();
  f.commit();
}

void write_hf_tokenizer(const std::string& dir, int model_max_length) {
  write_vocab(dir + "/vocab.txt");
  // BertTokenizer's settings: the vocabulary is upper-case 6-mers, so no lower-casing and
  // no accent stripping; [CLS] ... [SEP] around the tokens, as genemask encodes.
  nlohmann::ordered_json tc = {{"tokenizer_class", "BertTokenizer"},
                               {"do_lower_case", false},
                               {"do_basic_tokenize", true},
                               {"strip_accents", false},
                               {"tokenize_chinese_chars", false},
                               {"model_max_length", model_max_length},
                               {"unk_token", "[UNK]"},
                               {"sep_token", "[SEP]"},
                               {"pad_token", "[PAD]"},
                               {"cls_token", "[CLS]"},
                               {"mask_token", "[MASK]"},
                               {"clean_up_tokenization_spaces", false}};
  nlohmann::ordered_json sm = {{"unk_token", "[UNK]"}, {"sep_token", "[SEP]"}, {"pad_token", "[PAD]"},
                               {"cls_token", "[CLS]"}, {"mask_token", "[MASK]"}};
  for (const auto& [name, j] : {std::pair{"tokenizer_config.json", tc}, std::pair{"special_tokens_map.json", sm}}) {
    io::AtomicFile f(dir + "/" + name);
    f.stream() << j.dump(2) << '\n';
    f.commit();
  }
}

std::string vocab_sha256() {
  static const std::string h = io::sha256_hex(vocab_text());
  return h;
}

void check_vocab_sha256(const std::string& path, const std::string& digest) {
  if (digest != vocab_sha256())
    throw io::InputError(path, fmt::format("vocab_sha256 is '{}', but genemask's DNABERT-6 vocabulary (`genemask "
                                           "vocab`) has SHA-256 {}: the shards hold the ids of another vocabulary; "
                                           "build the shards again with this genemask",
                                           io::excerpt(digest, 80), vocab_sha256()));
}

std::vector<uint16_t> tokenize(std::string_view bases) {
  std::vector<uint16_t> ids;
  if (bases.size() < static_cast<size_t>(kTokenK)) return ids;
  ids.reserve(bases.size() - 5);
  uint32_t code = 0;
  int valid = 0;  // consecutive ACGT bases ending here
  for (size_t i = 0; i < bases.size(); ++i) {
    const int b = base_code(bases[i]);
    if (b < 0) {
      valid = 0;
    } else {
      code = ((code << 2) | static_cast<uint32_t>(b)) & 4095;
      ++valid;
    }
    if (i >= 5) ids.push_back(valid >= 6 ? kmer_to_token(code) : kUnk);
  }
  return ids;
}

std::vector<uint16_t> frame(const std::vector<uint16_t>& ids) {
  std::vector<uint16_t> out;
  out.reserve(ids.size() + 2);
  out.push_back(kCls);
  out.insert(out.end(), ids.begin(), ids.end());
  out.push_back(kSep);
  return out;
}

std::vector<uint16_t> tokenize_kmer_text(std::string_view text) {
  const std::string t(text);
  const size_t b = t.find_first_not_of(" \t");
  const size_t e = b == std::string::npos ? b : t.find_first_of(" \t", b);
  const std::string first = b == std::string::npos ? std::string() : t.substr(b, e == std::string::npos ? e : e - b);
  if (first.size() != static_cast<size_t>(kTokenK))
    throw std::invalid_argument(fmt::format("token 1 '{}' is not a 6-mer", first));
  return tokenize(io::kmer_text_to_bases(t));
}

std::string decode(const std::vector<uint16_t>& ids) {
  // [CLS], [SEP] and [PAD] frame a row; [UNK] and [MASK] stand for a 6-mer whose bases are
  // not known. Token j covers bases j..j+5: a base is N only where no known 6-mer covers it
  // (each later base keeps its position; a masked 6-mer's bases that its neighbours show are
  // shown, as the model can read them).
  std::vector<std::pair<size_t, uint16_t>> kmers;  // (index in ids, id) of the 6-mer positions
  size_t frame_after = SIZE_MAX;                   // a framing token after the first 6-mer
  for (size_t i = 0; i < ids.size(); ++i) {
    if (is_special(ids[i]) && ids[i] != kUnk && ids[i] != kMask) {
      if (!kmers.empty() && frame_after == SIZE_MAX) frame_after = i;
      continue;
    }
    // One sequence's ids: 6-mers after its [SEP] are another sequence's (a packed row), and
    // chained on they would move every later base.
    if (frame_after != SIZE_MAX)
      throw std::invalid_argument(fmt::format("ids[{}] ({}) follows the {} at ids[{}]: the ids hold more than one "
                                              "sequence (a packed row?); decode each sequence's ids",
                                              i, token_text(ids[i]), token_text(ids[frame_after]), frame_after));
    kmers.emplace_back(i, ids[i]);
  }
  if (kmers.empty()) return "";
  std::string out(kmers.size() + kTokenK - 1, 'N');
  size_t prev = SIZE_MAX;  // the last known 6-mer
  for (size_t j = 0; j < kmers.size(); ++j) {
    const auto [i, id] = kmers[j];
    if (id == kUnk || id == kMask) continue;
    const std::string t = token_text(id);
    // The known 6-mers of one sequence agree on the bases they share (5 for neighbours): ids
    // that do not were not made by tokenising a sequence, and chaining them would invent one.
    // Agreeing with the last known 6-mer is agreeing with every earlier one that reaches here.
    if (const size_t d = j - prev; prev != SIZE_MAX && d < static_cast<size_t>(kTokenK)) {
      const std::string p = token_text(kmers[prev].second);
      const size_t shared = static_cast<size_t>(kTokenK) - d;
      if (p.compare(d, shared, t, 0, shared) != 0)
        throw std::invalid_argument(fmt::format("ids[{}] ({}) does not overlap ids[{}] ({}) by {} bases: the ids are not "
                                                "the overlapping 6-mers of one sequence",
                                                i, t, kmers[prev].first, p, shared));
    }
    out.replace(j, static_cast<size_t>(kTokenK), t);
    prev = j;
  }
  return out;
}

}  // namespace genemask
