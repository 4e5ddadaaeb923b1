// A Philox state written as device scalars (philox_seed_kernels.hpp).
#include "model/cuda/philox_seed_kernels.hpp"

#include <ATen/cuda/detail/UnpackRaw.cuh>

namespace genemask::model::cuda {
namespace {

__global__ void write_philox_seed_kernel(at::PhiloxCudaState state, int64_t* seed, int64_t* offset) {
  const auto unpacked = at::cuda::philox::unpack(state);
  *seed = static_cast<int64_t>(std::get<0>(unpacked));
  *offset = static_cast<int64_t>(std::get<1>(unpacked));
}

}  // namespace

void write_philox_seed(at::PhiloxCudaState state, int64_t* seed, int64_t* offset, cudaStream_t stream) {
  write_philox_seed_kernel<<<1, 1, 0, stream>>>(state, seed, offset);
}

}  // namespace genemask::model::cuda
