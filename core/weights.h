// Weighting schemes (DESIGN.md, "Default definitions") and the per-group math they share with the
// CUDA kernels. Group g covers tokens [gG, min(T, gG+G)); r = i - gG is a token's slot in its group.
//
//   uniform     w_i = 1
//   positional  w_i = exp(lambda * r / max(1, G-1)), or w_i = exp(b_r) with an explicit bias vector b
//   cosine      w_i = max(eps, cos(k_i, m))^p, m = the group's mean key (or an EMA of past queries)
//   tfidf       w_i = eps + tf_i * idf_i, tf_i = a_i / max_{j in g} a_j (0 when that max is 0),
//               idf_i = ln((1+N)/(1+n_i)) + 1; with no history (N = 0) w_i = 1
//   hybrid      w_i = prod_s (w_{s,i} / mean_g w_s)^alpha_s over positional, cosine, tfidf
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "core/hd.h"

// Host code for x86 with AVX (the default -march=native build on such a machine) writes a few float
// reductions below with vector intrinsics; the additions and their order are the same either way.
#if !defined(__CUDACC__) && defined(__AVX__)
#include <immintrin.h>
#define IP_X86_AVX 1
#else
#define IP_X86_AVX 0
#endif
#if IP_X86_AVX && defined(__AVX512F__) && defined(__FMA__)
#define IP_X86_AVX512 1
#else
#define IP_X86_AVX512 0
#endif

namespace ip {

// How a group of keys becomes index entries. The first five pool into one composite per group;
// `maxmin` keeps element-wise max and min per group (Quest-style upper-bound scoring);
// `exact` keeps every key (no compression: the exact indexer, group size 1).
enum class Weighting { uniform, positional, cosine, tfidf, hybrid, maxmin, exact };

std::string_view to_string(Weighting w);
Weighting parse_weighting(std::string_view s);  // throws ip::Error naming the accepted values
inline bool uses_stats(Weighting w) { return w == Weighting::tfidf || w == Weighting::hybrid; }
// Rows of the stored index per group: maxmin stores two (the max row, then the min row), the others one.
inline int rows_per_group(Weighting w) { return w == Weighting::maxmin ? 2 : 1; }

enum class CosineReference { group_mean, query };
std::string_view to_string(CosineReference r);
CosineReference parse_cosine_reference(std::string_view s);

struct WeightParams {
  Weighting scheme = Weighting::uniform;
  float positional_lambda = 1.0f;
  std::vector<float> positional_bias;  // if non-empty (size G), w_i = exp(b[r_i]) replaces lambda
  float eps = 1e-3f;                    // floor of cosine weights and additive term of tfidf weights
  float cosine_power = 1.0f;
  CosineReference cosine_reference = CosineReference::group_mean;
  float alpha_positional = 1.0f;  // hybrid exponents
  float alpha_cosine = 1.0f;
  float alpha_tfidf = 1.0f;
};

// True when the weights need a query reference (cosine weights, alone or in hybrid, against past queries).
inline bool uses_query_reference(const WeightParams& wp) {
  return (wp.scheme == Weighting::cosine || wp.scheme == Weighting::hybrid) &&
         wp.cosine_reference == CosineReference::query;
}

// ---- per-group math, shared with the kernels -------------------------------------------------------

// Per-token scalars of each scheme. The group functions below and the CUDA pooling kernel (which
// keeps a group's keys in registers and reduces dot products across a warp) both call these, so the
// per-token math is one piece of code.

// Positional weight of slot r in a group of nominal size G.
IP_HOST_DEVICE float positional_weight(int r, int G, float lambda, const float* bias) {
  const float denom = static_cast<float>(G - 1 > 1 ? G - 1 : 1);
  return bias ? expf(bias[r]) : expf(lambda * static_cast<float>(r) / denom);
}

// Cosine weight from |k|^2 = kk, k.m = km and |m| = mnorm.
IP_HOST_DEVICE float cosine_weight(float kk, float km, float mnorm, float eps, float power) {
  const float denom = sqrtf(kk) * mnorm;
  const float c = denom > 0.0f ? km / denom : 0.0f;
  const float base = c > eps ? c : eps;
  return power == 1.0f ? base : powf(base, power);
}

// TF-IDF weight of a token with decayed mass a (amax = the group's largest), count cnt, after N > 0 steps.
IP_HOST_DEVICE float tfidf_weight(float a, float amax, std::uint32_t cnt, long long N, float eps) {
  const float tf = amax > 0.0f ? a / amax : 0.0f;
  const float idf = logf((1.0f + static_cast<float>(N)) / (1.0f + static_cast<float>(cnt))) + 1.0f;
  return eps + tf * idf;
}

// The hybrid factor (v / mean)^alpha of one token.
IP_HOST_DEVICE float hybrid_factor(float v, float mean, float alpha) {
  const float x = v / mean;
  return alpha == 1.0f ? x : powf(x, alpha);
}

// Positional weights of n tokens in a group of nominal size G (n < G for a partial last group).
IP_HOST_DEVICE void positional_group_weights(int n, int G, float lambda, const float* bias, float* w) {
  for (int r = 0; r < n; ++r) w[r] = positional_weight(r, G, lambda, bias);
}

// Fixed-order float reductions for the host loops below: kSumLanes partial sums over d (one 16-float
// vector register, or two 8-float ones), combined pairwise, then the last D mod kSumLanes products
// summed in order. The order is written out, so it is the same on every machine and the compiler
// keeps it. (An `omp simd` reduction leaves the order to the compiler; g++ 12 combined the vector's
// lanes one after another, 16 dependent adds per dot product, bench/RESULTS.md.) The lane arrays are
// only ever indexed by the vectorized loop, so they stay in registers.
constexpr int kSumLanes = 16;
IP_HOST_DEVICE float pairwise_lane_sum(float* a) {
  static_assert(kSumLanes == 16);
#if IP_X86_AVX
  // The same additions written as vector operations (g++ 12 made some 25 scalar extracts and adds of
  // the loop below, which were most of the cosine weights' time).
  const __m256 h = _mm256_add_ps(_mm256_loadu_ps(a), _mm256_loadu_ps(a + 8));          // a[j] + a[j + 8]
  const __m128 q = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));  // + [j + 4]
  const __m128 p = _mm_add_ps(q, _mm_movehl_ps(q, q));                                 // + [j + 2]
  return _mm_cvtss_f32(_mm_add_ss(p, _mm_shuffle_ps(p, p, 1)));                        // [0] + [1]
