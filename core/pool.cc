#include "core/pool.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/parallel.h"

namespace ip {
namespace {

// Groups per parallel chunk: fixed, so results never depend on the thread count.
constexpr Index64 kGroupsPerChunk = 2048;

// True when n rows of D floats are all finite (no exponent field of all ones); vectorizes.
template <class Dim>
bool rows_finite(const float* k, Index64 ld, int n, Dim D) {
  std::uint32_t bad = 0;
  for (int r = 0; r < n; ++r) {
    const float* row = k + r * ld;
    for (int d = 0; d < D; ++d) {
      std::uint32_t u;
      std::memcpy(&u, row + d, sizeof u);
      bad |= static_cast<std::uint32_t>((u & 0x7F800000u) == 0x7F800000u);
    }
  }
  return bad == 0;
}

// Weights of the n tokens from `first` into w (scratch: D + 2G floats); D as with_dim passes it.
template <class Dim>
void group_weights_dim(MatrixView<const float> keys, const PoolParams& p, const AccessStats* stats,
                       const float* query_ref, Index64 first, int G, int n, float* w, float* scratch, Dim D) {
  const WeightParams& wp = p.weights;
  const float* k = keys.row(first);
  const float* bias = wp.positional_bias.empty() ? nullptr : wp.positional_bias.data();
  const float* mref = wp.cosine_reference == CosineReference::query ? query_ref : nullptr;
  switch (wp.scheme) {
    case Weighting::uniform:
    case Weighting::maxmin:
    case Weighting::exact:
      for (int r = 0; r < n; ++r) w[r] = 1.0f;
      return;
    case Weighting::positional:
      positional_group_weights(n, G, wp.positional_lambda, bias, w);
      return;
    case Weighting::cosine:
      cosine_group_weights(k, keys.ld, n, D, mref, wp.eps, wp.cosine_power, scratch, w);
      return;
    case Weighting::tfidf:
      tfidf_group_weights(stats->mass.data() + first, stats->count.data() + first, n, stats->steps, wp.eps, w);
      return;
    case Weighting::hybrid: {
      float* v = scratch + static_cast<int>(D);
      for (int r = 0; r < n; ++r) w[r] = 1.0f;
      positional_group_weights(n, G, wp.positional_lambda, bias, v);
      hybrid_multiply(v, n, wp.alpha_positional, w);
      cosine_group_weights(k, keys.ld, n, D, mref, wp.eps, wp.cosine_power, scratch, v);
      hybrid_multiply(v, n, wp.alpha_cosine, w);
      tfidf_group_weights(stats->mass.data() + first, stats->count.data() + first, n, stats->steps, wp.eps, v);
      hybrid_multiply(v, n, wp.alpha_tfidf, w);
      return;
    }
  }
}

}  // namespace

void group_weights_at(MatrixView<const float> keys, const PoolParams& p, const AccessStats* stats,
                      const float* query_ref, Index64 first, int G, int n, float* w, float* scratch) {
  with_dim(static_cast<int>(keys.cols),
           [&](auto D) { group_weights_dim(keys, p, stats, query_ref, first, G, n, w, scratch, D); });
}

namespace {

// Runs fn(g, n, w, out_row_buffer, D) for every group, in parallel chunks, D as with_dim passes it.
template <class Fn>
void for_each_group(MatrixView<const float> keys, const PoolParams& p, const AccessStats* stats,
                    const float* query_ref, Fn&& fn) {
  const int G = effective_group_size(p);
  const Index64 T = keys.rows;
  const Index64 groups = num_groups(T, G);
  with_dim(static_cast<int>(keys.cols), [&](auto D) {
    parallel_for(groups, kGroupsPerChunk, [&](Index64 gb, Index64 ge) {
      std::vector<float> w(G), scratch(D + G), buf(2 * D);
      for (Index64 g = gb; g < ge; ++g) {
        const int n = static_cast<int>(std::min<Index64>(G, T - g * G));
        // The group is in L1 now: checking it here costs no extra pass over memory.
        if (!rows_finite(keys.row(g * G), keys.ld, n, D)) {
          for (Index64 t = g * G; t < g * G + n; ++t)
            IP_REQUIRE(rows_finite(keys.row(t), keys.ld, 1, D),
                       "pooling: index key of token {} contains NaN or infinity", t);
        }
        group_weights_dim(keys, p, stats, query_ref, g * G, G, n, w.data(), scratch.data(), D);
        fn(g, n, w.data(), buf.data(), D);
      }
    });
  });
}

}  // namespace

int effective_group_size(const PoolParams& p) { return p.weights.scheme == Weighting::exact ? 1 : p.group_size; }

Index64 num_groups(Index64 tokens, int group_size) { return (tokens + group_size - 1) / group_size; }

void validate_pool_params(const PoolParams& p) {
  IP_REQUIRE(p.group_size >= 1, "pool.group_size: group size G = {} (must be >= 1)", p.group_size);
  const WeightParams& wp = p.weights;
  const int G = effective_group_size(p);
  IP_REQUIRE(wp.positional_bias.empty() || static_cast<int>(wp.positional_bias.size()) == G,
             "pool.positional_bias: positional bias has {} entries for group size {} (pool.group_size; one entry "
             "per slot)",
             wp.positional_bias.size(), G);
  // exp() of more than ~88 overflows float and turns the composite into inf/inf = NaN.
  IP_REQUIRE(!wp.positional_bias.empty() ||
                 (std::isfinite(wp.positional_lambda) && std::fabs(wp.positional_lambda) <= 80.0f),
             "pool.positional_lambda: positional lambda = {} (must be finite, |lambda| <= 80)", wp.positional_lambda);
  IP_REQUIRE(wp.eps > 0.0f && std::isfinite(wp.eps), "pool.eps = {} (must be > 0)", wp.eps);
  IP_REQUIRE(wp.cosine_power > 0.0f && std::isfinite(wp.cosine_power),
             "pool.cosine_power: cosine power = {} (must be > 0)", wp.cosine_power);
  for (float b : wp.positional_bias)
    IP_REQUIRE(std::isfinite(b) && std::fabs(b) <= 80.0f,
               "pool.positional_bias: positional bias {} (must be finite, |b| <= 80)", b);
  // A group whose weights all sit on the floor must not sum to zero: eps^p has to stay a normal float.
  IP_REQUIRE(std::pow(wp.eps, wp.cosine_power) >= std::numeric_limits<float>::min(),
             "pool.eps and pool.cosine_power: eps^cosine_power = {}^{} underflows float (lower the power or raise "
             "eps)",
             wp.eps, wp.cosine_power);
}

void validate_pool_inputs(MatrixView<const float> keys, const PoolParams& p, const AccessStats* stats,
                          const float* query_ref) {
  IP_REQUIRE(keys.rows > 0, "pooling: empty context (0 tokens)");
  IP_REQUIRE(keys.cols > 0, "pooling: key dimension is 0");
  validate_pool_params(p);
  const WeightParams& wp = p.weights;
  if (uses_stats(wp.scheme)) {
    IP_REQUIRE(stats != nullptr, "pooling: weighting '{}' needs access statistics", to_string(wp.scheme));
    IP_REQUIRE(stats->tokens() == keys.rows, "pooling: access statistics cover {} tokens, the context has {}",
               stats->tokens(), keys.rows);
  }
  IP_REQUIRE(!uses_query_reference(wp) || query_ref != nullptr, "pooling: cosine reference 'query' needs a query reference");
}

std::vector<float> compute_weights(MatrixView<const float> keys, const PoolParams& p, const AccessStats* stats,
                                   const float* query_ref) {
  validate_pool_inputs(keys, p, stats, query_ref);
  std::vector<float> out(keys.rows);
  const int G = effective_group_size(p);
  for_each_group(keys, p, stats, query_ref, [&](Index64 g, int n, const float* w, float*, auto) {
    std::copy(w, w + n, out.begin() + g * G);
  });
  return out;
}

PooledIndex build_index(MatrixView<const float> keys, const PoolParams& p, const AccessStats* stats,
                        const float* query_ref) {
  PooledIndex idx;
  build_index(keys, p, stats, query_ref, idx);
  return idx;
}

void build_index(MatrixView<const float> keys, const PoolParams& p, const AccessStats* stats, const float* query_ref,
                 PooledIndex& idx) {
  validate_pool_inputs(keys, p, stats, query_ref);
  idx.method = p.weights.scheme;
  idx.group_size = effective_group_size(p);
  idx.tokens = keys.rows;
  const int D = static_cast<int>(keys.cols);
  const Index64 groups = idx.groups();
  resize(idx.rows, p.precision, groups * idx.rows_per_group(), D);
  const int G = idx.group_size;
  QuantizedMatrix& q = idx.rows;
  const bool fp32 = q.precision == Precision::fp32;
  // fp32 rows are written in place; other formats go through a row buffer and are encoded.
  auto row_out = [&](Index64 r, float* buf) { return fp32 ? reinterpret_cast<float*>(q.row_bytes(r)) : buf; };
  auto row_done = [&](Index64 r, const float* buf) {
    if (!fp32) quantize_row(buf, r, q);
  };
  if (idx.method == Weighting::maxmin) {
    for_each_group(keys, p, stats, query_ref, [&](Index64 g, int n, const float*, float* buf, auto) {
      float* hi = row_out(2 * g, buf);
      float* lo = row_out(2 * g + 1, buf + D);
      maxmin_group(keys.row(g * G), keys.ld, n, D, hi, lo);
      row_done(2 * g, hi);
      row_done(2 * g + 1, lo);
    });
  } else if (idx.method == Weighting::exact) {
    for_each_group(keys, p, stats, query_ref, [&](Index64 g, int, const float*, float*, auto) {
      quantize_row(keys.row(g), g, q);
    });
  } else {
    for_each_group(keys, p, stats, query_ref, [&](Index64 g, int n, const float* w, float* buf, auto Dc) {
      float* out = row_out(g, buf);
      pool_group(keys.row(g * G), keys.ld, n, Dc, w, out);
      row_done(g, out);
    });
  }
}

Tensor<float> pool_fp32(MatrixView<const float> keys, const PoolParams& p, const AccessStats* stats,
                        const float* query_ref) {
  PoolParams q = p;
  q.precision = Precision::fp32;
  return dequantize(build_index(keys, q, stats, query_ref).rows);
}

}  // namespace ip
