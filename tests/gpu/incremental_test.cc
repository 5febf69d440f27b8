// Incremental index updates on the GPU (kernels/cuda_update.h, the pooling kernels' update mode)
// against the CPU (core/incremental.cc) and against the GPU's own full builds.
//
// What must be equal, and what within a tolerance:
//   * GPU update vs GPU: bitwise, every scheme. tau = 0 gives GPU build_index's bytes; any tau gives,
//     group by group, the full re-pool's rows (an update with tau = -1 of a copy) where the group moved
//     (decided on the host with core/incremental_math.h from the GPU's own weights: the kernel's rule
//     on the same inputs) and the previous rows elsewhere; the same RepoolCount and stored weights.
//   * GPU update vs CPU update: the same RepoolCount (the cases move a group's weights either not at
//     all or by far more than the weights' rounding differences); bitwise rows for maxmin and exact;
//     otherwise decoded rows within a tolerance (weights from expf/logf/powf and cosine dot products
//     differ in the last bits: kernels/pool.cuh).
//   * asynchronous begin/end gives the synchronous update's bytes even when the statistics change
//     on the main stream while it runs; run_ms > 0 and 0 <= hidden_ms <= run_ms.
// Host C++ (no device code): it calls the backend.
#include <gtest/gtest.h>
#include <gtest/gtest-spi.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/backend.h"
#include "core/incremental.h"
#include "core/pipeline.h"
#include "core/workload.h"
#include "kernels/cuda_backend.h"
#include "kernels/pool.h"
#include "tests/gpu/gpu_test.h"
#include "tests/gpu/incremental_ref.h"

