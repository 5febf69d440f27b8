#include "core/incremental.h"

#include <algorithm>
#include <cmath>

#include "core/parallel.h"

namespace ip {
namespace {
constexpr Index64 kGroupsPerChunk = 2048;  // fixed, as in pool.cc: results never depend on the thread count
}

RepoolCount update_index(MatrixView<const float> keys, const PoolParams& p, const AccessStats* stats,
                         const float* query_ref, float tau, IndexState& st) {
  validate_pool_inputs(keys, p, stats, query_ref);
  PooledIndex& idx = st.index;
  const int G = effective_group_size(p);
  const Index64 T = keys.rows, D = keys.cols;
  const bool reset = idx.tokens == 0 || idx.method != p.weights.scheme || idx.group_size != G ||
                     idx.rows.precision != p.precision || idx.rows.cols != D || idx.tokens > T ||
                     static_cast<Index64>(st.weights.size()) != idx.tokens;
  const Index64 old_T = reset ? 0 : idx.tokens;
  idx.method = p.weights.scheme;
  idx.group_size = G;
  idx.tokens = T;
  const Index64 groups = idx.groups();
  // resize() keeps the rows already there (the payload is row-major, the scales one per row).
  resize(idx.rows, p.precision, groups * idx.rows_per_group(), D);
  st.weights.resize(static_cast<std::size_t>(T));
  // Groups at or after first_new hold tokens the index did not cover: their keys are checked here (the
  // others were checked when they were first pooled, and keys do not change).
  const Index64 first_new = old_T / G;
  QuantizedMatrix& q = idx.rows;
  const bool fp32 = q.precision == Precision::fp32;
  const Weighting m = idx.method;
  const Index64 chunks = (groups + kGroupsPerChunk - 1) / kGroupsPerChunk;
  std::vector<Index64> pooled(static_cast<std::size_t>(chunks), 0);
  // One pass per group: weights, movement, and (if it moved) pooling, as build_index does it (pool.cc),
  // so the bits agree.
  parallel_for(groups, kGroupsPerChunk, [&](Index64 gb, Index64 ge) {
    std::vector<float> w(G), scratch(D + std::max(G, 16)), buf(2 * D);
    for (Index64 g = gb; g < ge; ++g) {
      const Index64 b = g * G;
      const int n = static_cast<int>(std::min<Index64>(G, T - b));
      const bool fresh = g >= first_new;
      if (fresh)
        for (Index64 t = b; t < b + n; ++t)
          for (Index64 d = 0; d < D; ++d)
            IP_REQUIRE(std::isfinite(keys(t, d)), "pooling: index key of token {} contains NaN or infinity", t);
      group_weights_at(keys, p, stats, query_ref, b, G, n, w.data(), scratch.data());
      float* used = st.weights.data() + b;
      if (!repool_group(fresh, tau, w.data(), used, n)) continue;
      std::copy(w.begin(), w.begin() + n, used);
      ++pooled[g / kGroupsPerChunk];
      if (m == Weighting::exact) {
        quantize_row(keys.row(g), g, q);
      } else if (m == Weighting::maxmin) {
        float* hi = fp32 ? reinterpret_cast<float*>(q.row_bytes(2 * g)) : buf.data();
        float* lo = fp32 ? reinterpret_cast<float*>(q.row_bytes(2 * g + 1)) : buf.data() + D;
        maxmin_group(keys.row(b), keys.ld, n, static_cast<int>(D), hi, lo);
        if (!fp32) {
          quantize_row(hi, 2 * g, q);
          quantize_row(lo, 2 * g + 1, q);
        }
      } else {
        float* out = fp32 ? reinterpret_cast<float*>(q.row_bytes(g)) : buf.data();
        pool_group(keys.row(b), keys.ld, n, static_cast<int>(D), w.data(), out);
        if (!fp32) quantize_row(out, g, q);
      }
    }
  });
  RepoolCount rc;
  rc.groups = groups;
  for (Index64 c : pooled) rc.repooled += c;
  return rc;
}

}  // namespace ip
