// The CUDA backend against the CPU backend: the whole pipeline (core/pipeline.h) on small generated
// workloads, each backend method on its own, residency under hold_inputs and its safety outside it,
// and the batched decoder against per-request CPU results.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <string>

#include <cuda_runtime.h>

#include "core/attention.h"
#include "core/backend.h"
#include "core/pipeline.h"
#include "core/pool.h"
#include "core/stats.h"
#include "core/topk.h"
#include "core/workload.h"
#include "kernels/batched_decode.h"
#include "kernels/cuda_backend.h"
#include "tests/gpu/gpu_test.h"

namespace ip {
namespace {

WorkloadSpec small_spec(Index64 tokens, int requests = 1) {
  WorkloadSpec s;
  s.tokens = tokens;
  s.dim = 64;
  s.index_heads = 4;
  s.attn_dim = 64;
  s.attn_heads = 4;
  s.value_dim = 64;
  s.steps = 4;
  s.requests = requests;
  s.length_spread = requests > 1 ? 0.5 : 0.0;
  s.seed = 42;
  return s;
}

// Checks a selection against the CPU scores it was made from, allowing for near ties: every selected
// id scores at least the k-th best score less a margin, and every id that scores more than the k-th
// best plus the margin is selected (the GPU's sums may order near-equal scores differently). Returns
// whether the selection is the CPU's as a set, when the step's metrics must agree closely.
bool check_selection(const std::vector<float>& scores, const std::int32_t* cpu, const std::int32_t* gpu, Index64 k,
                     Index64 step) {
  std::vector<float> sorted(scores);
  std::sort(sorted.begin(), sorted.end(), std::greater<>());
  const float kth = sorted[static_cast<size_t>(k - 1)];
  const float margin = 1e-4f * std::max(1e-6f, std::fabs(sorted.front()));
  const auto n = static_cast<std::int32_t>(scores.size());
  for (Index64 i = 0; i + 1 < k; ++i)  // best first, up to near ties
    if (gpu[i] >= 0 && gpu[i] < n && gpu[i + 1] >= 0 && gpu[i + 1] < n) {
      EXPECT_LE(scores[gpu[i + 1]], scores[gpu[i]] + margin) << "step " << step << ": place " << i + 1 << " out of order";
    }
  std::vector<std::int32_t> a(cpu, cpu + k), b(gpu, gpu + k);
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  EXPECT_TRUE(std::adjacent_find(b.begin(), b.end()) == b.end()) << "step " << step << ": an id selected twice";
  for (std::int32_t id : b) {
    EXPECT_TRUE(id >= 0 && id < n) << "step " << step << ": id " << id;
    if (id < 0 || id >= n) return false;
    EXPECT_GE(scores[id], kth - margin) << "step " << step << ": selected id " << id << " scores below the k-th";
  }
  for (std::int32_t id = 0; id < n; ++id)
    if (scores[id] > kth + margin) {
      EXPECT_TRUE(std::binary_search(b.begin(), b.end(), id)) << "step " << step << ": id " << id << " not selected";
    }
  return a == b;
}

TEST(CudaBackend, WithoutDeviceThrows) {
  if (cuda::device_count() > 0) {
    const auto be = cuda::make_cuda_backend();
    EXPECT_EQ(be->name(), "cuda");
    EXPECT_FALSE(be->device().empty());
    return;
  }
  EXPECT_THROW(cuda::make_cuda_backend(), Error);
}

TEST(CudaBackend, PipelineMatchesCpu) {
  IP_REQUIRE_GPU();
  const Workload w = generate_request(small_spec(3001), 0);
  auto cpu = make_cpu_backend(), gpu = cuda::make_cuda_backend();
  for (Weighting scheme : {Weighting::uniform, Weighting::positional, Weighting::cosine, Weighting::tfidf,
                           Weighting::maxmin, Weighting::exact}) {
    SCOPED_TRACE(std::string(to_string(scheme)));
    PipelineParams p;
    p.pool.group_size = 4;
    p.pool.weights.scheme = scheme;
    p.topk_tokens = 256;
    const RequestResult rc = run_request(*cpu, w, p), rg = run_request(*gpu, w, p);
    ASSERT_EQ(rc.selected.size(), rg.selected.size());
    ASSERT_EQ(rc.steps.size(), rg.steps.size());
    const bool stateless = !uses_stats(scheme);
    std::vector<float> scores(rc.groups);
    int same = 0;  // steps whose selection is the CPU's as a set
    // tfidf: step 0 has no history, so its index is built with w = 1 (rc.index is the last step's);
    // later indexes depend on the history, which near ties may have made differ.
    const AccessStats none(w.tokens(), p.stats_decay);
    const PooledIndex first = stateless ? PooledIndex{} : build_index(w.index_keys.mat(), p.pool, &none, nullptr);
    for (Index64 q = 0; q < (stateless ? w.steps() : 1); ++q) {
      const IndexQuery iq{w.index_queries.slice(q), w.head_weights.data() + q * w.index_heads()};
      score_index(stateless ? rc.index : first, iq, scores.data());
      if (!check_selection(scores, rc.selected.data() + q * rc.k_groups, rg.selected.data() + q * rc.k_groups,
                           rc.k_groups, q))
        continue;  // a near tie went the other way: the step's metrics may differ by its tokens
      ++same;
      const StepRecord &sc = rc.steps[q], &sg = rg.steps[q];
      EXPECT_NEAR(sg.mass_recall, sc.mass_recall, 1e-4) << "step " << q;
      EXPECT_NEAR(sg.output_error, sc.output_error, 1e-4 + 1e-3 * sc.output_error) << "step " << q;
      EXPECT_NEAR(sg.token_recall, sc.token_recall, 0.01) << "step " << q;
      EXPECT_NEAR(sg.block_recall, sc.block_recall, 0.01) << "step " << q;
    }
    std::printf("%s: steps selecting the CPU's groups: %d\n", std::string(to_string(scheme)).c_str(), same);
    EXPECT_GE(same, stateless ? 3 : 1) << "too few steps selected the CPU's groups";
    if (stateless) {
      const Tensor<float> a = dequantize(rc.index.rows), b = dequantize(rg.index.rows);
      ASSERT_EQ(a.size(), b.size());
      for (Index64 i = 0; i < a.size(); ++i) ASSERT_NEAR(b.data()[i], a.data()[i], 1e-5f + 1e-5f * std::fabs(a.data()[i]));
    }
    EXPECT_EQ(rg.index_bytes, rc.index_bytes);
  }
}

TEST(CudaBackend, AttentionOverAnyTokenListAndDense) {
  IP_REQUIRE_GPU();
  const Workload w = generate_request(small_spec(989), 0);
  auto gpu = cuda::make_cuda_backend();
  std::vector<Index64> toks = {0, 1, 2, 17, 18, 500, 988};
  for (const std::vector<Index64>& list : {toks, std::vector<Index64>{}}) {
    const auto ref = attention(w.attn_keys.mat(), w.values.mat(), w.attn_queries.slice(1), list, true);
    const auto got = gpu->attention(w.attn_keys.mat(), w.values.mat(), w.attn_queries.slice(1), list, true);
    ASSERT_EQ(got.out.size(), ref.out.size());
    ASSERT_EQ(got.probs.size(), ref.probs.size());
    for (Index64 i = 0; i < ref.out.size(); ++i)
      EXPECT_NEAR(got.out.data()[i], ref.out.data()[i], 1e-5f + 1e-4f * std::fabs(ref.out.data()[i]));
    for (Index64 i = 0; i < ref.probs.size(); ++i)
      EXPECT_NEAR(got.probs.data()[i], ref.probs.data()[i], 1e-7f + 2e-4f * ref.probs.data()[i]);
  }
  // A token outside the context is refused before any work, with the CPU's message (both backends call
  // validate_attention_inputs, core/attention.h).
  for (const std::vector<Index64>& bad : {std::vector<Index64>{989}, std::vector<Index64>{0, 5, -1}}) {
    std::string cpu_error, gpu_error;
    try {
      attention(w.attn_keys.mat(), w.values.mat(), w.attn_queries.slice(0), bad, false);
    } catch (const Error& e) {
      cpu_error = e.what();
    }
    try {
      gpu->attention(w.attn_keys.mat(), w.values.mat(), w.attn_queries.slice(0), bad, false);
    } catch (const Error& e) {
      gpu_error = e.what();
    }
    EXPECT_NE(cpu_error.find(fmt::format("token {} outside [0, 989)", bad.back())), std::string::npos) << cpu_error;
    EXPECT_EQ(gpu_error, cpu_error);
  }
}

TEST(CudaBackend, TopkTiesToLowerIdLikeCpu) {
  IP_REQUIRE_GPU();
  auto gpu = cuda::make_cuda_backend();
  std::vector<float> s(1000, 1.0f);
  EXPECT_EQ(gpu->topk(s.data(), 1000, 10), topk(s.data(), 1000, 10));
  std::mt19937 rng(1);
  for (auto& x : s) x = static_cast<float>(rng() % 50);
  EXPECT_EQ(gpu->topk(s.data(), 1000, 77), topk(s.data(), 1000, 77));
  EXPECT_THROW(gpu->topk(s.data(), 1000, 1001), Error);
}

TEST(CudaBackend, UpdateStatsLikeCpu) {
  IP_REQUIRE_GPU();
  auto gpu = cuda::make_cuda_backend();
  const Index64 T = 1111;
  AccessStats a(T, 0.9f), b(T, 0.9f);
  std::mt19937 rng(2);
  for (int step = 0; step < 3; ++step) {
    std::vector<float> m(T, 0.0f);
    std::vector<std::pair<Index64, Index64>> ranges = {{0, 4}, {100, 104}, {1108, 1111}};
    for (const auto& [f, l] : ranges)
      for (Index64 t = f; t < l; ++t) m[t] = static_cast<float>(rng() % 100) / 100.0f;
    a.update(m, ranges);
    gpu->update_stats(b, m, ranges);
  }
  EXPECT_EQ(a.steps, b.steps);
  EXPECT_EQ(a.count, b.count);
  for (Index64 t = 0; t < T; ++t) EXPECT_NEAR(b.mass[t], a.mass[t], 1e-6f + 1e-6f * a.mass[t]);
}

// Under a hold the device statistics are reused while the host address, token count and step count
// match (cuda_backend.cc): after this backend's update_stats they are its own result, with the new
// step count (tfidf reads it); after statistics advanced elsewhere (here on the host) the new step count
// makes the next build upload them. Each build against the CPU's from the same statistics.
TEST(CudaBackend, HeldStatisticsFollowTheirStepCount) {
  IP_REQUIRE_GPU();
  const Workload w = generate_request(small_spec(1001), 0);
  const Index64 T = w.tokens();
  PoolParams p{};
  p.group_size = 4;
  p.weights.scheme = Weighting::tfidf;
  auto cpu = make_cpu_backend(), gpu = cuda::make_cuda_backend();
  const HeldInputs held(*gpu);
  AccessStats stats(T, 0.9f);
  std::mt19937 rng(3);
  auto advance = [&](bool on_gpu) {
    std::vector<float> m(T, 0.0f);
    const Index64 f = static_cast<Index64>(rng() % 900);
    const std::vector<std::pair<Index64, Index64>> ranges = {{f + 1, f + 6}, {f + 50, f + 59}};
    for (const auto& [a, b] : ranges)
      for (Index64 t = a; t < b; ++t) m[t] = 0.1f + static_cast<float>(rng() % 100) / 100.0f;
    if (on_gpu) {
      gpu->update_stats(stats, m, ranges);
    } else {
      stats.update(m, ranges);
    }
  };
  auto expect_cpu_index = [&](const char* what) {
    SCOPED_TRACE(what);
    PooledIndex g, c;
    gpu->build_index(w.index_keys.mat(), p, &stats, nullptr, g);
    cpu->build_index(w.index_keys.mat(), p, &stats, nullptr, c);
    const Tensor<float> a = dequantize(c.rows), b = dequantize(g.rows);
    ASSERT_EQ(a.size(), b.size());
    for (Index64 i = 0; i < a.size(); ++i) ASSERT_NEAR(b.data()[i], a.data()[i], 1e-4f + 1e-4f * std::fabs(a.data()[i])) << i;
  };
  expect_cpu_index("no steps yet");
  for (int i = 0; i < 2; ++i) {
    advance(true);
    expect_cpu_index("after the backend's update_stats");
  }
  advance(false);
  expect_cpu_index("after an update on the host");
}

TEST(CudaBackend, ResidentCopiesOnlyWhileHeld) {
  IP_REQUIRE_GPU();
  Workload w = generate_request(small_spec(777), 0);
  auto gpu = cuda::make_cuda_backend();
  const IndexQuery iq{w.index_queries.slice(0), w.head_weights.data()};
  std::vector<float> ref(w.tokens()), got(w.tokens());
  {
    const HeldInputs held(*gpu);
    PooledIndex idx;
    gpu->build_index(w.index_keys.mat(), PoolParams{}, nullptr, nullptr, idx);
    gpu->score_tokens(w.index_keys.mat(), iq, got.data());  // reuses the keys build_index uploaded
    score_tokens(w.index_keys.mat(), iq, ref.data());
    for (Index64 t = 0; t < w.tokens(); ++t) ASSERT_NEAR(got[t], ref[t], 1e-4f + 1e-5f * std::fabs(ref[t]));
  }
  // Not held: keys changed in place at the same address must be uploaded again.
  for (Index64 i = 0; i < w.index_keys.size(); ++i) w.index_keys.data()[i] *= -2.0f;
  gpu->score_tokens(w.index_keys.mat(), iq, got.data());
  score_tokens(w.index_keys.mat(), iq, ref.data());
  for (Index64 t = 0; t < w.tokens(); ++t) ASSERT_NEAR(got[t], ref[t], 1e-4f + 1e-5f * std::fabs(ref[t]));
  // Held again: a view of the same address with another shape is a different matrix.
  const HeldInputs held(*gpu);
  gpu->score_tokens(w.index_keys.mat(), iq, got.data());
  const MatrixView<const float> half = w.index_keys.mat().rows_range(0, w.tokens() / 2);
  gpu->score_tokens(half, iq, got.data());
  score_tokens(half, iq, ref.data());
  for (Index64 t = 0; t < half.rows; ++t) ASSERT_NEAR(got[t], ref[t], 1e-4f + 1e-5f * std::fabs(ref[t]));
}

// Inputs given as strided views (ld > cols: here the first 32 of 64 columns of the keys and the query
// heads) are read row by row as the CPU reads them: the build, the scoring of tokens and of the index.
TEST(CudaBackend, StridedViewsLikeCpu) {
  IP_REQUIRE_GPU();
  const Workload w = generate_request(small_spec(501), 0);
  const Index64 T = w.tokens(), D = 32;
  const MatrixView<const float> keys(w.index_keys.data(), T, D, w.dim());
  const MatrixView<const float> heads(w.index_queries.slice(0).data, w.index_heads(), D, w.dim());
  const IndexQuery iq{heads, w.head_weights.data()};
  auto cpu = make_cpu_backend(), gpu = cuda::make_cuda_backend();
  PoolParams p{};
  p.group_size = 4;
  PooledIndex c, g;
  cpu->build_index(keys, p, nullptr, nullptr, c);
  gpu->build_index(keys, p, nullptr, nullptr, g);
  const Tensor<float> a = dequantize(c.rows), b = dequantize(g.rows);
  ASSERT_EQ(a.size(), b.size());
  for (Index64 i = 0; i < a.size(); ++i) ASSERT_NEAR(b.data()[i], a.data()[i], 1e-5f + 1e-5f * std::fabs(a.data()[i])) << i;
  std::vector<float> ref(T), got(T);
  cpu->score_tokens(keys, iq, ref.data());
  gpu->score_tokens(keys, iq, got.data());
  for (Index64 t = 0; t < T; ++t) ASSERT_NEAR(got[t], ref[t], 1e-4f + 1e-5f * std::fabs(ref[t])) << "token " << t;
  cpu->score_index(c, iq, ref.data());
  gpu->score_index(c, iq, got.data());
  for (Index64 q = 0; q < c.groups(); ++q) ASSERT_NEAR(got[q], ref[q], 1e-4f + 1e-5f * std::fabs(ref[q])) << "group " << q;
}

// Non-finite inputs are refused as the CPU refuses them: an index key with NaN even when the same keys
// went to the device before, unchecked, for token scoring under the same hold; a NaN score given to topk.
TEST(CudaBackend, NonFiniteInputsRefusedLikeCpu) {
  IP_REQUIRE_GPU();
  Workload w = generate_request(small_spec(301), 0);
  w.index_keys.data()[5 * w.dim() + 7] = std::numeric_limits<float>::quiet_NaN();  // token 5
  const IndexQuery iq{w.index_queries.slice(0), w.head_weights.data()};
  auto refused = [](auto&& call, const std::string& what) {
    try {
      call();
    } catch (const Error& e) {
      return std::string(e.what()).find(what) != std::string::npos;
    }
    return false;
  };
  auto gpu = cuda::make_cuda_backend();
  const HeldInputs held(*gpu);
  std::vector<float> s(w.tokens());
  gpu->score_tokens(w.index_keys.mat(), iq, s.data());  // uploads the keys, unchecked
  PooledIndex idx;
  EXPECT_TRUE(refused([&] { gpu->build_index(w.index_keys.mat(), PoolParams{}, nullptr, nullptr, idx); },
                      "of token 5 contains NaN"));
  EXPECT_TRUE(refused([&] { build_index(w.index_keys.mat(), PoolParams{}, nullptr, nullptr); }, "of token 5 contains NaN"));
  std::vector<float> scores(100, 1.0f);
  scores[42] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(refused([&] { gpu->topk(scores.data(), 100, 10); }, "NaN"));
  EXPECT_TRUE(refused([&] { topk(scores.data(), 100, 10); }, "NaN"));
}

// stage_keys copies the keys before a pool stage's clock starts (Backend::stage_keys): under a hold the
// build or update that follows reads the staged copy and uploads nothing. To see which copy a call read,
// the host keys are negated in place after staging (breaking the hold's promise on purpose): a call that
// read the staged copy pools the original keys, one that uploaded pools the negated ones.
TEST(CudaBackend, StagedKeysAreWhatTheNextPoolReads) {
  IP_REQUIRE_GPU();
  Workload w = generate_request(small_spec(777), 0);
  const MatrixView<const float> keys = w.index_keys.mat();
  auto negate = [&] {
    for (Index64 i = 0; i < w.index_keys.size(); ++i) w.index_keys.data()[i] = -w.index_keys.data()[i];
  };
  const PoolParams p{};
  enum class Use { build, update };
  auto pool = [&](Backend& be, Use use) {
    if (use == Use::build) {
      PooledIndex idx;
      be.build_index(keys, p, nullptr, nullptr, idx);
      return idx.rows.payload;
    }
    IndexState st;
    be.update_index(keys, p, nullptr, nullptr, 0.0f, st);
    return st.index.rows.payload;
  };
  for (const Use use : {Use::build, Use::update}) {
    SCOPED_TRACE(use == Use::build ? "build_index" : "update_index");
    const bool for_updates = use == Use::update;
    const auto original = pool(*cuda::make_cuda_backend(), use);
    negate();
    const auto negated = pool(*cuda::make_cuda_backend(), use);
    negate();
    ASSERT_NE(original, negated);
    {  // held and staged: the staged (original) keys
      auto gpu = cuda::make_cuda_backend();
      const HeldInputs held(*gpu);
      gpu->stage_keys(keys, for_updates);
      negate();
      EXPECT_EQ(pool(*gpu, use), original);
      negate();
    }
    {  // held, not staged: the call uploads what the host holds then
      auto gpu = cuda::make_cuda_backend();
      const HeldInputs held(*gpu);
      negate();
      EXPECT_EQ(pool(*gpu, use), negated);
      negate();
    }
    {  // not held: staging does nothing, every call uploads
      auto gpu = cuda::make_cuda_backend();
      gpu->stage_keys(keys, for_updates);
      negate();
      EXPECT_EQ(pool(*gpu, use), negated);
      negate();
    }
  }
}

// score_index_for_topk (the pipelines' indexer): under a hold the scores stay on the device, the host
// array is left as it was (poisoned here with NaN, which topk of a host array refuses), and topk of that
// array selects what it selects from score_index's host scores; outside a hold it writes the host array
// as score_index does (topk then reads the host array).
TEST(CudaBackend, ScoresForTopkStayOnTheDeviceUnderAHold) {
  IP_REQUIRE_GPU();
  const Workload w = generate_request(small_spec(3001), 0);
  PoolParams p{};
  p.group_size = 4;
  auto gpu = cuda::make_cuda_backend();
  const HeldInputs held(*gpu);
  PooledIndex idx;
  gpu->build_index(w.index_keys.mat(), p, nullptr, nullptr, idx);
  const Index64 n = idx.groups(), k = 64;
  for (Index64 q = 0; q < w.steps(); ++q) {
    SCOPED_TRACE(q);
    const IndexQuery iq{w.index_queries.slice(q), w.head_weights.data() + q * w.index_heads()};
    std::vector<float> host(static_cast<std::size_t>(n));
    gpu->score_index(idx, iq, host.data());
    const auto want = gpu->topk(host.data(), n, k);
    std::vector<float> kept(static_cast<std::size_t>(n), std::numeric_limits<float>::quiet_NaN());
    gpu->score_index_for_topk(idx, iq, kept.data());
    EXPECT_TRUE(std::all_of(kept.begin(), kept.end(), [](float x) { return std::isnan(x); }))
        << "the host array was written";
    EXPECT_EQ(gpu->topk(kept.data(), n, k), want);
  }
  auto unheld = cuda::make_cuda_backend();
  const IndexQuery iq{w.index_queries.slice(0), w.head_weights.data()};
  std::vector<float> host(static_cast<std::size_t>(n)), written(static_cast<std::size_t>(n), std::nanf(""));
  unheld->score_index(idx, iq, host.data());
  unheld->score_index_for_topk(idx, iq, written.data());
  EXPECT_EQ(std::memcmp(host.data(), written.data(), host.size() * sizeof(float)), 0);
  EXPECT_EQ(unheld->topk(written.data(), n, k), unheld->topk(host.data(), n, k));
}

// Under a hold the rows of an index scored before are not uploaded again while the index (its host
// object) has the same rows address and shape; a new address (front and back states swapped, as the
// decode loop does) or more rows in the same storage are another index, and an index an update
// rewrote is not the one built before (here read back after two other updates took both of the
// updater's slots). Each score against the CPU's score of the index as the host holds it.
TEST(CudaBackend, HeldIndexIsKnownByItsRowsAddressAndShape) {
  IP_REQUIRE_GPU();
  WorkloadSpec other = small_spec(1001);
  other.seed = 43;
  const Workload w = generate_request(small_spec(1001), 0), v = generate_request(other, 0);
  PoolParams p{};
  p.group_size = 4;
  const Index64 T = w.tokens(), half = T / 2 / 4 * 4;
  const IndexQuery iq{w.index_queries.slice(0), w.head_weights.data()};
  auto gpu = cuda::make_cuda_backend();
  const HeldInputs held(*gpu);
  auto expect_cpu_scores = [&](const PooledIndex& x, const char* what) {
    SCOPED_TRACE(what);
    std::vector<float> got(x.groups()), ref(x.groups());
    gpu->score_index(x, iq, got.data());
    score_index(x, iq, ref.data());
    for (Index64 g = 0; g < x.groups(); ++g) ASSERT_NEAR(got[g], ref[g], 1e-4f + 1e-5f * std::fabs(ref[g])) << g;
  };
  PooledIndex a, b = build_index(v.index_keys.mat(), p, nullptr, nullptr);
  gpu->build_index(w.index_keys.mat(), p, nullptr, nullptr, a);
  expect_cpu_scores(a, "built");
  std::swap(a.rows, b.rows);  // a's rows now at another address
  expect_cpu_scores(a, "rows swapped in");
  PooledIndex c;
  c.rows.payload.reserve(a.rows.payload.size());  // room to grow in place
  gpu->build_index(w.index_keys.mat().rows_range(0, half), p, nullptr, nullptr, c);
  expect_cpu_scores(c, "half the tokens");
  const void* storage = c.rows.payload.data();
  const PooledIndex whole = build_index(w.index_keys.mat(), p, nullptr, nullptr);
  c.tokens = whole.tokens;
  c.rows.rows = whole.rows.rows;
  c.rows.payload.assign(whole.rows.payload.begin(), whole.rows.payload.end());
  ASSERT_EQ(c.rows.payload.data(), storage);
  expect_cpu_scores(c, "grown in place");
  IndexState st, s1, s2;
  gpu->build_index(w.index_keys.mat(), p, nullptr, nullptr, st.index);
  expect_cpu_scores(st.index, "built into a state");
  gpu->update_index(v.index_keys.mat(), p, nullptr, nullptr, 0.0f, st);  // no weights: rebuilt from v
  gpu->update_index(w.index_keys.mat(), p, nullptr, nullptr, 0.0f, s1);
  gpu->update_index(w.index_keys.mat(), p, nullptr, nullptr, 0.0f, s2);
  expect_cpu_scores(st.index, "updated, its slot taken since");
}

// Under a hold topk reads the device copy of scores score_index_for_topk left for a host array only
// for that array at that length; a new hold drops it (the host may have written the array since).
TEST(CudaBackend, HeldScoresAreKnownByLengthAndDroppedByANewHold) {
  IP_REQUIRE_GPU();
  const Workload w = generate_request(small_spec(3001), 0);
  PoolParams p{};
  p.group_size = 4;
  auto gpu = cuda::make_cuda_backend();
  gpu->hold_inputs(true);
  PooledIndex idx;
  gpu->build_index(w.index_keys.mat(), p, nullptr, nullptr, idx);
  const Index64 n = idx.groups(), k = 32;
  const IndexQuery iq{w.index_queries.slice(0), w.head_weights.data()};
  std::vector<float> scores(static_cast<std::size_t>(n));
  gpu->score_index_for_topk(idx, iq, scores.data());  // on the device only
  std::mt19937 rng(5);
  for (float& x : scores) x = static_cast<float>(rng() % 1000);  // the host's own scores
  EXPECT_EQ(gpu->topk(scores.data(), n / 2, k), topk(scores.data(), n / 2, k)) << "a shorter array";
  gpu->score_index_for_topk(idx, iq, scores.data());
  gpu->hold_inputs(false);
  gpu->hold_inputs(true);
  for (float& x : scores) x = static_cast<float>(rng() % 1000);
  EXPECT_EQ(gpu->topk(scores.data(), n, k), topk(scores.data(), n, k)) << "after a new hold";
  gpu->hold_inputs(false);
}

// spec.requests generated requests as the batched decoder takes them: its configuration (G = 4), the
// contexts per request and the first step's queries, back to back.
struct BatchInputs {
  std::vector<Workload> ws;
  std::vector<long long> off = {0};
  cuda::BatchedDecodeConfig c;
  std::vector<const float*> ik, ak, vv;  // per request
  std::vector<float> iq, hw, aq;         // step 0, [B, ...]

