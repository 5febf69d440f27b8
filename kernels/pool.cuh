// Fused weighting + pooling + quantization kernels (launcher: kernels/pool.cu; CPU reference:
// core/pool.cc build_index; shared per-token math: core/weights.h, core/quant_math.h, core/numeric.h).
//
// Byte layout
//   keys     [total_tokens, D] row-major, fp32 / fp16 / bf16 (raw IEEE / bf16 bits), request b's tokens
//            at rows [token_offset[b], token_offset[b+1]).
//   payload  rows of D elements of element_bytes(precision) (4 / 2 / 2 / 1 / 1), row-major, no padding.
//            Entry e (global over the batch) is row e, or rows 2e (element-wise max) and 2e+1 (min)
//            for maxmin. int8 bytes are two's complement, fp8 is OCP e4m3fn.
//   scales   [rows] fp32, int8 and fp8 only: value = decode(payload) * scale (core/quant.h).
//   weights  [total_tokens] fp32, optional: the weight of each token in its group (1 for
//            uniform, maxmin, exact), before normalisation by the group's sum.
//   Update mode (prev_weights set, kernels/pool.h): after its weights, a warp decides whether its
//            entry is pooled (update_gate); if not, it returns without writing anything else.
//
// Thread mapping
//   One warp per entry (group of G <= 16 consecutive tokens of one request; the last group of a
//   request may hold fewer; the fast path gives a warp two groups of 2-byte keys where they fit). The
//   warp finds its request with a binary search of entry_offset (core/segments.h), so requests of any
//   lengths share one launch without padding; a batch of one request needs no search and no offset load.
//   Fast path (D in {64, 128, 256}, G in {1, 2, 4, 8, 16}, keys and payload 16-byte aligned):
//     lane l owns E = D/32 elements of every row, in NC chunks of VE contiguous elements
//     (VE = min(E, 16 bytes / key bytes)): chunk c covers d = (32c + l) VE ... + VE - 1, so each load
//     instruction of the warp reads 32 VE contiguous keys (fully coalesced, up to 16 bytes a lane).
//     All G rows are loaded into registers before any use (G x E floats a lane), with streaming
//     loads (read once). Per-row dot products (cosine) are lane partials + xor shuffles (a group's
//     2G + 1 sums together: kernels/warp_sums.cuh); token r's weight is computed by lane r and
//     shuffled to every lane (kernels/pool_fast.cuh spread_weights). The composite is written once,
//     VE elements a lane, streaming stores.
//   Generic path (any D, any G, any alignment): lane l owns d = l, l + 32, ...; per-warp shared
//     memory holds the G weights, G scratch weights and two D-float rows (group mean / composite,
//     min row). Rows are re-read from global memory (L1) in each pass.
//
// Arithmetic order (what makes results equal to the CPU's): every per-element operation follows
// core/weights.h and core/pool.cc in the same order — group mean = ((k0 + k1) + ...) * (1/n), weight
// sum sequential over r, composite c = (w0/sum) k0 then c = fma(wr/sum, kr, c) (the host compiler
// contracts `out += wr * k` to the same fma on FMA hardware), quantization by core/quant_math.h.
// What differs: the order of the D-term dot-product sums of cosine weights (warp tree vs the host's
// vectorized loop) and the device's expf/logf/powf (within 2 ulp of the host's).
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include <cuda_runtime.h>

#include "core/incremental_math.h"
#include "core/numeric.h"
#include "core/quant_math.h"
#include "core/segments.h"
#include "core/weights.h"
#include "kernels/half_decode.cuh"
#include "kernels/launch.h"
#include "kernels/pool.h"
#include "kernels/pool_tuning.h"
#include "kernels/warp_sums.cuh"

