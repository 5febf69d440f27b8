// Decode attention: o_h = sum_t softmax_t(q_h . k_t / sqrt(Da)) v_t, dense and over token lists.
#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "core/attention.h"
#include "core/parallel.h"
#include "core/weights.h"
#include "tests/core/test_helpers.h"

namespace {

using iptest::view;
using Tok = std::vector<ip::Index64>;

// Da = 4 (sqrt = 2), one head q = (2, 0, 0, 0): logit_t = k_t[0].
// k_t[0] = {0, ln 2, ln 3} -> exp = {1, 2, 3}, p = {1/6, 2/6, 3/6}.
// v0 = (6, 0), v1 = (0, 6), v2 = (6, 6): o = (6*1 + 6*3, 6*2 + 6*3) / 6 = (4, 5).
struct ThreeTokens {
  std::vector<float> k = {0, 1, 1, 1, std::log(2.0f), 0, 0, 0, std::log(3.0f), 0, 5, -5};
  std::vector<float> v = {6, 0, 0, 6, 6, 6};
  std::vector<float> q = {2, 0, 0, 0};
  ip::MatrixView<const float> K() const { return view(k, 3, 4); }
  ip::MatrixView<const float> V() const { return view(v, 3, 2); }
  ip::MatrixView<const float> Q() const { return view(q, 1, 4); }
};

TEST(Attention, DenseMatchesHandComputation) {
  ThreeTokens c;
  const auto r = ip::attention(c.K(), c.V(), c.Q(), {}, true);
  ASSERT_EQ(r.out.dim(0), 1);
  ASSERT_EQ(r.out.dim(1), 2);
  EXPECT_NEAR(r.out.data()[0], 4.0f, 1e-5);
  EXPECT_NEAR(r.out.data()[1], 5.0f, 1e-5);
  ASSERT_EQ(r.probs.dim(1), 3);
  EXPECT_NEAR(r.probs.data()[0], 1.0 / 6, 1e-6);
  EXPECT_NEAR(r.probs.data()[1], 2.0 / 6, 1e-6);
  EXPECT_NEAR(r.probs.data()[2], 3.0 / 6, 1e-6);
}

TEST(Attention, SparseSubsetRenormalisesOverTheListedTokens) {
  // Tokens {1, 2}: p = {2/5, 3/5}; o = (6*3/5, 6*2/5 + 6*3/5) = (3.6, 6).
  ThreeTokens c;
  const Tok t = {1, 2};
  const auto r = ip::attention(c.K(), c.V(), c.Q(), t, true);
  EXPECT_NEAR(r.out.data()[0], 3.6f, 1e-5);
  EXPECT_NEAR(r.out.data()[1], 6.0f, 1e-5);
  ASSERT_EQ(r.probs.dim(1), 2);
  EXPECT_NEAR(r.probs.data()[0], 0.4, 1e-6);
  EXPECT_NEAR(r.probs.data()[1], 0.6, 1e-6);
}

TEST(Attention, TwoHeadsAreIndependent) {
  // Head 1 q = (0, 0, 0, 0): all logits 0, p = 1/3 each, o = ((6+0+6)/3, (0+6+6)/3) = (4, 4).
  ThreeTokens c;
  const std::vector<float> q2 = {2, 0, 0, 0, 0, 0, 0, 0};
  const auto r = ip::attention(c.K(), c.V(), view(q2, 2, 4), {}, false);
  EXPECT_TRUE(r.probs.empty());
  EXPECT_NEAR(r.out.data()[0], 4.0f, 1e-5);
  EXPECT_NEAR(r.out.data()[1], 5.0f, 1e-5);
  EXPECT_NEAR(r.out.data()[2], 4.0f, 1e-5);
  EXPECT_NEAR(r.out.data()[3], 4.0f, 1e-5);
}

struct RandomCase {
  static constexpr int T = 9000, Da = 16, Dv = 8, Ha = 3;  // T > 4096: several chunks
  std::vector<float> k, v, q;
  RandomCase() {
    std::mt19937 gen(5);
    std::normal_distribution<float> n(0.0f, 1.0f);
    for (int i = 0; i < T * Da; ++i) k.push_back(n(gen));
    for (int i = 0; i < T * Dv; ++i) v.push_back(n(gen));
    for (int i = 0; i < Ha * Da; ++i) q.push_back(2.0f * n(gen));
  }
};

TEST(Attention, SparseOverAllTokensEqualsDenseBitForBit) {
  RandomCase c;
  Tok all(RandomCase::T);
  for (int t = 0; t < RandomCase::T; ++t) all[t] = t;
  const auto K = view(c.k, c.T, c.Da), V = view(c.v, c.T, c.Dv), Q = view(c.q, c.Ha, c.Da);
  const auto d = ip::attention(K, V, Q, {}, true);
  const auto s = ip::attention(K, V, Q, all, true);
  for (ip::Index64 i = 0; i < d.out.size(); ++i) ASSERT_EQ(d.out.data()[i], s.out.data()[i]) << i;
  for (ip::Index64 i = 0; i < d.probs.size(); ++i) ASSERT_EQ(d.probs.data()[i], s.probs.data()[i]) << i;
}

TEST(Attention, ProbabilitiesSumToOnePerHead) {
  RandomCase c;
  const auto r = ip::attention(view(c.k, c.T, c.Da), view(c.v, c.T, c.Dv), view(c.q, c.Ha, c.Da), {}, true);
  for (int h = 0; h < c.Ha; ++h) {
    double sum = 0;
    for (int t = 0; t < c.T; ++t) {
      const float p = r.probs.data()[h * c.T + t];
      ASSERT_GE(p, 0.0f);
      sum += p;
    }
    EXPECT_NEAR(sum, 1.0, 1e-5) << "head " << h;  // T float roundings of relative 6e-8 each
  }
}

// The definition, written out plainly: logits by all_head_dots (core/weights.h's lane order) times
// 1/sqrt(Da); per head the maximum; p = exp(logit - max); per chunk of 4096 listed tokens, in token order,
// double sums of p and of p v (one multiply and one add a term); the chunks' sums added in chunk order.
std::vector<float> plain_attention(const std::vector<float>& k, const std::vector<float>& v,
                                   const std::vector<float>& q, int Da, int Dv, int Ha, const Tok& tokens) {
  const ip::Index64 n = static_cast<ip::Index64>(tokens.size());
  const float scale = 1.0f / std::sqrt(static_cast<float>(Da));
  std::vector<float> logit(n * Ha);
  std::vector<float> mx(Ha, -INFINITY);
  for (ip::Index64 i = 0; i < n; ++i) {
    ip::all_head_dots(k.data() + tokens[i] * Da, q.data(), Da, Ha, Da, logit.data() + i * Ha);
    for (int h = 0; h < Ha; ++h) {
      logit[i * Ha + h] *= scale;
      mx[h] = std::max(mx[h], logit[i * Ha + h]);
    }
  }
  std::vector<double> sum(Ha, 0.0), acc(Ha * Dv, 0.0);
  for (ip::Index64 c0 = 0; c0 < n; c0 += 4096) {
    std::vector<double> csum(Ha, 0.0), cacc(Ha * Dv, 0.0);
    for (ip::Index64 i = c0; i < std::min(n, c0 + 4096); ++i)
      for (int h = 0; h < Ha; ++h) {
        const float p = std::exp(logit[i * Ha + h] - mx[h]);
        csum[h] += p;
        for (int d = 0; d < Dv; ++d) cacc[h * Dv + d] += static_cast<double>(p) * v[tokens[i] * Dv + d];
      }
    for (int h = 0; h < Ha; ++h) {
      sum[h] += csum[h];
      for (int d = 0; d < Dv; ++d) acc[h * Dv + d] += cacc[h * Dv + d];
    }
  }
  std::vector<float> out(Ha * Dv);
  for (int h = 0; h < Ha; ++h)
    for (int d = 0; d < Dv; ++d) out[h * Dv + d] = static_cast<float>(acc[h * Dv + d] / sum[h]);
  return out;
}

TEST(Attention, WideValuesAreThePlainDefinitionBitForBit) {
  // Da = 128 (four tokens and four heads at a time), Dv = 133 (two blocks of 64 value sums held in
  // registers, then 5 in a plain loop), Ha = 5 (a head left over), 4096 + 77 tokens (a second chunk,
  // ending in a part tile of value sums), dense and over a list with gaps.
  constexpr int T = 4096 + 77, Da = 128, Dv = 133, Ha = 5;
  std::mt19937 gen(11);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> k(T * Da), v(T * Dv), q(Ha * Da);
  for (auto& x : k) x = nd(gen);
  for (auto& x : v) x = nd(gen);
  for (auto& x : q) x = 0.3f * nd(gen);
  Tok all(T), some;
  for (int t = 0; t < T; ++t) all[t] = t;
  for (int t = 0; t < T; t += 1 + t % 3) some.push_back(t);
  for (const Tok* tokens : {&all, &some}) {
    const auto want = plain_attention(k, v, q, Da, Dv, Ha, *tokens);
    const auto got = ip::attention(view(k, T, Da), view(v, T, Dv), view(q, Ha, Da),
                                   tokens == &all ? Tok{} : *tokens, false);
    ASSERT_EQ(got.out.size(), Ha * Dv);
    for (int i = 0; i < Ha * Dv; ++i)
      ASSERT_EQ(got.out.data()[i], want[i]) << (tokens == &all ? "dense" : "listed") << ", head " << i / Dv
                                            << ", element " << i % Dv;
  }
}

TEST(Attention, ThreadCountDoesNotChangeTheBits) {
  RandomCase c;
  const auto K = view(c.k, c.T, c.Da), V = view(c.v, c.T, c.Dv), Q = view(c.q, c.Ha, c.Da);
  ip::set_num_threads(1);
  const auto a = ip::attention(K, V, Q, {}, true);
  ip::set_num_threads(2);
  const auto b = ip::attention(K, V, Q, {}, true);
  ip::set_num_threads(0);
  for (ip::Index64 i = 0; i < a.out.size(); ++i) ASSERT_EQ(a.out.data()[i], b.out.data()[i]) << i;
  ASSERT_EQ(a.probs.size(), b.probs.size());
  ASSERT_GT(a.probs.size(), 0);
  for (ip::Index64 i = 0; i < a.probs.size(); ++i) ASSERT_EQ(a.probs.data()[i], b.probs.data()[i]) << "prob " << i;
}

TEST(Attention, TokensOfGroupsWithPartialLastGroup) {
  // T = 10, G = 4: group 0 -> 0..3, group 2 -> 8, 9 (partial); given out of order, returned ascending.
  const std::vector<std::int32_t> g = {2, 0};
  EXPECT_EQ(ip::tokens_of_groups(g, 4, 10), (Tok{0, 1, 2, 3, 8, 9}));
  const std::vector<std::int32_t> g1 = {1};
  EXPECT_EQ(ip::tokens_of_groups(g1, 4, 10), (Tok{4, 5, 6, 7}));
  const std::vector<std::int32_t> single = {3, 1};
  EXPECT_EQ(ip::tokens_of_groups(single, 1, 10), (Tok{1, 3}));
  const std::vector<std::int32_t> bad = {3};  // group 3 starts at token 12 >= 10
  EXPECT_IP_ERROR(ip::tokens_of_groups(bad, 4, 10), "group 3");
}

TEST(Attention, BadShapesThrow) {
  ThreeTokens c;
  EXPECT_IP_ERROR(ip::attention(c.K(), view(c.v, 2, 2), c.Q(), {}, false), "2 values for 3 keys");
  EXPECT_IP_ERROR(ip::attention(c.K(), c.V(), view(c.q, 1, 3), {}, false), "query dimension 3");
  const std::vector<float> none;
  EXPECT_IP_ERROR(ip::attention(view(none, 0, 4), view(none, 0, 2), c.Q(), {}, false), "empty context");
  EXPECT_IP_ERROR(ip::attention(c.K(), c.V(), view(none, 0, 4), {}, false), "no query heads");
  // A listed token outside the context, at either end or after valid ones: the first such is named.
  EXPECT_IP_ERROR(ip::attention(c.K(), c.V(), c.Q(), Tok{-1}, false), "token -1 outside [0, 3)");
  EXPECT_IP_ERROR(ip::attention(c.K(), c.V(), c.Q(), Tok{0, 2, 3}, false), "token 3 outside [0, 3)");
  EXPECT_IP_ERROR(ip::attention(c.K(), c.V(), c.Q(), Tok{0, 5, -2}, false), "token 5 outside [0, 3)");
  EXPECT_NO_THROW(ip::attention(c.K(), c.V(), c.Q(), Tok{0, 2}, false));
}

}  // namespace
