#include "core/adaptive.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/incremental.h"
#include "core/parallel.h"
#include "core/topk.h"

namespace ip {
namespace {

constexpr int kSizes[] = {1, 2, 4, 8, 16};

Index64 rows_for(Index64 n, int G) { return (n + G - 1) / G; }

}  // namespace

void validate_adaptive(const AdaptiveParams& a) {
  if (!a.enabled) return;
  IP_REQUIRE(a.segment >= 16 && a.segment % 16 == 0, "adaptive.segment = {} (must be a multiple of 16)", a.segment);
  IP_REQUIRE(std::isfinite(a.budget_bytes_per_token) && a.budget_bytes_per_token > 0,
             "adaptive.budget = {} bytes per token (must be > 0)", a.budget_bytes_per_token);
  IP_REQUIRE(a.access_weight >= 0 && a.disagreement_weight >= 0,
             "adaptive.access_weight and adaptive.disagreement_weight must be >= 0");
}

double adaptive_smallest_index_bytes(Index64 T, int segment, double row_bytes) {
  const Index64 S = segment, full = T / S, rest = T % S;
  return row_bytes * static_cast<double>(full * rows_for(S, 16) + rows_for(rest, 16));
}

Index64 adaptive_budget_short_context(const AdaptiveParams& a, Index64 prompt, Index64 append, Index64 steps,
                                      double row_bytes) {
  for (Index64 q = 0; q < (append > 0 ? steps : 1); ++q) {
    const Index64 T = prompt + (q + 1) * append;
    // The same sum choose_group_sizes compares (segment by segment, in double).
    if (adaptive_smallest_index_bytes(T, a.segment, row_bytes) > a.budget_bytes_per_token * static_cast<double>(T))
      return T;
  }
  return 0;
}

std::vector<double> segment_scores(MatrixView<const float> keys, const AccessStats* stats, const AdaptiveParams& a) {
  const Index64 T = keys.rows, D = keys.cols, S = a.segment;
  const Index64 segs = (T + S - 1) / S;
  std::vector<double> acc(segs, 0.0), dis(segs, 0.0);
  parallel_for(segs, 16, [&](Index64 sb, Index64 se) {
    std::vector<double> m(D);
    for (Index64 s = sb; s < se; ++s) {
      const Index64 b = s * S, e = std::min(T, b + S);
      if (stats && stats->tokens() >= e)
        for (Index64 i = b; i < e; ++i) acc[s] += stats->mass[i];
      std::fill(m.begin(), m.end(), 0.0);
      for (Index64 i = b; i < e; ++i)
        for (Index64 d = 0; d < D; ++d) m[d] += keys(i, d);
      double mm = 0.0;
      for (Index64 d = 0; d < D; ++d) mm += m[d] * m[d];
      double sum = 0.0;
      for (Index64 i = b; i < e; ++i) {
        double kk = 0.0, km = 0.0;
        for (Index64 d = 0; d < D; ++d) {
          kk += static_cast<double>(keys(i, d)) * keys(i, d);
          km += keys(i, d) * m[d];
        }
        const double den = std::sqrt(kk * mm);
        sum += 1.0 - (den > 0.0 ? km / den : 0.0);
      }
      dis[s] = sum / static_cast<double>(e - b);
    }
  });
  const double amax = *std::max_element(acc.begin(), acc.end()), dmax = *std::max_element(dis.begin(), dis.end());
  std::vector<double> u(segs);
  for (Index64 s = 0; s < segs; ++s)
    u[s] = (amax > 0 ? a.access_weight * acc[s] / amax : 0.0) + (dmax > 0 ? a.disagreement_weight * dis[s] / dmax : 0.0);
  return u;
}

std::vector<int> choose_group_sizes(std::span<const double> score, std::span<const Index64> seg_len, double row_bytes,
                                    double budget_bytes) {
  const std::size_t n = seg_len.size();
  IP_REQUIRE(score.size() == n, "adaptive: {} scores for {} segments", score.size(), n);
  std::vector<int> level(n, 4);  // index into kSizes: 16
  double total = 0.0;
  for (std::size_t s = 0; s < n; ++s) total += static_cast<double>(rows_for(seg_len[s], 16)) * row_bytes;
  IP_REQUIRE(total <= budget_bytes,
             "adaptive: the budget of {} bytes is below the smallest index ({} bytes, every segment at G = 16)",
             budget_bytes, total);
  auto delta = [&](std::size_t s) {
    const int G = kSizes[level[s]];
    return static_cast<double>(rows_for(seg_len[s], G / 2) - rows_for(seg_len[s], G)) * row_bytes;
  };
  std::vector<char> live(n, 1);
  for (;;) {
    std::size_t best = n;
    double best_p = -1.0;
    for (std::size_t s = 0; s < n; ++s) {
      if (!live[s]) continue;
      if (level[s] == 0) {
        live[s] = 0;
        continue;
      }
      const double d = delta(s);
      const double pr = d > 0 ? score[s] / d : INFINITY;
      if (best == n || pr > best_p) best = s, best_p = pr;  // strict: ties keep the lower id
    }
    if (best == n) break;
    const double d = delta(best);
    if (total + d <= budget_bytes) {
      total += d;
      --level[best];
    } else {
      live[best] = 0;  // the budget only shrinks: this halving never fits again
    }
  }
  std::vector<int> G(n);
  for (std::size_t s = 0; s < n; ++s) G[s] = kSizes[level[s]];
  return G;
}

void build_adaptive_index(MatrixView<const float> keys, const PoolParams& p, const AccessStats* stats,
                          const float* query_ref, const AdaptiveParams& a, AdaptiveIndex& out) {
  validate_adaptive(a);
  IP_REQUIRE(a.enabled, "adaptive: not enabled");
  validate_pool_inputs(keys, p, stats, query_ref);
  IP_REQUIRE(p.weights.scheme != Weighting::maxmin && p.weights.scheme != Weighting::exact,
             "adaptive compression pools composites: weighting '{}' is not supported", to_string(p.weights.scheme));
  const Index64 T = keys.rows, D = keys.cols, S = a.segment;
  const Index64 segs = (T + S - 1) / S;
  std::vector<Index64> len(segs);
  for (Index64 s = 0; s < segs; ++s) len[s] = std::min(T, (s + 1) * S) - s * S;
  const double row_bytes = static_cast<double>(D * element_bytes(p.precision) + scale_bytes(p.precision));
  const auto u = segment_scores(keys, stats, a);
  out.segment_size = choose_group_sizes(u, len, row_bytes, a.budget_bytes_per_token * static_cast<double>(T));
  out.begin.assign(1, 0);
  for (Index64 s = 0; s < segs; ++s)
    for (Index64 b = s * S; b < s * S + len[s]; b += out.segment_size[s])
      out.begin.push_back(std::min(s * S + len[s], b + out.segment_size[s]));
  const Index64 groups = out.groups();
  PooledIndex& idx = out.rows;
  idx.method = p.weights.scheme;
  idx.group_size = 1;
  idx.tokens = groups;
  resize(idx.rows, p.precision, groups, D);
  QuantizedMatrix& q = idx.rows;
  const bool fp32 = q.precision == Precision::fp32;
  parallel_for(groups, 2048, [&](Index64 gb, Index64 ge) {
    std::vector<float> w(16), scratch(D + 16), buf(D);
    for (Index64 g = gb; g < ge; ++g) {
      const Index64 b = out.begin[g];
      const int n = static_cast<int>(out.begin[g + 1] - b);
      const int G = out.segment_size[b / S];
      group_weights_at(keys, p, stats, query_ref, b, G, n, w.data(), scratch.data());
      float* row = fp32 ? reinterpret_cast<float*>(q.row_bytes(g)) : buf.data();
      pool_group(keys.row(b), keys.ld, n, static_cast<int>(D), w.data(), row);
      if (!fp32) quantize_row(row, g, q);
    }
  });
}

std::vector<std::int32_t> select_variable(const float* scores, const AdaptiveIndex& idx, Index64 k_tokens) {
  const Index64 groups = idx.groups();
  IP_REQUIRE(k_tokens >= 1 && k_tokens <= idx.begin.back(), "adaptive selection: budget {} outside [1, {}]", k_tokens,
             idx.begin.back());
  // Every group has at least one token, so the first min(groups, k) ranks always suffice.
  const auto ranked = topk(scores, groups, std::min(groups, k_tokens));
  std::vector<std::int32_t> out;
  Index64 tokens = 0;
  for (std::int32_t g : ranked) {
    if (tokens >= k_tokens) break;
    out.push_back(g);
    tokens += idx.begin[g + 1] - idx.begin[g];
  }
  return out;
}

}  // namespace ip
