// The gradient all-reduce of data-parallel pretraining alone: hpc::allreduce_sum_f32 (the
// call the trainer makes per gradient bucket) of FLOATS floats, ITERS times after 3 warm-up
// calls. Rank 0 prints one JSON line: ranks, hosts, floats, the median seconds per call and
// the bytes a ring all-reduce would send per rank (2 (p-1)/p x 4 FLOATS, the closed form
// that bench/multihost_bench.sh compares with the bytes it sees on each host's link).
// Usage: mpirun -n P allreduce_bench FLOATS [ITERS]
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <set>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>

#include "bench/bench_args.hpp"
#include "hpc/mpi.hpp"
#include "io/atomic_file.hpp"

int main(int argc, char** argv) {
  genemask::hpc::MpiEnv env(argc, argv);
  if (argc < 2) {
    std::cerr << "usage: mpirun -n P allreduce_bench FLOATS [ITERS]\n";
    return 2;
  }
  uint64_t n = 0;
  int iters = 20;
  try {  // every rank reads the same arguments: rank 0 says what is wrong
    n = static_cast<uint64_t>(genemask::bench::positive_integer("FLOATS", argv[1]));
    if (argc > 2) iters = static_cast<int>(genemask::bench::positive_integer("ITERS", argv[2]));
  } catch (const std::invalid_argument& e) {
    if (env.rank() == 0) std::cerr << "allreduce_bench: error: " << e.what() << "\n";
    return 2;
  }
  std::vector<float> buf(n, 1.0f);
  std::vector<double> t;
  for (int i = 0; i < iters + 3; ++i) {
    genemask::hpc::barrier(MPI_COMM_WORLD);
    const auto t0 = std::chrono::steady_clock::now();
    genemask::hpc::allreduce_sum_f32(buf.data(), n, MPI_COMM_WORLD);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (i >= 3) t.push_back(genemask::hpc::allreduce_max_double(s, MPI_COMM_WORLD));
  }
  const auto hosts = genemask::hpc::gather_bytes(genemask::io::host_name(), 0, MPI_COMM_WORLD);
  if (env.rank() == 0) {
    std::sort(t.begin(), t.end());
    const int p = env.size();
    const double ring = p > 1 ? 2.0 * (p - 1) / p * 4.0 * static_cast<double>(n) : 0.0;
    std::cout << fmt::format(
                     "{{\"ranks\":{},\"hosts\":{},\"floats\":{},\"iters\":{},\"median_s\":{:.6g},\"min_s\":{:.6g},"
                     "\"ring_bytes_per_rank\":{:.0f},\"gbit_per_s\":{:.3g}}}",
                     p, std::set<std::string>(hosts.begin(), hosts.end()).size(), n, iters, t[t.size() / 2], t[0],
                     ring, ring * 8 / t[t.size() / 2] / 1e9)
              << std::endl;
  }
  return 0;
}