#else
  for (int j = 0; j < 8; ++j) a[j] += a[j + 8];
  for (int j = 0; j < 4; ++j) a[j] += a[j + 4];
  for (int j = 0; j < 2; ++j) a[j] += a[j + 2];
  return a[0] + a[1];
#endif
}

// The dimension D of the loops below: an int, or FixedDim<N> where a host loop knows it at compile time
// (with_dim below dispatches D = 64, 128, 256). Either way the loops do the same operations in the same
// order, so the results are the same bits; with N known the compiler unrolls them and keeps short
// arrays in registers (bench/RESULTS.md, "Pooling with the key size known at compile time").
template <int N>
using FixedDim = std::integral_constant<int, N>;

// Calls fn(D) with D as a FixedDim where it is one of the usual index key sizes, else as an int (host
// loops: pooling, scoring, attention logits).
template <class Fn>
inline void with_dim(int D, Fn&& fn) {
  switch (D) {
    case 64: return fn(FixedDim<64>{});
    case 128: return fn(FixedDim<128>{});
    case 256: return fn(FixedDim<256>{});
    default: return fn(D);
  }
}

// sum_d a[d] * b[d] and sum_d a[d] * a[d] in the order above.
template <class Dim>
IP_HOST_DEVICE void dot_and_square(const float* __restrict__ a, const float* __restrict__ b, Dim D, float& ab,
                                   float& aa) {
  float pab[kSumLanes] = {}, paa[kSumLanes] = {};
  int d = 0;
  for (; d + kSumLanes <= D; d += kSumLanes) {
    IP_SIMD
    for (int j = 0; j < kSumLanes; ++j) {
      pab[j] += a[d + j] * b[d + j];
      paa[j] += a[d + j] * a[d + j];
    }
  }
  float tab = 0.0f, taa = 0.0f;  // the last D mod kSumLanes elements, in order, added after the lanes
  for (; d < D; ++d) {
    tab += a[d] * b[d];
    taa += a[d] * a[d];
  }
  ab = pairwise_lane_sum(pab) + tab;
  aa = pairwise_lane_sum(paa) + taa;
}

