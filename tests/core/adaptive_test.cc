// Adaptive compression: a hand-worked greedy choice, the budget property ("met exactly", as defined
// in core/adaptive.h) over random cases, the index layout and selection over variable-size groups.
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "core/adaptive.h"
#include "core/rng.h"
#include "tests/core/test_helpers.h"

namespace {

using iptest::view;

double rows_for(ip::Index64 n, int G) { return static_cast<double>((n + G - 1) / G); }

// Three 16-token segments, 10-byte rows, scores (1, 0, 0.5), budget 70 bytes (all at G = 16: 30).
//   priorities u / delta: s0 1/10, s1 0, s2 0.5/10  -> s0 16->8 (total 40)
//   s0 now 1/20 ties s2 0.5/10: lower id            -> s0 8->4  (total 60)
//   s0 1/40 < s2 0.05                               -> s2 16->8 (total 70)
//   s0 1/40 ties s2 0.5/20: s0 needs 40, no fit; s2 needs 20, no fit; s1 needs 10, no fit.
TEST(Adaptive, HandWorkedGreedyChoice) {
  const std::vector<double> u = {1.0, 0.0, 0.5};
  const std::vector<ip::Index64> len = {16, 16, 16};
  EXPECT_EQ(ip::choose_group_sizes(u, len, 10.0, 70.0), (std::vector<int>{4, 16, 8}));
  EXPECT_EQ(ip::choose_group_sizes(u, len, 10.0, 30.0), (std::vector<int>{16, 16, 16}));
  EXPECT_EQ(ip::choose_group_sizes(u, len, 10.0, 480.0), (std::vector<int>{1, 1, 1}));  // everything fits
  EXPECT_IP_ERROR(ip::choose_group_sizes(u, len, 10.0, 29.0), "below the smallest index");
  // A real tie goes to the lower id: two equal segments, room for one halving (20 + 10 <= 30 bytes):
  // priorities 1/10 each -> s0 16->8 (total 30); then s0 1/20 and s1 1/10 no longer fit.
  const std::vector<double> tie_u = {1.0, 1.0};
  const std::vector<ip::Index64> tie_len = {16, 16};
  EXPECT_EQ(ip::choose_group_sizes(tie_u, tie_len, 10.0, 30.0), (std::vector<int>{8, 16}));
}

TEST(Adaptive, BudgetIsMetExactlyAsDefined) {
  ip::Rng rng(9);
  for (int trial = 0; trial < 300; ++trial) {
    const int segs = 1 + static_cast<int>(rng.below(40));
    std::vector<ip::Index64> len(segs, 256);
    len.back() = 1 + static_cast<ip::Index64>(rng.below(256));  // a partial last segment
    std::vector<double> u(segs);
    for (double& x : u) x = rng.uniform() < 0.2 ? 0.0 : rng.uniform();
    const double row = 1.0 + static_cast<double>(rng.below(600));
    double lo = 0, T = 0;
    for (auto n : len) lo += rows_for(n, 16) * row, T += static_cast<double>(n);
    const double budget = lo + rng.uniform() * (T * row - lo) * 1.1;
    const auto G = ip::choose_group_sizes(u, len, row, budget);
    double total = 0;
    for (int s = 0; s < segs; ++s) total += rows_for(len[s], G[s]) * row;
    ASSERT_LE(total, budget) << "trial " << trial;  // (1)
    for (int s = 0; s < segs; ++s) {
      if (G[s] == 1) continue;
      const double delta = (rows_for(len[s], G[s] / 2) - rows_for(len[s], G[s])) * row;
      ASSERT_GT(total + delta, budget) << "trial " << trial << ": segment " << s << " could still halve";  // (2)
    }
  }
}

TEST(Adaptive, IndexLayoutBytesAndPooling) {
  const ip::Index64 T = 1000;
  const int D = 8;
  std::vector<float> k(T * D);
  ip::Rng rng(4);
  for (float& x : k) x = static_cast<float>(rng.normal());
  for (ip::Index64 t = 0; t < 256; ++t)  // segment 0: identical keys, so it disagrees least
    for (int d = 0; d < D; ++d) k[t * D + d] = 1.0f;
  ip::AdaptiveParams a;
  a.enabled = true;
  a.segment = 256;
  a.budget_bytes_per_token = 16.0;  // fp32 rows of 32 bytes: 2 tokens per row on average
  ip::AdaptiveIndex idx;
  ip::build_adaptive_index(view(k, T, D), iptest::params(ip::Weighting::uniform, 4), nullptr, nullptr, a, idx);
  EXPECT_LE(static_cast<double>(idx.bytes()), 16.0 * T);
  ASSERT_EQ(idx.segment_size.size(), 4u);
  for (int s = 1; s < 4; ++s)  // no disagreement, no access: the coarsest groups
    EXPECT_GE(idx.segment_size[0], idx.segment_size[s]) << s;
  EXPECT_LT(idx.segment_size[1], 16);
  EXPECT_EQ(idx.begin.front(), 0);
  EXPECT_EQ(idx.begin.back(), T);
  for (ip::Index64 g = 0; g < idx.groups(); ++g) {
    const ip::Index64 n = idx.begin[g + 1] - idx.begin[g];
    ASSERT_GE(n, 1);
    ASSERT_LE(n, idx.segment_size[idx.begin[g] / 256]);
    ASSERT_EQ(idx.begin[g] / 256, (idx.begin[g + 1] - 1) / 256) << "a group crosses a segment boundary";
  }
  // A uniform composite is the mean of its group's keys.
  const ip::Index64 g = idx.groups() - 1, b = idx.begin[g], n = idx.begin[g + 1] - b;
  const float* row = reinterpret_cast<const float*>(idx.rows.rows.row_bytes(g));
  for (int d = 0; d < D; ++d) {
    float m = 0;
    for (ip::Index64 t = b; t < b + n; ++t) m += k[t * D + d];
    EXPECT_NEAR(row[d], m / n, 1e-5f);
  }
}

TEST(Adaptive, SelectionTakesRankedGroupsUntilTheBudgetIsReached) {
  ip::AdaptiveIndex idx;
  idx.begin = {0, 1, 5, 7};  // sizes 1, 4, 2
  const float scores[] = {0.1f, 0.9f, 0.5f};
  EXPECT_EQ(ip::select_variable(scores, idx, 5), (std::vector<std::int32_t>{1, 2}));  // 4 + 2 = 6 >= 5
  EXPECT_EQ(ip::select_variable(scores, idx, 4), (std::vector<std::int32_t>{1}));
  EXPECT_EQ(ip::select_variable(scores, idx, 7), (std::vector<std::int32_t>{1, 2, 0}));
  EXPECT_IP_ERROR(ip::select_variable(scores, idx, 8), "budget");
}

TEST(Adaptive, SegmentScoresFollowAccessAndDisagreement) {
  const ip::Index64 T = 64;
  const int D = 4;
  std::vector<float> k(T * D, 1.0f);
  for (ip::Index64 t = 16; t < 32; ++t) k[t * D + (t % D)] = -3.0f;  // segment 1 disagrees
  ip::AdaptiveParams a;
  a.enabled = true;
  a.segment = 16;
  a.access_weight = 2.0f;
  ip::AccessStats st(T, 1.0f);
  std::vector<float> m(T, 0.0f);
  m[50] = 1.0f;  // segment 3 was attended
  st.update(m, {});
  const auto u = ip::segment_scores(view(k, T, D), &st, a);
  ASSERT_EQ(u.size(), 4u);
  EXPECT_NEAR(u[0], 0.0, 1e-12);
  EXPECT_NEAR(u[1], 1.0, 1e-12);  // w_d * d / max d
  EXPECT_NEAR(u[2], 0.0, 1e-12);
  EXPECT_NEAR(u[3], 2.0, 1e-12);  // w_a * a / max a
}

// A partial last segment's disagreement is a mean over its own tokens: T = 24, S = 16, keys alternating
// (1,0) (0,1) in both segments (16 and 8 tokens): each token's 1 - cos(k, m) = 1 - 1/sqrt(2) in both, so
// d_0 = d_1 and u = (1, 1) with access_weight 0 (dividing segment 1's sum by S = 16 would give u_1 = 0.5).
TEST(Adaptive, PartialLastSegmentDisagreementIsAMeanOverItsOwnTokens) {
  const ip::Index64 T = 24;
  std::vector<float> k(T * 2, 0.0f);
  for (ip::Index64 t = 0; t < T; ++t) k[t * 2 + (t % 2)] = 1.0f;
  ip::AdaptiveParams a;
  a.enabled = true;
  a.segment = 16;
  a.access_weight = 0.0f;
  const auto u = ip::segment_scores(view(k, T, 2), nullptr, a);
  ASSERT_EQ(u.size(), 2u);
  EXPECT_NEAR(u[0], 1.0, 1e-12);
  EXPECT_NEAR(u[1], 1.0, 1e-12);
}

}  // namespace
