// Pooling (composites, maxmin bounds, exact keys) and the byte accounting of the stored index.
// Small integer keys with power-of-two group sizes make fp32 results exact where the math allows.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "core/pool.h"
#include "core/stats.h"
#include "core/weights.h"
#include "tests/core/test_helpers.h"

namespace {

using iptest::params;
using iptest::view;
using ip::Precision;
using ip::Weighting;

// T = 10, D = 2, G = 4: groups {0..3}, {4..7}, {8,9} (partial).
const std::vector<float> kTen = {1, 8,  3, 0,  5, 4,  7, -4,   // group 0: mean (4, 2)
                                 0, 0,  2, 2,  4, 6,  10, 12,  // group 1: mean (4, 5)
                                 -3, 1, 5, 7};                 // group 2: mean (1, 4)

TEST(Pool, UniformMeansWithPartialLastGroup) {
  // Group 0: x (1+3+5+7)/4 = 4, y (8+0+4-4)/4 = 2.  Group 1: (0+2+4+10)/4 = 4, (0+2+6+12)/4 = 5.
  // Group 2 (2 tokens): (-3+5)/2 = 1, (1+7)/2 = 4.  Weights 1/4 and 1/2 are exact in fp32.
  const auto c = ip::pool_fp32(view(kTen, 10, 2), params(Weighting::uniform, 4), nullptr, nullptr);
  ASSERT_EQ(c.dim(0), 3);
  ASSERT_EQ(c.dim(1), 2);
  const float want[6] = {4, 2, 4, 5, 1, 4};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(c.data()[i], want[i]) << "element " << i;
}

TEST(Pool, OddLengthWithSingleTokenLastGroup) {
  // T = 5, G = 2: groups {0,1} {2,3} {4}. The single-token group's composite is that key.
  const std::vector<float> k = {2, 4, 6, 8, 1, 1, 3, 5, 9, -7};
  const auto c = ip::pool_fp32(view(k, 5, 2), params(Weighting::uniform, 2), nullptr, nullptr);
  ASSERT_EQ(c.dim(0), 3);
  const float want[6] = {4, 6, 2, 3, 9, -7};  // (2+6)/2, (4+8)/2, (1+3)/2, (1+5)/2, key 4
  for (int i = 0; i < 6; ++i) EXPECT_EQ(c.data()[i], want[i]) << "element " << i;
}

TEST(Pool, PositionalCompositeIsTheWeightedMean) {
  // G = 2, lambda = ln 3 -> w = {1, 3} (exp(ln 3) = 3 up to rounding); c = (1 k0 + 3 k1) / 4.
  // k0 = (4, 0), k1 = (0, 8): c = (1, 6).
  const std::vector<float> k = {4, 0, 0, 8};
  ip::PoolParams p = params(Weighting::positional, 2);
  p.weights.positional_lambda = std::log(3.0f);
  const auto c = ip::pool_fp32(view(k, 2, 2), p, nullptr, nullptr);
  EXPECT_NEAR(c.data()[0], 1.0f, 1e-6);
  EXPECT_NEAR(c.data()[1], 6.0f, 1e-5);
}

TEST(Pool, PoolGroupFunctionWithExactWeights) {
  // w = {1, 3}: sum 4, c = 0.25 k0 + 0.75 k1 = (0.25*4, 0.75*8) = (1, 6), exact.
  const float k[4] = {4, 0, 0, 8}, w[2] = {1, 3};
  float c[2];
  ip::pool_group(k, 2, 2, 2, w, c);
  EXPECT_EQ(c[0], 1.0f);
  EXPECT_EQ(c[1], 6.0f);
}

// build_index passes D = 64, 128 and 256 to the per-group math as compile-time constants (core/pool.cc
// with_dim) and other D at run time: its cosine composites must be the bits of the per-group functions
// called with D at run time, for whole and partial groups, against the group mean and a query reference.
TEST(Pool, CosineCompositesAreTheRunTimeDimensionBitsAtEveryD) {
  std::mt19937 rng(5);
  std::normal_distribution<float> nd;
  for (const int D : {64, 100, 128, 256})
    for (const int G : {4, 6, 8})  // G = 6 and the last group of 3 keys: a mean not scaled by a power of 2
      for (const bool query : {false, true}) {
        const ip::Index64 T = 1003;
        std::vector<float> k(T * D), ref(D);
        for (float& x : k) x = nd(rng) + 0.25f;
        for (float& x : ref) x = nd(rng);
        ip::PoolParams p = params(Weighting::cosine, G);
        // The power through a volatile: a literal would let g++ fold the test's powf(x, 2) into x * x,
        // which is not always glibc's powf(x, 2.0f) that the library computes.
        volatile float power = 2.0f;
        p.weights.cosine_power = power;
        if (query) p.weights.cosine_reference = ip::CosineReference::query;
        const auto c = ip::pool_fp32(view(k, T, D), p, nullptr, query ? ref.data() : nullptr);
        std::vector<float> w(G), scratch(D), want(D);
        for (ip::Index64 g = 0; g * G < T; ++g) {
          const int n = static_cast<int>(std::min<ip::Index64>(G, T - g * G));
          const float* kg = k.data() + g * G * D;
          ip::cosine_group_weights(kg, D, n, D, query ? ref.data() : nullptr, p.weights.eps, p.weights.cosine_power,
                                   scratch.data(), w.data());
          ip::pool_group(kg, D, n, D, w.data(), want.data());
          for (int d = 0; d < D; ++d)
            ASSERT_EQ(std::bit_cast<std::uint32_t>(c.data()[g * D + d]), std::bit_cast<std::uint32_t>(want[d]))
                << "D " << D << " G " << G << (query ? " query" : " mean") << " group " << g << " dim " << d;
        }
      }
}

TEST(Pool, GroupSizeOneReproducesTheKeysUnderEveryScheme) {
  // G = 1: each composite is w k / w = k (the exact indexer). Uniform/positional/tfidf weights are exactly
  // 1 for a lone token, so fp32 is exact there; cosine weights are cos(k, k) ~ 1, so allow 4 ulps.
  const std::vector<float> k = {1, -2, 3, 0.5f, 7, 0, -4, 2.25f, 6, 1};
  ip::AccessStats s(5);
  s.mass = {1, 2, 0, 4, 5};
  s.count = {1, 2, 0, 1, 1};
  s.steps = 2;
  for (Weighting w : {Weighting::uniform, Weighting::positional, Weighting::cosine, Weighting::tfidf,
                      Weighting::hybrid}) {
    const auto c = ip::pool_fp32(view(k, 5, 2), params(w, 1), &s, nullptr);
    ASSERT_EQ(c.dim(0), 5) << ip::to_string(w);
    for (int i = 0; i < 10; ++i) EXPECT_FLOAT_EQ(c.data()[i], k[i]) << ip::to_string(w) << " element " << i;
  }
}

TEST(Pool, ConstantKeysGiveTheSameConstantUnderEveryScheme) {
  // All keys (2, -3, 5): whatever the (positive) weights, c = (sum w) k / sum w = k. T = 7, G = 4.
  std::vector<float> k;
  for (int t = 0; t < 7; ++t) k.insert(k.end(), {2.0f, -3.0f, 5.0f});
  ip::AccessStats s(7);
  s.mass = {0.5f, 0, 2, 1, 3, 0, 1};
  s.count = {1, 0, 3, 1, 2, 0, 1};
  s.steps = 4;
  for (Weighting w : {Weighting::uniform, Weighting::positional, Weighting::cosine, Weighting::tfidf,
                      Weighting::hybrid, Weighting::maxmin, Weighting::exact}) {
    const auto idx = ip::build_index(view(k, 7, 3), params(w, 4), &s, nullptr);
    const auto c = ip::dequantize(idx.rows);
    for (ip::Index64 r = 0; r < c.dim(0); ++r) {
      // Non-uniform weights leave a few ulps of rounding in the normalised sum: 4e-6 absolute (8 ulps at 5).
      EXPECT_NEAR(c.data()[r * 3 + 0], 2.0f, 4e-6) << ip::to_string(w) << " row " << r;
      EXPECT_NEAR(c.data()[r * 3 + 1], -3.0f, 4e-6) << ip::to_string(w) << " row " << r;
      EXPECT_NEAR(c.data()[r * 3 + 2], 5.0f, 4e-6) << ip::to_string(w) << " row " << r;
    }
  }
}

TEST(Pool, OneDominantWeightPullsTheCompositeToItsKey) {
  // Bias {0, 0, 30, 0}: w = {1, 1, e^30, 1}; c - k2 = sum_{i != 2} w_i (k_i - k2) / sum w, of size
  // <= 3 * 20 / e^30 ~ 6e-12, far below fp32 resolution at 10: c == k2 to 1e-5.
  const std::vector<float> k = {1, 2, -3, 4, 10, -10, 0, 7};
  ip::PoolParams p = params(Weighting::positional, 4);
  p.weights.positional_bias = {0, 0, 30, 0};
  const auto c = ip::pool_fp32(view(k, 4, 2), p, nullptr, nullptr);
  EXPECT_NEAR(c.data()[0], 10.0f, 1e-5);
  EXPECT_NEAR(c.data()[1], -10.0f, 1e-5);
  // Large lambda: w_3 / w_2 = exp(50/3) ~ 1.7e7, so the last slot wins: c ~ k3 = (0, 7) within ~2e-6.
  p.weights.positional_bias.clear();
  p.weights.positional_lambda = 50.0f;
  const auto c2 = ip::pool_fp32(view(k, 4, 2), p, nullptr, nullptr);
  EXPECT_NEAR(c2.data()[0], 0.0f, 1e-5);
  EXPECT_NEAR(c2.data()[1], 7.0f, 1e-5);
}

TEST(Pool, MaxminKeepsElementwiseBoundsPerGroup) {
  // kTen, G = 4: row 2g = max, row 2g+1 = min.
  //   group 0 x {1,3,5,7} y {8,0,4,-4}: max (7, 8), min (1, -4)
  //   group 1 x {0,2,4,10} y {0,2,6,12}: max (10, 12), min (0, 0)
  //   group 2 x {-3,5} y {1,7}:          max (5, 7),  min (-3, 1)
  const auto idx = ip::build_index(view(kTen, 10, 2), params(Weighting::maxmin, 4), nullptr, nullptr);
  EXPECT_EQ(idx.groups(), 3);
  EXPECT_EQ(idx.rows_per_group(), 2);
  ASSERT_EQ(idx.rows.rows, 6);
  const auto r = ip::dequantize(idx.rows);
  const float want[12] = {7, 8, 1, -4, 10, 12, 0, 0, 5, 7, -3, 1};
  for (int i = 0; i < 12; ++i) EXPECT_EQ(r.data()[i], want[i]) << "element " << i;
}

TEST(Pool, ExactMethodIgnoresGroupSize) {
  // Weighting::exact forces G = 1: one row per token, equal to the key.
  const auto idx = ip::build_index(view(kTen, 10, 2), params(Weighting::exact, 4), nullptr, nullptr);
  EXPECT_EQ(idx.group_size, 1);
  EXPECT_EQ(idx.groups(), 10);
  EXPECT_EQ(ip::effective_group_size(params(Weighting::exact, 4)), 1);
  const auto r = ip::dequantize(idx.rows);
  ASSERT_EQ(r.dim(0), 10);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(r.data()[i], kTen[i]);
}

TEST(Pool, GroupGeometry) {
  // T = 10, G = 4: ceil(10/4) = 3 groups; group 2 covers [8, 10).
  EXPECT_EQ(ip::num_groups(10, 4), 3);
  EXPECT_EQ(ip::num_groups(8, 4), 2);
  EXPECT_EQ(ip::num_groups(1, 4), 1);
  const auto idx = ip::build_index(view(kTen, 10, 2), params(Weighting::uniform, 4), nullptr, nullptr);
  EXPECT_EQ(idx.group_begin(2), 8);
  EXPECT_EQ(idx.group_end(2), 10);
  EXPECT_EQ(idx.group_end(1), 8);
}

// ---- byte accounting ----------------------------------------------------------------------------

// T = 10, D = 8, G = 4 -> 3 groups (the last one partial, still a full stored row).
std::vector<float> ten_by_eight() {
  std::vector<float> k(80);
  for (int i = 0; i < 80; ++i) k[i] = static_cast<float>(i % 7) - 3.0f;
  return k;
}

TEST(PoolBytes, EveryPrecisionCountsPayloadAndScales) {
  const auto k = ten_by_eight();
  struct Case { Precision p; std::size_t bytes; };
  // 3 rows: fp32 3*8*4 = 96; fp16/bf16 3*8*2 = 48; int8/fp8 3*(8 + 4) = 36 (one fp32 scale per row).
  for (const Case c : {Case{Precision::fp32, 96}, Case{Precision::fp16, 48}, Case{Precision::bf16, 48},
                       Case{Precision::int8, 36}, Case{Precision::fp8, 36}}) {
    const auto idx = ip::build_index(view(k, 10, 8), params(Weighting::uniform, 4, c.p), nullptr, nullptr);
    EXPECT_EQ(idx.bytes(), c.bytes) << ip::to_string(c.p);
    EXPECT_DOUBLE_EQ(idx.bytes_per_token(), static_cast<double>(c.bytes) / 10.0) << ip::to_string(c.p);
  }
}

TEST(PoolBytes, MaxminStoresTwoRowsPerGroup) {
  const auto k = ten_by_eight();
  // 3 groups * 2 rows: fp32 6*32 = 192 (19.2 B/token); fp8 6*(8+4) = 72 (7.2 B/token); bf16 6*16 = 96.
  auto idx = ip::build_index(view(k, 10, 8), params(Weighting::maxmin, 4, Precision::fp32), nullptr, nullptr);
  EXPECT_EQ(idx.bytes(), 192u);
  EXPECT_DOUBLE_EQ(idx.bytes_per_token(), 19.2);
  idx = ip::build_index(view(k, 10, 8), params(Weighting::maxmin, 4, Precision::fp8), nullptr, nullptr);
  EXPECT_EQ(idx.bytes(), 72u);
  EXPECT_DOUBLE_EQ(idx.bytes_per_token(), 7.2);
  idx = ip::build_index(view(k, 10, 8), params(Weighting::maxmin, 4, Precision::bf16), nullptr, nullptr);
  EXPECT_EQ(idx.bytes(), 96u);
}

TEST(PoolBytes, ExactIndexIsOneRowPerToken) {
  const auto k = ten_by_eight();
  // 10 rows: fp8 10*(8+4) = 120 -> 12 B/token; fp32 10*32 = 320 -> 32 B/token.
  auto idx = ip::build_index(view(k, 10, 8), params(Weighting::exact, 4, Precision::fp8), nullptr, nullptr);
  EXPECT_EQ(idx.bytes(), 120u);
  EXPECT_DOUBLE_EQ(idx.bytes_per_token(), 12.0);
  idx = ip::build_index(view(k, 10, 8), params(Weighting::exact, 4, Precision::fp32), nullptr, nullptr);
  EXPECT_EQ(idx.bytes(), 320u);
  EXPECT_DOUBLE_EQ(idx.bytes_per_token(), 32.0);
}

TEST(PoolBytes, EmptyIndexHasZeroBytesPerToken) {
  ip::PooledIndex idx;
  EXPECT_EQ(idx.bytes(), 0u);
  EXPECT_EQ(idx.bytes_per_token(), 0.0);
}

}  // namespace
