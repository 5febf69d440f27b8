// Gated linear attention kernels (launchers: kernels/linear_attention.cu; per-element math shared
// with the CPU replay test: core/gla_tile.h).
//   gla_chunked_kernel  one block per tile of kGlaTile value columns. The block keeps its state tile
//                       [dk, kGlaTile] in shared memory and walks the chunks in order: it stages a
//                       chunk's keys, gates (and queries) and the tile's values, then runs the five
//                       phases of core/gla_tile.h with its threads striding over the elements of each
//                       phase and a barrier between phases. No atomics: every sum runs in a fixed
//                       order in one thread, so the same inputs give the same bits.
//   gla_chunk_sums_kernel, gla_state_scan_kernel, gla_chunk_outputs_kernel: the same arithmetic with the
//                       chunks in parallel (GlaArgs::workspace): every chunk's decay and state sum, the
//                       recurrence over chunks per state element, every chunk's outputs.
//   gla_append_kernel   one thread per state element: the recurrence over a few tokens.
//   gla_readout_kernel  one block per head: feature map of the query into shared memory, then one
//                       thread per state column sums over the key dimension; normalised by the last
//                       column when asked.
//   local_inputs_kernel grid-stride: feature-mapped keys, values with a ones column, gates.
#pragma once

#include "core/gla_tile.h"
#include "core/linear_attention.h"
#include "kernels/launch.h"
#include "kernels/linear_attention_tuning.h"

