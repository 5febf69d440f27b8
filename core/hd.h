// Host-device annotation for math shared by the CPU backend and the CUDA kernels.
// Plain `inline` without nvcc, so the CPU tests exercise the same code the kernels run.
#pragma once

#if defined(__CUDACC__)
#define IP_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define IP_HOST_DEVICE inline
#endif

// IP_SIMD: the loop that follows has no dependence between iterations (vectorize it as written). Host
// float reductions keep their own lanes in such loops (core/weights.h), in an order written out, rather
// than an `omp simd reduction`, whose order the compiler picks. Nothing under nvcc.
#if defined(__CUDACC__)
#define IP_SIMD
#else
#define IP_PRAGMA(x) _Pragma(#x)
#define IP_SIMD IP_PRAGMA(omp simd)
#endif
