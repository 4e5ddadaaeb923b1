#include "io/shard_manifest.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <cmath>

#include <fmt/format.h>
#include <fstream>
#include <map>
#include <set>
#include <algorithm>
#include <nlohmann/json.hpp>
#include <sstream>

#include "io/atomic_file.hpp"
#include "io/error.hpp"
#include "io/output_guard.hpp"
#include "io/plain_names.hpp"
#include "io/json.hpp"
#include "io/sha256.hpp"

namespace genemask::io {

using nlohmann::json;

void write_manifest(const std::string& dir, const ShardManifest& m) {
  json j;
  j["format"] = kManifestFormat;
  j["format_version"] = kManifestVersion;
  j["source_genome"] = m.source_genome;
  j["genome_bytes"] = m.genome_bytes;
  j["genes"] = m.genes.empty() ? json(nullptr) : json(m.genes);
  j["seed"] = m.seed;
  j["valid_fraction"] = m.valid_fraction;
  // Samples are cut at gene boundaries where --genes, or a genome list's genes column, gave them.
  const bool gene_boundaries =
      !m.genes.empty() || std::any_of(m.genomes.begin(), m.genomes.end(), [](const auto& g) { return !g.genes.empty(); });
  j["recipe"] = {{"max_offset", m.max_offset}, {"full_prob", m.full_prob}, {"min_tokens", m.min_tokens},
                 {"max_tokens", m.max_tokens}, {"gene_boundaries", gene_boundaries}};
  j["vocab_sha256"] = m.vocab_sha256;
  j["command_line"] = m.command_line;
  j["genemask_version"] = m.genemask_version;
  j["candidates"] = m.candidates;
  j["dropped_non_acgt"] = m.dropped_non_acgt;
  j["chromosomes"] = json::array();
  for (const auto& c : m.chromosomes) {
    json one = {{"name", c.name}, {"length", c.length}};
    if (!m.genomes.empty()) one["genome"] = c.genome;
    j["chromosomes"].push_back(std::move(one));
  }
  if (!m.genomes.empty()) {
    j["genomes"] = json::array();
    for (const auto& g : m.genomes)
      j["genomes"].push_back({{"name", g.name},
                              {"path", g.path},
                              {"genes", g.genes.empty() ? json(nullptr) : json(g.genes)},
                              {"file_bytes", g.file_bytes},
                              {"mtime_ns", g.mtime_ns},
                              {"weight", g.weight > 0 ? json(g.weight) : json(nullptr)},
                              {"records", g.records},
                              {"bases", g.bases},
                              {"samples", {{"train", g.samples_train}, {"valid", g.samples_valid}}},
                              {"tokens", {{"train", g.tokens_train}, {"valid", g.tokens_valid}}}});
  }
  j["shards"] = json::array();
  uint64_t samples[2] = {0, 0}, tokens[2] = {0, 0};
  for (const auto& s : m.shards) {
    j["shards"].push_back({{"file", s.file}, {"split", s.split}, {"samples", s.samples}, {"tokens", s.tokens},
                           {"first_sample", s.first_sample}, {"last_sample", s.last_sample}, {"sha256", s.sha256}});
    const int k = s.split == "train" ? 0 : 1;
    samples[k] += s.samples;
    tokens[k] += s.tokens;
  }
  j["totals"] = {{"train", {{"samples", samples[0]}, {"tokens", tokens[0]}}},
                 {"valid", {{"samples", samples[1]}, {"tokens", tokens[1]}}}};
  AtomicFile f(dir + "/manifest.json");
  f.stream() << json_text(j, 2) << '\n';
  f.commit();
}

void verify_shard_checksum(const std::string& dir, const ManifestShard& shard) {
  if (sha256_file(dir + "/" + shard.file) != shard.sha256)
    throw InputError(dir + "/" + shard.file, fmt::format("SHA-256 differs from {}/manifest.json: the file was changed or "
                                                         "damaged (build the shards again)",
                                                         dir));
}

namespace {

/// Fields of the manifest with errors that name the field and what was there (never a JSON
/// library message): a NaN option written as null, a count written as text.
class ManifestFields {
 public:
  explicit ManifestFields(std::string path) : path_(std::move(path)) {}
  [[noreturn]] void fail(const std::string& field, const std::string& what) const {
    throw InputError(path_, fmt::format("{}: {}; the manifest is damaged or was edited: build the shards again", field, what));
  }
  const json& at(const json& j, const std::string& key, const std::string& field) const {
    if (!j.is_object() || !j.contains(key)) fail(field, "missing");
    return j.at(key);
  }
  std::string str(const json& j, const std::string& key, const std::string& field) const {
    const json& v = at(j, key, field);
    if (!v.is_string()) fail(field, fmt::format("{} is not a string", json_excerpt(v, 80)));
    return v.get<std::string>();
  }
  uint64_t u64(const json& j, const std::string& key, const std::string& field, uint64_t lo = 0,
               uint64_t hi = UINT64_MAX) const {
    const json& v = at(j, key, field);
    if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<int64_t>() >= 0))
      fail(field, fmt::format("{} is not a non-negative integer", json_excerpt(v, 80)));
    const uint64_t x = v.get<uint64_t>();
    if (x < lo || x > hi) fail(field, fmt::format("{} is outside {}..{}", x, lo, hi));
    return x;
  }
  double fraction(const json& j, const std::string& key, const std::string& field) const {
    const json& v = at(j, key, field);
    if (!v.is_number() || !(v.get<double>() >= 0 && v.get<double>() <= 1))
      fail(field, fmt::format("{} is not a number in [0, 1]", json_excerpt(v, 80)));
    return v.get<double>();
  }

