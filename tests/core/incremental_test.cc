// Incremental re-pooling and growing contexts: tau = 0 gives build_index's bits, the groups counted
// as re-pooled are the ones whose weights moved (hand-worked), appending tokens equals a from-scratch
// build over the grown context.
#include <cmath>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "core/incremental.h"
#include "core/rng.h"
#include "tests/core/test_helpers.h"

namespace {

using ip::Precision;
using ip::Weighting;
using iptest::params;
using iptest::view;

std::vector<float> random_keys(ip::Index64 T, int D, std::uint64_t seed) {
  std::vector<float> k(T * D);
  ip::Rng rng(seed);
  for (float& x : k) x = static_cast<float>(rng.normal());
  return k;
}

void expect_same_index(const ip::PooledIndex& a, const ip::PooledIndex& b, const char* what) {
  EXPECT_EQ(a.tokens, b.tokens) << what;
  EXPECT_EQ(a.rows.rows, b.rows.rows) << what;
  EXPECT_TRUE(a.rows.payload == b.rows.payload) << what << ": payload bits differ";
  EXPECT_TRUE(a.rows.scales == b.rows.scales) << what << ": scales differ";
}

TEST(Incremental, WeightMovementIsRelativeL1) {
  const float now[] = {1, 2, 3}, before[] = {1, 1, 1};
  EXPECT_DOUBLE_EQ(ip::weight_movement(now, before, 3), 3.0 / 3.0);  // (0 + 1 + 2) / 3
  EXPECT_DOUBLE_EQ(ip::weight_movement(before, before, 3), 0.0);
  const float half[] = {0.5f, 0.5f};
  EXPECT_DOUBLE_EQ(ip::weight_movement(before, half, 2), 1.0);  // (0.5 + 0.5) / 1
}

TEST(Incremental, WeightMovementEdgeCases) {
  const float zero[] = {0, 0}, one[] = {1, 0}, neg[] = {-1, 2};
  EXPECT_DOUBLE_EQ(ip::weight_movement(zero, zero, 2), 0.0);             // nothing before, nothing moved
  EXPECT_EQ(ip::weight_movement(one, zero, 2), INFINITY);                // moved away from all-zero weights
  EXPECT_DOUBLE_EQ(ip::weight_movement(one, neg, 2), (2.0 + 2.0) / 3.0);  // |.| of negative weights
  EXPECT_DOUBLE_EQ(ip::weight_movement(one, neg, 0), 0.0);               // an empty group never moves
  // Sums in double: 1 + 1e-8 in float is 1, but the difference of the doubles is seen.
  const float a[] = {1.0f}, b[] = {std::nextafter(1.0f, 2.0f)};
  EXPECT_DOUBLE_EQ(ip::weight_movement(b, a, 1), static_cast<double>(b[0]) - 1.0);
}

TEST(Incremental, RepoolGroupDecision) {
  const float before[] = {1, 1}, same[] = {1, 1}, moved[] = {1.5f, 1};  // movement 0.25
  const float nan_w[] = {NAN, 1};
  EXPECT_TRUE(ip::repool_group(true, 10.0f, same, before, 2));     // fresh: always
  EXPECT_TRUE(ip::repool_group(false, -1.0f, same, before, 2));    // tau < 0: always
  EXPECT_TRUE(ip::repool_group(false, NAN, same, before, 2));      // tau NaN: always
  EXPECT_FALSE(ip::repool_group(false, 0.0f, same, before, 2));    // tau = 0: only a change re-pools
  EXPECT_TRUE(ip::repool_group(false, 0.0f, moved, before, 2));
  EXPECT_FALSE(ip::repool_group(false, 0.25f, moved, before, 2));  // strictly more than tau
  EXPECT_TRUE(ip::repool_group(false, 0.2499f, moved, before, 2));
  EXPECT_TRUE(ip::repool_group(false, 1e30f, nan_w, before, 2));   // a NaN movement re-pools
  // A fresh group's `before` is not read (null would crash).
  EXPECT_TRUE(ip::repool_group(true, 0.0f, same, nullptr, 2));
}

// T = 16, G = 4, tfidf. Step 1: mass 0.5 on tokens 1 and 5, groups 0 and 1 selected. Step 2: mass 1 on
// token 9, group 2 selected. Between the two, the weights move in groups 0 and 1 (idf of tokens 1, 5:
// N goes 1 -> 2) and group 2 (token 9 gains tf); group 3 (all weights eps) does not move.
TEST(Incremental, TauZeroRepoolsExactlyTheMovedGroupsAndMatchesAFullBuild) {
  const int D = 8;
  const auto k = random_keys(16, D, 1);
  for (Precision prec : {Precision::fp32, Precision::int8, Precision::fp8}) {
    const auto p = params(Weighting::tfidf, 4, prec);
    ip::AccessStats st(16, 0.9f);
    std::vector<float> m(16, 0.0f);
    m[1] = m[5] = 0.5f;
    const std::pair<ip::Index64, ip::Index64> r1[] = {{0, 4}, {4, 8}};
    st.update(m, r1);
    ip::IndexState s;
    const auto first = ip::update_index(view(k, 16, D), p, &st, nullptr, 0.0f, s);
    EXPECT_EQ(first.repooled, 4);  // an empty state: everything
    m.assign(16, 0.0f);
    m[9] = 1.0f;
    const std::pair<ip::Index64, ip::Index64> r2[] = {{8, 12}};
    st.update(m, r2);
    ip::IndexState big_tau = s;
    const auto c = ip::update_index(view(k, 16, D), p, &st, nullptr, 0.0f, s);
    EXPECT_EQ(c.repooled, 3);
    EXPECT_EQ(c.groups, 4);
    expect_same_index(s.index, ip::build_index(view(k, 16, D), p, &st, nullptr), "tau = 0");
    // A huge tau re-pools nothing: the index keeps its step-1 composites.
    const auto none = ip::update_index(view(k, 16, D), p, &st, nullptr, 1e9f, big_tau);
    EXPECT_EQ(none.repooled, 0);
    EXPECT_FALSE(big_tau.index.rows.payload == s.index.rows.payload);
    // tau < 0: everything.
    EXPECT_EQ(ip::update_index(view(k, 16, D), p, &st, nullptr, -1.0f, big_tau).repooled, 4);
    expect_same_index(big_tau.index, s.index, "tau = -1");
  }
}

TEST(Incremental, GrowingContextEqualsAFromScratchBuild) {
  const int D = 8;
  const auto k = random_keys(23, D, 2);
  for (Weighting w : {Weighting::uniform, Weighting::positional, Weighting::cosine, Weighting::tfidf,
                      Weighting::hybrid, Weighting::maxmin, Weighting::exact}) {
    for (Precision prec : {Precision::fp32, Precision::int8}) {
      const auto p = params(w, 4, prec);
      ip::AccessStats st(10, 0.9f);
      std::vector<float> m(10, 0.0f);
      m[2] = 1.0f;
      const std::pair<ip::Index64, ip::Index64> r[] = {{0, 4}};
      st.update(m, r);
      ip::IndexState s;
      ip::update_index(view(k, 10, D), p, &st, nullptr, 0.0f, s);  // 10 tokens: groups 0, 1 full, 2 half
      // Append 1 token (the partial group fills up), then 12 more (new groups, a partial last one).
      ip::Index64 T = 10;
      for (ip::Index64 add : {1, 12}) {
        T += add;
        st.mass.resize(T, 0.0f);
        st.count.resize(T, 0u);
        const auto c = ip::update_index(view(k, T, D), p, &st, nullptr, 0.0f, s);
        const int G = ip::effective_group_size(p);
        EXPECT_EQ(c.repooled, ip::num_groups(T, G) - (T - add) / G) << ip::to_string(w);  // only new / filling groups
        expect_same_index(s.index, ip::build_index(view(k, T, D), p, &st, nullptr),
                          std::string(ip::to_string(w)).c_str());
      }
    }
  }
}

// Keys k_t = (t, -t), t < T: a uniform composite is the mean of its group's keys.
std::vector<float> ramp_keys(ip::Index64 T) {
  std::vector<float> k(2 * T);
  for (ip::Index64 t = 0; t < T; ++t) k[2 * t] = static_cast<float>(t), k[2 * t + 1] = -static_cast<float>(t);
  return k;
}

// A grown context re-pools the old partial last group as fresh, whatever tau: G = 4, 5 tokens (group 1 =
// token 4 alone, composite (4, -4)), then 8 tokens at tau = 10 (its uniform weights move by 3 <= 10):
// group 1 must become the mean of tokens 4..7 = (5.5, -5.5), and its new keys are checked (a NaN at token 6).
TEST(Incremental, GrowingContextRepoolsThePartialLastGroupAsFresh) {
  const auto p = params(Weighting::uniform, 4);
  auto k = ramp_keys(8);
  ip::IndexState s;
  ip::update_index(view(k, 5, 2), p, nullptr, nullptr, 10.0f, s);
  ASSERT_EQ(s.index.rows.rows, 2);
  EXPECT_EQ(ip::dequantize(s.index.rows).data()[2], 4.0f);
  const auto c = ip::update_index(view(k, 8, 2), p, nullptr, nullptr, 10.0f, s);
  EXPECT_EQ(c.repooled, 1);
  EXPECT_EQ(c.groups, 2);
  const auto rows = ip::dequantize(s.index.rows);
  EXPECT_EQ(rows.data()[2], 5.5f);
  EXPECT_EQ(rows.data()[3], -5.5f);
  expect_same_index(s.index, ip::build_index(view(k, 8, 2), p, nullptr, nullptr), "grown partial group");
  k[2 * 6] = NAN;
  ip::IndexState s2;
  ip::update_index(view(k, 5, 2), p, nullptr, nullptr, 10.0f, s2);
  EXPECT_IP_ERROR(ip::update_index(view(k, 8, 2), p, nullptr, nullptr, 10.0f, s2), "token 6");
}

// A shorter context than the index covers resets it: 10 tokens (group 1 = tokens 4..7), then the first 6 at
// tau = 0 (group 1's weights 1, 1 do not move): group 1 must be the mean of tokens 4 and 5 = (4.5, -4.5).
TEST(Incremental, ShrinkingContextResetsTheIndex) {
  const auto p = params(Weighting::uniform, 4);
  const auto k = ramp_keys(10);
  ip::IndexState s;
  ip::update_index(view(k, 10, 2), p, nullptr, nullptr, 0.0f, s);
  EXPECT_EQ(ip::dequantize(s.index.rows).data()[2], 5.5f);
  const auto c = ip::update_index(view(k, 6, 2), p, nullptr, nullptr, 0.0f, s);
  EXPECT_EQ(c.repooled, 2);  // a reset pools every group
  EXPECT_EQ(c.groups, 2);
  EXPECT_EQ(s.index.tokens, 6);
  const auto rows = ip::dequantize(s.index.rows);
  ASSERT_EQ(rows.dim(0), 2);
  EXPECT_EQ(rows.data()[2], 4.5f);
  EXPECT_EQ(rows.data()[3], -4.5f);
  expect_same_index(s.index, ip::build_index(view(k, 6, 2), p, nullptr, nullptr), "shrunk context");
}

TEST(Incremental, CosineAgainstAMovingQueryReferenceRepoolsEverything) {
  const int D = 4;
  const auto k = random_keys(12, D, 3);
  auto p = params(Weighting::cosine, 4);
  p.weights.cosine_reference = ip::CosineReference::query;
  std::vector<float> q1 = {1, 0, 0, 0}, q2 = {0, 1, 0, 0};
  ip::IndexState s;
  ip::update_index(view(k, 12, D), p, nullptr, q1.data(), 0.0f, s);
  EXPECT_EQ(ip::update_index(view(k, 12, D), p, nullptr, q2.data(), 0.0f, s).repooled, 3);
  EXPECT_EQ(ip::update_index(view(k, 12, D), p, nullptr, q2.data(), 0.0f, s).repooled, 0);  // nothing moved
}

}  // namespace