namespace ip::cuda::detail {

constexpr unsigned kFullMask = 0xFFFFFFFFu;

// ---- key element types -----------------------------------------------------------------------------
struct KeyF32 {
  using raw = float;
  static __device__ __forceinline__ float decode(float x) { return x; }
};
struct KeyF16 {
  using raw = std::uint16_t;
  static __device__ __forceinline__ float decode(std::uint16_t x) { return fp16_bits_to_float(x); }
};
struct KeyBF16 {
  using raw = std::uint16_t;
  static __device__ __forceinline__ float decode(std::uint16_t x) { return bf16_to_float(x); }
};

// ---- vector memory access --------------------------------------------------------------------------
template <int Bytes> struct VecOf;
template <> struct VecOf<2> { using type = unsigned short; };
template <> struct VecOf<4> { using type = unsigned int; };
template <> struct VecOf<8> { using type = uint2; };
template <> struct VecOf<16> { using type = uint4; };

// VE keys at p (aligned to their size, at most 16 bytes), as stored; streaming load.
template <class K, int VE>
__device__ __forceinline__ void load_raw_keys(const typename K::raw* p, typename K::raw* out) {
  using raw = typename K::raw;
  constexpr int kBytes = VE * static_cast<int>(sizeof(raw));
  static_assert(kBytes <= 16 && (kBytes & (kBytes - 1)) == 0, "vector load of 2..16 bytes");
  using V = typename VecOf<kBytes>::type;
  const V v = __ldcs(reinterpret_cast<const V*>(p));
  memcpy(out, &v, kBytes);
}

// VE values of type T to p (aligned to min(16, their size)); streaming stores of at most 16 bytes.
template <class T, int VE>
__device__ __forceinline__ void store_vec(T* p, const T (&v)[VE]) {
  constexpr int kBytes = VE * static_cast<int>(sizeof(T));
  static_assert((kBytes & (kBytes - 1)) == 0 && kBytes >= 2, "vector store of a power-of-two size");
  if constexpr (kBytes > 16) {
#pragma unroll
    for (int i = 0; i < kBytes / 16; ++i) {
      uint4 u;
      memcpy(&u, reinterpret_cast<const char*>(v) + 16 * i, 16);
      __stcs(reinterpret_cast<uint4*>(p) + i, u);
    }
  } else {
    using V = typename VecOf<kBytes>::type;
    V u;
    memcpy(&u, v, kBytes);
    __stcs(reinterpret_cast<V*>(p), u);
  }
}

// ---- warp reductions (xor butterfly: every lane ends with the same value) -------------------------
__device__ __forceinline__ float warp_sum(float x) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(kFullMask, x, o);
  return x;
}
__device__ __forceinline__ float warp_abs_max(float a) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) a = abs_max(a, __shfl_xor_sync(kFullMask, a, o));
  return a;
}
__device__ __forceinline__ float warp_max(float a) {  // of non-negative values, like tfidf's amax
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float b = __shfl_xor_sync(kFullMask, a, o);
    a = b > a ? b : a;
  }
  return a;
}

// ---- where a warp's entry lies -----------------------------------------------------------------------
struct GroupSpan {
  int req;          // request
  long long first;  // first token (global row of keys)
  int n;            // tokens in the group, 1..G (0 only when the offsets are inconsistent)
};

// Entry e's span in request b, whose tokens start at token row `tokens_from` and end before `tokens_end`
// and whose entries start at `entries_from`.
__device__ __forceinline__ GroupSpan group_span(int b, long long tokens_from, long long tokens_end,
                                                long long entries_from, long long e, int G) {
  const long long first = tokens_from + (e - entries_from) * G;
  const long long left = tokens_end - first;
  return {b, first, left >= G ? G : (left > 0 ? static_cast<int>(left) : 0)};
}

// Entry e's span. A batch of one request has offsets {0, total_tokens} and {0, total_entries}
// (kernels/batch.h), known without a load: its warps' first memory round trip is their keys', not the
// offsets' (one L2 round trip less in every warp's life; the runner's pooling and kernel_bench's are
// single requests). Other batches search entry_offset and load their request's offsets.
__device__ __forceinline__ GroupSpan locate_group(const PoolArgs& a, long long e, int G) {
  if (a.batch.requests == 1) return group_span(0, 0, a.batch.total_tokens, 0, e, G);
  const int b = segment_of(a.batch.entry_offset, a.batch.requests, e);
  return group_span(b, a.batch.token_offset[b], a.batch.token_offset[b + 1], a.batch.entry_offset[b], e, G);
}

