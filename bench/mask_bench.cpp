// Masking + batching throughput (sequences/s on one core) for the three strategies, on
// 510-token sequences. Writes the sequences to a file so the NumPy benchmark uses the same.
// With a shard directory it also times the whole DataLoader (HDF5 reads, shuffle, masking,
// batching, prefetch thread) on real shards.
// Usage: mask_bench OUT_TOKENS_FILE [SEQUENCES [SHARD_DIR]]
// SEQUENCES (default 20000) is a positive multiple of 10, the batch: every sequence counted
// in seq_per_s is one the masking processed.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "bench/bench_args.hpp"

#include "genemask/kmer/kmer.hpp"
#include "genemask/corpus/loader.hpp"
#include "genemask/corpus/tokenizer.hpp"

using namespace genemask;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: mask_bench OUT_TOKENS_FILE [SEQUENCES [SHARD_DIR]]\n");
    return 2;
  }
  const size_t batch = 10;  // sequences a batch
  size_t nseq = 20000;
  try {
    if (argc > 2) nseq = static_cast<size_t>(bench::positive_integer("SEQUENCES", argv[2]));
    if (nseq % batch != 0)
      throw std::invalid_argument(
          fmt::format("SEQUENCES must be a multiple of {} (the batch), got '{}'", batch, argv[2]));
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "mask_bench: error: %s\n", e.what());
    return 2;
  }
  std::mt19937_64 rng(1);
  std::vector<std::vector<uint16_t>> seqs(nseq);
  std::string bases(515, 'A');
  for (auto& s : seqs) {
    for (auto& c : bases) c = "ACGT"[rng() % 4];
    s = tokenize(bases);
  }
  {
    std::ofstream out(argv[1], std::ios::binary);
    for (const auto& s : seqs) out.write(reinterpret_cast<const char*>(s.data()), static_cast<std::streamsize>(s.size() * 2));
  }
  std::vector<uint32_t> grank(4096);
  std::iota(grank.begin(), grank.end(), 1u);
  std::shuffle(grank.begin(), grank.end(), rng);
  std::vector<std::pair<int, uint64_t>> units;
  for (int k = 2; k <= 10; ++k)
    for (int i = 0; i < 4000; ++i) units.emplace_back(k, rng() % num_kmers(k));
  for (const auto& [strategy, kind] : kMaskingNames) {
    MaskingConfig cfg;
    cfg.kind = strategy;
    cfg.grank = grank;
    cfg.pmi_units = units;
    Masker m(cfg);
    std::vector<std::vector<uint16_t>> b(batch);
    std::vector<uint64_t> idx(batch);
    Batch out;
    double best = 1e9;
    for (int rep = 0; rep < 3; ++rep) {
      auto t0 = std::chrono::steady_clock::now();
      for (size_t i = 0; i + batch <= nseq; i += batch) {
        for (size_t j = 0; j < batch; ++j) {
          b[j] = seqs[i + j];
          idx[j] = i + j;
        }
        build_batch(b, idx, m, 42, 0, out);
      }
      best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    std::printf("{\"impl\":\"genemask\",\"strategy\":\"%s\",\"sequences\":%zu,\"seconds\":%.6f,\"seq_per_s\":%.0f}\n", kind,
                nseq, best, static_cast<double>(nseq) / best);
  }
  if (argc > 3) {
    LoaderOptions o;
    o.shard_dir = argv[3];
    o.batch_size = 10;
    DataLoader dl(o, Masker(MaskingConfig{}));
    const uint64_t batches = std::min<uint64_t>(dl.batches_per_epoch(), 3000);
    auto t0 = std::chrono::steady_clock::now();
    uint64_t seqs_seen = 0, tokens = 0;
    for (uint64_t i = 0; i < batches; ++i) {
      Batch b = dl.next();
      seqs_seen += static_cast<uint64_t>(b.rows);
      tokens += b.real_tokens();
    }
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("{\"impl\":\"genemask-loader\",\"strategy\":\"random\",\"sequences\":%llu,\"seconds\":%.6f,"
                "\"seq_per_s\":%.0f,\"tokens_per_s\":%.0f}\n",
                static_cast<unsigned long long>(seqs_seen), dt, static_cast<double>(seqs_seen) / dt,
                static_cast<double>(tokens) / dt);
  }
  return 0;
}