namespace ip {
namespace {

using test::Case;
using test::Expected;
using test::close_to_cpu;
using test::expect_gpu;
using test::grow_stats;
using test::move_some_groups;
using test::params_of;
using test::random_keys;
using test::random_stats;
using test::same_index;

using BackendFactory = std::unique_ptr<Backend> (*)();
std::unique_ptr<Backend> make_gpu() { return cuda::make_cuda_backend(); }

// One case: build, move the statistics, update with several tau; then grow the context with partial
// last groups. Each update: GPU vs its exact expectation, vs the CPU, and (tau = 0) vs GPU build_index.

void check_case(const Case& c, Index64 T0, bool hold, BackendFactory make = make_gpu) {
  SCOPED_TRACE(c.name() + fmt::format(" T0={} hold={}", T0, hold));
  const PoolParams p = params_of(c);
  const Index64 Tmax = T0 + 2 * c.G + 3;
  const auto kv = random_keys(Tmax, c.D, static_cast<unsigned>(T0 + c.D));
  float key_max = 0.0f;
  for (float v : kv) key_max = std::max(key_max, std::fabs(v));
  const MatrixView<const float> all(kv.data(), Tmax, c.D);
  std::vector<float> query = random_keys(1, c.D, 99);
  const float* q = c.query ? query.data() : nullptr;
  AccessStats stats = random_stats(T0, 5);
  // `gpu` runs the updates (held or not); `ref` computes the expectations, never held (its states are
  // temporaries, whose freed addresses a hold would be entitled to treat as the same data).
  auto gpu = make(), ref = make();
  if (hold) gpu->hold_inputs(true);
  IndexState gs, cs;
  Index64 T = T0;
  int round = 0;
  auto step = [&](float tau) {
    SCOPED_TRACE(fmt::format("round {} T={} tau={}", round, T, tau));
    const MatrixView<const float> keys = all.rows_range(0, T);
    const AccessStats* s = uses_stats(c.scheme) ? &stats : nullptr;
    const Expected e = expect_gpu(*ref, keys, p, s, q, tau, gs);
    const RepoolCount rg = gpu->update_index(keys, p, s, q, tau, gs);
    const RepoolCount rc = update_index(keys, p, s, q, tau, cs);
    EXPECT_EQ(rg.repooled, e.count.repooled);
    EXPECT_EQ(rg.groups, e.count.groups);
    EXPECT_TRUE(same_index(gs.index, e.st.index)) << "gpu update vs its expectation";
    EXPECT_TRUE(gs.weights == e.st.weights) << "stored weights vs the expectation";
    EXPECT_EQ(rg.groups, rc.groups);
    // Hybrid weights carry cosine factors whose last bits differ (kernels/pool.cuh): a moved group's
    // movement could fall on either side of tau > 0. Elsewhere the decisions are the same.
    if (!(c.scheme == Weighting::hybrid && tau > 0.0f)) {
      EXPECT_EQ(rg.repooled, rc.repooled) << "gpu vs cpu re-pooled groups";
      EXPECT_TRUE(close_to_cpu(c, gs.index, cs.index, key_max)) << "gpu vs cpu rows";
    }
    if (tau == 0.0f) {
      PooledIndex full;
      ref->build_index(keys, p, s, q, full);
      EXPECT_TRUE(same_index(gs.index, full)) << "tau = 0 vs gpu build_index";
    }
    ++round;
  };
  step(0.05f);  // first update: everything fresh
  for (float tau : {0.0f, 0.05f, -1.0f}) {
    move_some_groups(stats, p.group_size, static_cast<unsigned>(round));
    // N unchanged: groups not moved keep their weights exactly. The statistics changed outside the
    // backend: a new hold drops the resident copies (and the update slots: the next update uploads).
    if (hold) gpu->hold_inputs(true);
    step(tau);
    step(tau);  // nothing moved since: only tau < 0 re-pools
  }
  for (Index64 add : {Index64{1}, Index64{c.G + 1}, Index64{c.G + 1}}) {  // partial last groups
    T = std::min(Tmax, T + add);
    grow_stats(stats, T, static_cast<unsigned>(T));  // more tokens: the backend uploads them again
    step(0.0f);
    step(0.05f);
  }
  if (hold) gpu->hold_inputs(false);
}

// The update-mode arguments are validated on the host before any CUDA call (runs without a GPU).
TEST(IncrementalGpu, UpdateModeArgumentsAreChecked) {
  alignas(16) static float floats[64];
  alignas(16) static long long offsets[5] = {0, 10, 0, 3, 0};
  alignas(16) static unsigned long long counter[1];
  cuda::PoolArgs a;
  a.batch = {1, offsets, offsets + 2, 10, 3};  // 10 tokens, G = 4: 3 entries
  a.keys = floats;
  a.dim = 8;
  a.group_size = 4;
  a.payload = floats;
  a.prev_weights = floats;
  a.fresh_from = offsets + 4;
  a.repooled = counter;
  EXPECT_NO_THROW(cuda::validate_pool_args(a));
  for (int which = 0; which < 3; ++which) {
    cuda::PoolArgs b = a;
    if (which == 0) b.fresh_from = nullptr;
    if (which == 1) b.repooled = nullptr;
    if (which == 2) b.prev_weights = reinterpret_cast<float*>(reinterpret_cast<char*>(floats) + 2);
    try {
      cuda::validate_pool_args(b);
      ADD_FAILURE() << "case " << which << " passed validation";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("update mode"), std::string::npos) << e.what();
    }
  }
}

// ---- the check itself, on the CPU backend (runs without a GPU) -------------------------------------
std::unique_ptr<Backend> make_cpu() { return make_cpu_backend(2); }

// A backend whose update_index ignores tau (re-pools every group): the check must reject it.
class IgnoresTau final : public Backend {
 public:
  std::string name() const override { return "ignores-tau"; }
  std::string device() const override { return "cpu"; }
  void build_index(MatrixView<const float> k, const PoolParams& p, const AccessStats* s, const float* q,
                   PooledIndex& out) override {
    in_->build_index(k, p, s, q, out);
  }
  void score_index(const PooledIndex& i, const IndexQuery& q, float* out) override { in_->score_index(i, q, out); }
  void score_tokens(MatrixView<const float> k, const IndexQuery& q, float* out) override { in_->score_tokens(k, q, out); }
  std::vector<std::int32_t> topk(const float* s, Index64 n, Index64 k) override { return in_->topk(s, n, k); }
  AttentionOutput attention(MatrixView<const float> k, MatrixView<const float> v, MatrixView<const float> q,
                            std::span<const Index64> t, bool probs) override {
    return in_->attention(k, v, q, t, probs);
  }
  void update_stats(AccessStats& s, std::span<const float> m, std::span<const std::pair<Index64, Index64>> r) override {
    in_->update_stats(s, m, r);
  }
  RepoolCount update_index(MatrixView<const float> k, const PoolParams& p, const AccessStats* s, const float* q, float,
                           IndexState& st) override {
    return in_->update_index(k, p, s, q, -1.0f, st);
  }

