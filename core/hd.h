// Host-device annotation for math shared by the CPU backend and the CUDA kernels.
// Plain `inline` without nvcc, so the CPU tests exercise the same code the kernels run.
#pragma once

#if defined(__CUDACC__)
#define IP_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define IP_HOST_DEVICE inline
#endif

// Lets the host compiler vectorize a float reduction (a fixed reordering: the same bits for the same
// binary whatever the thread count). Nothing under nvcc.
// IP_SIMD: the loop that follows has no dependence between iterations (vectorize it as written).
#if defined(__CUDACC__)
#define IP_SIMD_REDUCE(...)
#define IP_SIMD
#else
#define IP_PRAGMA(x) _Pragma(#x)
#define IP_SIMD_REDUCE(...) IP_PRAGMA(omp simd reduction(__VA_ARGS__))
#define IP_SIMD IP_PRAGMA(omp simd)
#endif
