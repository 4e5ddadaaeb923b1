#pragma once
// The launcher of cuda/philox_seed.cu: a Philox state of LibTorch's CUDA generator written as
// the seed and offset that cuDNN's dropout reads from device memory.
#include <ATen/cuda/PhiloxCudaState.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace genemask::model::cuda {

/// One thread writes `state`'s seed and offset to seed[0] and offset[0] (int64, device). Under
/// a CUDA graph's capture the state's offset is read from the generator's device counter when
/// the graph replays (at::cuda::philox::unpack), so each replay draws anew, as LibTorch's own
/// dropout does.
void write_philox_seed(at::PhiloxCudaState state, int64_t* seed, int64_t* offset, cudaStream_t stream);

}  // namespace genemask::model::cuda