// out[h] = k . q_h for NH vectors q_h (stride ldq), each sum in the order of dot_and_square: 16 lanes
// by d mod 16, folded pairwise, then the last D mod 16 products in order. The NH sums share the loads
// of k (host scoring and attention logits; Eigen's GEMM, used for scoring before, spent four times its
// multiply-adds' time packing the rows, bench/RESULTS.md).
template <int NH, class Dim>
inline void head_dots(const float* __restrict__ k, const float* __restrict__ q, long long ldq, Dim D,
                      float* __restrict__ out) {
  float acc[NH][kSumLanes] = {};
  int d = 0;
  for (; d + kSumLanes <= D; d += kSumLanes)
    for (int h = 0; h < NH; ++h) {
      const float* qh = q + h * ldq;
      IP_SIMD
      for (int j = 0; j < kSumLanes; ++j) acc[h][j] += k[d + j] * qh[d + j];
    }
  for (int h = 0; h < NH; ++h) {
    const float* qh = q + h * ldq;
    float tail = 0.0f;
    for (int e = d; e < D; ++e) tail += k[e] * qh[e];
    out[h] = pairwise_lane_sum(acc[h]) + tail;
  }
}

#if IP_X86_AVX512
// out[r * ldo + h] = k[r] . q_h for 4 rows k[r] and 4 heads q_h (stride ldq), D a multiple of 16, each
// sum the bits of head_dots': its 16 lanes accumulate in d order by a multiply and an add, which the
// compiler fuses exactly where it fuses head_dots' loop (at -O2 and above unless -ffp-contract=off;
// an explicit fused multiply-add here differed from head_dots' bits at -O0 and -O1), and are folded by
// the same pairwise additions, done for the 16 sums together: each step adds two half-width parts of two
// accumulators into one vector (shuffles of 128-bit blocks, then of elements within blocks), where
// head_dots folds one accumulator at a time (four dependent steps of horizontal adds: at H = 64 as many
// instructions as the multiply-adds).
//
// _mm512_shuffle_f32x4 without its undefined pass-through operand (g++ 12 warns that it is
// uninitialized); with every lane selected the mask is dropped, the same vshuff32x4.
#define shuffle_blocks(a, b, imm) _mm512_maskz_shuffle_f32x4(0xFFFF, a, b, imm)

