// LibTorch is found, links, computes correctly, uses a fast BLAS (a LibTorch on a reference
// BLAS runs ~14x slower), and has the CUDA build that CMake reported.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>

TEST(Torch, MatmulIsCorrectAndFast) {
  at::set_num_threads(1);
  at::manual_seed(0);
  auto a = at::randn({64, 48});
  auto b = at::randn({48, 32});
  auto c = at::matmul(a, b);
  auto A = a.accessor<float, 2>();
  auto B = b.accessor<float, 2>();
  auto C = c.accessor<float, 2>();
  double worst = 0;
  for (int i = 0; i < 64; ++i)
    for (int j = 0; j < 32; ++j) {
      double s = 0;
      for (int k = 0; k < 48; ++k) s += static_cast<double>(A[i][k]) * B[k][j];
      worst = std::max(worst, std::abs(s - C[i][j]));
    }
  EXPECT_LT(worst, 1e-4);

  const int n = 768;
  auto x = at::randn({n, n}), y = at::randn({n, n});
  at::matmul(x, y);  // warm-up
  double best_s = 1e9;
  for (int r = 0; r < 5; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    auto z = at::matmul(x, y);
    best_s = std::min(best_s, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  const double gflops = 2.0 * n * n * n / best_s / 1e9;
  std::printf("sgemm %dx%d on one thread: %.1f GFLOP/s\n", n, n, gflops);
  // A reference BLAS gives ~2-3 GFLOP/s; an optimised one (MKL in PyPI's PyTorch) gives tens.
  EXPECT_GT(gflops, 8.0) << "slow BLAS: this LibTorch's CPU matrix products run on a reference BLAS";
}

// CI has the CUDA toolkit but no GPU: the CUDA LibTorch must still load and run on the CPU,
// and its CUDA part must be linked in (not dropped by --as-needed).
TEST(Torch, CudaBuildAsConfigured) {
  EXPECT_EQ(at::detail::getCUDAHooks().isBuilt(), static_cast<bool>(GENEMASK_EXPECT_TORCH_CUDA));
}
