#include "core/linear_attention.h"

#include <algorithm>
#include <vector>

#include "core/error.h"
#include "core/parallel.h"

namespace ip {
namespace {

void check_inputs(MatrixView<const float> k, MatrixView<const float> v, MatrixView<const float> a,
                  MatrixView<const float> q) {
  IP_REQUIRE(v.rows == k.rows && a.rows == k.rows, "linear attention: {} keys, {} values, {} gate rows", k.rows,
             v.rows, a.rows);
  IP_REQUIRE(a.cols == k.cols, "linear attention: gates have {} columns for key dimension {}", a.cols, k.cols);
  IP_REQUIRE(q.rows == 0 || (q.rows == k.rows && q.cols == k.cols),
             "linear attention: queries must be empty or [{}, {}], got [{}, {}]", k.rows, k.cols, q.rows, q.cols);
}

}  // namespace

void validate_gates(const GateParams& g) {
  IP_REQUIRE(g.decay > 0.0f && g.decay <= 1.0f, "gates: decay = {} outside (0, 1]", g.decay);
  IP_REQUIRE(std::isfinite(g.spread) && g.spread >= 0.0f && g.spread <= 10.0f, "gates: spread = {} outside [0, 10]",
             g.spread);
}

void fill_gates(const GateParams& g, Index64 first, Index64 rows, int dim, float* out) {
  validate_gates(g);
  parallel_for(rows, 1024, [&](Index64 b, Index64 e) {
    for (Index64 i = b; i < e; ++i)
      for (int d = 0; d < dim; ++d) out[i * dim + d] = gate_value(g, first + i, d);
  });
}

void gla_naive(MatrixView<const float> keys, MatrixView<const float> values, MatrixView<const float> gates,
               MatrixView<const float> queries, float* state, float* out) {
  check_inputs(keys, values, gates, queries);
  const Index64 n = keys.rows, Dk = keys.cols, Dv = values.cols;
  for (Index64 t = 0; t < n; ++t) {
    const float *k = keys.row(t), *v = values.row(t), *a = gates.row(t);
    for (Index64 d = 0; d < Dk; ++d) {
      float* s = state + d * Dv;
      for (Index64 j = 0; j < Dv; ++j) s[j] = a[d] * s[j] + k[d] * v[j];
    }
    if (queries.rows == 0) continue;
    const float* q = queries.row(t);
    float* o = out + t * Dv;
    for (Index64 j = 0; j < Dv; ++j) o[j] = 0.0f;
    for (Index64 d = 0; d < Dk; ++d)
      for (Index64 j = 0; j < Dv; ++j) o[j] += q[d] * state[d * Dv + j];
  }
}

void gla_chunked(MatrixView<const float> keys, MatrixView<const float> values, MatrixView<const float> gates,
                 MatrixView<const float> queries, int chunk, float* state, float* out) {
  check_inputs(keys, values, gates, queries);
  IP_REQUIRE(chunk >= 1, "linear attention: chunk = {} (must be >= 1)", chunk);
  const Index64 n = keys.rows, Dk = keys.cols, Dv = values.cols, C = chunk;
  if (n == 0) return;
  const bool outputs = queries.rows > 0;
  const Index64 chunks = (n + C - 1) / C;
  std::vector<float> logcum(static_cast<std::size_t>(n * Dk));          // b_i per dimension, chunk-relative
  std::vector<float> delta(static_cast<std::size_t>(chunks * Dk * Dv));  // chunk state from S_0 = 0
  // 1. Per chunk, in parallel: cumulative log-gates, the chunk's own state, intra-chunk outputs.
  parallel_for(chunks, 1, [&](Index64 cb, Index64 ce) {
    for (Index64 c = cb; c < ce; ++c) {
      const Index64 b = c * C, L = std::min(C, n - b);
      float* lc = logcum.data() + b * Dk;
      for (Index64 i = 0; i < L; ++i)
        for (Index64 d = 0; d < Dk; ++d) lc[i * Dk + d] = (i ? lc[(i - 1) * Dk + d] : 0.0f) + logf(gates(b + i, d));
      float* ds = delta.data() + c * Dk * Dv;
      std::fill(ds, ds + Dk * Dv, 0.0f);
      const float* last = lc + (L - 1) * Dk;
      for (Index64 i = 0; i < L; ++i) {
        const float *k = keys.row(b + i), *v = values.row(b + i);
        for (Index64 d = 0; d < Dk; ++d) {
          const float f = expf(last[d] - lc[i * Dk + d]) * k[d];
          for (Index64 j = 0; j < Dv; ++j) ds[d * Dv + j] += f * v[j];
        }
      }
      if (!outputs) continue;
      for (Index64 i = 0; i < L; ++i) {
        const float* q = queries.row(b + i);
        float* o = out + (b + i) * Dv;
        std::fill(o, o + Dv, 0.0f);
        for (Index64 j = 0; j <= i; ++j) {
          const float* k = keys.row(b + j);
          float a = 0.0f;
          for (Index64 d = 0; d < Dk; ++d) a += q[d] * k[d] * expf(lc[i * Dk + d] - lc[j * Dk + d]);
          const float* v = values.row(b + j);
          for (Index64 x = 0; x < Dv; ++x) o[x] += a * v[x];
        }
      }
    }
  });
  // 2. The state pass, in chunk order; keep each chunk's incoming state for the outputs.
  std::vector<float> incoming(outputs ? static_cast<std::size_t>(chunks * Dk * Dv) : 0);
  for (Index64 c = 0; c < chunks; ++c) {
    const Index64 b = c * C, L = std::min(C, n - b);
    if (outputs) std::copy(state, state + Dk * Dv, incoming.data() + c * Dk * Dv);
    const float* last = logcum.data() + (b + L - 1) * Dk;
    const float* ds = delta.data() + c * Dk * Dv;
    for (Index64 d = 0; d < Dk; ++d) {
      const float g = expf(last[d]);
      for (Index64 j = 0; j < Dv; ++j) state[d * Dv + j] = g * state[d * Dv + j] + ds[d * Dv + j];
    }
  }
  if (!outputs) return;
  // 3. Inter-chunk contribution (q_i * e^{b_i})^T S_in, in parallel.
  parallel_for(chunks, 1, [&](Index64 cb, Index64 ce) {
    std::vector<float> qs(Dk);
    for (Index64 c = cb; c < ce; ++c) {
      const Index64 b = c * C, L = std::min(C, n - b);
      const float* s0 = incoming.data() + c * Dk * Dv;
      for (Index64 i = 0; i < L; ++i) {
        const float* q = queries.row(b + i);
        const float* lc = logcum.data() + (b + i) * Dk;
        for (Index64 d = 0; d < Dk; ++d) qs[d] = q[d] * expf(lc[d]);
        float* o = out + (b + i) * Dv;
        for (Index64 d = 0; d < Dk; ++d)
          for (Index64 j = 0; j < Dv; ++j) o[j] += qs[d] * s0[d * Dv + j];
      }
    }
  });
}

void gla_readout(const float* state, Index64 dk, Index64 dv, MatrixView<const float> queries, float* out) {
  IP_REQUIRE(queries.cols == dk, "linear attention: query dimension {} for a state of {} rows", queries.cols, dk);
  for (Index64 h = 0; h < queries.rows; ++h) {
    const float* q = queries.row(h);
    float* o = out + h * dv;
    std::fill(o, o + dv, 0.0f);
    for (Index64 d = 0; d < dk; ++d)
      for (Index64 j = 0; j < dv; ++j) o[j] += q[d] * state[d * dv + j];
  }
}

}  // namespace ip
