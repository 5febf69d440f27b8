// Weighting schemes (DESIGN.md "Default definitions"): compute_weights() and the per-group functions.
// Expected values are written out by hand; tolerances are relative to the value unless stated.
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
using ip::Weighting;

void expect_rel(const std::vector<float>& got, const std::vector<double>& want, double rel = 1e-6) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], rel * std::fabs(want[i])) << "index " << i;
}

// Keys that make no difference to position-only schemes: T = 7, D = 2.
const std::vector<float> kSeven = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14};

TEST(Weights, UniformIsOneForEveryTokenIncludingThePartialGroup) {
  // T = 7, G = 3: groups {0,1,2} {3,4,5} {6}; w_i = 1.
  const auto w = ip::compute_weights(view(kSeven, 7, 2), params(Weighting::uniform, 3), nullptr, nullptr);
  ASSERT_EQ(w.size(), 7u);
  for (float x : w) EXPECT_EQ(x, 1.0f);
}

TEST(Weights, PositionalLambdaWithG4UsesRankOverThree) {
  // G = 4, lambda = 1.5: w_r = exp(1.5 r / 3) = exp(0.5 r) = 1, 1.6487213, 2.7182818, 4.4816891.
  // T = 6: the partial group {4,5} restarts at r = 0 and keeps denominator G-1 = 3.
  ip::PoolParams p = params(Weighting::positional, 4);
  p.weights.positional_lambda = 1.5f;
  const auto w = ip::compute_weights(view(kSeven, 6, 2), p, nullptr, nullptr);
  expect_rel(w, {1.0, 1.6487212707, 2.7182818285, 4.4816890703, 1.0, 1.6487212707});
}

TEST(Weights, PositionalDefaultLambdaPerGroupFunction) {
  // lambda = 1 (default), G = 4: exp(0), exp(1/3) = 1.3956124, exp(2/3) = 1.9477340, exp(1) = 2.7182818.
  EXPECT_EQ(ip::WeightParams{}.positional_lambda, 1.0f);
  std::vector<float> w(4);
  ip::positional_group_weights(4, 4, 1.0f, nullptr, w.data());
  expect_rel(w, {1.0, 1.3956124251, 1.9477340411, 2.7182818285});
}

TEST(Weights, PositionalDenominatorIsAtLeastOne) {
  // G = 1: denominator max(1, 0) = 1, the only slot r = 0 -> exp(0) = 1 (not 0/0).
  float w1 = -1.0f;
  ip::positional_group_weights(1, 1, 5.0f, nullptr, &w1);
  EXPECT_EQ(w1, 1.0f);
  // G = 2: denominator max(1, 1) = 1 -> w = {1, exp(lambda)} = {1, exp(0.5)}.
  std::vector<float> w2(2);
  ip::positional_group_weights(2, 2, 0.5f, nullptr, w2.data());
  expect_rel(w2, {1.0, 1.6487212707});
  // Through compute_weights with G = 1 every token is its own group: all ones.
  ip::PoolParams p = params(Weighting::positional, 1);
  p.weights.positional_lambda = 3.0f;
  for (float x : ip::compute_weights(view(kSeven, 7, 2), p, nullptr, nullptr)) EXPECT_EQ(x, 1.0f);
}

TEST(Weights, PositionalBiasVectorReplacesLambda) {
  // b = {0, 1, -1, 2}: w = exp(b_r) = 1, e = 2.7182818, 1/e = 0.3678794, e^2 = 7.3890561; lambda ignored.
  ip::PoolParams p = params(Weighting::positional, 4);
  p.weights.positional_lambda = 100.0f;
  p.weights.positional_bias = {0.0f, 1.0f, -1.0f, 2.0f};
  // T = 7: second group {4,5,6} uses b_0..b_2.
  const auto w = ip::compute_weights(view(kSeven, 7, 2), p, nullptr, nullptr);
  expect_rel(w, {1.0, 2.7182818285, 0.3678794412, 7.3890560989, 1.0, 2.7182818285, 0.3678794412});
}

// Group of four 2-D keys (3,1) (1,3) (0,0) (0,0): mean m = (1,1).
// cos((3,1), m) = 4 / (sqrt(10) sqrt(2)) = 4 / sqrt(20) = 0.8944272; same for (1,3); zero keys -> cos 0 -> eps.
const std::vector<float> kCosKeys = {3, 1, 1, 3, 0, 0, 0, 0};

