// Dispatch of the pooling kernels for one key type: D and G to compile-time values, launch, check.
// Instantiated once per key type (pool_f32.cu, pool_f16.cu, pool_bf16.cu: three translation units
// that nvcc compiles in parallel); pool.cu switches on the key type.
//   D in {64, 128, 256} x G in {1, 2, 4, 8, 16} with 16-byte aligned keys and payload: fast kernel
//   (for 2-byte keys at D = 128, G = 4, its pipelined form when PoolArgs::pipelined asks).
//   Anything else (D = 96, G = 3, an offset view, ...): the generic kernel, correct for every D and G
//   that validation admits — a deliberate, documented path, not a silent one.
#pragma once

#include <climits>
#include <cstdint>

#include "kernels/cuda_check.h"
#include "kernels/launch.h"
#include "kernels/pool.cuh"

namespace ip::cuda::detail {

inline bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

inline int blocks_for(long long entries, int per_block) {
  const long long blocks = (entries + per_block - 1) / per_block;
  IP_REQUIRE(blocks <= INT_MAX, "cuda pool: {} entries exceed one launch's grid", entries);
  return static_cast<int>(blocks);
}

template <int D, int G, class K>
void launch_fast(const PoolArgs& a, cudaStream_t s) {
  constexpr int kWarps = pool_tuning::kFastWarpsPerBlock;
  constexpr int kGroups = kWarps * fast_groups_per_warp<D, G, K>();  // per block
  IP_LAUNCH(blocks_for(a.batch.total_entries, kGroups), kWarps * 32, 0, s, pool_fast_kernel<D, G, K>)(a);
  IP_CUDA_CHECK(cudaGetLastError());
}

// The pipelined form (PoolArgs::pipelined): at most one wave of the blocks an SM holds.
template <int D, int G, class K>
void launch_fast_pipelined(const PoolArgs& a, cudaStream_t s) {
  constexpr int kWarps = pool_tuning::kFastWarpsPerBlock;
  constexpr int kGroups = kWarps;  // per block and stride step: one group a warp (pool_fast_pipelined_warp)
  int dev = 0, sms = 0, per_sm = 0;
  IP_CUDA_CHECK(cudaGetDevice(&dev));
  IP_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  IP_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, pool_fast_pipelined_kernel<D, G, K>,
                                                              kWarps * 32, 0));
  const long long wave = static_cast<long long>(sms) * (per_sm > 1 ? per_sm : 1);
  const long long needed = blocks_for(a.batch.total_entries, kGroups);
  IP_LAUNCH(static_cast<int>(needed < wave ? needed : wave), kWarps * 32, 0, s,
            pool_fast_pipelined_kernel<D, G, K>)(a);
  IP_CUDA_CHECK(cudaGetLastError());
}

template <class K>
void launch_generic(const PoolArgs& a, cudaStream_t s) {
  const long long per_warp = generic_smem_floats(a.dim, a.group_size) * static_cast<long long>(sizeof(float));
  int warps = pool_tuning::kGenericWarpsPerBlock;
  while (warps > 1 && warps * per_warp > pool_tuning::kGenericMaxSmemBytes) --warps;
  const std::size_t smem = static_cast<std::size_t>(warps * per_warp);  // <= 48 KiB: validated
  IP_LAUNCH(blocks_for(a.batch.total_entries, warps), warps * 32, smem, s, pool_generic_kernel<K>)(a, warps);
  IP_CUDA_CHECK(cudaGetLastError());
}

template <int D, class K>
bool try_fast_group(const PoolArgs& a, cudaStream_t s) {
  switch (a.group_size) {
    case 1: launch_fast<D, 1, K>(a, s); return true;
    case 2: launch_fast<D, 2, K>(a, s); return true;
    case 4:
      if constexpr (D == 128 && sizeof(typename K::raw) == 2) {
        if (a.pipelined) {
          launch_fast_pipelined<D, 4, K>(a, s);
          return true;
        }
      }
      launch_fast<D, 4, K>(a, s);
      return true;
    case 8: launch_fast<D, 8, K>(a, s); return true;
    case 16: launch_fast<D, 16, K>(a, s); return true;
    default: return false;
  }
}

template <class K>
void dispatch(const PoolArgs& a, cudaStream_t s) {
  bool done = false;
  if (aligned16(a.keys) && aligned16(a.payload)) {
    switch (a.dim) {
      case 64: done = try_fast_group<64, K>(a, s); break;
      case 128: done = try_fast_group<128, K>(a, s); break;
      case 256: done = try_fast_group<256, K>(a, s); break;
      default: break;
    }
  }
  if (!done) launch_generic<K>(a, s);
}

}  // namespace ip::cuda::detail
