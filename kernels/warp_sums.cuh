// Several sums over a warp at once (kernels/score.cuh's CUDA-core scoring, kernels/pool_fast.cuh's cosine
// weights). warp_sums<N> sums N values (N a power of two <= 32) over the warp by halving exchanges: after
// the step of offset o, lanes with bit o set hold the upper half of the values still in play. That is
// N - 1 + 5 - log2 N shuffles for all N sums instead of 5 N. Lane l ends with the warp's sum of value
// warp_sums_entry<N>(l); warp_sums_lane<N>(i) names a lane holding the sum of value i (for a broadcast).
// The sums are deterministic but add in another order than a butterfly per value.
#pragma once

namespace ip::cuda::detail {

// One halving step (n values in play, offset o), then the next; template recursion so that every index
// is a compile-time one (a loop over n left the values in local memory at N = 16).
template <int n, int o, int N>
__device__ __forceinline__ void warp_sums_step(float (&v)[N], int lane) {
  if constexpr (n > 1) {
    const bool upper = (lane & o) != 0;
#pragma unroll
    for (int i = 0; i < n / 2; ++i) {
      const float send = upper ? v[i] : v[i + n / 2];
      const float keep = upper ? v[i + n / 2] : v[i];
      v[i] = keep + __shfl_xor_sync(0xFFFFFFFFu, send, o);
    }
    warp_sums_step<n / 2, o / 2, N>(v, lane);
  }
}

template <int N>
__device__ __forceinline__ float warp_sums(float (&v)[N], int lane) {
  static_assert(N >= 1 && N <= 32 && (N & (N - 1)) == 0, "N a power of two <= 32");
  warp_sums_step<N, 16, N>(v, lane);
  float s = v[0];
#pragma unroll
  for (int o = 16 / N; o > 0; o >>= 1) s += __shfl_xor_sync(0xFFFFFFFFu, s, o);
  return s;
}

// The value whose sum lane `lane` holds after warp_sums<N>.
template <int N>
__host__ __device__ constexpr int warp_sums_entry(int lane) {
  int u = 0;
  for (int n = N, o = 16; n > 1; n >>= 1, o >>= 1)
    if (lane & o) u += n / 2;
  return u;
}

// The lowest lane holding the sum of value i after warp_sums<N> (warp_sums_entry<N> of it is i).
template <int N>
__host__ __device__ constexpr int warp_sums_lane(int i) {
  int lane = 0;
  for (int n = N, o = 16; n > 1; n >>= 1, o >>= 1)
    if (i & (n / 2)) lane |= o;
  return lane;
}

// The smallest power of two >= n (n >= 1).
__host__ __device__ constexpr int warp_sums_width(int n) {
  int w = 1;
  while (w < n) w <<= 1;
  return w;
}

}  // namespace ip::cuda::detail