 private:
  std::string path_;
};

bool is_sha256_hex(const std::string& s) {
  return s.size() == 64 && s.find_first_not_of("0123456789abcdef") == std::string::npos;
}

}  // namespace

ShardManifest read_manifest(const std::string& dir, bool verify_checksums) {
  check_output_complete(dir);  // a shard set whose publication was cut short
  const std::string path = dir + "/manifest.json";
  check_input_type(path);
  errno = 0;
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw InputError(path, fmt::format("cannot open ({}): is this a shard directory made by `genemask shards`?",
                                       open_error_reason(errno)));
  std::stringstream text;
  text << in.rdbuf();
  const json j = parse_json(text.str(), path, "the manifest is damaged: build the shards again");
  const ManifestFields f(path);
  if (!j.is_object() || j.value("format", "") != kManifestFormat)
    throw InputError(path, fmt::format("format is '{}', expected '{}'",
                                       j.is_object() ? excerpt(j.value("format", ""), 80) : "", kManifestFormat));
  const uint64_t version = f.u64(j, "format_version", "format_version");
  if (version != kManifestVersion)
    throw InputError(path, fmt::format("format_version {} is not supported (expected {})", version, kManifestVersion));
  ShardManifest m;
  m.source_genome = f.str(j, "source_genome", "source_genome");
  m.genome_bytes = f.u64(j, "genome_bytes", "genome_bytes");
  m.genes = f.at(j, "genes", "genes").is_null() ? "" : f.str(j, "genes", "genes");
  m.seed = f.u64(j, "seed", "seed");
  m.valid_fraction = f.fraction(j, "valid_fraction", "valid_fraction");
  const json& recipe = f.at(j, "recipe", "recipe");
  m.max_offset = static_cast<uint32_t>(f.u64(recipe, "max_offset", "recipe.max_offset", 0, UINT32_MAX));
  m.full_prob = f.fraction(recipe, "full_prob", "recipe.full_prob");
  m.min_tokens = static_cast<uint32_t>(f.u64(recipe, "min_tokens", "recipe.min_tokens", 1, 510));
  m.max_tokens = static_cast<uint32_t>(f.u64(recipe, "max_tokens", "recipe.max_tokens", m.min_tokens, 510));
  m.vocab_sha256 = f.str(j, "vocab_sha256", "vocab_sha256");
  m.command_line = j.value("command_line", json("")).is_string() ? j.value("command_line", "") : "";
  m.genemask_version = j.value("genemask_version", json("")).is_string() ? j.value("genemask_version", "") : "";
  if (j.contains("candidates")) m.candidates = f.u64(j, "candidates", "candidates");
  if (j.contains("dropped_non_acgt")) m.dropped_non_acgt = f.u64(j, "dropped_non_acgt", "dropped_non_acgt");
  if (j.contains("genomes")) {
    const json& gs = f.at(j, "genomes", "genomes");
    if (!gs.is_array() || gs.empty()) f.fail("genomes", "not a non-empty list");
    std::set<std::string> names;
    for (size_t i = 0; i < gs.size(); ++i) {
      const std::string at = fmt::format("genomes[{}]", i);
      ManifestGenome g;
      g.name = f.str(gs[i], "name", at + ".name");
      if (!names.insert(g.name).second) f.fail(at + ".name", fmt::format("'{}' is listed twice", excerpt(g.name, 80)));
      g.path = f.str(gs[i], "path", at + ".path");
      g.genes = f.at(gs[i], "genes", at + ".genes").is_null() ? "" : f.str(gs[i], "genes", at + ".genes");
      g.file_bytes = f.u64(gs[i], "file_bytes", at + ".file_bytes");
      if (gs[i].contains("mtime_ns") && gs[i]["mtime_ns"].is_number_integer()) g.mtime_ns = gs[i]["mtime_ns"].get<int64_t>();
      const json& w = f.at(gs[i], "weight", at + ".weight");
      if (!w.is_null()) {
        if (!w.is_number() || !(w.get<double>() > 0) || !std::isfinite(w.get<double>()))
          f.fail(at + ".weight", fmt::format("{} is not a positive finite number", json_excerpt(w, 40)));
        g.weight = w.get<double>();
      }
      g.records = f.u64(gs[i], "records", at + ".records");
      g.bases = f.u64(gs[i], "bases", at + ".bases");
      const json& s = f.at(gs[i], "samples", at + ".samples");
      g.samples_train = f.u64(s, "train", at + ".samples.train");
      g.samples_valid = f.u64(s, "valid", at + ".samples.valid");
      const json& t = f.at(gs[i], "tokens", at + ".tokens");
      g.tokens_train = f.u64(t, "train", at + ".tokens.train");
      g.tokens_valid = f.u64(t, "valid", at + ".tokens.valid");
      m.genomes.push_back(std::move(g));
    }
  }
  const json& chroms = f.at(j, "chromosomes", "chromosomes");
  if (!chroms.is_array()) f.fail("chromosomes", "not a list");
  std::set<std::pair<uint32_t, std::string>> chrom_names;  // a name is unique within its genome
  for (size_t i = 0; i < chroms.size(); ++i) {
    const std::string at = fmt::format("chromosomes[{}]", i);
    ManifestChrom c{f.str(chroms[i], "name", at + ".name"), f.u64(chroms[i], "length", at + ".length")};
    if (!m.genomes.empty())
      c.genome = static_cast<uint32_t>(f.u64(chroms[i], "genome", at + ".genome", 0, m.genomes.size() - 1));
    if (!chrom_names.insert({c.genome, c.name}).second)
      f.fail(at + ".name", fmt::format("'{}' is listed twice", excerpt(c.name, 80)));
    m.chromosomes.push_back(std::move(c));
  }
  const json& shards = f.at(j, "shards", "shards");
  if (!shards.is_array()) f.fail("shards", "not a list");
  // Each shard once: by name, and by the file behind the name (a hard link); the totals are
  // the sums. A manifest that lists a shard twice would otherwise count (and train on) its
  // samples twice. (Shards of one split may interleave their sample indices, as the shards
  // of plain gzip ranks do: a sample in two shards is found where the shards are read,
  // ShardSet.)
  std::map<std::string, std::string> by_name, by_identity;
  uint64_t samples[2] = {0, 0}, tokens[2] = {0, 0};
  for (size_t i = 0; i < shards.size(); ++i) {
    const std::string at = fmt::format("shards[{}]", i);
    const json& s = shards[i];
    ManifestShard sh;
    sh.file = f.str(s, "file", at + ".file");
    sh.split = f.str(s, "split", at + ".split");
    sh.sha256 = f.str(s, "sha256", at + ".sha256");
    sh.samples = f.u64(s, "samples", at + ".samples");
    sh.tokens = f.u64(s, "tokens", at + ".tokens");
    sh.first_sample = f.u64(s, "first_sample", at + ".first_sample");
    sh.last_sample = f.u64(s, "last_sample", at + ".last_sample");
    if (!is_plain_name(sh.file))
      f.fail(at + ".file", fmt::format("'{}' is not a file name in the shard directory", excerpt(sh.file, 80)));
    if (sh.split != "train" && sh.split != "valid")
      f.fail(at + ".split", fmt::format("'{}' is not train or valid", excerpt(sh.split, 40)));
    if (!is_sha256_hex(sh.sha256))
      f.fail(at + ".sha256", fmt::format("'{}' is not a SHA-256 (64 lower-case hex digits)", excerpt(sh.sha256, 80)));
    if (sh.samples > 0 && (sh.first_sample > sh.last_sample || sh.last_sample - sh.first_sample + 1 < sh.samples))
      f.fail(at, fmt::format("{} samples cannot have sample indices {}..{}", sh.samples, sh.first_sample, sh.last_sample));
    if (sh.samples > sh.tokens) f.fail(at, fmt::format("{} samples in {} tokens", sh.samples, sh.tokens));
    const std::string file = dir + "/" + sh.file;
    struct stat st {};
    if (::stat(file.c_str(), &st) != 0)
      throw InputError(path, fmt::format("lists {} but the file is missing: the shard set is incomplete", sh.file));
    if (!S_ISREG(st.st_mode)) throw InputError(file, input_problem(file));
    if (const auto [it, fresh] = by_name.emplace(sh.file, at); !fresh)
      throw InputError(path, fmt::format("{} and {} both list the shard {}: each shard is listed once (its samples "
                                         "would be counted twice); build the shards again",
                                         it->second, at, sh.file));
    const std::string id = fmt::format("{}:{}", static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino));
    if (const auto [it, fresh] = by_identity.emplace(id, sh.file); !fresh)
      throw InputError(path, fmt::format("lists {} and {}, which are the same file (a link): each shard is listed once; "
                                         "build the shards again",
                                         it->second, sh.file));
    const int k = sh.split == "train" ? 0 : 1;
    samples[k] += sh.samples;
    tokens[k] += sh.tokens;
    if (verify_checksums) verify_shard_checksum(dir, sh);
    m.shards.push_back(std::move(sh));
  }
  // The shards listed must be all the set's samples: the totals, the cut's own count and the
  // genomes' counts are three records of them (a shard left out of the list, with the totals
  // removed or adjusted, once read as a smaller corpus without a word).
  const json& t = f.at(j, "totals", "totals");
  for (int k = 0; k < 2; ++k) {
    const std::string split = k == 0 ? "train" : "valid";
    const json& one = f.at(t, split, "totals." + split);
    const uint64_t s_total = f.u64(one, "samples", "totals." + split + ".samples");
    const uint64_t t_total = f.u64(one, "tokens", "totals." + split + ".tokens");
    if (s_total != samples[k] || t_total != tokens[k])
      f.fail("totals." + split, fmt::format("{} samples and {} tokens, but the shards listed hold {} and {}", s_total,
                                            t_total, samples[k], tokens[k]));
    if (!m.genomes.empty()) {
      uint64_t gs = 0, gt = 0;
      for (const auto& g : m.genomes) {
        gs += k == 0 ? g.samples_train : g.samples_valid;
        gt += k == 0 ? g.tokens_train : g.tokens_valid;
      }
      if (gs != samples[k] || gt != tokens[k])
        f.fail("genomes", fmt::format("their {} samples and tokens add up to {} and {}, but the shards listed hold {} "
                                      "and {}",
                                      split, gs, gt, samples[k], tokens[k]));
    }
  }
  if (j.contains("candidates") && j.contains("dropped_non_acgt") &&
      (m.dropped_non_acgt > m.candidates || m.candidates - m.dropped_non_acgt != samples[0] + samples[1]))
    f.fail("candidates", fmt::format("{} segments cut, {} dropped, but the shards listed hold {} samples", m.candidates,
                                     m.dropped_non_acgt, samples[0] + samples[1]));
  // The set's marker lists every file `genemask shards` wrote: a shard it lists is in the
  // manifest (a shard left out of the list, with the totals, candidates and genomes adjusted
  // to match, read as a smaller corpus). A set of before the markers has none. (A shard added
  // to the list is another set's: its samples' indices, seed or chromosomes give it away.)
  if (const auto marker = read_output_marker(dir)) {
    const auto is_shard = [](const std::string& n) { return n.size() > 3 && n.compare(n.size() - 3, 3, ".h5") == 0; };
    std::set<std::string> written;
    for (const auto& e : (*marker)["entries"])
      if (is_shard(e.get<std::string>())) written.insert(e.get<std::string>());
    for (const auto& n : written)
      if (!by_name.count(n))
        throw InputError(path, fmt::format("does not list the shard {}, which `genemask shards` wrote into the set ({}/{} "
                                           "lists it): the manifest was edited, and its samples would be left out; "
                                           "build the shards again",
                                           n, dir, kOutputMarker));
  }
  return m;
}

}  // namespace genemask::io