TEST(Weights, CosineAgainstGroupMeanWithZeroKeysAtEps) {
  const auto w = ip::compute_weights(view(kCosKeys, 4, 2), params(Weighting::cosine, 4), nullptr, nullptr);
  expect_rel(w, {0.8944271910, 0.8944271910, 1e-3, 1e-3});
}

// Lane j of the host reductions accumulates the elements d = j (mod 16) below the last multiple of
// 16, the lanes are folded pairwise, and the rest is added in order: integer-valued inputs give exact
// sums at every length (vector body and tail), and the order is the written one (a sequential sum of
// the second case gives 0).
TEST(Weights, DotAndSquareSumEveryElementInAFixedOrder) {
  for (const int D : {0, 1, 15, 16, 17, 31, 32, 33, 128, 130}) {
    std::vector<float> a(D), b(D);
    long long ab_ref = 0, aa_ref = 0;
    for (int d = 0; d < D; ++d) {
      a[d] = static_cast<float>(d % 7 - 3);
      b[d] = static_cast<float>(d % 5 - 2);
      ab_ref += static_cast<long long>(a[d] * b[d]);
      aa_ref += static_cast<long long>(a[d] * a[d]);
    }
    float ab = -1.0f, aa = -1.0f;
    ip::dot_and_square(a.data(), b.data(), D, ab, aa);
    EXPECT_EQ(ab, static_cast<float>(ab_ref)) << D;
    EXPECT_EQ(aa, static_cast<float>(aa_ref)) << D;
  }
  std::vector<float> a(32, 0.0f), b(32, 1.0f);
  a[0] = 1e8f;   // lane 0
  a[1] = 1.0f;   // lane 1
  a[16] = -1e8f; // lane 0 again: cancels a[0] before the lanes are combined
  float ab = 0.0f, aa = 0.0f;
  ip::dot_and_square(a.data(), b.data(), 32, ab, aa);
  EXPECT_EQ(ab, 1.0f);
}

// The lane fold is a[j] + a[j + 8], then + [j + 4], then + [j + 2], then [0] + [1] (on x86 with AVX
// written as vector operations): random lanes of mixed magnitude give different bits for almost any
// other pairing, so the fold written out here must match bit for bit.
TEST(Weights, PairwiseLaneSumFoldsInTheWrittenOrder) {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd;
  for (int trial = 0; trial < 200; ++trial) {
    float a[ip::kSumLanes];
    for (float& x : a) x = nd(rng) * std::ldexp(1.0f, static_cast<int>(rng() % 40) - 20);
    float h[8], q[4];
    for (int j = 0; j < 8; ++j) h[j] = a[j] + a[j + 8];
    for (int j = 0; j < 4; ++j) q[j] = h[j] + h[j + 4];
    const float want = (q[0] + q[2]) + (q[1] + q[3]);
    float copy[ip::kSumLanes];
    std::copy(a, a + ip::kSumLanes, copy);
    EXPECT_EQ(std::bit_cast<std::uint32_t>(ip::pairwise_lane_sum(copy)), std::bit_cast<std::uint32_t>(want)) << trial;
  }
}

