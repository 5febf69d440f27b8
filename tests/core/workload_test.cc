// Synthetic workload generator: determinism (seed, thread count), shapes, token kinds, lengths.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "core/parallel.h"
#include "core/workload.h"
#include "tests/core/test_helpers.h"

namespace {

using ip::TokenKind;

ip::WorkloadSpec small_spec() {
  ip::WorkloadSpec s;
  s.tokens = 10000;  // > 4096: the generator's parallel chunks really split
  s.dim = 16;
  s.index_heads = 3;
  s.attn_dim = 8;  // != dim: exercises the random projection
  s.attn_heads = 2;
  s.value_dim = 4;
  s.steps = 5;
  s.topics = 8;
  s.image_fraction = 0.3;
  s.image_side = 8;
  s.seed = 1234;
  return s;
}

bool same_bits(const ip::Tensor<float>& a, const ip::Tensor<float>& b) {
  return a.shape() == b.shape() && std::memcmp(a.data(), b.data(), a.bytes()) == 0;
}

bool same_workload(const ip::Workload& a, const ip::Workload& b) {
  return same_bits(a.index_keys, b.index_keys) && same_bits(a.index_queries, b.index_queries) &&
         same_bits(a.head_weights, b.head_weights) && same_bits(a.attn_keys, b.attn_keys) &&
         same_bits(a.attn_queries, b.attn_queries) && same_bits(a.values, b.values) && a.kind == b.kind;
}

TEST(Workload, SameSeedSameBits) {
  const auto s = small_spec();
  EXPECT_TRUE(same_workload(ip::generate_request(s, 0), ip::generate_request(s, 0)));
}

TEST(Workload, DifferentSeedOrRequestDiffers) {
  auto s = small_spec();
  const auto a = ip::generate_request(s, 0);
  s.seed = 1235;
  const auto b = ip::generate_request(s, 0);
  EXPECT_NE(std::memcmp(a.index_keys.data(), b.index_keys.data(), a.index_keys.bytes()), 0);
  EXPECT_NE(std::memcmp(a.index_queries.data(), b.index_queries.data(), a.index_queries.bytes()), 0);
  s.seed = 1234;
  s.requests = 2;
  const auto c = ip::generate_request(s, 1);
  EXPECT_NE(std::memcmp(a.index_keys.data(), c.index_keys.data(), a.index_keys.bytes()), 0);
}

TEST(Workload, ThreadCountDoesNotChangeTheBits) {
  const auto s = small_spec();
  ip::set_num_threads(1);
  const auto one = ip::generate_request(s, 0);
  ip::set_num_threads(2);
  const auto two = ip::generate_request(s, 0);
  ip::set_num_threads(8);
  const auto eight = ip::generate_request(s, 0);
  ip::set_num_threads(0);
  EXPECT_TRUE(same_workload(one, two));
  EXPECT_TRUE(same_workload(one, eight));
}

TEST(Workload, Shapes) {
  const auto s = small_spec();
  const auto w = ip::generate_request(s, 0);
  EXPECT_EQ(w.index_keys.shape(), (std::vector<ip::Index64>{10000, 16}));
  EXPECT_EQ(w.index_queries.shape(), (std::vector<ip::Index64>{5, 3, 16}));
  EXPECT_EQ(w.head_weights.shape(), (std::vector<ip::Index64>{5, 3}));
  EXPECT_EQ(w.attn_keys.shape(), (std::vector<ip::Index64>{10000, 8}));
  EXPECT_EQ(w.attn_queries.shape(), (std::vector<ip::Index64>{5, 2, 8}));
  EXPECT_EQ(w.values.shape(), (std::vector<ip::Index64>{10000, 4}));
  EXPECT_EQ(w.kind.size(), 10000u);
  EXPECT_EQ(w.tokens(), 10000);
  EXPECT_EQ(w.dim(), 16);
  EXPECT_EQ(w.steps(), 5);
  EXPECT_EQ(w.index_heads(), 3);
  EXPECT_TRUE(w.has_attention());
  // (10000*16 + 5*3*16 + 5*3 + 10000*8 + 5*2*8 + 10000*4) floats of 4 bytes.
  EXPECT_EQ(w.input_bytes(), 4u * (160000 + 240 + 15 + 80000 + 80 + 40000));
  for (ip::Index64 i = 0; i < w.head_weights.size(); ++i) EXPECT_GE(w.head_weights.data()[i], 0.0f);
  EXPECT_NO_THROW(ip::validate_workload(w));
}

TEST(Workload, NoAttentionStageWhenAttnDimIsZero) {
  auto s = small_spec();
  s.attn_dim = 0;
  s.dim = 8;  // attention projection and dim equal-or-not no longer matter
  const auto w = ip::generate_request(s, 0);
  EXPECT_FALSE(w.has_attention());
  EXPECT_TRUE(w.values.empty());
  EXPECT_TRUE(w.attn_queries.empty());
  EXPECT_NO_THROW(ip::validate_workload(w));
}

TEST(Workload, SinksComeFirstAndNeedlesAreCounted) {
  auto s = small_spec();
  s.sinks = 6;
  s.needles = 3;
  s.image_fraction = 0.0;
  const auto w = ip::generate_request(s, 0);
  for (int t = 0; t < 6; ++t) EXPECT_EQ(w.kind[t], TokenKind::sink) << t;
  EXPECT_EQ(std::count(w.kind.begin(), w.kind.end(), TokenKind::sink), 6);
  EXPECT_EQ(std::count(w.kind.begin(), w.kind.end(), TokenKind::needle), 3);
  EXPECT_EQ(std::count(w.kind.begin(), w.kind.end(), TokenKind::image), 0);
  s.needles = 0;
  const auto none = ip::generate_request(s, 0);
  EXPECT_EQ(std::count(none.kind.begin(), none.kind.end(), TokenKind::needle), 0);
}

TEST(Workload, NeedlesAreDistinctTokensEvenWhenTheyFillTheContext) {
  // T = 8 with 4 sinks leaves exactly 4 free slots for 4 needles: each must be a different token.
  auto s = small_spec();
  s.tokens = 8;
  s.sinks = 4;
  s.needles = 4;
  s.image_fraction = 0.0;
  for (std::uint64_t seed = 0; seed < 5; ++seed) {
    s.seed = seed;
    const auto w = ip::generate_request(s, 0);
    const std::vector<TokenKind> want = {TokenKind::sink,   TokenKind::sink,   TokenKind::sink,   TokenKind::sink,
                                         TokenKind::needle, TokenKind::needle, TokenKind::needle, TokenKind::needle};
    EXPECT_EQ(w.kind, want) << "seed " << seed;
  }
  // More needles than tokens is refused; more than the free tokens after the sinks plants what fits.
  s.needles = 9;
  EXPECT_THROW(ip::generate_request(s, 0), ip::Error);
  s.needles = 6;
  const auto w = ip::generate_request(s, 0);
  EXPECT_EQ(std::count(w.kind.begin(), w.kind.end(), TokenKind::needle), 4);
}

TEST(Workload, ImagesCoverRoughlyTheRequestedFraction) {
  auto s = small_spec();
  s.tokens = 60000;
  s.image_fraction = 0.5;
  const auto w = ip::generate_request(s, 0);
  const double f = static_cast<double>(std::count(w.kind.begin(), w.kind.end(), TokenKind::image)) / 60000.0;
  EXPECT_GT(f, 0.2);  // loose: spans are 64 tokens, about 470 of them land as images
  EXPECT_LT(f, 0.8);
}

TEST(Workload, LengthSpreadShortensRequestsWithinBounds) {
  auto s = small_spec();
  s.tokens = 1000;
  s.requests = 8;
  s.length_spread = 0.5;  // T_b = T - floor(0.5 u T), u in [0,1): 500 < T_b <= 1000
  bool any_shorter = false;
  for (int b = 0; b < 8; ++b) {
    const ip::Index64 n = ip::request_tokens(s, b);
    EXPECT_LE(n, 1000);
    EXPECT_GT(n, 500);
    any_shorter |= n < 1000;
    EXPECT_EQ(ip::generate_request(s, b).tokens(), n);
  }
  EXPECT_TRUE(any_shorter);
  // u is uniform (not skewed, e.g. u^2): over 400 requests (seed 1234) the mean length is T (1 - 0.5 E[u]) =
  // 750 (+0.5 from the floor), within 4 standard deviations of the mean, 4 * 0.5 T / sqrt(12 * 400) = 28.9
  // tokens (u^2 would give T (1 - 0.5 / 3) = 833).
  s.requests = 400;
  double sum = 0;
  for (int b = 0; b < 400; ++b) sum += static_cast<double>(ip::request_tokens(s, b));
  const double tol = 4.0 * 0.5 * 1000.0 / std::sqrt(12.0 * 400.0);
  EXPECT_NEAR(sum / 400.0, 750.5, tol);
  s.length_spread = 0.0;
  EXPECT_EQ(ip::request_tokens(s, 3), 1000);
}

TEST(Workload, BadSpecThrows) {
  auto s = small_spec();
  s.tokens = 0;
  EXPECT_IP_ERROR(ip::generate_request(s, 0), "tokens = 0");
  s = small_spec();
  EXPECT_IP_ERROR(ip::generate_request(s, 1), "request 1 outside [0, 1)");
  s.length_spread = 1.0;
  EXPECT_IP_ERROR(ip::validate_spec(s), "length_spread");
}

}  // namespace