  BatchInputs(const WorkloadSpec& spec, long long topk_tokens) {
    for (int b = 0; b < spec.requests; ++b) {
      ws.push_back(generate_request(spec, b));
      off.push_back(off.back() + ws.back().tokens());
    }
    c.requests = spec.requests;
    c.total_tokens = off.back();
    for (const auto& w : ws) c.max_tokens = std::max<long long>(c.max_tokens, w.tokens());
    c.dim = spec.dim;
    c.index_heads = spec.index_heads;
    c.attn_dim = spec.attn_dim;
    c.attn_heads = spec.attn_heads;
    c.value_dim = spec.value_dim;
    c.pool.group_size = 4;
    c.topk_tokens = topk_tokens;
    c.want_probs = true;
    for (const auto& w : ws) {
      ik.push_back(w.index_keys.data());
      ak.push_back(w.attn_keys.data());
      vv.push_back(w.values.data());
      const auto s = w.index_queries.slice(0);
      iq.insert(iq.end(), s.data, s.data + s.rows * s.cols);
      hw.insert(hw.end(), w.head_weights.data(), w.head_weights.data() + w.index_heads());
      const auto a = w.attn_queries.slice(0);
      aq.insert(aq.end(), a.data, a.data + a.rows * a.cols);
    }
  }
  cuda::BatchedContext per_request() const {
    cuda::BatchedContext ctx;
    ctx.token_offset = off;
    ctx.request_index_keys = ik;
    ctx.request_attn_keys = ak;
    ctx.request_values = vv;
    return ctx;
  }
  cuda::BatchedQueries queries() const { return {iq.data(), hw.data(), aq.data()}; }
};

// One decode step of spec.requests requests in one launch sequence against per-request CPU results:
// the selected groups (up to near ties: check_selection), the attention output and probabilities.
void check_batched_decoder(const WorkloadSpec& spec, long long topk_tokens, Index64 expect_k_groups,
                           Weighting scheme = Weighting::uniform) {
  BatchInputs in(spec, topk_tokens);
  in.c.pool.weights.scheme = scheme;
  const std::vector<Workload>& ws = in.ws;
  const cuda::BatchedDecodeConfig& c = in.c;
  EXPECT_GT(cuda::estimate_device_bytes(c),
            static_cast<std::size_t>(c.total_tokens) * (spec.dim + spec.attn_dim + spec.value_dim) * sizeof(float));
  EXPECT_EQ(cuda::check_fits(c), "");
  auto cat = [&](auto get) {
    std::vector<float> v;
    for (const auto& w : ws) {
      const Tensor<float>& t = get(w);
      v.insert(v.end(), t.data(), t.data() + t.size());
    }
    return v;
  };
  const auto ik = cat([](const Workload& w) -> const Tensor<float>& { return w.index_keys; });
  const auto ak = cat([](const Workload& w) -> const Tensor<float>& { return w.attn_keys; });
  const auto vv = cat([](const Workload& w) -> const Tensor<float>& { return w.values; });
  cuda::BatchedDecoder dec(c);
  cuda::BatchedContext packed;
  packed.token_offset = in.off;
  packed.index_keys = ik.data();
  packed.attn_keys = ak.data();
  packed.values = vv.data();
  dec.load(packed);
  const cuda::BatchedStep st = dec.step(in.queries());
  const Index64 kg = st.k_groups, G = 4, Ha = spec.attn_heads, Dv = spec.value_dim;
  ASSERT_EQ(kg, expect_k_groups);
  {  // The same contexts given per request (no packed host copy): the same index and step, bit for bit.
    cuda::BatchedContext ctx = in.per_request();
    cuda::BatchedDecoder per(c);
    per.load(ctx);
    EXPECT_EQ(per.index_payload(), dec.index_payload());
    const cuda::BatchedStep ps = per.step(in.queries());
    EXPECT_EQ(ps.selected, st.selected);
    EXPECT_EQ(0, std::memcmp(ps.out.data(), st.out.data(), st.out.size() * sizeof(float)));
    ASSERT_EQ(ps.probs.size(), st.probs.size());
    EXPECT_EQ(0, std::memcmp(ps.probs.data(), st.probs.data(), st.probs.size() * sizeof(float)));
    // One pointer short: refused with a message, before any copy.
    ctx.request_values = std::span<const float* const>(in.vv.data(), in.vv.size() - 1);
    EXPECT_THROW(per.load(ctx), Error);
  }
  int same = 0;  // requests whose selection is the CPU's as a set
  const std::vector<std::uint8_t> rows = dec.index_payload();
  std::size_t at = 0;  // the request's first byte in `rows`
  for (int b = 0; b < spec.requests; ++b) {
    SCOPED_TRACE(testing::Message() << "request " << b);
    const Workload& w = ws[b];
    const PooledIndex idx = build_index(w.index_keys.mat(), c.pool, nullptr, nullptr);
    // The request's rows in the batch's index, packed after the previous request's (fp32 rows).
    const Tensor<float> cpu_rows = dequantize(idx.rows);
    ASSERT_LE(at + cpu_rows.size() * sizeof(float), rows.size()) << "the batch's index is too short";
    for (Index64 i = 0; i < cpu_rows.size(); ++i) {
      float x;
      std::memcpy(&x, rows.data() + at + i * sizeof(float), sizeof x);
      ASSERT_NEAR(x, cpu_rows.data()[i], 1e-5f + 1e-5f * std::fabs(cpu_rows.data()[i])) << "index element " << i;
    }
    at += cpu_rows.size() * sizeof(float);
    std::vector<float> scores(idx.groups());
    score_index(idx, {w.index_queries.slice(0), w.head_weights.data()}, scores.data());
    const std::vector<std::int32_t> gsel(st.selected.begin() + b * kg, st.selected.begin() + (b + 1) * kg);
    const std::vector<std::int32_t> csel = topk(scores.data(), idx.groups(), kg);
    same += check_selection(scores, csel.data(), gsel.data(), kg, 0);
    // Attention over the GPU's own selection, against the CPU reference.
    const auto toks = tokens_of_groups(gsel, static_cast<int>(G), w.tokens());
    const auto ref = attention(w.attn_keys.mat(), w.values.mat(), w.attn_queries.slice(0), toks, true);
    for (Index64 i = 0; i < Ha * Dv; ++i)
      EXPECT_NEAR(st.out[b * Ha * Dv + i], ref.out.data()[i], 1e-5f + 1e-4f * std::fabs(ref.out.data()[i]));
    const Index64 n = static_cast<Index64>(toks.size()), len = kg * G;
    for (Index64 h = 0; h < Ha; ++h) {
      const float* row = st.probs.data() + (b * Ha + h) * len;
      Index64 i = 0;
      for (std::int32_t g : gsel)
        for (Index64 t = Index64{g} * G; t < std::min(w.tokens(), (Index64{g} + 1) * G); ++t, ++i) {
          const Index64 ci = std::lower_bound(toks.begin(), toks.end(), t) - toks.begin();
          EXPECT_NEAR(row[i], ref.probs.data()[h * n + ci], 1e-7f + 2e-4f * ref.probs.data()[h * n + ci]);
        }
      for (; i < len; ++i) EXPECT_EQ(row[i], 0.0f);
    }
  }
  EXPECT_EQ(at, rows.size()) << "index bytes beyond the requests' rows";
  std::printf("requests selecting the CPU's groups: %d of %d\n", same, spec.requests);
  // Near ties may go the other way on a device's sums (check_selection allows it): most requests, not all.
  EXPECT_GE(same, (3 * spec.requests + 3) / 4) << "requests whose selection is the CPU's as a set";
}

std::size_t free_device_bytes() {
  std::size_t free = 0, total = 0;
  EXPECT_EQ(cudaMemGetInfo(&free, &total), cudaSuccess);
  return free;
}

// The decoder takes its device memory in the constructor, as much as estimate_device_bytes says (the
// runner's fit check and `indexpool list` rest on it), and nothing more in load() or step(). On the
// emulator, which counts bytes exactly, equal; on a device, cudaMalloc's granularity may add up to
// 2 MiB for each of the decoder's allocations (fewer than 20) and cudaMemGetInfo reports in pages.
TEST(BatchedDecoder, DeviceMemoryIsTheEstimateAndAllOfItIsTakenAtConstruction) {
  IP_REQUIRE_GPU();
  BatchInputs in(small_spec(8192, 6), 512);
  in.c.pool.precision = Precision::int8;  // per-row scales: one more allocation
  const cuda::BatchedDecodeConfig& c = in.c;
  const cuda::BatchedContext ctx = in.per_request();
  {  // Warm-up: a device loads kernel code on first launch (lazy module loading), which takes memory too.
    cuda::BatchedDecoder warm(c);
    warm.load(ctx);
    warm.step(in.queries());
  }
  cudaDeviceProp prop{};
  ASSERT_EQ(cudaGetDeviceProperties(&prop, 0), cudaSuccess);
  const bool emulated = std::string(prop.name).find("cuemu") != std::string::npos;
  const std::size_t estimate = cuda::estimate_device_bytes(c), before = free_device_bytes();
  cuda::BatchedDecoder dec(c);
  const std::size_t taken = before - free_device_bytes();
  dec.load(ctx);
  dec.step(in.queries());
  dec.step(in.queries());
  EXPECT_EQ(before - free_device_bytes(), taken) << "load() or step() allocated device memory";
  if (emulated) {
    EXPECT_EQ(taken, estimate);
  } else {
    EXPECT_GE(taken, estimate);
    EXPECT_LE(taken, estimate + (std::size_t{20} << 21) + (std::size_t{2} << 20)) << "estimate " << estimate;
  }
}

TEST(BatchedDecoder, MatchesPerRequestCpu) {
  IP_REQUIRE_GPU();
  check_batched_decoder(small_spec(3000, 5), 253, 64);  // 253 tokens: 64 groups of 4
}

// Three different widths (index keys 32, attention keys 48, values 24) and head counts (3 index, 2
// attention heads), so a context or query copied at another array's width shows, and maxmin (two rows
// per group): packed and per-request contexts, the index rows against the CPU's, and on the emulator
// the device memory against the estimate (which counts every array at its own width).
TEST(BatchedDecoder, DistinctWidthsAndHeadCountsMaxmin) {
  IP_REQUIRE_GPU();
  WorkloadSpec spec = small_spec(1001, 3);
  spec.dim = 32;
  spec.attn_dim = 48;
  spec.value_dim = 24;
  spec.index_heads = 3;
  spec.attn_heads = 2;
  check_batched_decoder(spec, 101, 26, Weighting::maxmin);  // 101 tokens: 26 groups of 4
  BatchInputs in(spec, 101);
  in.c.pool.weights.scheme = Weighting::maxmin;
  cudaDeviceProp prop{};
  ASSERT_EQ(cudaGetDeviceProperties(&prop, 0), cudaSuccess);
  if (std::string(prop.name).find("cuemu") == std::string::npos) return;  // exact counts: the emulator's
  const std::size_t before = free_device_bytes();
  cuda::BatchedDecoder dec(in.c);
  EXPECT_EQ(before - free_device_bytes(), cuda::estimate_device_bytes(in.c));
}

// load() refuses a non-finite index key (packed and per-request contexts), a request shorter than
// topk_tokens by one token and a context one token over total_tokens; the configuration check refuses
// more requests than a launch's grid takes.
TEST(BatchedDecoder, LoadAndConfigurationRefuseWhatCannotRun) {
  IP_REQUIRE_GPU();
  BatchInputs in(small_spec(400, 2), 64);
  auto refused = [](cuda::BatchedDecoder& dec, const cuda::BatchedContext& ctx, const std::string& what) {
    try {
      dec.load(ctx);
    } catch (const Error& e) {
      return std::string(e.what()).find(what) != std::string::npos;
    }
    return false;
  };
  std::vector<float> ik;
  for (const auto& w : in.ws) ik.insert(ik.end(), w.index_keys.data(), w.index_keys.data() + w.index_keys.size());
  std::vector<float> ak(in.c.total_tokens * in.c.attn_dim), vv(in.c.total_tokens * in.c.value_dim);
  cuda::BatchedContext packed;
  packed.token_offset = in.off;
  packed.index_keys = ik.data();
  packed.attn_keys = ak.data();
  packed.values = vv.data();
  {
    cuda::BatchedDecoder dec(in.c);
    ik[ik.size() - 7] = std::numeric_limits<float>::quiet_NaN();  // the last request's last token
    EXPECT_TRUE(refused(dec, packed, "contains NaN or infinity"));
    std::vector<float> last(in.ws[1].index_keys.data(), in.ws[1].index_keys.data() + in.ws[1].index_keys.size());
    last[3] = std::numeric_limits<float>::infinity();
    cuda::BatchedContext ctx = in.per_request();
    std::vector<const float*> keys = in.ik;
    keys[1] = last.data();
    ctx.request_index_keys = keys;
    EXPECT_TRUE(refused(dec, ctx, "contains NaN or infinity"));
  }
  // topk_tokens one more than the shortest request has; one token more than total_tokens.
  const long long shortest = std::min(in.off[1] - in.off[0], in.off[2] - in.off[1]);
  cuda::BatchedDecodeConfig c = in.c;
  c.topk_tokens = shortest + 1;
  cuda::BatchedDecoder dec(c);
  EXPECT_TRUE(refused(dec, in.per_request(), "fewer than topk_tokens"));
  c = in.c;
  c.total_tokens = in.off.back() - 1;
  cuda::BatchedDecoder small(c);
  EXPECT_TRUE(refused(small, in.per_request(), "more than total_tokens"));
  // More requests than one launch's grid takes (65535) are refused.
  c = in.c;
  c.requests = 65536;
  c.total_tokens = c.max_tokens * 65536;
  EXPECT_THROW(cuda::estimate_device_bytes(c), Error);
  c.requests = 65535;
  EXPECT_NO_THROW(cuda::estimate_device_bytes(c));
}

// Issue 5's batch size: 1024 requests of 64 to 256 tokens in one step (31 tokens: 8 groups of 4).
TEST(BatchedDecoder, AThousandAndTwentyFourRequestsInOneStep) {
  IP_REQUIRE_GPU();
  WorkloadSpec spec = small_spec(256, 1024);
  spec.length_spread = 0.75;
  check_batched_decoder(spec, 31, 8);
}

}  // namespace
}  // namespace ip
