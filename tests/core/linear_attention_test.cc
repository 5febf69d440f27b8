// Gated linear attention: a hand-computed recurrence, chunked == naive (tolerance below), the gates,
// the hybrid layer's local branch and combination rules, thread-count independence.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "core/hybrid.h"
#include "core/linear_attention.h"
#include "core/parallel.h"
#include "core/rng.h"
#include "tests/core/test_helpers.h"

namespace {

using iptest::view;

// Chunked vs naive: both are float; the chunked form reassociates sums and goes through exp(log a),
// so an output that cancels to near zero carries the rounding of its large terms. Tolerance:
//   |chunked - naive| <= 1e-5 * max_i |naive_i| + 1e-4 * |naive|   (over the outputs, and the state)
// (observed: about 2e-6 of max |naive|).
constexpr float kAtol = 1e-5f, kRtol = 1e-4f;
float max_abs(const std::vector<float>& v) {
  float m = 0;
  for (float x : v) m = std::max(m, std::fabs(x));
  return m;
}

TEST(LinearAttention, HandComputedRecurrence) {
  // Dk = 2, Dv = 1, gates (0.5, 1) every step, keys e1, e2, (1,1), values 2, 3, 4:
  //   S1 = (2, 0)       o1 = (1,1).S1 = 2
  //   S2 = (1, 3)       o2 = (0,1).S2 = 3
  //   S3 = (0.5+4, 3+4) = (4.5, 7)   o3 = (1,2).S3 = 18.5
  const std::vector<float> k = {1, 0, 0, 1, 1, 1}, v = {2, 3, 4}, a = {0.5f, 1, 0.5f, 1, 0.5f, 1},
                           q = {1, 1, 0, 1, 1, 2};
  for (int chunk : {0, 1, 2, 3, 4}) {  // 0: the naive recurrence
    std::vector<float> state(2, 0.0f), out(3, -1.0f);
    if (chunk == 0)
      ip::gla_naive(view(k, 3, 2), view(v, 3, 1), view(a, 3, 2), view(q, 3, 2), state.data(), out.data());
    else
      ip::gla_chunked(view(k, 3, 2), view(v, 3, 1), view(a, 3, 2), view(q, 3, 2), chunk, state.data(), out.data());
    EXPECT_NEAR(out[0], 2.0f, 1e-6f) << "chunk " << chunk;
    EXPECT_NEAR(out[1], 3.0f, 1e-6f) << "chunk " << chunk;
    EXPECT_NEAR(out[2], 18.5f, 1e-5f) << "chunk " << chunk;
    EXPECT_NEAR(state[0], 4.5f, 1e-6f) << "chunk " << chunk;
    EXPECT_NEAR(state[1], 7.0f, 1e-6f) << "chunk " << chunk;
  }
}

TEST(LinearAttention, ChunkedEqualsNaiveOnOddSizes) {
  for (ip::Index64 n : {1, 19, 211}) {
    const int Dk = 16, Dv = 9;
    std::vector<float> k(n * Dk), v(n * Dv), q(n * Dk), a(n * Dk), s0(Dk * Dv);
    ip::Rng rng(ip::hash_key(5, n));
    for (auto* x : {&k, &v, &q, &s0})
      for (float& f : *x) f = static_cast<float>(rng.normal());
    ip::fill_gates(ip::GateParams{0.9f, 1.0f, 11}, 0, n, Dk, a.data());
    std::vector<float> ref_state = s0, ref(n * Dv);
    ip::gla_naive(view(k, n, Dk), view(v, n, Dv), view(a, n, Dk), view(q, n, Dk), ref_state.data(), ref.data());
    const float oscale = std::max(1.0f, max_abs(ref)), sscale = std::max(1.0f, max_abs(ref_state));
    for (int chunk : {1, 7, 64, 300}) {
      std::vector<float> state = s0, out(n * Dv);
      ip::gla_chunked(view(k, n, Dk), view(v, n, Dv), view(a, n, Dk), view(q, n, Dk), chunk, state.data(), out.data());
      for (ip::Index64 i = 0; i < n * Dv; ++i)
        ASSERT_NEAR(out[i], ref[i], kAtol * oscale + kRtol * std::fabs(ref[i])) << "n " << n << " chunk " << chunk << " i " << i;
      for (int i = 0; i < Dk * Dv; ++i)
        ASSERT_NEAR(state[i], ref_state[i], kAtol * sscale + kRtol * std::fabs(ref_state[i])) << "n " << n << " chunk " << chunk;
    }
  }
}

TEST(LinearAttention, ChunkedIsIdenticalOnOneAndTwoThreads) {
  const ip::Index64 n = 1000;
  const int Dk = 8, Dv = 8;
  std::vector<float> k(n * Dk), v(n * Dv), q(n * Dk), a(n * Dk);
  ip::Rng rng(3);
  for (auto* x : {&k, &v, &q})
    for (float& f : *x) f = static_cast<float>(rng.normal());
  ip::fill_gates(ip::GateParams{0.95f, 0.5f, 1}, 0, n, Dk, a.data());
  std::vector<float> s1(Dk * Dv, 0.0f), s2 = s1, o1(n * Dv), o2(n * Dv);
  ip::set_num_threads(1);
  ip::gla_chunked(view(k, n, Dk), view(v, n, Dv), view(a, n, Dk), view(q, n, Dk), 32, s1.data(), o1.data());
  ip::set_num_threads(2);
  ip::gla_chunked(view(k, n, Dk), view(v, n, Dv), view(a, n, Dk), view(q, n, Dk), 32, s2.data(), o2.data());
  ip::set_num_threads(0);
  EXPECT_EQ(0, std::memcmp(o1.data(), o2.data(), o1.size() * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(s1.data(), s2.data(), s1.size() * sizeof(float)));
}

TEST(LinearAttention, Gates) {
  // spread 0: every gate is decay (powf(x, expf(0)) = powf(x, 1) = x).
  EXPECT_EQ(ip::gate_value(ip::GateParams{0.9f, 0.0f, 7}, 123, 4), 0.9f);
  const ip::GateParams g{0.9f, 1.0f, 7};
  float lo = 1, hi = 0;
  for (int t = 0; t < 200; ++t)
    for (int d = 0; d < 4; ++d) {
      const float x = ip::gate_value(g, t, d);
      EXPECT_GT(x, 0.0f);
      EXPECT_LE(x, 1.0f);
      // s in [-sqrt 3, sqrt 3]: the gate lies in [0.9^exp(sqrt 3), 0.9^exp(-sqrt 3)].
      EXPECT_GE(x, std::pow(0.9f, std::exp(1.7320509f)) * 0.9999f);
      EXPECT_LE(x, std::pow(0.9f, std::exp(-1.7320509f)) * 1.0001f);
      lo = std::min(lo, x), hi = std::max(hi, x);
    }
  EXPECT_LT(lo, 0.8f);  // the spread really spreads
  EXPECT_GT(hi, 0.95f);
  EXPECT_EQ(ip::gate_value(g, 5, 1), ip::gate_value(g, 5, 1));
  EXPECT_NE(ip::gate_value(g, 5, 1), ip::gate_value(ip::GateParams{0.9f, 1.0f, 8}, 5, 1));
  EXPECT_IP_ERROR(ip::validate_gates(ip::GateParams{0.0f, 0.5f, 0}), "decay");
  EXPECT_IP_ERROR(ip::validate_gates(ip::GateParams{1.5f, 0.5f, 0}), "decay = 1.5");  // decay in (0, 1]
  EXPECT_NO_THROW(ip::validate_gates(ip::GateParams{1.0f, 0.5f, 0}));
  EXPECT_IP_ERROR(ip::validate_gates(ip::GateParams{0.9f, -1.0f, 0}), "spread");
}

// Gates so small that decay^exp(spread s) underflows (gate_spread 4-10 at decay 0.9, or a tiny decay): the
// gate stays at the smallest normal float, so the chunked form's log-gates are finite and its outputs match
// the naive recurrence's (they were NaN). Looser than kAtol/kRtol: a chunk's cumulative log-gates reach
// some -87 x 64 here, where a float's rounding (2^-24 relative, ~3e-4 absolute) goes into every exp of their
// differences (observed: 3.6e-4 of the largest output).
TEST(LinearAttention, UnderflowingGatesKeepTheChunkedFormFinite) {
  for (const ip::GateParams g : {ip::GateParams{0.9f, 8.0f, 21}, ip::GateParams{0.9f, 10.0f, 22},
                                 ip::GateParams{1e-30f, 10.0f, 23}, ip::GateParams{0.5f, 4.0f, 24}}) {
    const ip::Index64 n = 211;
    const int Dk = 16, Dv = 9;
    std::vector<float> k(n * Dk), v(n * Dv), q(n * Dk), a(n * Dk);
    ip::Rng rng(ip::hash_key(9, g.seed));
    for (auto* x : {&k, &v, &q})
      for (float& f : *x) f = static_cast<float>(rng.normal());
    ip::fill_gates(g, 0, n, Dk, a.data());
    int tiny = 0;
    for (float x : a) {
      ASSERT_GE(x, 0x1.0p-126f) << "decay " << g.decay << " spread " << g.spread;
      tiny += x == 0x1.0p-126f;
    }
    EXPECT_GT(tiny, 0) << "no gate underflowed: the case tests nothing";
    std::vector<float> ref_state(Dk * Dv, 0.0f), ref(n * Dv);
    ip::gla_naive(view(k, n, Dk), view(v, n, Dv), view(a, n, Dk), view(q, n, Dk), ref_state.data(), ref.data());
    const float oscale = std::max(1.0f, max_abs(ref));
    for (int chunk : {7, 64}) {
      std::vector<float> state(Dk * Dv, 0.0f), out(n * Dv);
      ip::gla_chunked(view(k, n, Dk), view(v, n, Dv), view(a, n, Dk), view(q, n, Dk), chunk, state.data(), out.data());
      for (ip::Index64 i = 0; i < n * Dv; ++i) {
        ASSERT_TRUE(std::isfinite(out[i])) << "chunk " << chunk << " i " << i;
        ASSERT_NEAR(out[i], ref[i], 2e-3f * oscale) << "chunk " << chunk << " i " << i;
      }
    }
  }
}

ip::Workload tiny_workload(ip::Index64 T, int Dv, float value_of_all) {
  ip::Workload w;
  w.index_keys.reshape({T, 4});
  w.index_keys.fill(1.0f);
  w.attn_keys.reshape({T, 4});
  for (ip::Index64 i = 0; i < T * 4; ++i) w.attn_keys.data()[i] = static_cast<float>((i * 7) % 5) - 2.0f;
  w.values.reshape({T, Dv});
  w.values.fill(value_of_all);
  w.gates = ip::GateParams{0.8f, 0.5f, 3};
  return w;
}

TEST(LocalBranch, OutputIsAConvexCombinationOfTheWindowValues) {
  // Every value is 3: whatever the weights, the normalised output is 3.
  const auto w = tiny_workload(50, 2, 3.0f);
  ip::LocalBranch lb;
  ip::local_prefill(w, 10, 50, 8, lb);
  const std::vector<float> q = {0.5f, -1, 2, 0, 1, 1, 1, 1};
  std::vector<float> out(4);
  ip::local_readout(lb, view(q, 2, 4), out.data());
  for (float o : out) EXPECT_NEAR(o, 3.0f, 1e-5f);
  // A window of one token returns that token's value.
  ip::Workload w1 = tiny_workload(5, 2, 0.0f);
  w1.values.data()[4 * 2] = -7, w1.values.data()[4 * 2 + 1] = 2;
  ip::local_prefill(w1, 4, 5, 64, lb);
  ip::local_readout(lb, view(q, 2, 4), out.data());
  EXPECT_NEAR(out[0], -7.0f, 1e-5f);
  EXPECT_NEAR(out[1], 2.0f, 1e-5f);
}

TEST(LocalBranch, AppendingEqualsPrefillingTheLongerWindow) {
  ip::Workload w = tiny_workload(40, 3, 0.0f);
  for (ip::Index64 i = 0; i < 40 * 3; ++i) w.values.data()[i] = static_cast<float>(i % 11) - 5.0f;
  ip::LocalBranch grown, whole;
  ip::local_prefill(w, 8, 30, 4, grown);
  ip::local_append(w, 40, grown);
  ip::local_prefill(w, 8, 40, 4, whole);
  ASSERT_EQ(grown.state.size(), whole.state.size());
  for (std::size_t i = 0; i < whole.state.size(); ++i)
    EXPECT_NEAR(grown.state[i], whole.state[i], kAtol * max_abs(whole.state) + kRtol * std::fabs(whole.state[i])) << i;
  EXPECT_EQ(grown.end, 40);
}

TEST(Combine, RulesAndParsing) {
  const float s[] = {1, 2}, l[] = {3, 6};
  float o[2];
  ip::combine_outputs(ip::parse_combine("sum"), s, l, 2, o);
  EXPECT_EQ(o[0], 4.0f);
  EXPECT_EQ(o[1], 8.0f);
  ip::combine_outputs(ip::parse_combine("gate:0.25"), s, l, 2, o);
  EXPECT_EQ(o[0], 1.5f);  // 0.75 * 1 + 0.25 * 3
  EXPECT_EQ(o[1], 3.0f);  // 0.75 * 2 + 0.25 * 6
  ip::combine_outputs(ip::parse_combine("gate:0"), s, l, 2, o);
  EXPECT_EQ(o[0], 1.0f);
  EXPECT_EQ(ip::to_string(ip::parse_combine("gate:0.5")), "gate:0.5");
  EXPECT_IP_ERROR(ip::parse_combine("gate:1.5"), "[0, 1]");
  EXPECT_IP_ERROR(ip::parse_combine("gate:"), "gate");
  EXPECT_IP_ERROR(ip::parse_combine("mean"), "expected sum or gate:G");
}

}  // namespace