// The pooling loop passes D = 64, 128, 256 as a compile-time FixedDim (core/pool.cc with_dim): the
// reductions, the cosine weights and the composite must be the same bits as with D at run time, for
// every group length, with the group mean and with a given reference.
template <int N>
void expect_fixed_dim_same_bits(std::mt19937& rng) {
  std::normal_distribution<float> nd;
  const long long ld = N + 3;  // a row stride wider than D
  std::vector<float> k(8 * ld), m(N), scratch(N), w_int(8), w_fix(8), c_int(N), c_fix(N);
  for (float& x : k) x = nd(rng) + 0.5f;
  for (float& x : m) x = nd(rng);
  float ab_i, aa_i, ab_f, aa_f;
  ip::dot_and_square(k.data(), m.data(), N, ab_i, aa_i);
  ip::dot_and_square(k.data(), m.data(), ip::FixedDim<N>{}, ab_f, aa_f);
  EXPECT_EQ(std::bit_cast<std::uint32_t>(ab_i), std::bit_cast<std::uint32_t>(ab_f)) << N;
  EXPECT_EQ(std::bit_cast<std::uint32_t>(aa_i), std::bit_cast<std::uint32_t>(aa_f)) << N;
  for (int n = 1; n <= 8; ++n)
    for (const float* ref : {static_cast<const float*>(nullptr), static_cast<const float*>(m.data())}) {
      ip::cosine_group_weights(k.data(), ld, n, N, ref, 1e-3f, 1.5f, scratch.data(), w_int.data());
      ip::cosine_group_weights(k.data(), ld, n, ip::FixedDim<N>{}, ref, 1e-3f, 1.5f, scratch.data(), w_fix.data());
      ip::pool_group(k.data(), ld, n, N, w_int.data(), c_int.data());
      ip::pool_group(k.data(), ld, n, ip::FixedDim<N>{}, w_fix.data(), c_fix.data());
      for (int r = 0; r < n; ++r)
        EXPECT_EQ(std::bit_cast<std::uint32_t>(w_int[r]), std::bit_cast<std::uint32_t>(w_fix[r]))
            << "D " << N << " n " << n << " key " << r << (ref ? " (reference)" : " (group mean)");
      for (int d = 0; d < N; ++d)
        ASSERT_EQ(std::bit_cast<std::uint32_t>(c_int[d]), std::bit_cast<std::uint32_t>(c_fix[d]))
            << "D " << N << " n " << n << " dim " << d;
    }
}

TEST(Weights, FixedDimensionsGiveTheSameBitsAsRunTimeOnes) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 20; ++trial) {
    expect_fixed_dim_same_bits<64>(rng);
    expect_fixed_dim_same_bits<128>(rng);
    expect_fixed_dim_same_bits<256>(rng);
  }
}

// Cosine weights at a realistic D (the vector body of the reductions) against double precision.
TEST(Weights, CosineAtD128MatchesDoublePrecision) {
  const int D = 128, n = 4;
  std::vector<float> k(n * D);
  for (int i = 0; i < n * D; ++i) k[i] = std::sin(0.37f * static_cast<float>(i)) + (i % D < 8 ? 1.0f : 0.0f);
  std::vector<float> w(n), scratch(D);
  ip::cosine_group_weights(k.data(), D, n, D, nullptr, 1e-3f, 1.0f, scratch.data(), w.data());
  std::vector<double> m(D, 0.0);
  for (int r = 0; r < n; ++r)
    for (int d = 0; d < D; ++d) m[d] += k[r * D + d] / static_cast<double>(n);
  double mm = 0;
  for (int d = 0; d < D; ++d) mm += m[d] * m[d];
  for (int r = 0; r < n; ++r) {
    double kk = 0, km = 0;
    for (int d = 0; d < D; ++d) {
      kk += static_cast<double>(k[r * D + d]) * k[r * D + d];
      km += k[r * D + d] * m[d];
    }
    const double c = std::max(1e-3, km / std::sqrt(kk * mm));
    EXPECT_NEAR(w[r], c, 1e-5 * c) << r;
  }
}

TEST(Weights, CosineNegativeCosineIsFlooredAtEps) {
  // Keys (2,0) (2,0) (2,0) (-2,0): mean (1,0); cos = 1, 1, 1, -1 -> the last is floored to eps = 1e-3.
  const std::vector<float> k = {2, 0, 2, 0, 2, 0, -2, 0};
  std::vector<float> w(4), scratch(2);
  ip::cosine_group_weights(k.data(), 2, 4, 2, nullptr, 1e-3f, 1.0f, scratch.data(), w.data());
  expect_rel(w, {1.0, 1.0, 1.0, 1e-3});
}

TEST(Weights, CosinePowerRaisesTheFlooredCosine) {
  // p = 2: 0.8944272^2 = 16/20 = 0.8, eps^2 = 1e-6.   p = 0.5: 0.8^(1/4) = 0.9457416, eps^0.5 = 0.0316228.
  ip::PoolParams p = params(Weighting::cosine, 4);
  p.weights.cosine_power = 2.0f;
  expect_rel(ip::compute_weights(view(kCosKeys, 4, 2), p, nullptr, nullptr), {0.8, 0.8, 1e-6, 1e-6}, 1e-5);
  p.weights.cosine_power = 0.5f;
  expect_rel(ip::compute_weights(view(kCosKeys, 4, 2), p, nullptr, nullptr),
             {0.9457416090, 0.9457416090, 0.0316227766, 0.0316227766}, 1e-5);
}

