// Gated linear attention kernels (launchers: kernels/linear_attention.cu; per-element math shared
// with the CPU replay test: core/gla_tile.h).
//   gla_chunked_kernel  one block per tile of kGlaTile value columns. The block keeps its state tile
//                       [dk, kGlaTile] in shared memory and walks the chunks in order: it stages a
//                       chunk's keys, gates (and queries) and the tile's values, then runs the five
//                       phases of core/gla_tile.h with its threads striding over the elements of each
//                       phase and a barrier between phases. No atomics: every sum runs in a fixed
//                       order in one thread, so the same inputs give the same bits.
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

__global__ void __launch_bounds__(kGlaThreads) gla_chunked_kernel(GlaKernelParams a) {
  IP_DYNAMIC_SHARED(float, smem);
  const int tile = blockIdx.x, j0 = tile * kGlaTile;
  const int tv = gla_tile_cols(a.dv, kGlaTile, tile);
  const int dk = a.dk, ldk = gla_ldk(dk), C = a.chunk;
  const bool outputs = a.queries != nullptr;
  float* sk = smem;                  // [C, ldk]
  float* slc = sk + C * ldk;         // [C, ldk]
  float* sS = slc + C * ldk;         // [dk, kGlaTile]
  float* sv = sS + dk * kGlaTile;    // [C, kGlaTile]
  float* sq = outputs ? sv + C * kGlaTile : nullptr;  // [C, ldk]
  float* sA = outputs ? sq + C * ldk : nullptr;       // [C, C]

  for (int p = threadIdx.x; p < dk * tv; p += blockDim.x) {
    const int d = p / tv, j = p % tv;
    sS[d * kGlaTile + j] = a.state[static_cast<long long>(d) * a.dv + j0 + j];
  }
  const long long chunks = gla_num_chunks(a.n, C);
  for (long long c = 0; c < chunks; ++c) {
    const int L = gla_chunk_len(a.n, C, c);
    const long long t0 = c * C;
    __syncthreads();  // the previous chunk's phase 5 is done with k, lc and v
    for (int p = threadIdx.x; p < L * dk; p += blockDim.x) {
      const int i = p / dk, d = p % dk;
      const long long g = t0 * dk + p;
      sk[i * ldk + d] = a.keys[g];
      slc[i * ldk + d] = a.gates[g];
      if (outputs) sq[i * ldk + d] = a.queries[g];
    }
    for (int p = threadIdx.x; p < L * tv; p += blockDim.x) {
      const int i = p / tv, j = p % tv;
      sv[i * kGlaTile + j] = a.values[(t0 + i) * a.dv + j0 + j];
    }
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
