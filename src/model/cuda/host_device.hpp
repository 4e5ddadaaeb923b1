#pragma once
// GENEMASK_HOST_DEVICE: __host__ __device__ where nvcc compiles, nothing in plain C++, for the
// headers whose code both the kernels and the CPU tests run (smem_sum_slots.hpp,
// int_divider.hpp).
#if defined(__CUDACC__)
#define GENEMASK_HOST_DEVICE __host__ __device__
#else
#define GENEMASK_HOST_DEVICE
#endif
