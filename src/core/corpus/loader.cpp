#include "genemask/corpus/loader.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fmt/format.h>
#include <numeric>
#include <stdexcept>
#include <thread>

#include "genemask/kmer/kmer.hpp"
#include "genemask/corpus/tokenizer.hpp"
#include "io/error.hpp"
#include "io/shard_manifest.hpp"

namespace genemask {

uint64_t Batch::real_tokens() const {
  uint64_t n = 0;
  for (int64_t v : attention_mask) n += static_cast<uint64_t>(v);
  return n;
}

static_assert(io::kShardFirstToken == kFirstKmerToken && io::kShardLastToken == kVocabSize - 1 &&
              io::kShardMaxSampleTokens == static_cast<uint64_t>(kMaxTokens));

ShardSet::ShardSet(const std::string& dir, const std::string& split, const ShardChecks& checks) {
  const auto m = io::read_manifest(dir);
  // The token ids are those of the vocabulary the shards were written with: another's would
  // be trained on (and masked) as genemask's without a word.
  check_vocab_sha256(dir + "/manifest.json", m.vocab_sha256);
  genomes_ = m.genomes;
  for (size_t k = 0; k < m.shards.size(); ++k) {
    const auto& sh = m.shards[k];
    const bool mine = static_cast<int>(k % static_cast<size_t>(checks.parts)) == checks.part;
    const bool verify = checks.verify && mine;
    if (sh.split != split && !verify) continue;
    const std::string file = dir + "/" + sh.file;
    // The manifest's SHA-256 of every shard this set reads (ranks share the work): what the
    // writer promised, checked by every reader.
    if (verify || (checks.checksums && mine)) io::verify_shard_checksum(dir, sh);
    auto r = std::make_unique<io::ShardReader>(file);
    if (r->samples() != sh.samples || r->tokens() != sh.tokens)
      throw io::InputError(file, fmt::format("has {} samples and {} tokens, the manifest says {} and {}", r->samples(),
                                             r->tokens(), sh.samples, sh.tokens));
    if (r->split() != sh.split)
      throw io::InputError(file, fmt::format("is a '{}' shard, but the manifest lists it as '{}'", io::excerpt(r->split(), 40),
                                             sh.split));
    if (r->samples() > 0 && (r->sample_index().front() != sh.first_sample || r->sample_index().back() != sh.last_sample))
      throw io::InputError(file, fmt::format("holds samples {}..{}, the manifest says {}..{}", r->sample_index().front(),
                                             r->sample_index().back(), sh.first_sample, sh.last_sample));
    for (size_t i = 0; i < r->samples(); ++i)
      if (r->chrom()[i] >= m.chromosomes.size())
        throw io::InputError(file, fmt::format("damaged shard: sample {} has chrom {}, but the manifest lists {} "
                                               "chromosomes",
                                               i, r->chrom()[i], m.chromosomes.size()));
    if (!m.genomes.empty()) {
      if (r->genome().size() != r->samples())
        throw io::InputError(file, "has no /genome dataset, but the manifest lists genomes: build the shards again");
      for (size_t i = 0; i < r->samples(); ++i)
        if (r->genome()[i] != m.chromosomes[r->chrom()[i]].genome)
          throw io::InputError(file, fmt::format("damaged shard: sample {} has genome {}, but its chromosome {} is of "
                                                 "genome {}",
                                                 i, r->genome()[i], r->chrom()[i], m.chromosomes[r->chrom()[i]].genome));
    }
    if (verify) r->verify_tokens();
    if (sh.split != split) continue;  // verified only
    const uint32_t s = static_cast<uint32_t>(shards_.size());
    for (size_t i = 0; i < r->samples(); ++i) order_.push_back(Ref{r->sample_index()[i], s, static_cast<uint32_t>(i)});
    total_tokens_ += r->tokens();
    shards_.push_back(std::move(r));
  }
  if (order_.empty())
    throw io::InputError(dir + "/manifest.json", fmt::format("has no '{}' samples", split));
  std::sort(order_.begin(), order_.end(), [](const Ref& a, const Ref& b) { return a.sample_index < b.sample_index; });
  if (!genomes_.empty()) {
    sample_genome_.reserve(order_.size());
    for (const auto& r : order_) sample_genome_.push_back(shards_[r.shard]->genome()[r.local]);
  }
  for (size_t i = 1; i < order_.size(); ++i)
    if (order_[i].sample_index == order_[i - 1].sample_index)
      throw io::InputError(dir + "/manifest.json",
                           fmt::format("sample {} is in both {} and {}: a sample is in one shard (a copied shard?); "
                                       "build the shards again",
                                       order_[i].sample_index, shards_[order_[i - 1].shard]->path(),
                                       shards_[order_[i].shard]->path()));
}

void ShardSet::read(size_t i, std::vector<uint16_t>& out) const {
  const Ref& r = order_[i];
  shards_[r.shard]->read(r.local, out);
}

void build_batch(const std::vector<std::vector<uint16_t>>& samples, const std::vector<uint64_t>& sample_index,
                 const Masker& masker, uint64_t seed, uint64_t epoch, Batch& out) {
  build_batch(samples, sample_index, masker, seed, std::vector<uint64_t>(samples.size(), epoch), out);
}

void build_batch(const std::vector<std::vector<uint16_t>>& samples, const std::vector<uint64_t>& sample_index,
                 const Masker& masker, uint64_t seed, const std::vector<uint64_t>& epochs, Batch& out) {
  size_t longest = 0;
  for (const auto& s : samples) longest = std::max(longest, s.size());
  out.rows = static_cast<int64_t>(samples.size());
  out.cols = static_cast<int64_t>(longest + 2);
  const size_t cells = samples.size() * (longest + 2);
  out.input_ids.assign(cells, kPad);
  out.labels.assign(cells, kIgnoreLabel);
  out.attention_mask.assign(cells, 0);
  out.sample_index = sample_index;
  out.epoch = epochs;
  thread_local MaskedSample m;
  for (size_t r = 0; r < samples.size(); ++r) {
    masker.mask(samples[r].data(), samples[r].size(), seed, epochs[r], sample_index[r], m);
    const size_t base = r * (longest + 2);
    for (size_t j = 0; j < m.input_ids.size(); ++j) {
      out.input_ids[base + j] = m.input_ids[j];
      out.labels[base + j] = m.labels[j];
      out.attention_mask[base + j] = 1;
    }
  }
}

DataLoader::DataLoader(const LoaderOptions& opts, Masker masker, LoaderCursor start)
    : opts_(opts), masker_(std::move(masker)), set_(opts.shard_dir, opts.split, opts.checks), cursor_(start) {
  if (opts_.world < 1 || opts_.rank < 0 || opts_.rank >= opts_.world) throw std::invalid_argument("bad rank/world");
  if (opts_.batch_size == 0) throw std::invalid_argument("batch size must be positive");
  if (set_.size() > UINT32_MAX) throw std::invalid_argument("more than 2^32 samples in one split");
  const uint64_t world = static_cast<uint64_t>(opts_.world), rank = static_cast<uint64_t>(opts_.rank);
  if (opts_.first_samples > 0) {
    const uint64_t n = std::min<uint64_t>(opts_.first_samples, set_.size());
    per_rank_ = n > rank ? (n - rank + world - 1) / world : 0;
  } else {
    per_rank_ = set_.size() / world;
  }
  if (per_rank_ == 0 && opts_.first_samples == 0)
    throw io::InputError(opts_.shard_dir, fmt::format("{} '{}' samples cannot feed {} ranks", set_.size(), opts_.split,
                                                      opts_.world));
  if (!opts_.genome_weights.empty()) {
    const GenomeWeighting w = parse_genome_weighting(opts_.genome_weights);
    if (set_.genomes().empty())
      throw io::InputError(opts_.shard_dir + "/manifest.json",
                           fmt::format("was built from one genome (shards --genome): --genome-weights {} needs a shard "
                                       "set built from a genome list (shards --genomes LIST)",
                                       opts_.genome_weights));
    GenomeTable t;
    for (const auto& g : set_.genomes()) {
      t.names.push_back(g.name);
      t.bases.push_back(g.bases);
      t.list_weights.push_back(g.weight);
    }
    t.samples.assign(t.names.size(), 0);
    for (uint32_t g : set_.sample_genomes()) ++t.samples[g];
    try {
      probabilities_ = genemask::genome_probabilities(w, t);
    } catch (const std::invalid_argument& e) {
      throw io::InputError(opts_.shard_dir, fmt::format("'{}' split: {}", opts_.split, e.what()));
    }
  }
  if (opts_.first_samples > 0 ? cursor_.position > per_rank_ : cursor_.position >= set_.size())
    throw std::invalid_argument(fmt::format("resume cursor position {} is beyond the epoch ({} samples{})",
                                            cursor_.position, opts_.first_samples > 0 ? per_rank_ : set_.size(),
                                            opts_.first_samples > 0 ? " of this rank" : ""));
  if (per_rank_ > 0) thread_ = std::thread([this] { produce(); });  // else no batch to make
}

DataLoader::~DataLoader() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

const std::vector<uint32_t>& DataLoader::permutation(uint64_t epoch) {
  if (perm_epoch_ == epoch) return perm_;
  perm_ = probabilities_.empty() ? epoch_permutation(set_.size(), opts_.seed, epoch, opts_.shuffle)
                                 : weighted_epoch_order(set_.sample_genomes(), probabilities_, opts_.seed, epoch);
  perm_epoch_ = epoch;
  return perm_;
}

void DataLoader::stream_draws(LoaderCursor& c, std::vector<Draw>& out) const {
  const uint64_t world = static_cast<uint64_t>(opts_.world), total = set_.size();
  out.resize(opts_.batch_size);
  for (uint64_t j = 0; j < out.size(); ++j) {
    const uint64_t at = c.position + j * world + static_cast<uint64_t>(opts_.rank);
    out[j] = {c.epoch + at / total, at % total};
  }
  const uint64_t end = c.position + out.size() * world;  // the next micro-batch's first stream position
  c.epoch += end / total;
  c.position = end % total;
}

void DataLoader::first_sample_draws(LoaderCursor& c, std::vector<Draw>& out) const {
  if (c.position >= per_rank_) {
    c.epoch += 1;
    c.position = 0;
  }
  out.resize(std::min<uint64_t>(opts_.batch_size, per_rank_ - c.position));
  for (uint64_t j = 0; j < out.size(); ++j)
    out[j] = {c.epoch, (c.position + j) * static_cast<uint64_t>(opts_.world) + static_cast<uint64_t>(opts_.rank)};
  c.position += out.size();
}

void DataLoader::produce() {
  // Tests: a slow input (GENEMASK_TEST_SLOW_LOADER_S seconds more per batch), to check that
  // pretrain's input_wait and loader_busy see it.
  const char* slow = std::getenv("GENEMASK_TEST_SLOW_LOADER_S");
  const double slow_s = slow ? std::atof(slow) : 0.0;
  try {
    LoaderCursor c = cursor_;
    std::vector<Draw> draws;
    std::vector<std::vector<uint16_t>> samples;
    std::vector<uint64_t> index, epochs;
    std::vector<uint32_t> genome;
    while (true) {
      const auto t0 = std::chrono::steady_clock::now();
      if (opts_.first_samples == 0) stream_draws(c, draws);
      else first_sample_draws(c, draws);
      const size_t n = draws.size();
      samples.resize(n);
      index.resize(n);
      epochs.resize(n);
      genome.resize(set_.genomes().empty() ? 0 : n);
      for (size_t j = 0; j < n; ++j) {
        const size_t i = permutation(draws[j].epoch)[draws[j].slot];
        set_.read(i, samples[j]);
        index[j] = set_.sample_index(i);
        epochs[j] = draws[j].epoch;
        if (!genome.empty()) genome[j] = set_.genome(i);
      }
      Batch b;
      build_batch(samples, index, masker_, opts_.seed, epochs, b);
      b.genome = genome;
      b.next = c;
      if (slow_s > 0) std::this_thread::sleep_for(std::chrono::duration<double>(slow_s));
      b.produce_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait(lk, [&] { return stop_ || queue_.size() < opts_.prefetch_batches; });
      if (stop_) return;
      queue_.push_back(std::move(b));
      cv_.notify_all();
    }
  } catch (...) {
    std::lock_guard<std::mutex> lk(mu_);
    error_ = std::current_exception();
    cv_.notify_all();
  }
}

Batch DataLoader::next() {
  if (per_rank_ == 0) throw std::logic_error("DataLoader::next: this rank has no sample of the split's first samples");
  std::unique_lock<std::mutex> lk(mu_);
  cv_.wait(lk, [&] { return !queue_.empty() || error_; });
  if (queue_.empty() && error_) std::rethrow_exception(error_);
  Batch b = std::move(queue_.front());
  queue_.pop_front();
  cv_.notify_all();
  return b;
}

}  // namespace genemask