// The spans of a warp's groups e0 .. e0 + GPW - 1 (e0 < total_entries; n = 0 past the end). In a batch
// of several requests the request of e0 is searched once and its offsets, with the entry offset that
// ends it, are loaded together; the later groups that lie in it (all of them but at a request's end)
// take those, so the warp's keys wait for one round trip of offsets, not GPW one after another. A later
// group in another request is located by itself. The same spans as locate_group of each group.
template <int GPW>
__device__ __forceinline__ void locate_groups(const PoolArgs& a, long long e0, int G, GroupSpan (&s)[GPW]) {
  if (GPW == 1 || a.batch.requests == 1) {
#pragma unroll
    for (int q = 0; q < GPW; ++q)
      s[q] = e0 + q < a.batch.total_entries ? locate_group(a, e0 + q, G) : GroupSpan{0, 0, 0};
    return;
  }
  const int b = segment_of(a.batch.entry_offset, a.batch.requests, e0);
  const long long entries_from = a.batch.entry_offset[b], entries_end = a.batch.entry_offset[b + 1];
  const long long tokens_from = a.batch.token_offset[b], tokens_end = a.batch.token_offset[b + 1];
  // e0 < entries_end holds for consistent offsets (the search found b); testing it makes s[0] need
  // entries_end, so that ptxas loads it with the other three rather than after them, where only the later
  // groups would need it. With inconsistent offsets n = 0: nothing is read.
  s[0] = e0 < entries_end ? group_span(b, tokens_from, tokens_end, entries_from, e0, G) : GroupSpan{b, tokens_from, 0};
#pragma unroll
  for (int q = 1; q < GPW; ++q) {
    const long long e = e0 + q;
    if (e >= a.batch.total_entries)
      s[q] = GroupSpan{0, 0, 0};
    else if (e < entries_end)  // entry_offset[b] <= e0 < e < entry_offset[b + 1]: request b, as a search finds
      s[q] = group_span(b, tokens_from, tokens_end, entries_from, e, G);
    else
      s[q] = locate_group(a, e, G);
  }
}

__device__ __forceinline__ bool quantized(Precision p) { return p == Precision::int8 || p == Precision::fp8; }

// Row scale of a quantized row from the lane's partial max |x|: reduces, stores, returns 1/scale.
__device__ __forceinline__ float finish_scale(const PoolArgs& a, long long row, float lane_amax, int lane) {
  const float scale = row_scale(warp_abs_max(lane_amax), a.precision == Precision::int8);
  if (lane == 0) a.scales[row] = scale;
  return inverse_scale(scale);
}

// Update mode (PoolArgs::prev_weights): whether entry e is pooled, from its n weights w (the same
// values in every lane, so the answer is warp-uniform). When it is, the caller's lanes store the new
// weights into prev_weights after a __syncwarp() (every lane reads prev_weights here first).
__device__ __forceinline__ bool update_gate(const PoolArgs& a, const GroupSpan& s, long long e, const float* w,
                                            int lane) {
  if (!a.prev_weights) return true;
  const bool fresh = e - a.batch.entry_offset[s.req] >= a.fresh_from[s.req];
  const bool pool = repool_group(fresh, a.tau, w, a.prev_weights + s.first, s.n);
  if (pool && lane == 0) atomicAdd(a.repooled, 1ull);  // integer count: the same total in any order
  __syncwarp();
  return pool;
}

// The rows' bytes of one value in the output precision (float formats ignore inv).
template <class T>
__device__ __forceinline__ T encode_out(Precision p, float x, float inv) {
  if constexpr (sizeof(T) == 4) {
    return x;
  } else if constexpr (sizeof(T) == 2) {
    return p == Precision::fp16 ? fp16_from_float(x) : bf16_from_float(x);
  } else {
    return encode_scaled(x, inv, p == Precision::int8);
  }
}

}  // namespace ip::cuda::detail

#include "kernels/pool_fast.cuh"
#include "kernels/pool_generic.cuh"
