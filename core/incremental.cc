#include "core/incremental.h"

#include <algorithm>
#include <cmath>

#include "core/parallel.h"

namespace ip {
namespace {
constexpr Index64 kGroupsPerChunk = 2048;  // fixed, as in pool.cc: results never depend on the thread count
}

double weight_movement(const float* now, const float* before, int n) {
  double num = 0.0, den = 0.0;
  for (int i = 0; i < n; ++i) {
    num += std::fabs(static_cast<double>(now[i]) - static_cast<double>(before[i]));
    den += std::fabs(static_cast<double>(before[i]));
  }
  return den > 0.0 ? num / den : (num > 0.0 ? INFINITY : 0.0);
}

RepoolCount update_index(MatrixView<const float> keys, const PoolParams& p, const AccessStats* stats,
                         const float* query_ref, float tau, IndexState& st) {
  // compute_weights validates everything build_index validates, and gives the same per-token weights.
  std::vector<float> w = compute_weights(keys, p, stats, query_ref);
  PooledIndex& idx = st.index;
  const int G = effective_group_size(p);
  const Index64 T = keys.rows, D = keys.cols;
  const bool reset = idx.tokens == 0 || idx.method != p.weights.scheme || idx.group_size != G ||
                     idx.rows.precision != p.precision || idx.rows.cols != D || idx.tokens > T ||
                     static_cast<Index64>(st.weights.size()) != idx.tokens;
  const Index64 old_T = reset ? 0 : idx.tokens;
  IP_REQUIRE(reset || idx.tokens <= T, "index update: the context shrank from {} to {} tokens", idx.tokens, T);
  idx.method = p.weights.scheme;
  idx.group_size = G;
  idx.tokens = T;
  const Index64 groups = idx.groups();
  // resize() keeps the rows already there (the payload is row-major, the scales one per row).
  resize(idx.rows, p.precision, groups * idx.rows_per_group(), D);
  // Groups at or after first_new hold tokens the index did not cover.
  const Index64 first_new = old_T / G;
  std::vector<std::uint8_t> todo(static_cast<std::size_t>(groups), 0);
  for (Index64 g = 0; g < groups; ++g) {
    const Index64 b = g * G;
    const int n = static_cast<int>(std::min<Index64>(G, T - b));
    todo[g] = g >= first_new || tau < 0.0f || weight_movement(w.data() + b, st.weights.data() + b, n) > tau;
  }
  QuantizedMatrix& q = idx.rows;
  const bool fp32 = q.precision == Precision::fp32;
  const Weighting m = idx.method;
  parallel_for(groups, kGroupsPerChunk, [&](Index64 gb, Index64 ge) {
    std::vector<float> buf(2 * D);
    for (Index64 g = gb; g < ge; ++g) {
      if (!todo[g]) continue;
      const Index64 b = g * G;
      const int n = static_cast<int>(std::min<Index64>(G, T - b));
      // The same arithmetic as build_index (pool.cc), so the bits agree.
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
        pool_group(keys.row(b), keys.ld, n, static_cast<int>(D), w.data() + b, out);
        if (!fp32) quantize_row(out, g, q);
      }
    }
  });
  RepoolCount rc;
  rc.groups = groups;
  st.weights.resize(static_cast<std::size_t>(T));
  for (Index64 g = 0; g < groups; ++g) {
    if (!todo[g]) continue;
    ++rc.repooled;
    const Index64 b = g * G, e = std::min(T, b + G);
    std::copy(w.begin() + b, w.begin() + e, st.weights.begin() + b);
  }
  return rc;
}

}  // namespace ip