 private:
  std::unique_ptr<Backend> in_ = make_cpu_backend(2);
};
std::unique_ptr<Backend> make_ignores_tau() { return std::make_unique<IgnoresTau>(); }

TEST(IncrementalCheck, PassesOnTheCpuBackend) {
  for (const Case& c : {Case{Weighting::tfidf, 4, 128, Precision::int8}, Case{Weighting::hybrid, 3, 96, Precision::fp8, true},
                        Case{Weighting::maxmin, 5, 64, Precision::fp32}, Case{Weighting::exact, 1, 64, Precision::fp8}})
    for (Index64 T0 : {Index64{1}, Index64{19}, Index64{989}}) check_case(c, T0, false, make_cpu);
}

TEST(IncrementalCheck, RejectsAnUpdateThatIgnoresTau) {
  ::testing::TestPartResultArray failures;
  {
    const ::testing::ScopedFakeTestPartResultReporter capture(
        ::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD, &failures);
    check_case({Weighting::tfidf, 4, 64, Precision::fp32}, 111, false, make_ignores_tau);
  }
  int repooled = 0;
  for (int i = 0; i < failures.size(); ++i)
    repooled += std::string(failures.GetTestPartResult(i).message()).find("repooled") != std::string::npos;
  EXPECT_GT(repooled, 0) << "a backend that ignores tau passed the check (" << failures.size() << " failures)";
}

TEST(IncrementalGpu, EqualsCpuAndFullBuilds) {
  IP_REQUIRE_GPU();
  const Case cases[] = {
      {Weighting::tfidf, 4, 128, Precision::fp32},   {Weighting::tfidf, 4, 128, Precision::int8},
      {Weighting::tfidf, 16, 64, Precision::fp8},    {Weighting::tfidf, 3, 96, Precision::fp32},
      {Weighting::hybrid, 8, 128, Precision::fp8, true}, {Weighting::hybrid, 4, 96, Precision::int8},
      {Weighting::uniform, 4, 64, Precision::fp32},  {Weighting::positional, 2, 256, Precision::bf16},
      {Weighting::cosine, 4, 128, Precision::int8},  {Weighting::maxmin, 4, 128, Precision::fp8},
      {Weighting::maxmin, 5, 64, Precision::int8},   {Weighting::exact, 1, 64, Precision::fp32},
      {Weighting::exact, 1, 128, Precision::int8},   {Weighting::tfidf, 2, 64, Precision::fp16},
  };
  for (const Case& c : cases)
    for (Index64 T0 : {Index64{1}, Index64{19}, Index64{111}, Index64{989}})
      for (bool hold : {false, true}) check_case(c, T0, hold);
}

// An update of a state it cannot extend re-pools everything, as the CPU does (core/incremental.cc):
// a state of another scheme, group size, precision or key width, of more tokens than the keys have
// now, or an index without its weights (build_index's). Each: the update of that state equals the
// update of an empty one, bit for bit, every group re-pooled; held and not (the slots differ then).
TEST(IncrementalGpu, AStateItCannotExtendIsRebuilt) {
  IP_REQUIRE_GPU();
  const Case base{Weighting::tfidf, 4, 64, Precision::fp32};
  const Index64 T = 203;
  const auto kv = random_keys(T, base.D, 17);
  const MatrixView<const float> keys(kv.data(), T, base.D);
  const AccessStats stats = random_stats(T, 6);
  struct Change {
    const char* what;
    Case c;
    Index64 tokens = T;
    int cols = 64;
    bool from_build = false;
    bool no_steps = false;  // the state from statistics of no steps: tfidf weights all 1, as uniform's
  };
  const Change changes[] = {
      {"scheme", {Weighting::maxmin, 4, 64, Precision::fp32}},
      {"scheme, the same weights", {Weighting::uniform, 4, 64, Precision::fp32}, T, 64, false, true},
      {"group size", {Weighting::tfidf, 8, 64, Precision::fp32}},
      {"precision", {Weighting::tfidf, 4, 64, Precision::int8}},
      {"key width", {Weighting::tfidf, 4, 32, Precision::fp32}, T, 32},  // the first 32 columns
      {"fewer tokens", base, T - 6},
      {"index without weights", base, T, 64, true},
  };
  for (const Change& ch : changes)
    for (bool hold : {false, true}) {
      SCOPED_TRACE(fmt::format("{}, hold {}", ch.what, hold));
      const PoolParams p0 = params_of(base), p1 = params_of(ch.c);
      const MatrixView<const float> k1(kv.data(), ch.tokens, ch.cols, base.D);
      const AccessStats s1 = random_stats(ch.tokens, 6);  // the same values for the first tokens
      auto gpu = make_gpu(), ref = make_gpu();
      if (hold) gpu->hold_inputs(true);
      IndexState st, cs, fresh;
      AccessStats s0 = stats;
      if (ch.no_steps) s0.steps = 0;
      if (ch.from_build) {
        gpu->build_index(keys, p0, &s0, nullptr, st.index);
        cs.index = build_index(keys, p0, &s0, nullptr);
      } else {
        gpu->update_index(keys, p0, &s0, nullptr, 0.0f, st);
        update_index(keys, p0, &s0, nullptr, 0.0f, cs);
      }
      const RepoolCount rg = gpu->update_index(k1, p1, &s1, nullptr, 0.05f, st);
      const RepoolCount rc = update_index(k1, p1, &s1, nullptr, 0.05f, cs);
      ref->update_index(k1, p1, &s1, nullptr, 0.05f, fresh);
      EXPECT_TRUE(same_index(st.index, fresh.index)) << "vs the update of an empty state";
      EXPECT_TRUE(st.weights == fresh.weights);
      EXPECT_EQ(rg.groups, rc.groups);
      EXPECT_EQ(rg.repooled, rg.groups) << "groups re-pooled";
      EXPECT_EQ(rc.repooled, rc.groups) << "groups re-pooled on the CPU";
      if (hold) gpu->hold_inputs(false);
    }
}

// Outside a hold an update starts from the host state and keys as they are, even at the addresses its
// last update read and wrote, and so does the first update of a new hold (the design's rule: nothing is
// trusted across holds). Here the state's rows and the keys are changed in place between two updates:
// the second one keeps the changed rows and pools the changed keys (the partial last group), as the
// update of a copy of the changed state (another address) on another backend does. Within one hold,
// a state whose weights are another vector (swapped in: another address) is not the state updated
// before either.
TEST(IncrementalGpu, UnheldOrNewlyHeldUpdatesReadTheHostStateAndKeys) {
  IP_REQUIRE_GPU();
  for (bool rehold : {false, true})
    for (Precision prec : {Precision::fp32, Precision::int8}) {
      const Case c{Weighting::uniform, 4, 64, prec};
      SCOPED_TRACE(c.name() + (rehold ? " held, released, held again" : " not held"));
      const PoolParams p = params_of(c);
      const Index64 T0 = 101, T1 = 110;  // group 25 (tokens 100-103) is partial, then fresh again
      auto kv = random_keys(T1, c.D, 23);
      const MatrixView<const float> all(kv.data(), T1, c.D);
      auto gpu = make_gpu(), ref = make_gpu();
      if (rehold) gpu->hold_inputs(true);
      IndexState st;
      gpu->update_index(all.rows_range(0, T0), p, nullptr, nullptr, 0.0f, st);
      if (rehold) gpu->hold_inputs(false);
      for (std::size_t i = 0; i < st.index.rows.payload.size(); i += 3) st.index.rows.payload[i] ^= 0x5A;
      for (float& x : st.index.rows.scales) x *= 2.0f;
      for (float& x : kv) x = -x;
      if (rehold) gpu->hold_inputs(true);
      IndexState copy = st;
      const RepoolCount rc = ref->update_index(all, p, nullptr, nullptr, 0.05f, copy);
      const RepoolCount rg = gpu->update_index(all, p, nullptr, nullptr, 0.05f, st);
      if (rehold) gpu->hold_inputs(false);
      EXPECT_LT(rg.repooled, rg.groups);  // the first groups are kept
      EXPECT_EQ(rg.repooled, rc.repooled);
      EXPECT_TRUE(same_index(st.index, copy.index)) << "not the host's rows and keys";
    }
  const Case c{Weighting::tfidf, 4, 64, Precision::fp32};
  SCOPED_TRACE(c.name() + " weights swapped in under one hold");
  const PoolParams p = params_of(c);
  const auto kv = random_keys(101, c.D, 29);
  const MatrixView<const float> keys(kv.data(), 101, c.D);
  const AccessStats stats = random_stats(101, 8);
  auto gpu = make_gpu(), ref = make_gpu();
  const HeldInputs held(*gpu);
  IndexState st;
  gpu->update_index(keys, p, &stats, nullptr, 0.0f, st);
  std::vector<float> other(st.weights.size());
  for (std::size_t i = 0; i < other.size(); ++i) other[i] = 1.0f + static_cast<float>(i % 3);
  std::swap(st.weights, other);
  IndexState copy = st;
  const RepoolCount rc = ref->update_index(keys, p, &stats, nullptr, 0.05f, copy);
  const RepoolCount rg = gpu->update_index(keys, p, &stats, nullptr, 0.05f, st);
  EXPECT_GT(rc.repooled, 0);  // the swapped-in weights moved
  EXPECT_EQ(rg.repooled, rc.repooled);
  EXPECT_TRUE(same_index(st.index, copy.index));
  EXPECT_TRUE(st.weights == copy.weights);
}

// A non-finite key among the tokens an update adds is refused as the CPU refuses it: here the first one
// past what the state covers (token 101, in the partial group 25 that becomes whole).
TEST(IncrementalGpu, NonFiniteNewKeyRefusedLikeCpu) {
  IP_REQUIRE_GPU();
  const PoolParams p = params_of({Weighting::uniform, 4, 64, Precision::fp32});
  auto kv = random_keys(110, 64, 31);
  const MatrixView<const float> all(kv.data(), 110, 64);
  auto gpu = make_gpu();
  IndexState gs, cs;
  gpu->update_index(all.rows_range(0, 101), p, nullptr, nullptr, 0.0f, gs);
  update_index(all.rows_range(0, 101), p, nullptr, nullptr, 0.0f, cs);
  kv[101 * 64 + 3] = std::numeric_limits<float>::quiet_NaN();
  for (Backend* be : {gpu.get(), static_cast<Backend*>(nullptr)}) {
    SCOPED_TRACE(be ? "gpu" : "cpu");
    try {
      if (be) {
        be->update_index(all, p, nullptr, nullptr, 0.0f, gs);
      } else {
        update_index(all, p, nullptr, nullptr, 0.0f, cs);
      }
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("of token 101 contains NaN"), std::string::npos) << e.what();
    }
  }
}