// The 16 sums of acc[4 h + r] (16 lanes each, row or group r, head h) folded in pairwise_lane_sum's
// order into out[r * ldo + h]. (The per-head forms then add their empty tail, +0: no change, as sums
// whose accumulators start at +0 are never -0.)
inline void fold16_store(const __m512* acc, float* __restrict__ out, long long ldo) {
  // a[j] + a[j + 8]: w[i] holds acc[2i]'s 8 sums in lanes 0-7, acc[2i + 1]'s in lanes 8-15.
  __m512 w[8];
  for (int i = 0; i < 8; ++i)
    w[i] = _mm512_add_ps(shuffle_blocks(acc[2 * i], acc[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                         shuffle_blocks(acc[2 * i], acc[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  // + [j + 4]: block b of x[i] holds acc[4i + b]'s 4 sums.
  __m512 x[4];
  for (int i = 0; i < 4; ++i)
    x[i] = _mm512_add_ps(shuffle_blocks(w[2 * i], w[2 * i + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                         shuffle_blocks(w[2 * i], w[2 * i + 1], _MM_SHUFFLE(3, 1, 3, 1)));
  // + [j + 2]: block b of y[i] holds acc[8i + b]'s 2 sums, then acc[8i + 4 + b]'s.
  __m512 y[2];
  for (int i = 0; i < 2; ++i)
    y[i] = _mm512_add_ps(_mm512_shuffle_ps(x[2 * i], x[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm512_shuffle_ps(x[2 * i], x[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  // [0] + [1]: lane 4b + m holds acc[4m + b], i.e. row b, head m.
  const __m512 z = _mm512_add_ps(_mm512_shuffle_ps(y[0], y[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                 _mm512_shuffle_ps(y[0], y[1], _MM_SHUFFLE(3, 1, 3, 1)));
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, z);
  for (int r = 0; r < 4; ++r)
    for (int h = 0; h < 4; ++h) out[r * ldo + h] = lanes[4 * r + h];
}

template <class Dim>
inline void rows4_head4_dots(const float* const* k, const float* __restrict__ q, long long ldq, Dim D,
                             float* __restrict__ out, long long ldo) {
  __m512 acc[16];  // acc[4 h + r]: row r, head h
  for (auto& a : acc) a = _mm512_setzero_ps();
  for (int d = 0; d < D; d += 16) {
    __m512 kv[4], qv[4];
    for (int r = 0; r < 4; ++r) kv[r] = _mm512_loadu_ps(k[r] + d);
    for (int h = 0; h < 4; ++h) qv[h] = _mm512_loadu_ps(q + h * ldq + d);
    for (int h = 0; h < 4; ++h)
      for (int r = 0; r < 4; ++r) acc[4 * h + r] = _mm512_add_ps(acc[4 * h + r], _mm512_mul_ps(kv[r], qv[h]));
  }
  fold16_store(acc, out, ldo);
}

// out[r * ldo + h] = box_bound_lanes(q_h, hi[r], lo[r]) for 4 groups' bounds and 4 heads (stride ldq), D a
// multiple of 16, the same bits: per lane max(q hi, q lo) (the vector max is `a > b ? a : b`) added in
// d order, then fold16_store. The 8 bound rows and 4 heads are loaded once for the 16 sums.
template <class Dim>
inline void groups4_head4_bounds(const float* const* hi, const float* const* lo, const float* __restrict__ q,
                                 long long ldq, Dim D, float* __restrict__ out, long long ldo) {
  __m512 acc[16];  // acc[4 h + r]: group r, head h
  for (auto& a : acc) a = _mm512_setzero_ps();
  for (int d = 0; d < D; d += 16) {
    __m512 hv[4], lv[4], qv[4];
    for (int r = 0; r < 4; ++r) {
      hv[r] = _mm512_loadu_ps(hi[r] + d);
      lv[r] = _mm512_loadu_ps(lo[r] + d);
    }
    for (int h = 0; h < 4; ++h) qv[h] = _mm512_loadu_ps(q + h * ldq + d);
    for (int h = 0; h < 4; ++h)
      for (int r = 0; r < 4; ++r)
        acc[4 * h + r] = _mm512_add_ps(
            acc[4 * h + r], _mm512_max_ps(_mm512_mul_ps(qv[h], hv[r]), _mm512_mul_ps(qv[h], lv[r])));
  }
  fold16_store(acc, out, ldo);
}
#undef shuffle_blocks
#endif

// out[j] = k . q_j for the H rows of q (stride ldq), four at a time, in head_dots' order.
template <class Dim>
inline void all_head_dots(const float* __restrict__ k, const float* __restrict__ q, long long ldq, int H, Dim D,
                          float* __restrict__ out) {
  int j = 0;
  for (; j + 4 <= H; j += 4) head_dots<4>(k, q + j * ldq, ldq, D, out + j);
  for (; j < H; ++j) head_dots<1>(k, q + j * ldq, ldq, D, out + j);
}

// out[r * H + j] = k[r] . q_j for 4 rows k[r] and the H rows of q, in head_dots' order (the same bits as
// all_head_dots row by row); four heads at a time together where the machine has AVX-512 and D is a
// multiple of 16.
template <class Dim>
inline void four_rows_head_dots(const float* const* k, const float* __restrict__ q, long long ldq, int H, Dim D,
                                float* __restrict__ out) {
#if IP_X86_AVX512
  if (D % 16 == 0) {
    int j = 0;
    for (; j + 4 <= H; j += 4) rows4_head4_dots(k, q + j * ldq, ldq, D, out + j, H);
    for (int r = 0; r < 4; ++r)
      for (int i = j; i < H; ++i) head_dots<1>(k[r], q + i * ldq, ldq, D, out + r * H + i);
    return;
  }
#endif
  for (int r = 0; r < 4; ++r) all_head_dots(k[r], q, ldq, H, D, out + r * H);
}

// Streams of rows read with arithmetic between them are prefetched this many rows ahead in software: on
// the machine of bench/RESULTS.md ("Software prefetch"), the hardware prefetchers alone kept the H = 8
// scoring scan at 45% of memcpy, and even H = 64 lost a fifth of its time waiting for memory.
inline constexpr int kPrefetchRows = 8;

// Asks for the cache lines of [p, p + bytes) (no effect on the values; a hint the compiler may drop).
inline void prefetch_bytes(const void* p, long long bytes) {
#if defined(__GNUC__) || defined(__clang__)
  const auto first = reinterpret_cast<std::uintptr_t>(p) & ~std::uintptr_t{63};
  const auto last = reinterpret_cast<std::uintptr_t>(p) + static_cast<std::uintptr_t>(bytes);
  for (std::uintptr_t a = first; a < last; a += 64) __builtin_prefetch(reinterpret_cast<const void*>(a));
#else
  (void)p;
  (void)bytes;
#endif
}

// out[r * H + j] = k_r . q_j for n rows k_r (stride ldk) and the H rows of q, as four_rows_head_dots.
// `ahead` more rows after the n, same stride, are read next by the caller: they are prefetched too (the
// first kPrefetchRows of the n are the caller's to prefetch, as they are when it passed `ahead` before).
template <class Dim>
inline void rows_head_dots(const float* __restrict__ k, long long ldk, long long n, const float* __restrict__ q,
                           long long ldq, int H, Dim D, float* __restrict__ out, long long ahead = 0) {
  const long long readable = n + ahead;
  long long r = 0;
  for (; r + 4 <= n; r += 4) {
    const float* rows[4] = {k + r * ldk, k + (r + 1) * ldk, k + (r + 2) * ldk, k + (r + 3) * ldk};
    for (long long p = r + kPrefetchRows; p < r + kPrefetchRows + 4 && p < readable; ++p)
      prefetch_bytes(k + p * ldk, static_cast<long long>(D) * 4);
    four_rows_head_dots(rows, q, ldq, H, D, out + r * H);
  }
  for (; r < n; ++r) all_head_dots(k + r * ldk, q, ldq, H, D, out + r * H);
}

// sum_d max(q_d hi_d, q_d lo_d), the Quest-style bound of core/score_math.h box_upper_bound, in the order
// of dot_and_square (host maxmin scoring: the in-order loop does not vectorize).
template <class Dim>
inline float box_bound_lanes(const float* __restrict__ q, const float* __restrict__ hi, const float* __restrict__ lo,
                             Dim D) {
  float acc[kSumLanes] = {};
  int d = 0;
  for (; d + kSumLanes <= D; d += kSumLanes) {
    IP_SIMD
    for (int j = 0; j < kSumLanes; ++j) {
      const float a = q[d + j] * hi[d + j], b = q[d + j] * lo[d + j];
      acc[j] += a > b ? a : b;
    }
  }
  float tail = 0.0f;
  for (; d < D; ++d) {
    const float a = q[d] * hi[d], b = q[d] * lo[d];
    tail += a > b ? a : b;
  }
  return pairwise_lane_sum(acc) + tail;
}

// Cosine weights of n keys (row stride ld) against the reference m (or the group mean when m is null;
// `scratch` holds D floats for it).
template <class Dim>
IP_HOST_DEVICE void cosine_group_weights(const float* __restrict__ keys, long long ld, int n, Dim D,
                                         const float* m, float eps, float power, float* __restrict__ scratch,
                                         float* __restrict__ w) {
  // With D a FixedDim the mean goes to a local array, which the compiler keeps in registers; summed in
  // `scratch` (memory) it took about a third of cosine pooling's time on one core (T = 1Mi, D = 128:
  // 68 -> 46 ms, bench/RESULTS.md).
  float local[std::is_same_v<Dim, int> ? 1 : static_cast<int>(Dim{})];
  if (!m) {
    float* s = std::is_same_v<Dim, int> ? scratch : local;
    for (int d = 0; d < D; ++d) s[d] = keys[d];
    for (int r = 1; r < n; ++r)
      for (int d = 0; d < D; ++d) s[d] += keys[r * ld + d];
    const float inv = 1.0f / static_cast<float>(n);
    for (int d = 0; d < D; ++d) s[d] *= inv;
    m = s;
  }
  float mm = 0.0f, unused = 0.0f;
  dot_and_square(m, m, D, unused, mm);
  const float mnorm = sqrtf(mm);
  for (int r = 0; r < n; ++r) {
    float kk = 0.0f, km = 0.0f;
    dot_and_square(keys + r * ld, m, D, km, kk);
    w[r] = cosine_weight(kk, km, mnorm, eps, power);
  }
}

// TF-IDF weights of n tokens from their decayed attention mass a, selection counts cnt and the number
// of past steps N.
IP_HOST_DEVICE void tfidf_group_weights(const float* a, const std::uint32_t* cnt, int n, long long N, float eps,
                                        float* w) {
  if (N == 0) {
    for (int r = 0; r < n; ++r) w[r] = 1.0f;
    return;
  }
  float amax = 0.0f;
  for (int r = 0; r < n; ++r) amax = a[r] > amax ? a[r] : amax;
  for (int r = 0; r < n; ++r) w[r] = tfidf_weight(a[r], amax, cnt[r], N, eps);
}

// w <- w * (v / mean(v))^alpha, the hybrid product's factor for one scheme.
IP_HOST_DEVICE void hybrid_multiply(const float* v, int n, float alpha, float* w) {
  float mean = 0.0f;
  for (int r = 0; r < n; ++r) mean += v[r];
  mean /= static_cast<float>(n);
  for (int r = 0; r < n; ++r) w[r] *= hybrid_factor(v[r], mean, alpha);
}

// Composite c = sum_i w_i k_i / sum_i w_i of n keys.
template <class Dim>
IP_HOST_DEVICE void pool_group(const float* __restrict__ keys, long long ld, int n, Dim D, const float* w,
                               float* __restrict__ out) {
  float wsum = 0.0f;
  for (int r = 0; r < n; ++r) wsum += w[r];
  const float inv = 1.0f / wsum;
  const float w0 = w[0] * inv;
  for (int d = 0; d < D; ++d) out[d] = w0 * keys[d];
  for (int r = 1; r < n; ++r) {
    const float wr = w[r] * inv;
    const float* k = keys + r * ld;
    for (int d = 0; d < D; ++d) out[d] += wr * k[d];
  }
}

// Element-wise max and min of n keys (Quest-style bounds).
IP_HOST_DEVICE void maxmin_group(const float* keys, long long ld, int n, int D, float* hi, float* lo) {
  for (int d = 0; d < D; ++d) hi[d] = lo[d] = keys[d];
  for (int r = 1; r < n; ++r)
    for (int d = 0; d < D; ++d) {
      const float k = keys[r * ld + d];
      hi[d] = k > hi[d] ? k : hi[d];
      lo[d] = k < lo[d] ? k : lo[d];
    }
}

}  // namespace ip
