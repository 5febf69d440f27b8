// Thread block clusters (sm_90 and later), written once for nvcc and for the CPU emulator: a kernel
// launched with IP_LAUNCH_CLUSTER (kernels/launch.h) calls these. On the GPU they are cooperative
// groups' cluster calls; compiled for an architecture without clusters (sm_80) they trap, and launchers
// must not choose a cluster kernel there. On the emulator the blocks of a cluster run together, each with
// its own dynamic shared memory (emu/cuemu.h); a kernel using these keeps to dynamic shared memory.
#pragma once

#include <cuda_runtime.h>

#if !defined(IP_CUEMU) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#include <cooperative_groups.h>
#define IP_HAS_CLUSTERS 1
#else
#define IP_HAS_CLUSTERS 0
#endif

namespace ip::cuda {

// The calling block's rank in its cluster, 0 .. cluster_blocks() - 1.
__device__ __forceinline__ unsigned cluster_rank() {
#if defined(IP_CUEMU)
  return ::cuemu::cluster_block_rank();
#elif IP_HAS_CLUSTERS
  return cooperative_groups::this_cluster().block_rank();
#else
  __trap();
  return 0;
#endif
}

__device__ __forceinline__ unsigned cluster_blocks() {
#if defined(IP_CUEMU)
  return ::cuemu::cluster_num_blocks();
#elif IP_HAS_CLUSTERS
  return cooperative_groups::this_cluster().num_blocks();
#else
  __trap();
  return 1;
#endif
}

// A barrier over every thread of the cluster, ordering shared-memory accesses across it (release /
// acquire at cluster scope). Every thread of the cluster must reach it: none may have exited.
__device__ __forceinline__ void cluster_sync() {
#if defined(IP_CUEMU)
  ::cuemu::cluster_sync();
#elif IP_HAS_CLUSTERS
  cooperative_groups::this_cluster().sync();
#else
  __trap();
#endif
}

// The address p (in the calling block's dynamic shared memory) in block `rank`'s shared memory
// (distributed shared memory: loads, stores and atomics work on it). Valid from the first cluster_sync
// until the last: a block must not exit while another may still access its shared memory.
template <class T>
__device__ __forceinline__ T* cluster_map(T* p, unsigned rank) {
#if defined(IP_CUEMU)
  return static_cast<T*>(::cuemu::cluster_map_shared(const_cast<void*>(static_cast<const void*>(p)), rank));
#elif IP_HAS_CLUSTERS
  return cooperative_groups::this_cluster().map_shared_rank(p, rank);
#else
  (void)rank;
  __trap();
  return p;
#endif
}

}  // namespace ip::cuda
