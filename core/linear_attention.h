// Gated linear attention (issue 7, the local branch of the hybrid layer):
//   S_t = diag(alpha_t) S_{t-1} + k_t v_t^T,   o_t = S_t^T q_t
// with S_t in R^{Dk x Dv}, per-dimension gates alpha_t in (0, 1]^Dk. Two forms with the same math:
//   gla_naive    the recurrence, one token at a time (the reference; also the decode-step update);
//   gla_chunked  chunks of C tokens (the form the GPU kernel uses): within a chunk, with cumulative
//                log-gates b_i = sum_{j<=i} log alpha_j (per dimension, relative to the chunk start),
//                  o_i   = (q_i * e^{b_i})^T S_0 + sum_{j<=i} (sum_d q_id k_jd e^{b_id - b_jd}) v_j
//                  S_end = diag(e^{b_L}) S_0 + sum_j (e^{b_L - b_j} * k_j) v_j^T
//                every exponent is <= 0, so nothing overflows. Chunks are independent apart from the
//                state they hand on: intra-chunk work runs in parallel, the state pass in chunk order.
// Gates of the synthetic workload: alpha_{t,d} = decay^{exp(spread * s)}, s uniform in [-sqrt 3, sqrt 3]
// (unit variance) from hash(seed, t, d): spread 0 gives the constant gate `decay`.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/hd.h"
#include "core/rng.h"
#include "core/tensor.h"

namespace ip {

struct GateParams {
  float decay = 0.9f;   // median gate, in (0, 1]
  float spread = 0.5f;  // log-scale spread of the gates, >= 0
  std::uint64_t seed = 0;
};

void validate_gates(const GateParams& g);

// Gate of token t, key dimension d (pure function: the GPU computes the same): decay^exp(spread s), s
// uniform in [-sqrt 3, sqrt 3), at least 2^-126, the smallest normal float. A smaller gate (0.9^exp(4 x 1.73)
// underflows to 0) would clear the state within one token all the same, but the chunked forms take its log,
// and log 0 made their outputs NaN (workload.gate_spread >= 4 at gate_decay 0.9, before 2026-12-07).
IP_HOST_DEVICE float gate_value(const GateParams& g, long long t, int d) {
  const std::uint64_t h = splitmix64(hash_key(g.seed, 0x6A7E, static_cast<std::uint64_t>(t), static_cast<std::uint64_t>(d)));
  const float u = static_cast<float>(h >> 40) * 0x1.0p-24f;  // [0, 1)
  const float s = 1.7320508f * (2.0f * u - 1.0f);
  return fmaxf(powf(g.decay, expf(g.spread * s)), 0x1.0p-126f);
}

// Gates of tokens [first, first + rows) into out [rows, dim].
void fill_gates(const GateParams& g, Index64 first, Index64 rows, int dim, float* out);

// The naive recurrence over n = keys.rows tokens, from `state` ([Dk, Dv] row-major, updated in place).
// queries [n, Dk] or empty (then no outputs); out [n, Dv] when queries are given.
void gla_naive(MatrixView<const float> keys, MatrixView<const float> values, MatrixView<const float> gates,
               MatrixView<const float> queries, float* state, float* out);

// The chunked form (chunk >= 1 tokens); same arguments and results up to float rounding.
void gla_chunked(MatrixView<const float> keys, MatrixView<const float> values, MatrixView<const float> gates,
                 MatrixView<const float> queries, int chunk, float* state, float* out);

// Read-out only: out[h] = S^T q_h for each row of `queries` ([Ha, Dk] -> [Ha, Dv]).
void gla_readout(const float* state, Index64 dk, Index64 dv, MatrixView<const float> queries, float* out);

// Positive feature map of the hybrid layer's local branch: phi(x) = elu(x) + 1 (x > 0: x + 1, else e^x).
IP_HOST_DEVICE float feature_map(float x) { return x > 0.0f ? x + 1.0f : expf(x); }

}  // namespace ip