TEST(IncrementalGpu, LargeContext) {
  IP_REQUIRE_GPU();
  check_case({Weighting::tfidf, 4, 128, Precision::int8}, 200003, true);
  check_case({Weighting::maxmin, 8, 128, Precision::fp8}, 100001, false);
}

// begin/end gives the synchronous update's bytes while the main stream scores and updates the very
// statistics the update reads; the times are consistent.
TEST(IncrementalGpu, AsynchronousEqualsSynchronous) {
  IP_REQUIRE_GPU();
  for (Precision prec : {Precision::fp32, Precision::int8, Precision::fp8}) {
    const Case c{Weighting::tfidf, 4, 128, prec};
    SCOPED_TRACE(c.name());
    const PoolParams p = params_of(c);
    const Index64 T = 50001;
    const auto kv = random_keys(T, c.D, 3);
    const MatrixView<const float> keys(kv.data(), T, c.D);
    AccessStats stats = random_stats(T, 4);
    auto gpu = cuda::make_cuda_backend();
    HeldInputs held(*gpu);
    IndexState front, back;
    gpu->update_index(keys, p, &stats, nullptr, 0.0f, front);
    back = front;
    gpu->update_index(keys, p, &stats, nullptr, 0.0f, back);  // back's slot now mirrors it
    std::vector<float> step_mass(T, 0.0f);
    for (Index64 t = 0; t < T; t += 7) step_mass[t] = 0.25f;
    const std::vector<std::pair<Index64, Index64>> ranges = {{0, 400}, {9000, 9400}};
    gpu->update_stats(stats, step_mass, ranges);

    IndexState expect_in = back;  // the synchronous result from the same state and statistics
    const RepoolCount rg = gpu->update_index(keys, p, &stats, nullptr, 0.05f, expect_in);
    const auto qk = random_keys(4, c.D, 8);
    const std::vector<float> hw(4, 0.25f);
    const IndexQuery iq{MatrixView<const float>(qk.data(), 4, c.D), hw.data()};

    Backend::PendingUpdate u = gpu->begin_update_index(keys, p, &stats, nullptr, 0.05f, back);
    EXPECT_THROW(gpu->begin_update_index(keys, p, &stats, nullptr, 0.05f, back), Error);  // one at a time
    EXPECT_THROW(
        {
          std::vector<float> s(back.index.groups());
          gpu->score_index(back.index, iq, s.data());
        },
        Error);  // the back state is being written
    // Main-stream work meanwhile: score the front index, and change the statistics the update read.
    std::vector<float> scores(front.index.groups()), token_scores(T);
    for (int i = 0; i < 3; ++i) {
      gpu->score_index(front.index, iq, scores.data());
      gpu->score_tokens(keys, iq, token_scores.data());
      gpu->update_stats(stats, step_mass, ranges);
    }
    gpu->end_update_index(u);
    EXPECT_TRUE(same_index(back.index, expect_in.index)) << "async vs sync";
    EXPECT_TRUE(back.weights == expect_in.weights);
    EXPECT_EQ(u.count.repooled, rg.repooled);
    EXPECT_EQ(u.count.groups, rg.groups);
    EXPECT_GT(u.run_ms, 0.0);
    EXPECT_GE(u.hidden_ms, 0.0);
    EXPECT_LE(u.hidden_ms, u.run_ms);
    std::printf("%s: update %.3f ms, hidden %.3f ms, %lld of %lld groups re-pooled\n", c.name().c_str(), u.run_ms,
                u.hidden_ms, static_cast<long long>(u.count.repooled), static_cast<long long>(u.count.groups));
    EXPECT_THROW(gpu->end_update_index(u), Error);  // nothing pending any more
    // After end, the updated state is readable (from its slot) and scores like its host copy.
    std::vector<float> a(back.index.groups()), b(back.index.groups());
    gpu->score_index(back.index, iq, a.data());
    score_index(back.index, iq, b.data());
    for (std::size_t i = 0; i < a.size(); ++i)
      ASSERT_NEAR(a[i], b[i], 1e-3f * (1.0f + std::fabs(b[i]))) << "group " << i;
  }
}

