// Fast pooling kernel: compile-time D and G, a group's keys in registers (layout and mapping:
// kernels/pool.cuh). Included by pool.cuh only.
#pragma once

namespace ip::cuda::detail {

// Element-slot geometry of the fast path for D dims of key type K.
template <int D, class K>
struct FastShape {
  static_assert(D % 32 == 0, "fast path: D is a multiple of 32");
  static constexpr int E = D / 32;  // elements a lane owns per row
  static constexpr int kMaxVe = 16 / static_cast<int>(sizeof(typename K::raw));
  static constexpr int VE = E < kMaxVe ? E : kMaxVe;  // contiguous elements per vector access
  static constexpr int NC = E / VE;                   // chunks per row
  static_assert(NC * VE == E, "fast path: E is a multiple of VE");
  // Row element of slot i = c * VE + j of lane l.
  static __device__ __forceinline__ int dim_of(int i, int lane) { return ((i / VE) * 32 + lane) * VE + i % VE; }
};

// Per-token weights are computed once, token r's by lane r (r < G <= 16), and then given to every lane:
// out[r] = lane r's `mine`. The same function on the same inputs as when every lane computed all G, so
// the same bits, for G times fewer divisions, logarithms and square roots a group.
template <int G>
__device__ __forceinline__ void spread_weights(float mine, float (&out)[G]) {
#pragma unroll
  for (int r = 0; r < G; ++r) out[r] = __shfl_sync(0xFFFFFFFFu, mine, r);
}

// Cosine weights of the n rows x[0..n) against the group mean, or the request's query reference.
template <int D, int G, class K>
__device__ __forceinline__ void cosine_fast(const PoolArgs& a, const GroupSpan& s, int lane,
                                            const float (&x)[G][D / 32], float (&out)[G]) {
  using S = FastShape<D, K>;
  constexpr int E = S::E;
  float m[E];
  if (a.query_ref) {
    const float* q = a.query_ref + static_cast<long long>(s.req) * D;
#pragma unroll
    for (int i = 0; i < E; ++i) m[i] = __ldg(q + S::dim_of(i, lane));
  } else {
    const float inv = 1.0f / static_cast<float>(s.n);
#pragma unroll
    for (int i = 0; i < E; ++i) {
      float acc = x[0][i];
#pragma unroll
      for (int r = 1; r < G; ++r)
        if (r < s.n) acc += x[r][i];
      m[i] = acc * inv;
    }
  }
  float mm = 0.0f;
#pragma unroll
  for (int i = 0; i < E; ++i) mm = fmaf(m[i], m[i], mm);
  constexpr int NV = 2 * G + 1;  // |k_r|^2 and k_r . m of each row, then |m|^2
  if constexpr (NV <= 32) {
    // All 2G + 1 sums in one warp_sums (25 shuffles at G = 4 with the broadcasts, 45 a sum at a time).
    // Rows past n hold zeros: their sums are 0 and unused.
    constexpr int N = warp_sums_width(NV);
    float v[N];
#pragma unroll
    for (int r = 0; r < G; ++r) {
      float kk = 0.0f, km = 0.0f;
#pragma unroll
      for (int i = 0; i < E; ++i) {
        kk = fmaf(x[r][i], x[r][i], kk);
        km = fmaf(x[r][i], m[i], km);
      }
      v[r] = kk;
      v[G + r] = km;
    }
    v[2 * G] = mm;
#pragma unroll
    for (int i = NV; i < N; ++i) v[i] = 0.0f;
    const float sum = warp_sums<N>(v, lane);
    const float mnorm = sqrtf(__shfl_sync(0xFFFFFFFFu, sum, warp_sums_lane<N>(2 * G)));
    // Lane r < G fetches row r's two sums and computes its weight (one square root and one division a
    // lane instead of G); lanes past G repeat row G - 1's and are not read.
    const int r = lane < G ? lane : G - 1;
    const float kk = __shfl_sync(0xFFFFFFFFu, sum, warp_sums_lane<N>(r));
    const float km = __shfl_sync(0xFFFFFFFFu, sum, warp_sums_lane<N>(G + r));
    spread_weights<G>(r < s.n ? cosine_weight(kk, km, mnorm, a.eps, a.power) : 0.0f, out);
  } else {  // G = 16: one sum at a time
    const float mnorm = sqrtf(warp_sum(mm));
#pragma unroll
    for (int r = 0; r < G; ++r) {
      out[r] = 0.0f;
      if (r < s.n) {  // warp-uniform: every lane shuffles
        float kk = 0.0f, km = 0.0f;
#pragma unroll
        for (int i = 0; i < E; ++i) {
          kk = fmaf(x[r][i], x[r][i], kk);
          km = fmaf(x[r][i], m[i], km);
        }
        out[r] = cosine_weight(warp_sum(kk), warp_sum(km), mnorm, a.eps, a.power);
      }
    }
  }
}

// A group's access statistics (tfidf and hybrid), loaded with its keys before any weight is computed:
// lane r < n holds token r's (one coalesced load for the group), the other lanes zeros.
struct TfidfIn {
  long long N = 0;  // steps of the request (0: no statistics yet, every weight 1)
  float mass = 0.0f;
  std::uint32_t cnt = 0;
};

// The statistics are loaded whatever N is (the launcher requires the arrays for tfidf and hybrid), so that
// they do not wait for N: one memory round trip with the keys instead of two after them. With N = 0 they
// are not used (they may be stale).
__device__ __forceinline__ TfidfIn load_tfidf(const PoolArgs& a, const GroupSpan& s, int lane) {
  TfidfIn t;
  t.N = __ldg(a.stats_steps + s.req);
  if (lane < s.n) {
    t.mass = __ldg(a.stats_mass + s.first + lane);
    t.cnt = __ldg(a.stats_count + s.first + lane);
  }
  return t;
}

// amax = the largest mass of the group's n tokens (0 when N = 0), over lanes 0..G-1 by xor steps below G
// (max is exact in any order; masses are >= 0 and lanes past n hold 0, the reference's starting value).
template <int G>
__device__ __forceinline__ void tfidf_fast(const PoolArgs& a, const GroupSpan& s, int lane, const TfidfIn& t,
                                           float (&out)[G]) {
  float amax = t.N != 0 && lane < s.n ? t.mass : 0.0f;
#pragma unroll
  for (int o = 1; o < G; o <<= 1) {
    const float b = __shfl_xor_sync(0xFFFFFFFFu, amax, o);
    amax = b > amax ? b : amax;
  }
  spread_weights<G>(lane < s.n ? (t.N == 0 ? 1.0f : tfidf_weight(t.mass, amax, t.cnt, t.N, a.eps)) : 0.0f, out);
}

template <int G>
__device__ __forceinline__ void positional_fast(const PoolArgs& a, int n, int lane, float (&out)[G]) {
  const int r = lane < G ? lane : G - 1;
  spread_weights<G>(r < n ? positional_weight(r, G, a.lambda, a.bias) : 0.0f, out);
}

// w <- w * (v / mean v)^alpha over the n tokens (core/weights.h hybrid_multiply).
template <int G>
__device__ __forceinline__ void hybrid_multiply_fast(const float (&v)[G], int n, float alpha, float (&w)[G]) {
  float mean = 0.0f;
#pragma unroll
  for (int r = 0; r < G; ++r)
    if (r < n) mean += v[r];
  mean /= static_cast<float>(n);
#pragma unroll
  for (int r = 0; r < G; ++r)
    if (r < n) w[r] *= hybrid_factor(v[r], mean, alpha);
}

template <int D, int G, class K>
__device__ __forceinline__ void weights_fast(const PoolArgs& a, const GroupSpan& s, int lane,
                                             const float (&x)[G][D / 32], const TfidfIn& t, float (&w)[G]) {
  switch (a.scheme) {
    case Weighting::positional:
      positional_fast<G>(a, s.n, lane, w);
      return;
    case Weighting::cosine:
      cosine_fast<D, G, K>(a, s, lane, x, w);
      return;
    case Weighting::tfidf:
      tfidf_fast<G>(a, s, lane, t, w);
      return;
    case Weighting::hybrid: {
      float v[G];
#pragma unroll
      for (int r = 0; r < G; ++r) w[r] = r < s.n ? 1.0f : 0.0f;
      positional_fast<G>(a, s.n, lane, v);
      hybrid_multiply_fast<G>(v, s.n, a.alpha_positional, w);
      cosine_fast<D, G, K>(a, s, lane, x, v);
      hybrid_multiply_fast<G>(v, s.n, a.alpha_cosine, w);
      tfidf_fast<G>(a, s, lane, t, v);
      hybrid_multiply_fast<G>(v, s.n, a.alpha_tfidf, w);
      return;
    }
    default:  // uniform, maxmin, exact
#pragma unroll
      for (int r = 0; r < G; ++r) w[r] = r < s.n ? 1.0f : 0.0f;
      return;
  }
}

// Writes row `row` from the lane's E values in the output precision (scale first for int8/fp8).
template <int D, class K, class T>
__device__ __forceinline__ void store_row_as(const PoolArgs& a, long long row, const float (&c)[D / 32], int lane,
                                             float inv) {
  using S = FastShape<D, K>;
  T* dst = static_cast<T*>(a.payload) + row * D;
#pragma unroll
  for (int ch = 0; ch < S::NC; ++ch) {
    T v[S::VE];
#pragma unroll
    for (int j = 0; j < S::VE; ++j) v[j] = encode_out<T>(a.precision, c[ch * S::VE + j], inv);
    store_vec<T, S::VE>(dst + (ch * 32 + lane) * S::VE, v);
  }
}

template <int D, class K>
__device__ __forceinline__ void store_row_fast(const PoolArgs& a, long long row, const float (&c)[D / 32], int lane) {
  switch (a.precision) {
    case Precision::fp32: store_row_as<D, K, float>(a, row, c, lane, 1.0f); return;
    case Precision::fp16:
    case Precision::bf16: store_row_as<D, K, std::uint16_t>(a, row, c, lane, 1.0f); return;
    case Precision::int8:
    case Precision::fp8: {
      float amax = 0.0f;
#pragma unroll
      for (int i = 0; i < D / 32; ++i) amax = abs_max(amax, c[i]);
      store_row_as<D, K, std::uint8_t>(a, row, c, lane, finish_scale(a, row, amax, lane));
      return;
    }
  }
}

// Groups one warp pools: their offsets, keys and statistics are all loaded before any is used, so a
// warp has that many groups' bytes in flight. 2-byte keys carry half the bytes of fp32 per group, so a
// warp takes two groups when they fit in registers (G * D / 32 <= 16 floats each). Host and device.
template <int D, int G, class K>
IP_HOST_DEVICE constexpr int fast_groups_per_warp() {
  return sizeof(typename K::raw) == 2 && G * (D / 32) <= 16 ? 2 : 1;
}

// Resident blocks of 8 warps asked of ptxas (__launch_bounds__). A warp pooling two groups of bf16 keys
// at G <= 4: 3 (at most 85 registers). Left to itself ptxas gave it 100-106 registers, 2 blocks an SM:
// 16 warps, 32 KiB of keys in flight, no more than one group per warp had given (bf16 uniform pooling
// reached 72% of copy on the H200, fp32 keys 101%). fp32 keys at G <= 4 and G * D / 32 <= 16: 4 (at most
// 64 registers), the 32 warps an SM they had at 59 registers before the keys were kept raw until pooled
// (70 without the bound). fp16 keys and larger G, which spilled 20-32 B and 40-200 B under such bounds,
// are left to ptxas.
template <int D, int G, class K>
IP_HOST_DEVICE constexpr int fast_min_blocks() {
  if (fast_groups_per_warp<D, G, K>() == 2) return G <= 4 && std::is_same_v<K, KeyBF16> ? 3 : 1;
  return sizeof(typename K::raw) == 4 && G <= 4 && G * (D / 32) <= 16 ? 4 : 1;
}

// One group from its keys x (in registers) and statistics t: weights, the update gate, the composite.
template <int D, int G, class K>
__device__ __forceinline__ void pool_group_fast(const PoolArgs& a, const GroupSpan& s, long long e, int lane,
                                                const float (&x)[G][D / 32], const TfidfIn& t) {
  constexpr int E = D / 32;
  float w[G];
  weights_fast<D, G, K>(a, s, lane, x, t, w);
  if (a.weights) {
#pragma unroll
    for (int r = 0; r < G; ++r)
      if (r < s.n && lane == r) a.weights[s.first + r] = w[r];
  }
  if (a.prev_weights) {
    // A copy for the gate's indexed loop, so that w itself stays in registers on every path.
    float wl[G];
#pragma unroll
    for (int r = 0; r < G; ++r) wl[r] = w[r];
    if (!update_gate(a, s, e, wl, lane)) return;  // warp-uniform
#pragma unroll
    for (int r = 0; r < G; ++r)
      if (r < s.n && lane == r) a.prev_weights[s.first + r] = w[r];
  }

  if (a.scheme == Weighting::maxmin) {
    float hi[E], lo[E];
#pragma unroll
    for (int i = 0; i < E; ++i) {
      hi[i] = lo[i] = x[0][i];
#pragma unroll
      for (int r = 1; r < G; ++r)
        if (r < s.n) {
          hi[i] = x[r][i] > hi[i] ? x[r][i] : hi[i];
          lo[i] = x[r][i] < lo[i] ? x[r][i] : lo[i];
        }
    }
    store_row_fast<D, K>(a, 2 * e, hi, lane);
    store_row_fast<D, K>(a, 2 * e + 1, lo, lane);
    return;
  }

  // c = sum_r (w_r / sum w) k_r in core/weights.h pool_group's order.
  float wsum = 0.0f;
#pragma unroll
  for (int r = 0; r < G; ++r)
    if (r < s.n) wsum += w[r];
  const float inv = 1.0f / wsum;
  const float w0 = w[0] * inv;
  float c[E];
#pragma unroll
  for (int i = 0; i < E; ++i) c[i] = w0 * x[0][i];
#pragma unroll
  for (int r = 1; r < G; ++r) {
    if (r < s.n) {
      const float wr = w[r] * inv;
#pragma unroll
      for (int i = 0; i < E; ++i) c[i] = fmaf(wr, x[r][i], c[i]);
    }
  }
  store_row_fast<D, K>(a, e, c, lane);
}

// What a warp loads for its groups e0 .. e0 + GPW - 1 before pooling any: their places, keys (raw: 2-byte
// keys take half the registers) and statistics.
template <int D, int G, class K, int kGroups = fast_groups_per_warp<D, G, K>()>
struct FastSet {
  static constexpr int GPW = kGroups;
  GroupSpan s[GPW];
  typename K::raw xr[GPW][G][D / 32];
  TfidfIn t[GPW];
};

// All loads first: GPW groups of G rows, NC vector loads each, then their statistics.
template <int D, int G, class K, int GPW>
__device__ __forceinline__ void load_fast_set(const PoolArgs& a, long long e0, int lane, FastSet<D, G, K, GPW>& x) {
  using S = FastShape<D, K>;
  using raw = typename K::raw;
  locate_groups<GPW>(a, e0, G, x.s);  // n = 0 past the end, and for inconsistent offsets: never read outside the request
#pragma unroll
  for (int q = 0; q < GPW; ++q) {
    const raw* base = static_cast<const raw*>(a.keys) + x.s[q].first * D;
#pragma unroll
    for (int r = 0; r < G; ++r) {
#pragma unroll
      for (int ch = 0; ch < S::NC; ++ch) {
        if (r < x.s[q].n) {
          load_raw_keys<K, S::VE>(base + static_cast<long long>(r) * D + (ch * 32 + lane) * S::VE,
                                  &x.xr[q][r][ch * S::VE]);
        } else {
#pragma unroll
          for (int j = 0; j < S::VE; ++j) x.xr[q][r][ch * S::VE + j] = raw(0);  // decodes to +0
        }
      }
    }
  }
  if (a.scheme == Weighting::tfidf || a.scheme == Weighting::hybrid) {  // core/weights.h uses_stats
#pragma unroll
    for (int q = 0; q < GPW; ++q)
      if (x.s[q].n > 0) x.t[q] = load_tfidf(a, x.s[q], lane);
  }
}

// Pools the groups of a loaded set, one after another.
template <int D, int G, class K, int GPW>
__device__ __forceinline__ void pool_fast_set(const PoolArgs& a, long long e0, int lane,
                                              const FastSet<D, G, K, GPW>& x) {
  constexpr int E = D / 32;
#pragma unroll
  for (int q = 0; q < GPW; ++q) {
    if (x.s[q].n > 0) {  // warp-uniform
      float k[G][E];
#pragma unroll
      for (int r = 0; r < G; ++r)
#pragma unroll
        for (int i = 0; i < E; ++i) k[r][i] = K::decode(x.xr[q][r][i]);
      pool_group_fast<D, G, K>(a, x.s[q], e0 + q, lane, k, x.t[q]);
    }
  }
}

// The warp's index in the grid (kFastWarpsPerBlock warps a block).
__device__ __forceinline__ long long fast_warp_index() {
  return static_cast<long long>(blockIdx.x) * pool_tuning::kFastWarpsPerBlock + (static_cast<int>(threadIdx.x) >> 5);
}

// One warp's groups (the kernel's body; scripts/pool_sass_counts.py also compiles it with the scheme and
// precision fixed, to count the instructions of one path).
template <int D, int G, class K>
__device__ __forceinline__ void pool_fast_warp(const PoolArgs& a) {
  constexpr int GPW = FastSet<D, G, K>::GPW;
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const long long e0 = fast_warp_index() * GPW;
  if (e0 >= a.batch.total_entries) return;  // whole warps
  FastSet<D, G, K> x;
  load_fast_set(a, e0, lane, x);
  pool_fast_set(a, e0, lane, x);
}

// The pipelined form (PoolArgs::pipelined, an experiment): a grid of at most one wave of resident blocks,
// each warp striding over the groups; it issues the loads of its next groups before it pools the current
// ones, so that its loads stay in flight while it computes (in the plain form a warp loads, waits, pools
// and exits, and only other warps' loads overlap its arithmetic). Two sets of registers, one group each
// (with two, as the plain form holds for 2-byte keys, ptxas spilled 150-200 B under the same bounds).
template <int D, int G, class K>
__device__ __forceinline__ void pool_fast_pipelined_warp(const PoolArgs& a) {
  constexpr int GPW = 1;
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const long long stride = static_cast<long long>(gridDim.x) * pool_tuning::kFastWarpsPerBlock * GPW;
  long long e0 = fast_warp_index() * GPW;
  if (e0 >= a.batch.total_entries) return;  // whole warps
  FastSet<D, G, K, GPW> cur;
  load_fast_set(a, e0, lane, cur);
  for (;;) {
    const long long e1 = e0 + stride;
    const bool more = e1 < a.batch.total_entries;  // warp-uniform
    FastSet<D, G, K, GPW> next;
    if (more) load_fast_set(a, e1, lane, next);
    pool_fast_set(a, e0, lane, cur);
    if (!more) return;
    cur = next;
    e0 = e1;
  }
}

// Grid: one warp per fast_groups_per_warp groups (kernels/pool_dispatch.cuh launch_fast).
template <int D, int G, class K>
__global__ void __launch_bounds__(pool_tuning::kFastWarpsPerBlock * 32, (fast_min_blocks<D, G, K>()))
    pool_fast_kernel(const __grid_constant__ PoolArgs a) {
  pool_fast_warp<D, G, K>(a);
}

// Grid: at most one wave of resident blocks (kernels/pool_dispatch.cuh launch_fast_pipelined). 3 blocks
// an SM (at most 85 registers): 2-byte keys fit 80 registers without spilling. Launched for 2-byte keys
// only: with fp32 keys the two sets spilled 84 B at 80 registers (160 B at 64) on sm_90.
template <int D, int G, class K>
__global__ void __launch_bounds__(pool_tuning::kFastWarpsPerBlock * 32, 3)
    pool_fast_pipelined_kernel(const __grid_constant__ PoolArgs a) {
  pool_fast_pipelined_warp<D, G, K>(a);
}

}  // namespace ip::cuda::detail
