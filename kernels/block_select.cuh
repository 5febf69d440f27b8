// Block-wide building blocks in shared memory, used by the top-k kernels (kernels/topk.cuh,
// kernels/topk_cluster.cuh) and tested on their own (tests/gpu/topk_select_test.cu): an exclusive
// prefix sum over the block, a bitonic sort and a radix select. Device functions only: a test program may
// include this header and link the library (a kernel that is not a template, defined in a header, is an
// external definition in every object file that includes the header: two in such a program).
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

namespace ip::cuda::detail {

// Bins of block_radix_select's histogram (its digits have at most 11 bits).
constexpr int kBlockSelectBins = 2048;

// Exclusive prefix sum over the block (blockDim.x a multiple of 32, at most 1024); `total` gets the sum.
// Every thread of the block must call it. warp_sums: 32 words of shared memory for the warps' sums.
__device__ __forceinline__ std::uint32_t block_exclusive_sum(std::uint32_t v, std::uint32_t& total,
                                                             std::uint32_t* warp_sums) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  std::uint32_t inc = v;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const std::uint32_t y = __shfl_up_sync(0xFFFFFFFFu, inc, o);
    if (lane >= o) inc += y;
  }
  __syncthreads();  // warp_sums may still be read by a previous call
  if (lane == 31) warp_sums[warp] = inc;
  __syncthreads();
  std::uint32_t before = 0, all = 0;
  for (int w = 0; w < warps; ++w) {
    if (w < warp) before += warp_sums[w];
    all += warp_sums[w];
  }
  total = all;
  return before + inc - v;
}

// The same with the warps' sums in a static shared array.
__device__ __forceinline__ std::uint32_t block_exclusive_sum(std::uint32_t v, std::uint32_t& total) {
  __shared__ std::uint32_t warp_tot[32];
  return block_exclusive_sum(v, total, warp_tot);
}

// One compare-exchange of the bitonic network at element i (partner i ^ stride, value y): the value i
// keeps. Runs of `size` alternate direction; the last run (size == n) is the wanted one.
template <bool kDescending, class T>
__device__ __forceinline__ T bitonic_keep(T x, T y, int i, int size, int stride) {
  const bool big_first = ((i & size) == 0) == kDescending;  // the lower index of the pair gets the bigger
  const bool want_big = ((i & stride) == 0) == big_first;
  return want_big ? (x < y ? y : x) : (x < y ? x : y);
}

// The smallest n >= max(count, 32 E) that is a power of two: the size of block_bitonic_sort<.., E> for
// count values (the rest padding).
template <int E>
__host__ __device__ __forceinline__ int bitonic_size(int count) {
  int n = 32 * E;
  while (n < count) n <<= 1;
  return n;
}

// Sorts v[0, n) in shared memory by a bitonic network, descending or ascending; n a power of two with
// 32 E <= n <= E blockDim.x (bitonic_size). Thread t < n / E (whole warps) holds v[t E, t E + E) in
// registers: steps of stride < E run in its registers, strides below 32 E by warp shuffles, and only
// the larger ones through shared memory (two __syncthreads each): for n = 2048 and E = 8, 6 of the 66
// steps instead of all of them. Every thread of the block must call it, after v is written and synced.
template <bool kDescending, int E, class T>
__device__ __forceinline__ void block_bitonic_sort(T* v, int n) {
  static_assert(E >= 1 && (E & (E - 1)) == 0, "E is a power of two");
  const int t = threadIdx.x;
  const bool active = t < n / E;
  T x[E];
  if (active) {
#pragma unroll
    for (int e = 0; e < E; ++e) x[e] = v[t * E + e];
  }
  for (int size = 2; size <= n; size <<= 1) {
    int stride = size >> 1;
    for (; stride >= 32 * E; stride >>= 1) {  // partner in another warp
      __syncthreads();                         // v's last reads are done
      if (active) {
#pragma unroll
        for (int e = 0; e < E; ++e) v[t * E + e] = x[e];
      }
      __syncthreads();
      if (active) {
#pragma unroll
        for (int e = 0; e < E; ++e) {
          const int i = t * E + e;
          x[e] = bitonic_keep<kDescending>(x[e], v[i ^ stride], i, size, stride);
        }
      }
    }
    if (!active) continue;
    for (; stride >= E; stride >>= 1) {  // partner in another lane of the warp
#pragma unroll
      for (int e = 0; e < E; ++e) {
        const int i = t * E + e;
        x[e] = bitonic_keep<kDescending>(x[e], __shfl_xor_sync(0xFFFFFFFFu, x[e], stride / E), i, size, stride);
      }
    }
#pragma unroll
    for (int s = E / 2; s >= 1; s >>= 1) {  // partner in this thread's registers
      if (s < size) {
#pragma unroll
        for (int e = 0; e < E; ++e) {
          if ((e & s) != 0) continue;
          const int i = t * E + e;
          const T a = x[e], b = x[e + s];
          x[e] = bitonic_keep<kDescending>(a, b, i, size, s);
          x[e + s] = bitonic_keep<kDescending>(b, a, i + s, size, s);
        }
      }
    }
  }
  __syncthreads();
  if (active) {
#pragma unroll
    for (int e = 0; e < E; ++e) v[t * E + e] = x[e];
  }
  __syncthreads();
}

