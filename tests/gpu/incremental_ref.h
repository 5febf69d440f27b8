// Test-side helpers of tests/gpu/incremental_test.cc: cases, inputs, the comparisons, and the exact
// expectation of a GPU update (see that file's comment).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/backend.h"
#include "core/incremental.h"
#include "tests/gpu/pool_ref.h"

namespace ip::test {

struct Case {
  Weighting scheme;
  int G;
  int D;
  Precision precision;
  bool query = false;  // cosine / hybrid: reference = a query vector
  std::string name() const {
    return fmt::format("{}{} G={} D={} {}", to_string(scheme), query ? "+query" : "", G, D, to_string(precision));
  }
};

inline PoolParams params_of(const Case& c) {
  PoolParams p;
  p.group_size = c.scheme == Weighting::exact ? 1 : c.G;
  p.precision = c.precision;
  WeightParams& w = p.weights;
  w.scheme = c.scheme;
  w.positional_lambda = 0.7f;
  w.eps = 1e-3f;
  w.cosine_power = 1.0f;
  w.cosine_reference = c.query ? CosineReference::query : CosineReference::group_mean;
  w.alpha_positional = 0.5f;
  w.alpha_cosine = 1.5f;
  w.alpha_tfidf = 1.0f;
  return p;
}

inline std::vector<float> random_keys(Index64 T, int D, unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> k(static_cast<std::size_t>(T) * D);
  for (auto& v : k) v = normal(gen);
  return k;
}

inline AccessStats random_stats(Index64 T, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  AccessStats s(T);
  for (Index64 i = 0; i < T; ++i) {
    s.mass[i] = unit(gen) < 0.3f ? 0.0f : unit(gen) * 4.0f;
    s.count[i] = static_cast<std::uint32_t>(unit(gen) * 9.0f);
  }
  s.steps = 7;
  return s;
}

// Moves the statistics of every third group by a lot (N unchanged): the other groups' weights stay
// bit for bit what they were, on both sides.
inline void move_some_groups(AccessStats& s, int G, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  for (Index64 t = 0; t < s.tokens(); ++t)
    if ((t / G) % 3 == 1) {
      s.mass[t] = 0.5f + 6.0f * unit(gen);
      s.count[t] += 1 + static_cast<std::uint32_t>(unit(gen) * 4.0f);
    }
}

inline void grow_stats(AccessStats& s, Index64 T, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  while (s.tokens() < T) {
    s.mass.push_back(unit(gen) * 3.0f);
    s.count.push_back(static_cast<std::uint32_t>(unit(gen) * 5.0f));
  }
}

inline ::testing::AssertionResult same_index(const PooledIndex& a, const PooledIndex& b) {
  if (a.method != b.method || a.group_size != b.group_size || a.tokens != b.tokens || a.rows.rows != b.rows.rows ||
      a.rows.cols != b.rows.cols || a.rows.precision != b.rows.precision)
    return ::testing::AssertionFailure() << "shapes differ: tokens " << a.tokens << " vs " << b.tokens << ", rows "
                                         << a.rows.rows << " vs " << b.rows.rows;
  if (a.rows.payload.size() != b.rows.payload.size() || a.rows.scales.size() != b.rows.scales.size())
    return ::testing::AssertionFailure() << "storage sizes differ";
  if (a.rows.payload != b.rows.payload) {
    std::size_t i = 0;
    while (a.rows.payload[i] == b.rows.payload[i]) ++i;
    return ::testing::AssertionFailure() << "payload byte " << i << " of " << a.rows.payload.size() << " differs";
  }
  // (No scales, for fp32/bf16/fp16 rows: data() may be null, which memcmp must not get even for 0 bytes.)
  if (!a.rows.scales.empty() &&
      std::memcmp(a.rows.scales.data(), b.rows.scales.data(), a.rows.scales.size() * sizeof(float)) != 0)
    return ::testing::AssertionFailure() << "scales differ";
  return ::testing::AssertionSuccess();
}

// GPU rows against CPU rows: bitwise for maxmin and exact, else decoded values within a tolerance.
inline ::testing::AssertionResult close_to_cpu(const Case& c, const PooledIndex& g, const PooledIndex& cpu, float key_max) {
  if (c.scheme == Weighting::maxmin || c.scheme == Weighting::exact) return same_index(g, cpu);
  if (g.tokens != cpu.tokens || g.rows.rows != cpu.rows.rows || g.rows.cols != cpu.rows.cols)
    return ::testing::AssertionFailure() << "shapes differ";
  const bool cosine = c.scheme == Weighting::cosine || c.scheme == Weighting::hybrid;
  const float atol = key_max * (cosine ? 5e-3f : 1e-4f);
  const std::size_t row_bytes = static_cast<std::size_t>(c.D) * element_bytes(c.precision);
  for (Index64 r = 0; r < g.rows.rows; ++r)
    for (int d = 0; d < c.D; ++d) {
      const float sg = g.rows.scale(r), sc = cpu.rows.scale(r);
      const float yg = decode(c.precision, g.rows.payload.data() + r * row_bytes, d, sg);
      const float yc = decode(c.precision, cpu.rows.payload.data() + r * row_bytes, d, sc);
      const float tol = atol + format_error(c.precision, yg, sg) + format_error(c.precision, yc, sc);
      if (!(std::fabs(yg - yc) <= tol))
        return ::testing::AssertionFailure() << "row " << r << " dim " << d << ": gpu " << yg << " cpu " << yc;
    }
  return ::testing::AssertionSuccess();
}

// The exact expectation of a GPU update of `before` with tau (see the file comment).
struct Expected {
  IndexState st;
  RepoolCount count;
};
inline Expected expect_gpu(Backend& gpu, MatrixView<const float> keys, const PoolParams& p, const AccessStats* s,
                    const float* q, float tau, const IndexState& before) {
  IndexState full = before;  // every group re-pooled: the new weights and rows of every group
  gpu.update_index(keys, p, s, q, -1.0f, full);
  Expected e{before, {}};
  const bool reset = before.index.tokens == 0;  // the cases never change scheme, G or precision
  const Index64 old_T = reset ? 0 : before.index.tokens, G = full.index.group_size;
  const Index64 rpg = full.index.rows_per_group();
  const std::size_t row_bytes = static_cast<std::size_t>(keys.cols) * element_bytes(p.precision);
  e.st.index = full.index;  // shapes, and the fresh groups' rows; kept groups copied back below
  e.st.weights = full.weights;
  e.count.groups = full.index.groups();
  for (Index64 g = 0; g < e.count.groups; ++g) {
    const Index64 b = g * G, n = std::min(G, keys.rows - b);
    const bool fresh = g >= old_T / G;
    if (repool_group(fresh, tau, full.weights.data() + b, fresh ? nullptr : before.weights.data() + b,
                     static_cast<int>(n))) {
      ++e.count.repooled;
      continue;
    }
    std::copy_n(before.weights.begin() + b, n, e.st.weights.begin() + b);
    for (Index64 r = g * rpg; r < (g + 1) * rpg; ++r) {
      std::copy_n(before.index.rows.payload.begin() + r * row_bytes, row_bytes, e.st.index.rows.payload.begin() + r * row_bytes);
      if (!before.index.rows.scales.empty()) e.st.index.rows.scales[r] = before.index.rows.scales[r];
    }
  }
  return e;
}

}  // namespace ip::test