namespace ip::cuda {

// Tuning constants and the shared-memory layout: kernels/linear_attention_tuning.h.

struct GlaKernelParams {
  const float* keys;
  const float* values;
  const float* gates;
  const float* queries;  // null: no outputs
  float* out;
  float* state;
  long long n;
  int dk, dv, chunk;
};

// The chunked kernels' shared memory (gla_smem_floats): keys and log-gates [C, ldk], the state tile
// [dk, kGlaTile], the values tile [C, kGlaTile], with outputs the queries [C, ldk] and scores [C, C].
struct GlaSmem {
  float *k, *lc, *S, *v, *q, *A;
  __device__ GlaSmem(float* smem, int dk, int C, bool outputs) {
    const int ldk = gla_ldk(dk);
    k = smem;
    lc = k + C * ldk;
    S = lc + C * ldk;
    v = S + dk * kGlaTile;
    q = outputs ? v + C * kGlaTile : nullptr;
    A = outputs ? q + C * ldk : nullptr;
  }
};

// Stages tokens [t0, t0 + L) of a chunk: keys and gates (and, when sm.q, queries) by rows of ldk, the
// value tile's columns [j0, j0 + tv). The block's threads stride; the caller synchronizes.
__device__ __forceinline__ void gla_stage_chunk(const GlaKernelParams& a, const GlaSmem& sm, long long t0, int L,
                                                int j0, int tv) {
  const int dk = a.dk, ldk = gla_ldk(dk);
  for (int p = threadIdx.x; p < L * dk; p += blockDim.x) {
    const int i = p / dk, d = p % dk;
    const long long g = t0 * dk + p;
    sm.k[i * ldk + d] = a.keys[g];
    sm.lc[i * ldk + d] = a.gates[g];
    if (sm.q) sm.q[i * ldk + d] = a.queries[g];
  }
  for (int p = threadIdx.x; p < L * tv; p += blockDim.x) {
    const int i = p / tv, j = p % tv;
    sm.v[i * kGlaTile + j] = a.values[(t0 + i) * a.dv + j0 + j];
  }
}

__global__ void __launch_bounds__(kGlaThreads) gla_chunked_kernel(GlaKernelParams a) {
  IP_DYNAMIC_SHARED(float, smem);
  const int tile = blockIdx.x, j0 = tile * kGlaTile;
  const int tv = gla_tile_cols(a.dv, kGlaTile, tile);
  const int dk = a.dk, ldk = gla_ldk(dk), C = a.chunk;
  const bool outputs = a.queries != nullptr;
  const GlaSmem sm(smem, dk, C, outputs);
  float *sk = sm.k, *slc = sm.lc, *sS = sm.S, *sv = sm.v, *sq = sm.q, *sA = sm.A;

  for (int p = threadIdx.x; p < dk * tv; p += blockDim.x) {
    const int d = p / tv, j = p % tv;
    sS[d * kGlaTile + j] = a.state[static_cast<long long>(d) * a.dv + j0 + j];
  }
  const long long chunks = gla_num_chunks(a.n, C);
  for (long long c = 0; c < chunks; ++c) {
    const int L = gla_chunk_len(a.n, C, c);
    const long long t0 = c * C;
    __syncthreads();  // the previous chunk's phase 5 is done with k, lc and v
    gla_stage_chunk(a, sm, t0, L, j0, tv);
    __syncthreads();
    GlaTile t{L, dk, ldk, tv, kGlaTile, sk, sq, slc, sA, sv, sS};  // fields in declaration order
    for (int d = threadIdx.x; d < dk; d += blockDim.x) gla_logcum_dim(t, d);
    __syncthreads();
    if (outputs) {
      for (int p = threadIdx.x; p < L * L; p += blockDim.x) gla_score_elem(t, p / L, p % L);
      __syncthreads();
    }
    for (int p = threadIdx.x; p < L * dk; p += blockDim.x) gla_prepare_elem(t, p / dk, p % dk);
    __syncthreads();
    if (outputs) {
      for (int p = threadIdx.x; p < L * tv; p += blockDim.x) {
        const int i = p / tv, j = p % tv;
        a.out[(t0 + i) * a.dv + j0 + j] = gla_output_elem(t, i, j);
      }
      __syncthreads();  // phase 4 reads the incoming state that phase 5 overwrites
    }
    for (int p = threadIdx.x; p < dk * tv; p += blockDim.x) gla_state_elem(t, p / tv, p % tv);
  }
  __syncthreads();
  for (int p = threadIdx.x; p < dk * tv; p += blockDim.x) {
    const int d = p / tv, j = p % tv;
    a.state[static_cast<long long>(d) * a.dv + j0 + j] = sS[d * kGlaTile + j];
  }
}

// ---- the chunk-parallel form (GlaArgs::workspace) ----------------------------------------------------
// The sequential kernel walks the chunks in order in dv / 32 blocks (4 or 5 on the whole GPU: 112 ms for
// 64Ki tokens with outputs on an H200, 2026-12-04). The state a chunk hands on is
//   S_c = diag(g_c) S_{c-1} + U_c,  g_c = e^{b_L} (phase 5's gate),  U_c = sum_m k~_m v_m^T (its sum),
// so the chunks' (g_c, U_c) can be computed all at once, the recurrence then runs per state element over
// the chunks (a scan of multiply-adds), and the outputs of all chunks at once from each chunk's incoming
// state. Every element is computed by the functions and in the order the sequential kernel uses, so the
// state and the outputs are the same bits.
constexpr int kGlaScanThreads = 64;  // 256 blocks for a 128 x 128 state: every SM gets some
constexpr int kGlaScanUnroll = 16;  // chunks whose (U, g) a thread of the scan loads before using any

// What block (c, tile) of the chunk-parallel kernels works on, its chunk staged (not yet synchronized).
struct GlaChunkBlock {
  long long c;
  int j0, tv, L;
  GlaSmem sm;
  __device__ GlaChunkBlock(const GlaKernelParams& a, float* smem, bool outputs)
      : c(blockIdx.x),
        j0(static_cast<int>(blockIdx.y) * kGlaTile),
        tv(gla_tile_cols(a.dv, kGlaTile, static_cast<int>(blockIdx.y))),
        L(gla_chunk_len(a.n, a.chunk, blockIdx.x)),
        sm(smem, a.dk, a.chunk, outputs) {
    gla_stage_chunk(a, sm, c * a.chunk, L, j0, tv);
  }
};

// Block (c, tile): chunk c's U_c for the tile's columns (into U[c], [dk, dv]) and, tile 0, g_c (G[c], [dk]).
__global__ void __launch_bounds__(kGlaThreads) gla_chunk_sums_kernel(GlaKernelParams a, float* U, float* G) {
  IP_DYNAMIC_SHARED(float, smem);
  const GlaChunkBlock cb(a, smem, false);
  const long long c = cb.c;
  const int j0 = cb.j0, tv = cb.tv, dk = a.dk, L = cb.L;
  const GlaSmem& sm = cb.sm;
  __syncthreads();
  GlaTile t{L, dk, gla_ldk(dk), tv, kGlaTile, sm.k, nullptr, sm.lc, nullptr, sm.v, sm.S};
  for (int d = threadIdx.x; d < dk; d += blockDim.x) gla_logcum_dim(t, d);
  __syncthreads();
  for (int p = threadIdx.x; p < L * dk; p += blockDim.x) gla_prepare_elem(t, p / dk, p % dk);
  __syncthreads();
  float* const Uc = U + c * dk * static_cast<long long>(a.dv);
  for (int p = threadIdx.x; p < dk * tv; p += blockDim.x) {
    const int d = p / tv, j = p % tv;
    Uc[static_cast<long long>(d) * a.dv + j0 + j] = gla_state_sum(t, d, j);
  }
  if (blockIdx.y == 0)
    for (int d = threadIdx.x; d < dk; d += blockDim.x) G[c * dk + d] = gla_state_gate(t, d);
}

// One thread per state element e = (d, j): S <- g_c S + U_c over the chunks in order, from and into
// `state`. With keep_incoming each U_c is replaced by the state chunk c starts from (the outputs' input).
// The loads of kGlaScanUnroll chunks go out before the first of them is used.
__global__ void __launch_bounds__(kGlaScanThreads) gla_state_scan_kernel(float* state, float* U, const float* G,
                                                                        long long chunks, int dk, int dv,
                                                                        bool keep_incoming) {
  const long long e = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  const long long elems = static_cast<long long>(dk) * dv;
  if (e >= elems) return;
  const int d = static_cast<int>(e / dv);
  float s = state[e];
  for (long long c0 = 0; c0 < chunks; c0 += kGlaScanUnroll) {
    float u[kGlaScanUnroll], g[kGlaScanUnroll];
#pragma unroll
    for (int i = 0; i < kGlaScanUnroll; ++i) {
      const long long c = min(c0 + i, chunks - 1);
      u[i] = U[c * elems + e];
      g[i] = G[c * dk + d];
    }
#pragma unroll
    for (int i = 0; i < kGlaScanUnroll; ++i) {
      if (c0 + i >= chunks) break;
      if (keep_incoming) U[(c0 + i) * elems + e] = s;
      s = gla_state_update(g[i], s, u[i]);
    }
  }
  state[e] = s;
}

// Block (c, tile): the outputs of chunk c's tokens for the tile's columns, from the state it starts from
// (S_in[c], [dk, dv]), by phases 1-4 as the sequential kernel runs them.
__global__ void __launch_bounds__(kGlaThreads) gla_chunk_outputs_kernel(GlaKernelParams a, const float* S_in) {
  IP_DYNAMIC_SHARED(float, smem);
  const GlaChunkBlock cb(a, smem, true);
  const long long c = cb.c, t0 = c * a.chunk;
  const int j0 = cb.j0, tv = cb.tv, dk = a.dk, ldk = gla_ldk(dk), L = cb.L;
  const GlaSmem& sm = cb.sm;
  const float* const Sc = S_in + c * dk * static_cast<long long>(a.dv);
  for (int p = threadIdx.x; p < dk * tv; p += blockDim.x) {
    const int d = p / tv, j = p % tv;
    sm.S[d * kGlaTile + j] = Sc[static_cast<long long>(d) * a.dv + j0 + j];
  }
  __syncthreads();
  GlaTile t{L, dk, ldk, tv, kGlaTile, sm.k, sm.q, sm.lc, sm.A, sm.v, sm.S};
  for (int d = threadIdx.x; d < dk; d += blockDim.x) gla_logcum_dim(t, d);
  __syncthreads();
  for (int p = threadIdx.x; p < L * L; p += blockDim.x) gla_score_elem(t, p / L, p % L);
  __syncthreads();
  for (int p = threadIdx.x; p < L * dk; p += blockDim.x) gla_prepare_elem(t, p / dk, p % dk);
  __syncthreads();
  for (int p = threadIdx.x; p < L * tv; p += blockDim.x) {
    const int i = p / tv, j = p % tv;
    a.out[(t0 + i) * a.dv + j0 + j] = gla_output_elem(t, i, j);
  }
}

__global__ void gla_append_kernel(const float* __restrict__ keys, const float* __restrict__ values,
                                  const float* __restrict__ gates, float* __restrict__ state, long long n, int dk,
                                  int dv) {
  const long long e = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= static_cast<long long>(dk) * dv) return;
  const int d = static_cast<int>(e / dv), j = static_cast<int>(e % dv);
  state[e] = gla_recurrence_elem(state[e], n, keys + d, gates + d, dk, values + j, dv);
}