// block_bitonic_sort with the values spread over the whole block: E = n / blockDim.x values a thread (1
// when n is smaller, at most kMaxE), n = bitonic_size<1>(count). Fewer threads holding more values each
// would need fewer barriers, but they also load and store the values with fewer threads: with 64 threads
// of 8 values, the final sort of k = 512 took 19.7 us under Nsight Compute on an H200 (2026-12-04), the
// shared-memory sort of 512 threads before it 10.6 us.
template <bool kDescending, int kMaxE, class T>
__device__ __forceinline__ void block_bitonic_sort_spread(T* v, int n) {
  const int per = n / static_cast<int>(blockDim.x);
  if constexpr (kMaxE >= 8) {
    if (per >= 8) return block_bitonic_sort<kDescending, 8>(v, n);
  }
  if constexpr (kMaxE >= 4) {
    if (per >= 4) return block_bitonic_sort<kDescending, 4>(v, n);
  }
  if constexpr (kMaxE >= 2) {
    if (per >= 2) return block_bitonic_sort<kDescending, 2>(v, n);
  }
  block_bitonic_sort<kDescending, 1>(v, n);
}

// The rank-th largest (1 <= rank <= n) of v[0, n) in shared memory (T: std::uint32_t or std::uint64_t),
// by a most-significant-digit radix select over digits of 11 bits (the last one shorter) with the shared
// histogram h[kBlockSelectBins]. Every thread of the block must call it (blockDim.x a multiple of 32, at
// most 1024), after v is written and synced.
template <class T>
__device__ __forceinline__ T block_radix_select(const T* v, int n, std::uint32_t rank, std::uint32_t* h) {
  __shared__ T found_prefix;
  __shared__ std::uint32_t found_rem;
  T prefix = 0, above_mask = 0;  // digits found so far, and the bits they cover
  std::uint32_t rem = rank;
  for (int top = static_cast<int>(8 * sizeof(T)); top > 0;) {
    const int bits = top >= 11 ? 11 : top, shift = top - bits, bins = 1 << bits;
    const std::uint32_t dmask = (1u << bits) - 1u;
    for (int d = threadIdx.x; d < bins; d += blockDim.x) h[d] = 0;
    if (threadIdx.x == 0) {
      found_prefix = prefix;
      found_rem = rem;
    }
    __syncthreads();
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
      const T x = v[i];
      if ((x & above_mask) == prefix) atomicAdd(&h[static_cast<std::uint32_t>(x >> shift) & dmask], 1u);
    }
    __syncthreads();
    // Thread t owns the `per` bins below bins - t per, so lower threads own higher digits.
    const int per = (bins + static_cast<int>(blockDim.x) - 1) / static_cast<int>(blockDim.x);
    const int hi = bins - static_cast<int>(threadIdx.x) * per;
    std::uint32_t local = 0;
    for (int i = 0; i < per && hi - 1 - i >= 0; ++i) local += h[hi - 1 - i];
    std::uint32_t total;
    const std::uint32_t before = block_exclusive_sum(local, total);
    if (before < rem && rem <= before + local) {
      std::uint32_t cum = before;
      for (int i = 0; i < per && hi - 1 - i >= 0; ++i) {
        const std::uint32_t c = h[hi - 1 - i];
        if (cum < rem && rem <= cum + c) {
          found_prefix = prefix | (static_cast<T>(hi - 1 - i) << shift);
          found_rem = rem - cum;
        }
        cum += c;
      }
    }
    __syncthreads();
    prefix = found_prefix;
    rem = found_rem;
    above_mask |= static_cast<T>(dmask) << shift;
    __syncthreads();  // found_* are read by every thread before the next digit writes them
    top = shift;
  }
  return prefix;
}

}  // namespace ip::cuda::detail
