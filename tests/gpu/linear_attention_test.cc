// Gated linear attention on the device (kernels/linear_attention.h, kernels/local_branch.h) against
// the CPU reference (core/linear_attention.h, core/hybrid.h). Host C++: it only calls launchers.
//
// Tolerance against the naive recurrence (and the CPU chunked form), per element:
//   |gpu - ref| <= 2e-5 * max_i |ref_i| + 1e-4 * |ref|
// The kernel runs the same per-element sums in the same order as gla_chunked (core/gla_tile.h; the
// CPU replay test finds the decomposition bit-identical to gla_chunked and 1.1e-6 of max |o| from
// gla_naive); on the device logf/expf/powf are within 1-2 ulp of glibc and the compiler may contract
// differently to fma, so the CPU chunked-vs-naive bound (1e-5 of max) is doubled. Relative to the
// largest output because outputs that cancel to near zero carry the rounding of their large terms.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/hybrid.h"
#include "core/linear_attention.h"
#include "core/pipeline.h"
#include "core/rng.h"
#include "core/workload.h"
#include "kernels/cuda_backend.h"
#include "kernels/linear_attention.h"
#include "tests/core/test_helpers.h"
#include "tests/gpu/gpu_test.h"

namespace ip {
namespace {

using iptest::view;
constexpr float kAtol = 2e-5f, kRtol = 1e-4f;

float max_abs(const std::vector<float>& v) {
  float m = 0;
  for (float x : v) m = std::max(m, std::fabs(x));
  return m;
}

// Every element written (no poison left) and within the tolerance of ref.
void expect_close(const std::vector<float>& got, const std::vector<float>& ref, const std::string& what) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  const float scale = std::max(1.0f, max_abs(ref));
  for (std::size_t i = 0; i < ref.size(); ++i) {
    ASSERT_FALSE(test::is_poison(got[i])) << what << ": element " << i << " never written";
    ASSERT_NEAR(got[i], ref[i], kAtol * scale + kRtol * std::fabs(ref[i])) << what << ": element " << i;
  }
}

struct Inputs {
  std::vector<float> k, v, a, q, s0;
};
Inputs make_inputs(Index64 n, int dk, int dv, float spread, std::uint64_t seed) {
  Inputs in{std::vector<float>(n * dk), std::vector<float>(n * dv), std::vector<float>(n * dk),
            std::vector<float>(n * dk), std::vector<float>(static_cast<std::size_t>(dk) * dv)};
  Rng rng(hash_key(seed, n, dk * 1000 + dv));
  for (auto* x : {&in.k, &in.v, &in.q, &in.s0})
    for (float& f : *x) f = static_cast<float>(rng.normal());
  fill_gates(GateParams{0.9f, spread, seed}, 0, n, dk, in.a.data());
  return in;
}

// Runs the chunked kernel on copies of the inputs (parallel: the chunk-parallel form, with a poisoned
// workspace); returns {state, outputs}.
std::pair<std::vector<float>, std::vector<float>> run_chunked(const Inputs& in, Index64 n, int dk, int dv, int chunk,
                                                              bool outputs, bool parallel = false) {
  auto k = test::to_device(in.k), v = test::to_device(in.v), a = test::to_device(in.a), q = test::to_device(in.q);
  auto s = test::to_device(in.s0);
  auto o = test::poisoned<float>(outputs ? static_cast<std::size_t>(n * dv) : 1);
  cuda::GlaArgs g;
  g.keys = k.data();
  g.values = v.data();
  g.gates = a.data();
  g.queries = outputs ? q.data() : nullptr;
  g.out = outputs ? o.data() : nullptr;
  g.state = s.data();
  g.n = n;
  g.dk = dk;
  g.dv = dv;
  g.chunk = chunk;
  cuda::DeviceBuffer<float> ws;
  if (parallel) {
    ws = test::poisoned<float>(cuda::gla_chunked_workspace_bytes(n, dk, dv, chunk) / sizeof(float));
    g.workspace = ws.data();
    g.workspace_bytes = ws.size() * sizeof(float);
  }
  cuda::gla_chunked(g, nullptr);
  IP_CUDA_CHECK(cudaDeviceSynchronize());
  return {s.to_host(), outputs ? o.to_host() : std::vector<float>{}};
}

TEST(GlaArgs, BadArgumentsThrowBeforeAnyCudaCall) {
  static float buf[64];
  auto valid = [] {
    cuda::GlaArgs a;
    a.keys = a.values = a.gates = buf;
    a.state = buf;
    a.n = 2;
    a.dk = a.dv = 4;
    a.chunk = 2;
    return a;
  };
  auto a = valid();
  a.n = -1;
  EXPECT_TRUE(iptest::throws_ip_error([&] { cuda::gla_chunked(a, nullptr); }, "n = -1"));
  a = valid();
  a.dk = 0;
  EXPECT_TRUE(iptest::throws_ip_error([&] { cuda::gla_chunked(a, nullptr); }, "dk = 0"));
  a = valid();
  a.dv = 0;
  EXPECT_TRUE(iptest::throws_ip_error([&] { cuda::gla_append(a, nullptr); }, "dv = 0"));
  a = valid();
  a.chunk = 0;
  EXPECT_TRUE(iptest::throws_ip_error([&] { cuda::gla_chunked(a, nullptr); }, "chunk = 0"));
  a.chunk = 4097;
  EXPECT_TRUE(iptest::throws_ip_error([&] { cuda::gla_chunked(a, nullptr); }, "chunk = 4097 outside"));
  a = valid();
  a.gates = nullptr;
  EXPECT_TRUE(iptest::throws_ip_error([&] { cuda::gla_chunked(a, nullptr); }, "gates"));
  a = valid();
  a.state = nullptr;
  EXPECT_TRUE(iptest::throws_ip_error([&] { cuda::gla_append(a, nullptr); }, "state"));
  a = valid();
  a.queries = buf;
  EXPECT_TRUE(iptest::throws_ip_error([&] { cuda::gla_chunked(a, nullptr); }, "out is null"));
  EXPECT_TRUE(iptest::throws_ip_error([&] { cuda::gla_append(a, nullptr); }, "queries"));
  a = valid();
  a.workspace = buf;
  a.workspace_bytes = cuda::gla_chunked_workspace_bytes(a.n, a.dk, a.dv, a.chunk) - 1;
  EXPECT_TRUE(iptest::throws_ip_error([&] { cuda::gla_chunked(a, nullptr); }, "workspace_bytes"));
  EXPECT_TRUE(iptest::throws_ip_error([&] { cuda::gla_chunked_workspace_bytes(5, 4, 4, 0); }, "chunk = 0"));
  cuda::GlaReadoutArgs r;
  r.state = r.queries = r.out = buf;
  r.dk = 4;
  r.dv = 1;
  r.heads = 1;
  r.normalise = true;
  EXPECT_TRUE(iptest::throws_ip_error([&] { cuda::gla_readout(r, nullptr); }, "dv = 1"));
  r.dv = 4;
  r.feature_scale = -1.0f;
  EXPECT_TRUE(iptest::throws_ip_error([&] { cuda::gla_readout(r, nullptr); }, "feature_scale"));
  cuda::LocalInputArgs li;
  li.n = 1;
  li.dk = li.dv = 4;
  li.gates.decay = 1.5f;
  EXPECT_TRUE(iptest::throws_ip_error([&] { cuda::local_inputs(li, nullptr); }, "decay"));
  li.gates.decay = 0.9f;
  li.dv = 1 << 16;  // dk may be 2^16, dv not: the values get a ones column
  EXPECT_TRUE(iptest::throws_ip_error([&] { cuda::local_inputs(li, nullptr); }, "dv = 65536"));
}

// No tokens: nothing to do, and the token arrays may be null (no CUDA call is made).
TEST(GlaArgs, ZeroTokensNeedNoInputs) {
  static float state[16];
  cuda::GlaArgs a;
  a.state = state;
  a.dk = a.dv = 4;
  a.chunk = 2;
  EXPECT_NO_THROW(cuda::gla_chunked(a, nullptr));
  EXPECT_NO_THROW(cuda::gla_append(a, nullptr));
}

TEST(Gla, ChunkedKernelMatchesNaiveOnOddSizes) {
  IP_REQUIRE_GPU();
  struct Case {
    Index64 n;
    int dk, dv, chunk;
    float spread;
  };
  const Case cases[] = {{1, 16, 16, 1, 0.0f},       {1, 128, 129, 64, 0.8f},    {7, 64, 33, 7, 0.8f},
                        {7, 16, 16, 48, 0.0f},      {64, 64, 64, 64, 0.8f},     {64, 128, 128, 48, 0.0f},
                        {1000, 16, 64, 48, 0.8f},   {1000, 128, 128, 64, 0.0f}, {1000, 64, 129, 7, 0.8f},
                        {1000, 128, 16, 1, 0.8f},   {65537, 64, 64, 64, 0.8f},  {65537, 128, 128, 48, 0.0f},
                        {65537, 16, 129, 64, 0.8f}};
  for (const Case& c : cases) {
    const std::string what = "n " + std::to_string(c.n) + " dk " + std::to_string(c.dk) + " dv " + std::to_string(c.dv) +
                             " chunk " + std::to_string(c.chunk) + " spread " + std::to_string(c.spread);
    SCOPED_TRACE(what);
    const Inputs in = make_inputs(c.n, c.dk, c.dv, c.spread, 23);
    std::vector<float> ref_s = in.s0, ref_o(c.n * c.dv);
    gla_naive(view(in.k, c.n, c.dk), view(in.v, c.n, c.dv), view(in.a, c.n, c.dk), view(in.q, c.n, c.dk), ref_s.data(),
              ref_o.data());
    const auto [s, o] = run_chunked(in, c.n, c.dk, c.dv, c.chunk, true);
    expect_close(o, ref_o, what + " outputs");
    expect_close(s, ref_s, what + " state");
    // State only (the local branch's prefill) leaves the same state bits.
    const auto [s2, o2] = run_chunked(in, c.n, c.dk, c.dv, c.chunk, false);
    ASSERT_EQ(0, std::memcmp(s2.data(), s.data(), s.size() * sizeof(float))) << "state-only run differs";
    // The chunk-parallel form: the same bits, with outputs and state only.
    const auto [s3, o3] = run_chunked(in, c.n, c.dk, c.dv, c.chunk, true, /*parallel=*/true);
    ASSERT_EQ(0, std::memcmp(s3.data(), s.data(), s.size() * sizeof(float))) << "chunk-parallel state differs";
    ASSERT_EQ(0, std::memcmp(o3.data(), o.data(), o.size() * sizeof(float))) << "chunk-parallel outputs differ";
    const auto [s4, o4] = run_chunked(in, c.n, c.dk, c.dv, c.chunk, false, /*parallel=*/true);
    ASSERT_EQ(0, std::memcmp(s4.data(), s.data(), s.size() * sizeof(float))) << "chunk-parallel state-only differs";
  }
}

TEST(Gla, PrefillThenAppendEqualsPrefillOfTheWhole) {
  IP_REQUIRE_GPU();
  const Index64 n = 1000;
  const int dk = 128, dv = 129, chunk = 64;
  const Inputs in = make_inputs(n, dk, dv, 0.5f, 5);
  std::vector<float> zero(in.s0.size(), 0.0f), naive = zero;
  gla_naive(view(in.k, n, dk), view(in.v, n, dv), view(in.a, n, dk), {}, naive.data(), nullptr);
  Inputs whole_in = in;
  whole_in.s0 = zero;
  const auto whole = run_chunked(whole_in, n, dk, dv, chunk, false).first;
  expect_close(whole, naive, "whole");
  for (Index64 split : {Index64{1}, Index64{500}, n - 3, n - 1}) {
    SCOPED_TRACE("split " + std::to_string(split));
    Inputs head = whole_in;
    const auto prefix = run_chunked(head, split, dk, dv, chunk, false).first;
    auto k = test::to_device(in.k), v = test::to_device(in.v), a = test::to_device(in.a);
    auto s = test::to_device(prefix);
    cuda::GlaArgs g;
    g.keys = k.data() + split * dk;
    g.values = v.data() + split * dv;
    g.gates = a.data() + split * dk;
    g.state = s.data();
    g.n = n - split;
    g.dk = dk;
    g.dv = dv;
    cuda::gla_append(g, nullptr);
    const auto grown = s.to_host();
    expect_close(grown, naive, "prefill + append vs naive");
    expect_close(grown, whole, "prefill + append vs whole");
  }
}

TEST(Gla, SameInputsSameBits) {
  IP_REQUIRE_GPU();
  for (Index64 n : {Index64{1000}, Index64{65537}}) {
    const Inputs in = make_inputs(n, 128, 129, 0.8f, 9);
    for (bool parallel : {false, true}) {
      const auto r1 = run_chunked(in, n, 128, 129, 48, true, parallel),
                 r2 = run_chunked(in, n, 128, 129, 48, true, parallel);
      EXPECT_EQ(0, std::memcmp(r1.first.data(), r2.first.data(), r1.first.size() * sizeof(float))) << n << parallel;
      EXPECT_EQ(0, std::memcmp(r1.second.data(), r2.second.data(), r1.second.size() * sizeof(float))) << n << parallel;
    }
  }
}

TEST(Gla, ReadoutMatchesCpu) {
  IP_REQUIRE_GPU();
  for (int dk : {16, 64, 128})
    for (int dv : {16, 65, 129})
      for (int heads : {1, 4, 7}) {
        SCOPED_TRACE(std::to_string(dk) + " " + std::to_string(dv) + " " + std::to_string(heads));
        const Inputs in = make_inputs(heads, dk, dv, 0.0f, 4);
        std::vector<float> ref(static_cast<std::size_t>(heads) * dv);
        gla_readout(in.s0.data(), dk, dv, view(in.q, heads, dk), ref.data());
        auto s = test::to_device(in.s0), q = test::to_device(in.q);
        auto o = test::poisoned<float>(ref.size());
        cuda::GlaReadoutArgs r;
        r.state = s.data();
        r.queries = q.data();
        r.out = o.data();
        r.dk = dk;
        r.dv = dv;
        r.heads = heads;
        cuda::gla_readout(r, nullptr);
        expect_close(o.to_host(), ref, "read-out");
      }
}

WorkloadSpec hybrid_spec(Index64 tokens, int append_per_step) {
  WorkloadSpec s;
  s.tokens = tokens;
  s.dim = 64;
  s.index_heads = 4;
  s.attn_dim = 128;
  s.attn_heads = 4;
  s.value_dim = 128;
  s.steps = 4;
  s.append_per_step = append_per_step;
  s.gate_decay = 0.9;
  s.gate_spread = 0.7;
  s.seed = 7;
  return s;
}

TEST(Gla, BackendLocalBranchMatchesCpu) {
  IP_REQUIRE_GPU();
  const Workload w = generate_request(hybrid_spec(3001, 3), 0);
  auto cpu = make_cpu_backend(), gpu = cuda::make_cuda_backend();
  for (Index64 begin : {Index64{0}, Index64{2489}, Index64{3000}})
    for (int chunk : {1, 48, 64, 1000}) {
      SCOPED_TRACE("begin " + std::to_string(begin) + " chunk " + std::to_string(chunk));
      LocalBranch lc, lg;
      cpu->local_prefill(w, begin, 3001, chunk, lc);
      gpu->local_prefill(w, begin, 3001, chunk, lg);
      ASSERT_EQ(lg.begin, lc.begin);
      ASSERT_EQ(lg.end, lc.end);
      ASSERT_EQ(lg.dk, lc.dk);
      ASSERT_EQ(lg.dv, lc.dv);
      expect_close(lg.state, lc.state, "prefill state");
      for (Index64 end : {Index64{3002}, Index64{3005}, Index64{3013}}) {
        cpu->local_append(w, end, lc);
        gpu->local_append(w, end, lg);
        ASSERT_EQ(lg.end, lc.end);
        expect_close(lg.state, lc.state, "appended state");
        const auto q = w.attn_queries.slice(0);
        std::vector<float> oc(q.rows * (lc.dv - 1)), og(oc.size());
        std::memset(og.data(), 0xFF, og.size() * sizeof(float));
        cpu->local_readout(lc, q, oc.data());
        gpu->local_readout(lg, q, og.data());
        expect_close(og, oc, "read-out");
        // The GPU read-out of the CPU's state: the same numbers (the state is host-visible).
        gpu->local_readout(lc, q, og.data());
        expect_close(og, oc, "read-out of the CPU state");
      }
    }
}

// One backend, two local branches of different windows appended in turn: each append continues its own
// state (lb.state, host-visible), not the device copy the other branch's call left behind.
TEST(Gla, BackendAppendsTwoBranchesInTurn) {
  IP_REQUIRE_GPU();
  const Workload w = generate_request(hybrid_spec(3001, 3), 0);
  auto cpu = make_cpu_backend(), gpu = cuda::make_cuda_backend();
  LocalBranch ca, cb, ga, gb;
  cpu->local_prefill(w, 0, 2000, 64, ca);
  gpu->local_prefill(w, 0, 2000, 64, ga);
  cpu->local_prefill(w, 2500, 3001, 64, cb);
  gpu->local_prefill(w, 2500, 3001, 64, gb);
  for (Index64 end : {Index64{2003}, Index64{2010}}) {
    cpu->local_append(w, end, ca);
    gpu->local_append(w, end, ga);
    expect_close(ga.state, ca.state, "branch a");
    cpu->local_append(w, end + 1001, cb);
    gpu->local_append(w, end + 1001, gb);
    expect_close(gb.state, cb.state, "branch b");
  }
}

TEST(Gla, HybridRunRequestMatchesCpu) {
  IP_REQUIRE_GPU();
  auto cpu = make_cpu_backend(), gpu = cuda::make_cuda_backend();
  for (int append : {0, 3}) {
    const Workload w = generate_request(hybrid_spec(3001, append), 0);
    PipelineParams p;
    p.pool.group_size = 4;
    p.topk_tokens = 256;
    p.append_per_step = append;
    p.hybrid.enabled = true;
    p.hybrid.window = 700;
    p.hybrid.chunk = 64;
    // gate:1: the layer output is the local branch alone, so its error against dense attention does
    // not depend on the sparse selection (which has its own test): a strict check of the local branch.
    p.hybrid.combine = parse_combine("gate:1");
    const RequestResult rc = run_request(*cpu, w, p), rg = run_request(*gpu, w, p);
    ASSERT_EQ(rc.steps.size(), rg.steps.size());
    for (std::size_t q = 0; q < rc.steps.size(); ++q) {
      const double ref = rc.steps[q].layer_output_error, got = rg.steps[q].layer_output_error;
      ASSERT_FALSE(std::isnan(ref)) << "step " << q;
      EXPECT_NEAR(got, ref, 1e-4 + 1e-3 * std::fabs(ref)) << "append " << append << " step " << q;
    }
    // gate:0.5: where both backends select the same groups, the same layer error.
    p.hybrid.combine = parse_combine("gate:0.5");
    const RequestResult hc = run_request(*cpu, w, p), hg = run_request(*gpu, w, p);
    ASSERT_EQ(hc.steps.size(), hg.steps.size());
    if (hc.selected == hg.selected) {
      for (std::size_t q = 0; q < hc.steps.size(); ++q) {
        EXPECT_NEAR(hg.steps[q].layer_output_error, hc.steps[q].layer_output_error,
                    1e-4 + 1e-3 * std::fabs(hc.steps[q].layer_output_error))
            << "append " << append << " step " << q;
      }
    }
  }
}

}  // namespace
}  // namespace ip
