// The decomposition of the CUDA gated-linear-attention kernels (kernels/linear_attention.cuh) as
// host-device functions, one per element of each phase, so the CPU replay test
// (tests/core/gla_tile_test.cc) runs exactly the arithmetic the kernel's threads run.
//
// Chunked form (core/linear_attention.h), one value tile of tv columns, one chunk of L tokens staged
// in row-major arrays (keys, queries and log-gates with row stride ldk >= dk, values and the state
// with row stride ldv >= tv). Per chunk, phases separated by barriers on the device:
//   1 gla_logcum_dim   (per key dimension d)  gates -> cumulative log-gates b_i, in place
//   2 gla_score_elem   (per pair i, m)        A_im = sum_d q_id k_md e^{b_id - b_md}  (m <= i, else 0)
//   3 gla_prepare_elem (per token i, dim d)   k_id <- e^{b_Ld - b_id} k_id,  q_id <- q_id e^{b_id}
//   4 gla_output_elem  (per token i, col j)   o_ij = sum_{m<=i} A_im v_mj + sum_d q_id S_dj
//   5 gla_state_elem   (per state d, col j)   S_dj <- e^{b_Ld} S_dj + sum_m k_md v_mj
// Within a phase every element reads only what earlier phases wrote and writes only its own slot, so
// the order in which elements run does not matter. The per-element sums run in the order of
// core/linear_attention.cc gla_chunked. Decode append: gla_recurrence_elem, the naive recurrence of one
// state element over a few tokens. Every multiply-add is an explicit fmaf: one rounding, whatever a
// compiler's contraction of a * b + c would do (nvcc fuses by default, a host compiler without FMA in its
// target does not), so two kernels built from these functions give the same bits.
#pragma once

#include <cmath>

#include "core/hd.h"

namespace ip {

// One chunk of one value tile, staged.
struct GlaTile {
  int L = 0;              // tokens in the chunk (>= 1)
  int dk = 0, ldk = 0;    // key dimension, row stride of k, q, lc
  int tv = 0, ldv = 0;    // value columns of the tile, row stride of v and S
  float* k = nullptr;     // [L, ldk] keys; after phase 3 the decayed keys
  float* q = nullptr;     // [L, ldk] queries (null: no outputs); after phase 3 q_i e^{b_i}
  float* lc = nullptr;    // [L, ldk] gates; after phase 1 cumulative log-gates
  float* A = nullptr;     // [L, L] intra-chunk scores (null: no outputs)
  const float* v = nullptr;  // [L, ldv] the tile's value columns
  float* S = nullptr;     // [dk, ldv] the tile's state
};

// Number of chunks of `chunk` tokens covering n tokens, and the length of chunk c.
IP_HOST_DEVICE long long gla_num_chunks(long long n, int chunk) { return (n + chunk - 1) / chunk; }
IP_HOST_DEVICE int gla_chunk_len(long long n, int chunk, long long c) {
  const long long left = n - c * chunk;
  return static_cast<int>(left < chunk ? left : chunk);
}
// Value columns of tile `tile` of width `width` over dv columns.
IP_HOST_DEVICE int gla_tile_cols(int dv, int width, int tile) {
  const int left = dv - tile * width;
  return left < width ? left : width;
}

// Phase 1: b_id = sum_{j<=i} log a_jd, in place over the gates of dimension d.
IP_HOST_DEVICE void gla_logcum_dim(const GlaTile& t, int d) {
  float acc = 0.0f;
  for (int i = 0; i < t.L; ++i) {
    acc = acc + logf(t.lc[i * t.ldk + d]);
    t.lc[i * t.ldk + d] = acc;
  }
}

// Phase 2: the intra-chunk score of query i and key m (0 above the diagonal).
IP_HOST_DEVICE void gla_score_elem(const GlaTile& t, int i, int m) {
  float a = 0.0f;
  if (m <= i) {
    const float *q = t.q + i * t.ldk, *k = t.k + m * t.ldk, *bi = t.lc + i * t.ldk, *bm = t.lc + m * t.ldk;
    for (int d = 0; d < t.dk; ++d) a = fmaf(q[d] * k[d], expf(bi[d] - bm[d]), a);
  }
  t.A[i * t.L + m] = a;
}

// Phase 3: decayed key (to the end of the chunk) and decayed query (from the chunk start).
IP_HOST_DEVICE void gla_prepare_elem(const GlaTile& t, int i, int d) {
  const float b = t.lc[i * t.ldk + d], last = t.lc[(t.L - 1) * t.ldk + d];
  t.k[i * t.ldk + d] = expf(last - b) * t.k[i * t.ldk + d];
  if (t.q) t.q[i * t.ldk + d] = t.q[i * t.ldk + d] * expf(b);
}

// Phase 4: output of token i, tile column j, from the chunk's incoming state.
IP_HOST_DEVICE float gla_output_elem(const GlaTile& t, int i, int j) {
  float o = 0.0f;
  for (int m = 0; m <= i; ++m) o = fmaf(t.A[i * t.L + m], t.v[m * t.ldv + j], o);
  for (int d = 0; d < t.dk; ++d) o = fmaf(t.q[i * t.ldk + d], t.S[d * t.ldv + j], o);
  return o;
}

// Phase 5 in its parts (the chunk-parallel form computes them in different kernels, the sequential one
// in one): the chunk's decay of key dimension d, its sum for state element (d, j), and the update.
IP_HOST_DEVICE float gla_state_gate(const GlaTile& t, int d) { return expf(t.lc[(t.L - 1) * t.ldk + d]); }
IP_HOST_DEVICE float gla_state_sum(const GlaTile& t, int d, int j) {
  float acc = 0.0f;
  for (int m = 0; m < t.L; ++m) acc = fmaf(t.k[m * t.ldk + d], t.v[m * t.ldv + j], acc);
  return acc;
}
IP_HOST_DEVICE float gla_state_update(float g, float s, float acc) { return fmaf(g, s, acc); }

// Phase 5: state element (d, j) handed to the next chunk.
IP_HOST_DEVICE void gla_state_elem(const GlaTile& t, int d, int j) {
  const float g = gla_state_gate(t, d);
  const float acc = gla_state_sum(t, d, j);
  t.S[d * t.ldv + j] = gla_state_update(g, t.S[d * t.ldv + j], acc);
}

// Decode append: state element s = S_dj through n tokens of the recurrence s <- a_d s + k_d v_j.
// k, a: rows of stride ldk starting at dimension d; v: rows of stride ldv starting at column j.
IP_HOST_DEVICE float gla_recurrence_elem(float s, long long n, const float* k, const float* a, long long ldk,
                                         const float* v, long long ldv) {
  for (long long t = 0; t < n; ++t) s = fmaf(a[t * ldk], s, k[t * ldk] * v[t * ldv]);
  return s;
}

}  // namespace ip
