// libFuzzer target for the FASTA parser and the counting scanner.
// Oracle: the input either parses or raises io::InputError (nothing else, no crash, no
// sanitizer report); when it parses, counting it as 1, 2 or 5 ranks gives the same counts
// and the record lengths the reader saw.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "genemask/kmer/kmer_count.hpp"
#include "io/error.hpp"
#include "io/fasta.hpp"

using namespace genemask;

static std::string temp_path() {
  static std::string p = [] {
    const char* dir = std::getenv("TMPDIR");
    return std::string(dir ? dir : "/tmp") + "/genemask-fuzz-" + std::to_string(::getpid()) + ".fa";
  }();
  return p;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = temp_path();
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return 0;
  std::fwrite(data, 1, size, f);
  std::fclose(f);

  std::vector<io::FastaRecordSummary> records;
  try {
    records = io::read_fasta(path, io::FastaVisitor{});
  } catch (const io::InputError&) {
    return 0;
  }
  const io::FileInfo info = io::probe_file(path);
  CountOptions opts;
  opts.kmax = 4;
  KmerCounts reference;
  for (int ranks : {1, 2, 5}) {
    RankCounts sum;
    try {
      for (int r = 0; r < ranks; ++r) sum.add(count_owned(info, io::partition(info, r, ranks, 7), opts));
    } catch (const io::InputError& e) {
      std::fprintf(stderr, "reader accepted the input but the counter (%d ranks) rejected it: %s\n", ranks, e.what());
      std::abort();
    }
    auto recs = stitch_records(info, sum.segments);
    if (recs.size() != records.size()) std::abort();
    for (size_t i = 0; i < recs.size(); ++i)
      if (recs[i].name != records[i].name || recs[i].length != records[i].length) std::abort();
    KmerCounts c = finalize_counts(sum);
    if (ranks == 1) reference = c;
    else if (c.counts != reference.counts) std::abort();
  }
  return 0;
}
