#pragma once
// DNABERT-6 compatible tokenizer. Vocabulary (4101 ids, the order of DNABERT's vocab.txt):
//   [PAD]=0 [UNK]=1 [CLS]=2 [SEP]=3 [MASK]=4, then the 4096 6-mers in
//   itertools.product('ATCG', repeat=6) order: A<T<C<G, first base most significant,
//   so id(AAAAAA)=5, id(AAAAAT)=6, id(GGGGGG)=4100.
// This is not the counter's 2-bit A<C<G<T order; kmer_to_token / token_to_kmer map
// between the two.
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace genemask {

inline constexpr int kTokenK = 6;
inline constexpr uint16_t kPad = 0, kUnk = 1, kCls = 2, kSep = 3, kMask = 4;
inline constexpr uint16_t kFirstKmerToken = 5;
inline constexpr uint16_t kVocabSize = 4101;
inline constexpr int kMaxTokens = 510;  // 6-mers in a 512-position input with [CLS] and [SEP]

/// Token id of the 6-mer with counter code `code` (A=0 C=1 G=2 T=3).
uint16_t kmer_to_token(uint32_t code);
/// Counter code of a 6-mer token (id >= 5).
uint32_t token_to_kmer(uint16_t id);
bool is_special(uint16_t id);

/// The vocabulary as DNABERT's vocab.txt lists it (4101 lines).
std::vector<std::string> vocab_tokens();
/// Writes vocab.txt atomically.
void write_vocab(const std::string& path);
/// Writes DIR/vocab.txt and the files of Hugging Face's BertTokenizer for it
/// (tokenizer_config.json, special_tokens_map.json: no lower-casing, so `AutoTokenizer`
/// maps upper-case 6-mer text to these ids), each atomically. DIR must exist.
void write_hf_tokenizer(const std::string& dir, int model_max_length);
/// SHA-256 of the vocab.txt text (recorded in shard manifests).
std::string vocab_sha256();
/// Throws io::InputError naming `path` unless `digest` (a shard set's recorded vocab_sha256)
/// is vocab_sha256(): its token ids would be trained on, and masked, as genemask's.
void check_vocab_sha256(const std::string& path, const std::string& digest);

/// Overlapping 6-mer ids of a sequence (L bases give L-5 ids; fewer than 6 bases give
/// none). Lowercase is upper-cased; a 6-mer with a non-ACGT base is [UNK].
std::vector<uint16_t> tokenize(std::string_view bases);
/// [CLS] ids [SEP].
std::vector<uint16_t> frame(const std::vector<uint16_t>& ids);
/// Tokens of DNABERT's space-separated 6-mer text ("AAACGG AACGGA ..."). Throws
/// std::invalid_argument naming the token when a token is not 6 letters or two tokens
/// do not overlap by 5 bases.
std::vector<uint16_t> tokenize_kmer_text(std::string_view text);
/// Bases back from overlapping 6-mer ids ([CLS], [SEP], [PAD] skipped). [UNK] and [MASK] stand
/// for 6-mers whose bases are not known: a base is N only where no known 6-mer covers it, and
/// every base keeps its position. Known 6-mers must agree on the bases they share (5 for
/// neighbours; std::invalid_argument otherwise).
std::string decode(const std::vector<uint16_t>& ids);
/// Text of one token ("[CLS]", "ACGTAC", ...).
std::string token_text(uint16_t id);

}  // namespace genemask