// The decode loop with asynchronous updates on the GPU: every step that began an update reports a
// measured hidden time within [0, run], and re-pooled fractions in [0, 1].
TEST(IncrementalGpu, DecodeLoopReportsHiddenTime) {
  IP_REQUIRE_GPU();
  WorkloadSpec s;
  s.tokens = 20000;
  s.dim = 128;
  s.index_heads = 4;
  s.attn_dim = 64;
  s.attn_heads = 4;
  s.value_dim = 64;
  s.steps = 6;
  s.seed = 42;
  const Workload w = generate_request(s, 0);
  PipelineParams p;
  p.pool.group_size = 4;
  p.pool.weights.scheme = Weighting::tfidf;
  p.pool.precision = Precision::int8;
  p.topk_tokens = 256;
  p.async_updates = true;
  p.repool_tau = 0.0f;
  auto gpu = cuda::make_cuda_backend();
  const RequestResult r = run_request(*gpu, w, p);
  int began = 0;
  for (std::size_t q = 0; q < r.steps.size(); ++q) {
    const StepRecord& st = r.steps[q];
    EXPECT_GE(st.repooled_fraction, 0.0);
    EXPECT_LE(st.repooled_fraction, 1.0);
    if (!st.pool_async) continue;
    ++began;
    EXPECT_TRUE(std::isfinite(st.pool_hidden_ms)) << "step " << q;
    EXPECT_GE(st.pool_hidden_ms, 0.0) << "step " << q;
  }
  EXPECT_EQ(began, static_cast<int>(r.steps.size()) - 1);  // every step after the first
}

}  // namespace
}  // namespace ip
