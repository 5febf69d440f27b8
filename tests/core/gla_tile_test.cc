// Host replay of the CUDA gated-linear-attention kernels' decomposition (kernels/linear_attention.cuh):
// the same value tiles (kGlaTile columns), the same shared-memory staging (row strides gla_ldk and
// kGlaTile, unused slots poisoned with NaN), the same chunk walk and the same per-element functions of
// core/gla_tile.h, with the elements of each phase run in reverse order (the kernel's threads run them
// in any order). Checked against gla_naive (the recurrence) with the tolerance of the chunked form, and
// against gla_chunked (same per-element sums; differences only from the compiler's fma contraction).
// The kernel cannot run on this machine; this is how its algorithm is checked here.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "core/gla_tile.h"
#include "core/linear_attention.h"
#include "core/rng.h"
#include "kernels/linear_attention_tuning.h"
#include "tests/core/test_helpers.h"

namespace {

using ip::Index64;
using iptest::view;
using ip::cuda::kGlaTile;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// One block of gla_chunked_kernel per tile, replayed on the host.
void replay_chunked(const std::vector<float>& k, const std::vector<float>& v, const std::vector<float>& a,
                    const std::vector<float>* q, Index64 n, int dk, int dv, int C, float* state, float* out) {
  const int ldk = ip::cuda::gla_ldk(dk);
  const bool outputs = q != nullptr;
  ASSERT_EQ(ip::cuda::gla_smem_floats(dk, C, outputs),
            2LL * C * ldk + 1LL * dk * kGlaTile + 1LL * C * kGlaTile + (outputs ? 1LL * C * ldk + 1LL * C * C : 0));
  const int tiles = (dv + kGlaTile - 1) / kGlaTile;
  for (int tile = 0; tile < tiles; ++tile) {
    const int j0 = tile * kGlaTile, tv = ip::gla_tile_cols(dv, kGlaTile, tile);
    ASSERT_GE(tv, 1);
    ASSERT_LE(j0 + tv, dv);
    std::vector<float> smem(static_cast<std::size_t>(ip::cuda::gla_smem_floats(dk, C, outputs)), kNaN);
    float* sk = smem.data();
    float* slc = sk + C * ldk;
    float* sS = slc + C * ldk;
    float* sv = sS + dk * kGlaTile;
    float* sq = outputs ? sv + C * kGlaTile : nullptr;
    float* sA = outputs ? sq + C * ldk : nullptr;
    for (int p = 0; p < dk * tv; ++p) sS[(p / tv) * kGlaTile + p % tv] = state[Index64{p / tv} * dv + j0 + p % tv];
    const long long chunks = ip::gla_num_chunks(n, C);
    for (long long c = 0; c < chunks; ++c) {
      const int L = ip::gla_chunk_len(n, C, c);
      const long long t0 = c * C;
      ASSERT_GE(L, 1);
      ASSERT_LE(t0 + L, n);
      for (int p = 0; p < L * dk; ++p) {
        const int i = p / dk, d = p % dk;
        const long long g = t0 * dk + p;
        sk[i * ldk + d] = k[g];
        slc[i * ldk + d] = a[g];
        if (outputs) sq[i * ldk + d] = (*q)[g];
      }
      for (int p = 0; p < L * tv; ++p) sv[(p / tv) * kGlaTile + p % tv] = v[(t0 + p / tv) * dv + j0 + p % tv];
      ip::GlaTile t{L, dk, ldk, tv, kGlaTile, sk, sq, slc, sA, sv, sS};  // fields in declaration order
      for (int d = dk - 1; d >= 0; --d) ip::gla_logcum_dim(t, d);
      if (outputs)
        for (int p = L * L - 1; p >= 0; --p) ip::gla_score_elem(t, p / L, p % L);
      for (int p = L * dk - 1; p >= 0; --p) ip::gla_prepare_elem(t, p / dk, p % dk);
      if (outputs)
        for (int p = L * tv - 1; p >= 0; --p) out[(t0 + p / tv) * dv + j0 + p % tv] = ip::gla_output_elem(t, p / tv, p % tv);
      for (int p = dk * tv - 1; p >= 0; --p) ip::gla_state_elem(t, p / tv, p % tv);
    }
    for (int p = 0; p < dk * tv; ++p) state[Index64{p / tv} * dv + j0 + p % tv] = sS[(p / tv) * kGlaTile + p % tv];
  }
}

// gla_append_kernel replayed: one "thread" per state element.
void replay_append(const std::vector<float>& k, const std::vector<float>& v, const std::vector<float>& a, Index64 first,
                   Index64 n, int dk, int dv, float* state) {
  for (long long e = 0; e < Index64{dk} * dv; ++e) {
    const int d = static_cast<int>(e / dv), j = static_cast<int>(e % dv);
    state[e] = ip::gla_recurrence_elem(state[e], n, k.data() + first * dk + d, a.data() + first * dk + d, dk,
                                       v.data() + first * dv + j, dv);
  }
}

struct Case {
  std::vector<float> k, v, q, a, s0;
};
Case make_case(Index64 n, int dk, int dv, float spread, std::uint64_t seed) {
  Case c{std::vector<float>(n * dk), std::vector<float>(n * dv), std::vector<float>(n * dk), std::vector<float>(n * dk),
         std::vector<float>(Index64{dk} * dv)};
  ip::Rng rng(ip::hash_key(seed, n, dk * 1000 + dv));
  for (auto* x : {&c.k, &c.v, &c.q, &c.s0})
    for (float& f : *x) f = static_cast<float>(rng.normal());
  for (float& f : c.k) f = ip::feature_map(f * 0.3f);  // positive keys, as the local branch feeds
  ip::fill_gates(ip::GateParams{0.9f, spread, seed}, 0, n, dk, c.a.data());
  return c;
}

float max_abs(const std::vector<float>& x) {
  float m = 0;
  for (float f : x) m = std::max(m, std::fabs(f));
  return m;
}

// Tolerance against the naive recurrence: that of the chunked form (tests/core/linear_attention_test.cc).
constexpr float kAtol = 1e-5f, kRtol = 1e-4f;
// Against gla_chunked (same sums in the same order): only fma contraction may differ.
constexpr float kTightAtol = 1e-6f, kTightRtol = 1e-5f;

TEST(GlaTile, ChunkAndTileArithmetic) {
  for (Index64 n : {1, 7, 64, 65, 1000, 65537})
    for (int C : {1, 7, 48, 64}) {
      Index64 total = 0;
      for (long long c = 0; c < ip::gla_num_chunks(n, C); ++c) {
        const int L = ip::gla_chunk_len(n, C, c);
        ASSERT_TRUE(L >= 1 && L <= C) << n << " " << C;
        total += L;
      }
      EXPECT_EQ(total, n);
    }
  for (int dv : {1, 16, 32, 33, 129}) {
    int total = 0;
    for (int t = 0; t < (dv + kGlaTile - 1) / kGlaTile; ++t) total += ip::gla_tile_cols(dv, kGlaTile, t);
    EXPECT_EQ(total, dv);
  }
  EXPECT_EQ(ip::cuda::gla_ldk(128), 129);
  EXPECT_EQ(ip::cuda::gla_ldk(17), 17);
}

TEST(GlaTile, ReplayEqualsNaiveAndChunked) {
  struct Dims {
    Index64 n;
    int dk, dv;
  };
  float worst_naive = 0, worst_chunked = 0;
  for (const Dims& s : {Dims{1, 16, 16}, Dims{7, 64, 33}, Dims{64, 16, 129}, Dims{1000, 128, 64}, Dims{1000, 64, 16},
                        Dims{211, 128, 129}})
    for (float spread : {0.0f, 0.8f})
      for (int C : {1, 7, 48, 64}) {
        SCOPED_TRACE(testing::Message() << "n " << s.n << " dk " << s.dk << " dv " << s.dv << " spread " << spread
                                        << " chunk " << C);
        const Case c = make_case(s.n, s.dk, s.dv, spread, 17);
        std::vector<float> ref_s = c.s0, ref_o(s.n * s.dv);
        ip::gla_naive(view(c.k, s.n, s.dk), view(c.v, s.n, s.dv), view(c.a, s.n, s.dk), view(c.q, s.n, s.dk),
                      ref_s.data(), ref_o.data());
        std::vector<float> ch_s = c.s0, ch_o(s.n * s.dv);
        ip::gla_chunked(view(c.k, s.n, s.dk), view(c.v, s.n, s.dv), view(c.a, s.n, s.dk), view(c.q, s.n, s.dk), C,
                        ch_s.data(), ch_o.data());
        std::vector<float> rs = c.s0, ro(s.n * s.dv, kNaN);
        replay_chunked(c.k, c.v, c.a, &c.q, s.n, s.dk, s.dv, C, rs.data(), ro.data());
        const float os = std::max(1.0f, max_abs(ref_o)), ss = std::max(1.0f, max_abs(ref_s));
        for (Index64 i = 0; i < s.n * s.dv; ++i) {
          ASSERT_FALSE(std::isnan(ro[i])) << "output " << i << " never written";
          ASSERT_NEAR(ro[i], ref_o[i], kAtol * os + kRtol * std::fabs(ref_o[i])) << "output " << i;
          ASSERT_NEAR(ro[i], ch_o[i], kTightAtol * os + kTightRtol * std::fabs(ch_o[i])) << "output " << i;
          worst_naive = std::max(worst_naive, std::fabs(ro[i] - ref_o[i]) / os);
          worst_chunked = std::max(worst_chunked, std::fabs(ro[i] - ch_o[i]) / os);
        }
        for (std::size_t i = 0; i < rs.size(); ++i) {
          ASSERT_NEAR(rs[i], ref_s[i], kAtol * ss + kRtol * std::fabs(ref_s[i])) << "state " << i;
          ASSERT_NEAR(rs[i], ch_s[i], kTightAtol * ss + kTightRtol * std::fabs(ch_s[i])) << "state " << i;
        }
        // State only (the local branch's prefill): the same state without queries.
        std::vector<float> s2 = c.s0;
        replay_chunked(c.k, c.v, c.a, nullptr, s.n, s.dk, s.dv, C, s2.data(), nullptr);
        for (std::size_t i = 0; i < s2.size(); ++i) ASSERT_EQ(s2[i], rs[i]) << "state-only " << i;
      }
  RecordProperty("worst_vs_naive_of_max", std::to_string(worst_naive));
  RecordProperty("worst_vs_chunked_of_max", std::to_string(worst_chunked));
  std::printf("replay vs naive: %.3g of max |o|; vs gla_chunked: %.3g of max |o|\n", worst_naive, worst_chunked);
}

TEST(GlaTile, PrefillThenAppendEqualsWholeAndNaive) {
  for (Index64 n : {2, 64, 1000})
    for (Index64 split : {Index64{1}, n / 2, n - 1}) {
      const int dk = 64, dv = 33, C = 48;
      const Case c = make_case(n, dk, dv, 0.5f, 3);
      std::vector<float> whole(c.s0.size(), 0.0f), grown(c.s0.size(), 0.0f), naive(c.s0.size(), 0.0f);
      replay_chunked(c.k, c.v, c.a, nullptr, n, dk, dv, C, whole.data(), nullptr);
      // The prefix: the first `split` tokens (contiguous arrays, so the views are prefixes).
      replay_chunked(c.k, c.v, c.a, nullptr, split, dk, dv, C, grown.data(), nullptr);
      replay_append(c.k, c.v, c.a, split, n - split, dk, dv, grown.data());
      ip::gla_naive(view(c.k, n, dk), view(c.v, n, dv), view(c.a, n, dk), {}, naive.data(), nullptr);
      const float sc = std::max(1.0f, max_abs(naive));
      for (std::size_t i = 0; i < whole.size(); ++i) {
        ASSERT_NEAR(grown[i], whole[i], 2 * kAtol * sc + 2 * kRtol * std::fabs(whole[i])) << n << " " << split << " " << i;
        ASSERT_NEAR(grown[i], naive[i], kAtol * sc + kRtol * std::fabs(naive[i])) << n << " " << split << " " << i;
      }
    }
}

TEST(GlaTile, AppendReplayIsTheRecurrence) {
  const Index64 n = 5;
  const int dk = 16, dv = 9;
  const Case c = make_case(n, dk, dv, 1.0f, 8);
  std::vector<float> ref = c.s0, got = c.s0;
  ip::gla_naive(view(c.k, n, dk), view(c.v, n, dv), view(c.a, n, dk), {}, ref.data(), nullptr);
  replay_append(c.k, c.v, c.a, 0, n, dk, dv, got.data());
  for (std::size_t i = 0; i < ref.size(); ++i) ASSERT_NEAR(got[i], ref[i], 1e-6f * (1.0f + std::fabs(ref[i]))) << i;
}

}  // namespace
