// Index scoring: s = sum_j h_j max(0, q_j . k) for tokens, composites and maxmin bounds.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "core/pool.h"
#include "core/score.h"
#include "core/score_math.h"
#include "core/weights.h"
#include "tests/core/test_helpers.h"

namespace {

using iptest::params;
using iptest::view;
using ip::Precision;
using ip::Weighting;

std::vector<float> randn(int n, unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> x(n);
  for (auto& v : x) v = d(gen);
  return x;
}

TEST(Score, MultiHeadHandComputed) {
  // q0 = (1, 2), q1 = (-1, 1), h = (0.5, 2).
  //   k0 = (1, 1):  q0.k = 3, q1.k = 0   -> 0.5*3 + 2*0 = 1.5
  //   k1 = (2, -1): q0.k = 0, q1.k = -3  -> 0 (both clamped)
  //   k2 = (-1, 3): q0.k = 5, q1.k = 4   -> 0.5*5 + 2*4 = 10.5
  const std::vector<float> keys = {1, 1, 2, -1, -1, 3};
  const std::vector<float> q = {1, 2, -1, 1};
  const float h[2] = {0.5f, 2.0f};
  float s[3];
  ip::score_tokens(view(keys, 3, 2), ip::IndexQuery{view(q, 2, 2), h}, s);
  EXPECT_EQ(s[0], 1.5f);
  EXPECT_EQ(s[1], 0.0f);
  EXPECT_EQ(s[2], 10.5f);
}

TEST(Score, ThreeHeadsOneNegativeDot) {
  // q0 = (1,0,0), q1 = (0,1,0), q2 = (0,0,1), h = (1, 2, 4); k = (3, -5, 0.5):
  //   1*3 + 2*max(0,-5) + 4*0.5 = 3 + 0 + 2 = 5
  const std::vector<float> keys = {3, -5, 0.5f};
  const std::vector<float> q = {1, 0, 0, 0, 1, 0, 0, 0, 1};
  const float h[3] = {1, 2, 4};
  float s;
  ip::score_tokens(view(keys, 1, 3), ip::IndexQuery{view(q, 3, 3), h}, &s);
  EXPECT_EQ(s, 5.0f);
}

TEST(Score, SingleHeadIsTheClampedDotProduct) {
  // H = 1, h = 1, q = (1, 1, 1): k0 = (1,2,3) -> 6; k1 = -k0 -> -6 clamped to 0; k2 = (2,-1,0.5) -> 1.5.
  const std::vector<float> keys = {1, 2, 3, -1, -2, -3, 2, -1, 0.5f};
  const std::vector<float> q = {1, 1, 1};
  const float one = 1.0f, half = 0.5f;
  float s[3];
  ip::score_tokens(view(keys, 3, 3), ip::IndexQuery{view(q, 1, 3), &one}, s);
  EXPECT_EQ(s[0], 6.0f);
  EXPECT_EQ(s[1], 0.0f);
  EXPECT_EQ(s[2], 1.5f);
  // h = 0.5 halves the positive scores.
  ip::score_tokens(view(keys, 3, 3), ip::IndexQuery{view(q, 1, 3), &half}, s);
  EXPECT_EQ(s[0], 3.0f);
  EXPECT_EQ(s[2], 0.75f);
}

// Each head's dot product is summed in the fixed lane order of core/weights.h (dot_and_square), whatever
// the number of heads (four at a time, then one at a time) and whether D is dispatched as a
// compile-time constant (64, 128, 256) or not (100, 17): the scores are those bits.
TEST(Score, HeadDotsAreTheFixedLaneOrderAtEveryHeadCountAndDimension) {
  // H = 8, 12 and 64 take the four-row, four-head blocks where the machine has AVX-512 (core/weights.h
  // rows_head_dots; D = 64, 128, 256), T = 301 leaves a row past the last block of four.
  for (const int D : {17, 64, 100, 128, 256})
    for (const int H : {1, 3, 4, 5, 8, 12, 64}) {
      const int T = 301;
      const auto k = randn(T * D, 3 + D), qh = randn(H * D, 5 + H);
      std::vector<float> hw(H);
      for (int j = 0; j < H; ++j) hw[j] = 0.25f + 0.5f * static_cast<float>(j);
      const ip::IndexQuery q{view(qh, H, D), hw.data()};
      std::vector<float> got(T);
      ip::score_tokens(view(k, T, D), q, got.data());
      std::vector<float> dots(H);
      for (int t = 0; t < T; ++t) {
        for (int j = 0; j < H; ++j) {
          float unused = 0.0f;
          ip::dot_and_square(k.data() + t * D, qh.data() + j * D, D, dots[j], unused);
        }
        const float want = ip::head_weighted_relu(dots.data(), hw.data(), H);
        ASSERT_EQ(std::bit_cast<std::uint32_t>(got[t]), std::bit_cast<std::uint32_t>(want))
            << "D " << D << " H " << H << " token " << t;
      }
    }
}

TEST(Score, FourRowsOfHeadDotsAreEachRowsHeadDots) {
  // The dense attention's logits take four rows from anywhere (its selected tokens): the bits of
  // all_head_dots for each row, at dimensions with and without the AVX-512 blocks, every head count.
  for (const int D : {17, 64, 128, 256})
    for (const int H : {1, 3, 4, 5, 8, 64}) {
      const int ldq = D + 3, ldk = D + 5;  // strides other than D
      const auto k = randn(40 * ldk, 7 + D), qh = randn(H * ldq, 11 + H);
      const float* rows[4] = {k.data() + 31 * D, k.data() + 2 * D + 1, k.data() + 17 * D, k.data() + 2 * D + 1};
      std::vector<float> got(4 * H), want(4 * H);
      ip::with_dim(D, [&](auto Dc) { ip::four_rows_head_dots(rows, qh.data(), ldq, H, Dc, got.data()); });
      for (int r = 0; r < 4; ++r) ip::all_head_dots(rows[r], qh.data(), ldq, H, D, want.data() + r * H);
      for (int i = 0; i < 4 * H; ++i)
        ASSERT_EQ(std::bit_cast<std::uint32_t>(got[i]), std::bit_cast<std::uint32_t>(want[i]))
            << "D " << D << " H " << H << " row " << i / H << " head " << i % H;
      // Rows at a stride (scoring's blocks), seven of them: one block of four, three rows after it.
      std::vector<float> got7(7 * H), want7(7 * H);
      ip::with_dim(D, [&](auto Dc) { ip::rows_head_dots(k.data() + 2, ldk, 7, qh.data(), ldq, H, Dc, got7.data()); });
      for (int r = 0; r < 7; ++r) ip::all_head_dots(k.data() + 2 + r * ldk, qh.data(), ldq, H, D, want7.data() + r * H);
      for (int i = 0; i < 7 * H; ++i)
        ASSERT_EQ(std::bit_cast<std::uint32_t>(got7[i]), std::bit_cast<std::uint32_t>(want7[i]))
            << "D " << D << " H " << H << " strided row " << i / H << " head " << i % H;
    }
}

TEST(Score, AllNegativeZeroProductsSumToPositiveZeroInEveryForm) {
  // A zero key row against a query of negative elements: every product is -0, and every form's sum is
  // +0 (its accumulators start at +0, which a -0 added leaves +0), so the per-head forms' final + 0 of
  // the empty tail, which the four-by-four forms leave out, changes no bit. A form that started from
  // its first product instead would give -0 here.
  for (const int D : {64, 128}) {
    const int H = 4;
    std::vector<float> k(4 * D, 0.0f), qh(H * D, -1.0f);
    const float* rows[4] = {k.data(), k.data() + D, k.data() + 2 * D, k.data() + 3 * D};
    std::vector<float> got(4 * H, 1.0f), want(4 * H, 1.0f);
    ip::with_dim(D, [&](auto Dc) { ip::four_rows_head_dots(rows, qh.data(), D, H, Dc, got.data()); });
    for (int r = 0; r < 4; ++r) ip::all_head_dots(rows[r], qh.data(), D, H, D, want.data() + r * H);
    for (int i = 0; i < 4 * H; ++i) {
      EXPECT_EQ(std::bit_cast<std::uint32_t>(want[i]), 0u) << "D " << D << " per-head sum " << i;
      EXPECT_EQ(std::bit_cast<std::uint32_t>(got[i]), 0u) << "D " << D << " four-by-four sum " << i;
    }
    // The maxmin bounds: hi = lo = 0, so every max(q hi, q lo) is -0.
    for (int j = 0; j < H; ++j) {
      const float lanes = ip::box_bound_lanes(qh.data() + j * D, k.data(), k.data() + D, D);
      EXPECT_EQ(std::bit_cast<std::uint32_t>(lanes), 0u) << "D " << D << " box bound, head " << j;
    }
#if IP_X86_AVX512
    std::vector<float> bounds(4 * H, 1.0f);
    ip::with_dim(D, [&](auto Dc) { ip::groups4_head4_bounds(rows, rows, qh.data(), D, Dc, bounds.data(), H); });
    for (int i = 0; i < 4 * H; ++i)
      EXPECT_EQ(std::bit_cast<std::uint32_t>(bounds[i]), 0u) << "D " << D << " four-by-four bound " << i;
#endif
  }
}

TEST(Score, HeadWeightedReluFunction) {
  const float dots[3] = {2.0f, -7.0f, 0.25f}, hw[3] = {3.0f, 100.0f, 4.0f};
  EXPECT_EQ(ip::head_weighted_relu(dots, hw, 3), 7.0f);  // 3*2 + 0 + 4*0.25
}

// The f16 tensor-core math's per-head scaling (kernels/score.cuh): a power of two that puts the head's
// largest magnitude in [2^14, 2^15), its exact inverse, 1 for zeros and non-finite values, clamped so
// both stay normal floats.
TEST(Score, F16QueryFactorPutsTheLargestMagnitudeJustBelowTwoToThe15) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> mant(1.0f, 2.0f);
  for (int e = -112; e <= 127; ++e)
    for (int i = 0; i < 4; ++i) {
      const float amax = std::ldexp(i == 0 ? 1.0f : (i == 1 ? std::nextafter(2.0f, 0.0f) : mant(rng)), e);
      if (!std::isfinite(amax)) continue;
      float inv = 0.0f;
      const float f = ip::f16_query_factor(amax, &inv);
      const float scaled = amax * f;
      EXPECT_GE(scaled, 16384.0f) << amax;
      EXPECT_LT(scaled, 32768.0f) << amax;
      EXPECT_EQ(f * inv, 1.0f) << amax;
      int fe = 0;
      EXPECT_EQ(std::frexp(f, &fe), 0.5f) << "a power of two: " << f;
    }
  float inv = 0.0f;
  for (float v : {0.0f, -0.0f, std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
    EXPECT_EQ(ip::f16_query_factor(v, &inv), 1.0f) << v;
    EXPECT_EQ(inv, 1.0f) << v;
  }
  // A negative amax is no magnitude (the kernel's is a max of |q|): 1, as for zeros, at every size.
  for (float v : {-1.0f, -std::ldexp(1.0f, 40), -std::ldexp(1.0f, -40), -std::numeric_limits<float>::denorm_min(),
                  -std::numeric_limits<float>::infinity()}) {
    inv = 0.0f;
    EXPECT_EQ(ip::f16_query_factor(v, &inv), 1.0f) << v;
    EXPECT_EQ(inv, 1.0f) << v;
  }
  // Below 2^-112 the factor stays at 2^126 (inverse 2^-126, still normal): less headroom, no overflow.
  for (float v : {std::ldexp(1.0f, -120), std::numeric_limits<float>::denorm_min(), std::ldexp(1.0f, -127)}) {
    EXPECT_EQ(ip::f16_query_factor(v, &inv), std::ldexp(1.0f, 126)) << v;
    EXPECT_EQ(inv, std::ldexp(1.0f, -126)) << v;
    EXPECT_LT(v * std::ldexp(1.0f, 126), 32768.0f);
  }
  // The largest floats: 2^-113 and its inverse 2^113.
  EXPECT_EQ(ip::f16_query_factor(std::numeric_limits<float>::max(), &inv), std::ldexp(1.0f, -113));
  EXPECT_EQ(inv, std::ldexp(1.0f, 113));
}

TEST(Score, CompressedScoreOfUniformCompositeIsTheScoreOfTheMean) {
  // G = 2, k0 = (2, 0), k1 = (0, 4): c = (1, 2). q = (3, 1), h = 1 -> 3*1 + 1*2 = 5.
  const std::vector<float> keys = {2, 0, 0, 4};
  const std::vector<float> q = {3, 1};
  const float one = 1.0f;
  const auto idx = ip::build_index(view(keys, 2, 2), params(Weighting::uniform, 2), nullptr, nullptr);
  float s = -1;
  ip::score_index(idx, ip::IndexQuery{view(q, 1, 2), &one}, &s);
  EXPECT_EQ(s, 5.0f);
}

TEST(Score, GroupSizeOneCompressedEqualsExact) {
  // Uniform pooling with G = 1 stores the keys themselves, so both paths score identical rows.
  const int T = 300, D = 24, H = 4;  // T > 256 crosses a scoring block
  const auto keys = randn(T * D, 11), q = randn(H * D, 12);
  const std::vector<float> h = {0.5f, 1.0f, 0.25f, 2.0f};
  const ip::IndexQuery iq{view(q, H, D), h.data()};
  for (Weighting w : {Weighting::uniform, Weighting::exact}) {
    const auto idx = ip::build_index(view(keys, T, D), params(w, 1), nullptr, nullptr);
    std::vector<float> a(T), b(T);
    ip::score_index(idx, iq, a.data());
    ip::score_tokens(view(keys, T, D), iq, b.data());
    for (int t = 0; t < T; ++t) ASSERT_EQ(a[t], b[t]) << ip::to_string(w) << " token " << t;
  }
}

TEST(Score, MaxminBoundHandComputed) {
  // Group (1,-2), (3,4): hi = (3,4), lo = (1,-2). q = (1,-1): bound = max(3,1) + max(-4,2) = 5 >= token
  // scores 1+2 = 3 and 3-4 = -1.
  const std::vector<float> keys = {1, -2, 3, 4};
  const std::vector<float> q = {1, -1};
  const float one = 1.0f;
  const auto idx = ip::build_index(view(keys, 2, 2), params(Weighting::maxmin, 2), nullptr, nullptr);
  float s = -1;
  ip::score_index(idx, ip::IndexQuery{view(q, 1, 2), &one}, &s);
  EXPECT_EQ(s, 5.0f);
  const float hi[2] = {3, 4}, lo[2] = {1, -2};
  EXPECT_EQ(ip::box_upper_bound(q.data(), hi, lo, 2), 5.0f);
}

// The lane order written out: 16 lanes by d mod 16 up to the last multiple of 16, folded pairwise
// ([j] + [j + 8], + [j + 4], + [j + 2], [0] + [1]), then the rest added in order.
float box_bound_written_out(const float* q, const float* hi, const float* lo, int D) {
  float acc[16] = {};
  int d = 0;
  for (; d + 16 <= D; d += 16)
    for (int j = 0; j < 16; ++j) acc[j] += std::max(q[d + j] * hi[d + j], q[d + j] * lo[d + j]);
  float tail = 0.0f;
  for (; d < D; ++d) tail += std::max(q[d] * hi[d], q[d] * lo[d]);
  for (int j = 0; j < 8; ++j) acc[j] += acc[j + 8];
  for (int j = 0; j < 4; ++j) acc[j] += acc[j + 4];
  return ((acc[0] + acc[2]) + (acc[1] + acc[3])) + tail;
}

// The maxmin bound is summed in the fixed lane order too: score_index's bits are those of the order
// written out above per head, which equals box_upper_bound's in-order sum to rounding.
TEST(Score, MaxminBoundIsTheFixedLaneOrder) {
  // 19 groups: four blocks of four groups and three left over; 5 and 9 heads: one left over; an index
  // stored at fp32 (read in place) and at int8 (decoded first: compared with its decoded rows).
  auto check = [](int D, int H, Precision p) {
    const int T = 76, G = 4;
    const auto k = randn(T * D, 21 + D), qh = randn(H * D, 23);
    std::vector<float> hw(H, 0.5f);
    const ip::IndexQuery q{view(qh, H, D), hw.data()};
    const auto idx = ip::build_index(view(k, T, D), params(Weighting::maxmin, G, p), nullptr, nullptr);
    std::vector<float> got(T / G);
    ip::score_index(idx, q, got.data());
    const auto rows = ip::dequantize(idx.rows);
    std::vector<float> ub(H);
    for (int g = 0; g < T / G; ++g) {
      const float* hi = rows.data() + (2 * g) * D;
      for (int j = 0; j < H; ++j) {
        ub[j] = box_bound_written_out(qh.data() + j * D, hi, hi + D, D);
        const float seq = ip::box_upper_bound(qh.data() + j * D, hi, hi + D, D);
        EXPECT_NEAR(ub[j], seq, 1e-5f * (1.0f + std::fabs(seq))) << "D " << D << " group " << g << " head " << j;
      }
      const float want = ip::head_weighted_relu(ub.data(), hw.data(), H);
      EXPECT_EQ(std::bit_cast<std::uint32_t>(got[g]), std::bit_cast<std::uint32_t>(want))
          << ip::to_string(p) << " D " << D << " H " << H << " group " << g;
    }
  };
  for (const int D : {17, 128})
    for (const int H : {5, 9})
      for (const Precision p : {Precision::fp32, Precision::int8}) check(D, H, p);
}

TEST(Score, MaxminUpperBoundDominatesEveryTokenInItsGroup) {
  const int T = 1003, D = 16, H = 3, G = 8;  // partial last group of 3 tokens
  const auto keys = randn(T * D, 21), q = randn(H * D, 22);
  const std::vector<float> h = {0.3f, 1.0f, 2.0f};
  const ip::IndexQuery iq{view(q, H, D), h.data()};
  const auto idx = ip::build_index(view(keys, T, D), params(Weighting::maxmin, G), nullptr, nullptr);
  std::vector<float> ub(idx.groups()), s(T);
  ip::score_index(idx, iq, ub.data());
  ip::score_tokens(view(keys, T, D), iq, s.data());
  // Mathematically ub >= s; 1e-4 absorbs different fp32 summation orders (scores are O(10)).
  for (int t = 0; t < T; ++t) ASSERT_GE(ub[t / G] + 1e-4f, s[t]) << "token " << t;
}

TEST(Score, EveryPrecisionStaysWithinItsQuantisationBoundOfFp32) {
  // ReLU is 1-Lipschitz, so |s_p - s_fp32| <= sum_j h_j sum_d |q_jd| e_d, with e_d the element bound:
  //   fp16 |c_d| 2^-11 + 2^-25, bf16 |c_d| 2^-8, int8 scale/2 (scale = max|c|/127),
  //   fp8 |c_d|/16 + scale 2^-10 (scale = max|c|/448); plus 1e-5 sum_j h_j sum_d |q_jd c_d| for fp32 rounding.
  const int T = 517, D = 32, H = 4, G = 4;
  const auto keys = randn(T * D, 31), q = randn(H * D, 32);
  const std::vector<float> h = {0.25f, 0.5f, 1.0f, 1.5f};
  const ip::IndexQuery iq{view(q, H, D), h.data()};
  const auto c = ip::pool_fp32(view(keys, T, D), params(Weighting::uniform, G), nullptr, nullptr);
  const ip::Index64 groups = c.dim(0);
  std::vector<float> ref(groups);
  ip::score_index(ip::build_index(view(keys, T, D), params(Weighting::uniform, G), nullptr, nullptr), iq, ref.data());
  for (Precision p : {Precision::fp16, Precision::bf16, Precision::int8, Precision::fp8}) {
    std::vector<float> got(groups);
    ip::score_index(ip::build_index(view(keys, T, D), params(Weighting::uniform, G, p), nullptr, nullptr), iq,
                    got.data());
    for (ip::Index64 g = 0; g < groups; ++g) {
      const float* cg = c.data() + g * D;
      float amax = 0;
      for (int d = 0; d < D; ++d) amax = std::max(amax, std::fabs(cg[d]));
      double bound = 0, mag = 0;
      for (int j = 0; j < H; ++j)
        for (int d = 0; d < D; ++d) {
          const double a = std::fabs(cg[d]), qa = h[j] * std::fabs(q[j * D + d]);
          double e = 0;
          switch (p) {
            case Precision::fp16: e = a * 0x1p-11 + 0x1p-25; break;
            case Precision::bf16: e = a * 0x1p-8; break;
            case Precision::int8: e = amax / 127.0 / 2; break;
            case Precision::fp8: e = a / 16 + amax / 448.0 * 0x1p-10; break;
            default: break;
          }
          bound += qa * e;
          mag += qa * a;
        }
      ASSERT_LE(std::fabs(got[g] - ref[g]), bound + 1e-5 * mag + 1e-6) << ip::to_string(p) << " group " << g;
    }
  }
}

TEST(Score, EveryPrecisionScoresItsDecodedRowsBitForBit) {
  // A stored index is decoded in blocks of rows (32 at a time, parallel chunks of 4096) and scored like
  // fp32 keys: its scores are the exact-token scores of its decoded rows, every bit, whatever the block
  // and chunk boundaries (4096 + 37 composites: a second chunk, a last block of 5 rows and a last block
  // of four rows of one; the fp32 rows are read in place with the next rows prefetched).
  const int G = 4, D = 128, H = 5;
  const int T = (4096 + 37) * G - 2;  // the last group holds 2 tokens
  const auto keys = randn(T * D, 41), q = randn(H * D, 42);
  const std::vector<float> h = {0.25f, 0.5f, 1.0f, 1.5f, 0.75f};
  const ip::IndexQuery iq{view(q, H, D), h.data()};
  for (Precision p : {Precision::fp32, Precision::fp16, Precision::bf16, Precision::int8, Precision::fp8}) {
    const auto index = ip::build_index(view(keys, T, D), params(Weighting::uniform, G, p), nullptr, nullptr);
    ASSERT_EQ(index.rows.rows, 4096 + 37);
    std::vector<float> got(index.rows.rows), want(index.rows.rows);
    ip::score_index(index, iq, got.data());
    const ip::Tensor<float> decoded = ip::dequantize(index.rows);
    ip::score_tokens(ip::MatrixView<const float>(decoded.data(), index.rows.rows, D), iq, want.data());
    for (ip::Index64 g = 0; g < index.rows.rows; ++g)
      ASSERT_EQ(std::bit_cast<std::uint32_t>(got[g]), std::bit_cast<std::uint32_t>(want[g]))
          << ip::to_string(p) << " composite " << g << ": " << got[g] << " vs " << want[g];
  }
}

TEST(Score, MacsCount) {
  EXPECT_EQ(ip::scoring_macs(1000, 64, 128), 8192000.0);  // 1000 * 64 * 128
}

}  // namespace