TEST(Weights, CosineAgainstExplicitQueryReference) {
  // m = (1, 0): cos((3,1)) = 3/sqrt(10) = 0.9486833, cos((1,3)) = 1/sqrt(10) = 0.3162278, zero keys -> eps.
  ip::PoolParams p = params(Weighting::cosine, 4);
  p.weights.cosine_reference = ip::CosineReference::query;
  const std::vector<float> m = {1.0f, 0.0f};
  expect_rel(ip::compute_weights(view(kCosKeys, 4, 2), p, nullptr, m.data()),
             {0.9486832981, 0.3162277660, 1e-3, 1e-3});
}

TEST(Weights, CosineBelowEpsIsFlooredButJustAboveIsKept) {
  // m = (1,0). (1,2000): cos = 1/sqrt(4000001) = 4.9999994e-4 < eps = 1e-3 -> eps.
  //            (1,500):  cos = 1/sqrt(250001)  = 1.99999600e-3 > eps        -> kept.
  const std::vector<float> k = {1, 2000, 1, 500};
  const std::vector<float> m = {1, 0};
  std::vector<float> w(2), scratch(2);
  ip::cosine_group_weights(k.data(), 2, 2, 2, m.data(), 1e-3f, 1.0f, scratch.data(), w.data());
  expect_rel(w, {1e-3, 1.9999960000e-3}, 1e-5);
}

TEST(Weights, TfidfWithoutHistoryIsOne) {
  // N = 0 steps: w_i = 1 whatever the (stale) mass says.
  ip::AccessStats s(6);
  s.mass = {5, 0, 1, 2, 3, 4};
  const auto w = ip::compute_weights(view(kSeven, 6, 2), params(Weighting::tfidf, 4), &s, nullptr);
  for (float x : w) EXPECT_EQ(x, 1.0f);
}

TEST(Weights, TfidfFromMassCountsAndSteps) {
  // T = 6, G = 4, N = 3. Group 0: a = {0,1,2,4} -> tf = a / 4 = {0, .25, .5, 1}; n = {0,1,3,3}
  //   idf = ln(4/(1+n)) + 1 = {ln4+1, ln2+1, 1, 1}; w = 1e-3 + tf*idf:
  //   {0.001, 0.001 + 0.25*1.6931472 = 0.4242868, 0.501, 1.001}.
  // Group 1 (partial, tokens 4,5): all-zero mass -> tf = 0 -> w = eps = 0.001.
  ip::AccessStats s(6);
  s.mass = {0, 1, 2, 4, 0, 0};
  s.count = {0, 1, 3, 3, 3, 0};
  s.steps = 3;
  const auto w = ip::compute_weights(view(kSeven, 6, 2), params(Weighting::tfidf, 4), &s, nullptr);
  expect_rel(w, {0.001, 0.4242867952, 0.501, 1.001, 0.001, 0.001});
}

TEST(Weights, TfidfPerGroupFunctionIdfOfNeverSelectedToken) {
  // N = 2, a = {2, 1}, n = {0, 2}: tf = {1, .5}; idf = {ln(3/1)+1 = 2.0986123, ln(3/3)+1 = 1}.
  // w = {0.001 + 2.0986123, 0.001 + 0.5} = {2.0996123, 0.501}.
  const float a[2] = {2.0f, 1.0f};
  const std::uint32_t n[2] = {0, 2};
  float w[2];
  ip::tfidf_group_weights(a, n, 2, 2, 1e-3f, w);
  EXPECT_NEAR(w[0], 2.0996122887, 2e-6);
  EXPECT_NEAR(w[1], 0.501, 1e-6);
}

