#pragma once
// Rows in flight of the fused bias + GELU kernels (cuda/bias_gelu.cu): how many of a thread's
// rows they load before they use the first, so that more loads are in flight to cover the
// memory's latency. Every choice computes the same bits: each thread still takes its rows,
// and adds their bias gradients, in the same order. No CUDA or Torch headers: the model's
// code and its tests include it on any build.
namespace genemask::model::cuda {

/// The kernels' default: one row at a time, as they were first measured, until a GPU's
/// kernel benchmark (bench/kernel_bench.cpp) has timed the others.
constexpr int kBiasGeluRowsInFlight = 1;
/// The choices the kernels are compiled for.
constexpr bool bias_gelu_rows_in_flight_supported(int rows) { return rows == 1 || rows == 2 || rows == 4; }

}  // namespace genemask::model::cuda
