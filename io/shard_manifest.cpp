#include "io/shard_manifest.hpp"

#include <sys/stat.h>

#include <cerrno>

#include <fmt/format.h>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "io/atomic_file.hpp"
#include "io/error.hpp"
#include "io/output_guard.hpp"
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
  j["recipe"] = {{"max_offset", m.max_offset}, {"full_prob", m.full_prob}, {"min_tokens", m.min_tokens},
                 {"max_tokens", m.max_tokens}, {"gene_boundaries", !m.genes.empty()}};
  j["vocab_sha256"] = m.vocab_sha256;
  j["command_line"] = m.command_line;
  j["genemask_version"] = m.genemask_version;
  j["candidates"] = m.candidates;
  j["dropped_non_acgt"] = m.dropped_non_acgt;
  j["chromosomes"] = json::array();
  for (const auto& c : m.chromosomes) j["chromosomes"].push_back({{"name", c.name}, {"length", c.length}});
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

ShardManifest read_manifest(const std::string& dir, bool verify_checksums) {
  check_output_complete(dir);  // a shard set whose publication was cut short
  const std::string path = dir + "/manifest.json";
  errno = 0;
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw InputError(path, fmt::format("cannot open ({}): is this a shard directory made by `genemask shards`?",
                                       open_error_reason(errno)));
  std::stringstream text;
  text << in.rdbuf();
  const json j = parse_json(text.str(), path, "the manifest is damaged: build the shards again");
  try {
    if (j.value("format", "") != kManifestFormat)
      throw InputError(path, fmt::format("format is '{}', expected '{}'", j.value("format", ""), kManifestFormat));
    if (j.at("format_version").get<uint64_t>() != kManifestVersion)
      throw InputError(path, fmt::format("format_version {} is not supported (expected {})",
                                         j.at("format_version").get<uint64_t>(), kManifestVersion));
    ShardManifest m;
    m.source_genome = j.at("source_genome");
    m.genome_bytes = j.at("genome_bytes");
    m.genes = j.at("genes").is_null() ? "" : j.at("genes").get<std::string>();
    m.seed = j.at("seed");
    m.valid_fraction = j.at("valid_fraction");
    m.max_offset = j.at("recipe").at("max_offset");
    m.full_prob = j.at("recipe").at("full_prob");
    m.min_tokens = j.at("recipe").at("min_tokens");
    m.max_tokens = j.at("recipe").at("max_tokens");
    m.vocab_sha256 = j.at("vocab_sha256");
    m.command_line = j.value("command_line", "");
    m.genemask_version = j.value("genemask_version", "");
    m.candidates = j.value("candidates", uint64_t{0});
    m.dropped_non_acgt = j.value("dropped_non_acgt", uint64_t{0});
    for (const auto& c : j.at("chromosomes")) m.chromosomes.push_back(ManifestChrom{c.at("name"), c.at("length")});
    for (const auto& s : j.at("shards")) {
      ManifestShard sh{s.at("file"), s.at("split"), s.at("sha256"), s.at("samples"),
                       s.at("tokens"), s.at("first_sample"), s.at("last_sample")};
      const std::string file = dir + "/" + sh.file;
      struct stat st {};
      if (::stat(file.c_str(), &st) != 0)
        throw InputError(path, fmt::format("lists {} but the file is missing: the shard set is incomplete", sh.file));
      if (verify_checksums) verify_shard_checksum(dir, sh);
      m.shards.push_back(std::move(sh));
    }
    return m;
  } catch (const json::exception& e) {
    throw InputError(path, fmt::format("missing or malformed field: {}", e.what()));
  }
}

}  // namespace genemask::io