TEST(Weights, HybridMultiplyNormalisesByTheGroupMean) {
  // v = {1, 3}: mean 2 -> v / mean = {0.5, 1.5}; alpha = 2 -> {0.25, 2.25}; alpha = 0 -> {1, 1}.
  const float v[2] = {1.0f, 3.0f};
  float w[2] = {1.0f, 1.0f};
  ip::hybrid_multiply(v, 2, 1.0f, w);
  EXPECT_FLOAT_EQ(w[0], 0.5f);
  EXPECT_FLOAT_EQ(w[1], 1.5f);
  float w2[2] = {2.0f, 2.0f};
  ip::hybrid_multiply(v, 2, 2.0f, w2);
  EXPECT_FLOAT_EQ(w2[0], 0.5f);  // 2 * 0.25
  EXPECT_FLOAT_EQ(w2[1], 4.5f);  // 2 * 2.25
  float w3[2] = {1.0f, 1.0f};
  ip::hybrid_multiply(v, 2, 0.0f, w3);
  EXPECT_FLOAT_EQ(w3[0], 1.0f);
  EXPECT_FLOAT_EQ(w3[1], 1.0f);
}

// Hybrid on T = 2, G = 2, keys (1,0) (1,1), lambda = 0.5, stats a = {1,2}, n = {1,1}, N = 1.
//   positional {1, e^0.5 = 1.6487213}, mean 1.3243606      -> {0.7550813, 1.2449187}
//   cosine: m = (1, .5), |m| = 1.1180340; cos = {1/1.1180340 = 0.8944272, 1.5/(1.4142136*1.1180340) = 0.9486833},
//           mean 0.9215552                                 -> {0.9705627, 1.0294373}
//   tfidf: tf = {.5, 1}, idf = ln(2/2)+1 = 1, w = {0.501, 1.001}, mean 0.751 -> {0.6671105, 1.3328895}
struct HybridCase {
  std::vector<float> keys = {1, 0, 1, 1};
  ip::AccessStats stats{2};
  ip::PoolParams p = params(Weighting::hybrid, 2);
  HybridCase() {
    stats.mass = {1, 2};
    stats.count = {1, 1};
    stats.steps = 1;
    p.weights.positional_lambda = 0.5f;
  }
};

TEST(Weights, HybridIsTheProductOfMeanNormalisedWeights) {
  HybridCase c;
  // {0.7550813 * 0.9705627 * 0.6671105, 1.2449187 * 1.0294373 * 1.3328895} = {0.4888945, 1.7081854}
  const auto w = ip::compute_weights(view(c.keys, 2, 2), c.p, &c.stats, nullptr);
  expect_rel(w, {0.7550813 * 0.9705627 * 0.6671105, 1.2449187 * 1.0294373 * 1.3328895}, 3e-6);
}

TEST(Weights, HybridAlphasAreExponents) {
  HybridCase c;
  c.p.weights.alpha_positional = 2.0f;  // {0.7550813^2, 1.2449187^2} = {0.5701478, 1.5498226}
  c.p.weights.alpha_cosine = 0.0f;      // factor 1
  c.p.weights.alpha_tfidf = 0.5f;       // {sqrt(0.6671105) = 0.8167683, sqrt(1.3328895) = 1.1545083}
  const auto w = ip::compute_weights(view(c.keys, 2, 2), c.p, &c.stats, nullptr);
  expect_rel(w, {0.5701478 * 0.8167683, 1.5498226 * 1.1545083}, 5e-6);
}

TEST(Weights, HybridWithoutHistoryOrPositionIsCosineNormalised) {
  // lambda = 0 -> positional all 1; N = 0 -> tfidf all 1; only the cosine factor {0.9705627, 1.0294373} is left.
  HybridCase c;
  c.p.weights.positional_lambda = 0.0f;
  ip::AccessStats fresh(2);
  expect_rel(ip::compute_weights(view(c.keys, 2, 2), c.p, &fresh, nullptr), {0.9705627485, 1.0294372515}, 2e-6);
}

TEST(Weights, MaxminAndExactReportUnitWeights) {
  for (Weighting s : {Weighting::maxmin, Weighting::exact})
    for (float x : ip::compute_weights(view(kSeven, 7, 2), params(s, 4), nullptr, nullptr)) EXPECT_EQ(x, 1.0f);
}

TEST(Weights, NamesRoundTrip) {
  for (Weighting s : {Weighting::uniform, Weighting::positional, Weighting::cosine, Weighting::tfidf,
                      Weighting::hybrid, Weighting::maxmin, Weighting::exact})
    EXPECT_EQ(ip::parse_weighting(ip::to_string(s)), s);
  EXPECT_EQ(ip::to_string(Weighting::tfidf), "tfidf");
  EXPECT_EQ(ip::parse_cosine_reference("query"), ip::CosineReference::query);
  EXPECT_EQ(ip::parse_cosine_reference("group_mean"), ip::CosineReference::group_mean);
  EXPECT_TRUE(ip::uses_stats(Weighting::hybrid));
  EXPECT_FALSE(ip::uses_stats(Weighting::cosine));
}

