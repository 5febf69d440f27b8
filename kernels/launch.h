// Kernel launches and dynamic shared memory, written once for nvcc and for the CPU emulator (emu/),
// which compiles the same kernel sources with the host compiler.
//   IP_LAUNCH(grid, block, smem_bytes, stream, kernel)(args...)   is   kernel<<<grid, block, smem, stream>>>(args...)
//   IP_DYNAMIC_SHARED(float, smem);                                is   extern __shared__ float smem[];
//   IP_LAUNCH_CHAINED(grid, block, smem_bytes, stream, chain, kernel)(args...)
//       the same launch, and when `chain` is true (sm_90 and later: programmatic dependent launch) the GPU may
//       start it while the kernel ahead of it in the stream still runs. Such a kernel must call
//       wait_for_prior_grids() before it touches memory the kernels ahead of it write (every chained kernel
//       here calls it first), and calls allow_dependents() to let the next chained kernel start early.
//       Errors are left for cudaGetLastError, as with <<<>>>. On the emulator: IP_LAUNCH, and a chained
//       launch (chain true) any of whose threads exits without calling wait_for_prior_grids is reported.
//   IP_LAUNCH_CLUSTER(grid, block, smem_bytes, stream, cluster, kernel)(args...)
//       the same launch in thread block clusters of `cluster` blocks along x (sm_90 and later; grid.x a
//       multiple of it; kernels/cluster.cuh has the device side). Errors are left for cudaGetLastError.
//       On the emulator the blocks of a cluster run together (emu/cuemu.h).
#pragma once

#if defined(IP_CUEMU)
#define IP_LAUNCH(grid, block, smem, stream, ...) \
  ::cuemu::launch(__FILE__, __LINE__, #__VA_ARGS__, grid, block, smem, stream, __VA_ARGS__)
#define IP_LAUNCH_CHAINED(grid, block, smem, stream, chain, ...) \
  ::cuemu::launch_chained(__FILE__, __LINE__, #__VA_ARGS__, grid, block, smem, stream, chain, __VA_ARGS__)
#define IP_LAUNCH_CLUSTER(grid, block, smem, stream, cluster, ...) \
  ::cuemu::launch_cluster(__FILE__, __LINE__, #__VA_ARGS__, grid, block, smem, stream, cluster, __VA_ARGS__)
#define IP_DYNAMIC_SHARED(type, name) type* const name = reinterpret_cast<type*>(::cuemu::dynamic_shared())
#else
#include <cstddef>
#include <utility>

#include <cuda_runtime.h>

#define IP_LAUNCH(grid, block, smem, stream, ...) __VA_ARGS__<<<grid, block, smem, stream>>>
#define IP_LAUNCH_CHAINED(grid, block, smem, stream, chain, ...) \
  ::ip::cuda::ChainedLaunch{grid, block, smem, stream, chain, __VA_ARGS__}
#define IP_LAUNCH_CLUSTER(grid, block, smem, stream, cluster, ...) \
  ::ip::cuda::ClusterLaunch{grid, block, smem, stream, cluster, __VA_ARGS__}
#define IP_DYNAMIC_SHARED(type, name) extern __shared__ __align__(16) type name[]

namespace ip::cuda {

// cudaLaunchKernelEx with n launch attributes; the error stays for cudaGetLastError, as with <<<>>>.
template <class... P, class... A>
void launch_ex(dim3 grid, dim3 block, std::size_t smem, cudaStream_t stream, cudaLaunchAttribute* attrs, unsigned n,
               void (*kernel)(P...), A&&... args) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cfg.attrs = attrs;
  cfg.numAttrs = n;
  (void)cudaLaunchKernelEx(&cfg, kernel, std::forward<A>(args)...);
}

template <class... P>
struct ChainedLaunch {
  dim3 grid, block;
  std::size_t smem;
  cudaStream_t stream;
  bool chain;
  void (*kernel)(P...);
  template <class... A>
  void operator()(A&&... args) const {
    cudaLaunchAttribute attr{};
    attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr.val.programmaticStreamSerializationAllowed = 1;
    launch_ex(grid, block, smem, stream, &attr, chain ? 1 : 0, kernel, std::forward<A>(args)...);
  }
};
template <class... P>
ChainedLaunch(dim3, dim3, std::size_t, cudaStream_t, bool, void (*)(P...)) -> ChainedLaunch<P...>;

template <class... P>
struct ClusterLaunch {
  dim3 grid, block;
  std::size_t smem;
  cudaStream_t stream;
  unsigned cluster;
  void (*kernel)(P...);
  template <class... A>
  void operator()(A&&... args) const {
    cudaLaunchAttribute attr{};
    attr.id = cudaLaunchAttributeClusterDimension;
    attr.val.clusterDim.x = cluster;
    attr.val.clusterDim.y = 1;
    attr.val.clusterDim.z = 1;
    launch_ex(grid, block, smem, stream, &attr, 1, kernel, std::forward<A>(args)...);
  }
};
template <class... P>
ClusterLaunch(dim3, dim3, std::size_t, cudaStream_t, unsigned, void (*)(P...)) -> ClusterLaunch<P...>;

}  // namespace ip::cuda
#endif

// Device side of IP_LAUNCH_CHAINED (griddepcontrol, sm_90 and later; nothing elsewhere; on the emulator,
// where a kernel starts only after the one before it has finished, the wait is only recorded).
#if defined(IP_CUEMU)
namespace ip::cuda {
inline void wait_for_prior_grids() { ::cuemu::griddep_wait(); }
inline void allow_dependents() {}
}  // namespace ip::cuda
#else
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define IP_GRIDDEP(op) asm volatile(op ::: "memory")
#else
#define IP_GRIDDEP(op) ((void)0)
#endif
namespace ip::cuda {
__device__ __forceinline__ void wait_for_prior_grids() { IP_GRIDDEP("griddepcontrol.wait;"); }
__device__ __forceinline__ void allow_dependents() { IP_GRIDDEP("griddepcontrol.launch_dependents;"); }
}  // namespace ip::cuda
#undef IP_GRIDDEP
#endif