__global__ void gla_readout_kernel(const float* __restrict__ state, const float* __restrict__ queries,
                                   float* __restrict__ out, int dk, int dv, float feature_scale, bool normalise) {
  IP_DYNAMIC_SHARED(float, smem);
  float* x = smem;       // [dk] the (feature-mapped) query
  float* o = smem + dk;  // [dv] S^T x
  const int h = blockIdx.x;
  for (int d = threadIdx.x; d < dk; d += blockDim.x) {
    const float q = queries[static_cast<long long>(h) * dk + d];
    x[d] = feature_scale > 0.0f ? feature_map(__fmul_rn(feature_scale, q)) : q;
  }
  __syncthreads();
  for (int j = threadIdx.x; j < dv; j += blockDim.x) {
    float acc = 0.0f;
    for (int d = 0; d < dk; ++d) acc += x[d] * state[static_cast<long long>(d) * dv + j];
    o[j] = acc;
  }
  __syncthreads();
  if (normalise) {
    const float z = o[dv - 1];
    for (int j = threadIdx.x; j < dv - 1; j += blockDim.x) out[static_cast<long long>(h) * (dv - 1) + j] = o[j] / z;
  } else {
    for (int j = threadIdx.x; j < dv; j += blockDim.x) out[static_cast<long long>(h) * dv + j] = o[j];
  }
}

__global__ void local_inputs_kernel(const float* __restrict__ keys, const float* __restrict__ values, long long first,
                                    long long n, int dk, int dv, float scale, GateParams gp, float* __restrict__ ok,
                                    float* __restrict__ ov, float* __restrict__ og) {
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  const long long start = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (long long e = start; e < n * dk; e += stride) {
    const long long i = e / dk;
    const int d = static_cast<int>(e % dk);
    ok[e] = feature_map(__fmul_rn(scale, keys[e]));
    og[e] = gate_value(gp, first + i, d);
  }
  const long long dv1 = dv + 1LL;
  for (long long e = start; e < n * dv1; e += stride) {
    const long long i = e / dv1, j = e % dv1;
    ov[e] = j < dv ? values[i * dv + j] : 1.0f;
  }
}

}  // namespace ip::cuda