// The per-token scalars the CUDA pooling kernel calls (core/weights.h), by hand.
TEST(Weights, PerTokenScalarsByHand) {
  // positional: G = 4, lambda = 3 -> exp(3 r / 3) = e^r; G = 1 and 2 divide by 1; a bias replaces lambda.
  EXPECT_EQ(ip::positional_weight(0, 4, 3.0f, nullptr), 1.0f);
  EXPECT_NEAR(ip::positional_weight(2, 4, 3.0f, nullptr), std::exp(2.0), 1e-6 * std::exp(2.0));
  EXPECT_NEAR(ip::positional_weight(1, 2, 0.5f, nullptr), std::exp(0.5), 1e-6 * std::exp(0.5));
  const float bias[3] = {0.0f, -1.0f, 2.0f};
  EXPECT_NEAR(ip::positional_weight(1, 3, 7.0f, bias), std::exp(-1.0), 1e-6);
  // cosine: k = (3, 4), m = (1, 0): kk = 25, km = 3, |m| = 1 -> cos = 0.6; squared 0.36; floored at eps.
  EXPECT_NEAR(ip::cosine_weight(25.0f, 3.0f, 1.0f, 1e-3f, 1.0f), 0.6f, 1e-7);
  EXPECT_NEAR(ip::cosine_weight(25.0f, 3.0f, 1.0f, 1e-3f, 2.0f), 0.36f, 1e-6);
  EXPECT_EQ(ip::cosine_weight(25.0f, -3.0f, 1.0f, 1e-3f, 1.0f), 1e-3f);
  EXPECT_EQ(ip::cosine_weight(0.0f, 0.0f, 1.0f, 0.25f, 1.0f), 0.25f);  // zero key: cos taken as 0
  // tfidf: a = 2, amax = 4, n = 1 of N = 3 -> tf = 0.5, idf = ln(4/2) + 1; amax 0 -> tf 0 -> eps.
  EXPECT_NEAR(ip::tfidf_weight(2.0f, 4.0f, 1u, 3, 0.01f), 0.01 + 0.5 * (std::log(2.0) + 1.0), 1e-6);
  EXPECT_EQ(ip::tfidf_weight(0.0f, 0.0f, 0u, 5, 0.01f), 0.01f);
  // hybrid: (v / mean)^alpha.
  EXPECT_EQ(ip::hybrid_factor(3.0f, 2.0f, 1.0f), 1.5f);
  EXPECT_NEAR(ip::hybrid_factor(3.0f, 2.0f, 2.0f), 2.25f, 1e-6);
}

// The group functions are loops over the scalars: same bits.
TEST(Weights, GroupFunctionsEqualTheirPerTokenScalars) {
  const float keys[6] = {1, 2, -3, 0.5f, 4, 4};  // 3 keys of D = 2
  const float m[2] = {1, 1};
  float w[3], scratch[2];
  ip::cosine_group_weights(keys, 2, 3, 2, m, 1e-3f, 1.5f, scratch, w);
  for (int r = 0; r < 3; ++r) {
    const float* k = keys + 2 * r;
    const float kk = k[0] * k[0] + k[1] * k[1], km = k[0] + k[1];
    EXPECT_NEAR(w[r], ip::cosine_weight(kk, km, std::sqrt(2.0f), 1e-3f, 1.5f), 1e-6f) << r;
  }
  const float a[3] = {0.5f, 2.0f, 0.0f};
  const std::uint32_t cnt[3] = {1, 4, 0};
  ip::tfidf_group_weights(a, cnt, 3, 7, 1e-3f, w);
  for (int r = 0; r < 3; ++r) EXPECT_EQ(w[r], ip::tfidf_weight(a[r], 2.0f, cnt[r], 7, 1e-3f)) << r;
  ip::positional_group_weights(3, 4, 1.25f, nullptr, w);
  for (int r = 0; r < 3; ++r) EXPECT_EQ(w[r], ip::positional_weight(r, 4, 1.25f, nullptr)) << r;
}

}  // namespace
