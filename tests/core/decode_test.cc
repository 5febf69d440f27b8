// The issue-7 decode loop (core/decode.cc) against the plain loop (pipeline.cc): tau = 0 gives the
// full rebuild's bits; the hybrid layer with gate:0 is the sparse layer; growing contexts end with the
// index a from-scratch build gives; asynchronous updates score with the previous step's index; and
// every new path gives the same bits on 1 and 2 threads.
#include <cmath>
#include <map>
#include <set>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <fmt/format.h>

#include <gtest/gtest.h>

#include "core/backend.h"
#include "core/parallel.h"
#include "core/pipeline.h"
#include "core/workload.h"
#include "tests/core/test_helpers.h"

namespace {

using ip::Precision;
using ip::Weighting;

ip::Workload workload(int append = 0, int steps = 5) {
  ip::WorkloadSpec s;
  s.tokens = 9000;
  s.dim = 16;
  s.index_heads = 4;
  s.attn_dim = 16;
  s.attn_heads = 2;
  s.value_dim = 8;
  s.steps = steps;
  s.topics = 16;
  s.append_per_step = append;
  s.seed = 78;
  return ip::generate_request(s, 0);
}

ip::PipelineParams pipeline(Weighting w, Precision p = Precision::fp32, int G = 4, ip::Index64 k = 256) {
  ip::PipelineParams pp;
  pp.pool.weights.scheme = w;
  pp.pool.group_size = G;
  pp.pool.precision = p;
  pp.topk_tokens = k;
  return pp;
}

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

void expect_same(const ip::RequestResult& a, const ip::RequestResult& b, bool layer = true) {
  ASSERT_EQ(a.steps.size(), b.steps.size());
  for (size_t q = 0; q < a.steps.size(); ++q) {
    const auto &x = a.steps[q], &y = b.steps[q];
    EXPECT_TRUE(same_bits(x.token_recall, y.token_recall)) << "step " << q;
    EXPECT_TRUE(same_bits(x.block_recall, y.block_recall)) << "step " << q;
    EXPECT_TRUE(same_bits(x.mass_recall, y.mass_recall)) << "step " << q;
    EXPECT_TRUE(same_bits(x.output_error, y.output_error)) << "step " << q;
    if (layer) {
      EXPECT_TRUE(same_bits(x.layer_output_error, y.layer_output_error)) << "step " << q;
      EXPECT_TRUE(same_bits(x.layer_mass_recall, y.layer_mass_recall)) << "step " << q;
      EXPECT_EQ(x.layer_tokens, y.layer_tokens) << "step " << q;
    }
  }
  EXPECT_EQ(a.tokens_per_group, b.tokens_per_group);
  EXPECT_EQ(a.selected, b.selected);
  EXPECT_EQ(a.selected_mass, b.selected_mass);
  EXPECT_EQ(a.selected_similarity, b.selected_similarity);
  EXPECT_TRUE(a.index.rows.payload == b.index.rows.payload);
  EXPECT_TRUE(a.index.rows.scales == b.index.rows.scales);
}

TEST(Decode, TauZeroEqualsFullRebuildBitwise) {
  const auto w = workload();
  for (Weighting s : {Weighting::tfidf, Weighting::hybrid}) {
    for (Precision prec : {Precision::fp32, Precision::int8}) {
      auto full = pipeline(s, prec);  // repool_tau = -1: the plain loop of pipeline.cc
      full.record_similarity = true;  // a cache model's cosine relevance: both loops record it
      auto cpu = ip::make_cpu_backend(2);
      const auto a = ip::run_request(*cpu, w, full);
      ASSERT_EQ(a.selected_similarity.size(), a.selected.size());
      auto inc = full;
      inc.repool_tau = 0.0f;
      const auto b = ip::run_request(*cpu, w, inc);
      expect_same(a, b);
      // Every step rebuilds in both, but tau = 0 pools only the groups whose weights moved.
      double pooled = 0;
      for (size_t q = 1; q < b.steps.size(); ++q) {
        EXPECT_EQ(a.steps[q].repooled_fraction, 1.0);
        EXPECT_LE(b.steps[q].repooled_fraction, 1.0);
        pooled += b.steps[q].repooled_fraction;
      }
      if (s == Weighting::tfidf) {
        EXPECT_LT(pooled, 0.5 * (b.steps.size() - 1));  // most groups are never touched
      }
      // A larger tau pools no more, and changes the index.
      inc.repool_tau = 0.5f;
      const auto c = ip::run_request(*cpu, w, inc);
      for (size_t q = 1; q < c.steps.size(); ++q) EXPECT_LE(c.steps[q].repooled_fraction, b.steps[q].repooled_fraction);
    }
  }
}

// tokens_per_group is G in both loops, also with a partial last group (9002 tokens at G = 4: 2251 groups); the
// extended loop said 9002 / 2251 = 3.999. Adaptive groups: their mean size, context tokens over groups.
TEST(Decode, TokensPerGroupIsTheGroupSizeInBothLoops) {
  ip::WorkloadSpec s;
  s.tokens = 9002;
  s.dim = 16;
  s.index_heads = 2;
  s.steps = 2;
  s.seed = 5;
  const auto w = ip::generate_request(s, 0);
  auto cpu = ip::make_cpu_backend(1);
  auto plain = pipeline(Weighting::positional);
  auto inc = plain;
  inc.repool_tau = 0.0f;
  EXPECT_EQ(ip::run_request(*cpu, w, plain).tokens_per_group, 4.0);
  EXPECT_EQ(ip::run_request(*cpu, w, inc).tokens_per_group, 4.0);
  auto ad = plain;
  ad.adaptive.enabled = true;
  ad.adaptive.budget_bytes_per_token = 20;
  const auto a = ip::run_request(*cpu, w, ad);
  EXPECT_EQ(a.tokens_per_group, 9002.0 / static_cast<double>(a.groups));
}

TEST(Decode, HybridWithGateZeroIsTheSparseLayer) {
  const auto w = workload();
  auto cpu = ip::make_cpu_backend(2);
  auto p = pipeline(Weighting::uniform);
  p.record_similarity = true;
  const auto sparse = ip::run_request(*cpu, w, p);
  ASSERT_EQ(sparse.selected_similarity.size(), sparse.selected.size());
  p.hybrid.enabled = true;
  p.hybrid.window = 300;
  p.hybrid.combine = ip::parse_combine("gate:0");
  const auto h = ip::run_request(*cpu, w, p);
  expect_same(sparse, h, false);
  for (size_t q = 0; q < h.steps.size(); ++q) {
    EXPECT_TRUE(same_bits(h.steps[q].layer_output_error, sparse.steps[q].output_error)) << q;
    EXPECT_GE(h.steps[q].layer_mass_recall, sparse.steps[q].mass_recall) << q;  // it covers the window too
    EXPECT_GT(h.steps[q].layer_tokens, sparse.steps[q].layer_tokens) << q;
    EXPECT_LE(h.steps[q].layer_tokens, sparse.steps[q].layer_tokens + 300) << q;
    EXPECT_GT(h.steps[q].local_ms, 0.0) << q;
  }
  // Exactly: the layer reads |tokens of the selected groups U [T - W, T)|, the window being the last W = 300
  // tokens (a window beginning at T - W + 1 reads one token fewer at every step that does not select T - W).
  const ip::Index64 T = w.tokens(), kg = h.k_groups;
  ASSERT_EQ(h.selected.size(), h.steps.size() * static_cast<size_t>(kg));
  for (size_t q = 0; q < h.steps.size(); ++q) {
    std::set<ip::Index64> covered;
    for (ip::Index64 i = 0; i < kg; ++i) {
      const ip::Index64 g = h.selected[q * kg + i];
      for (ip::Index64 t = 4 * g; t < std::min(T, 4 * g + 4); ++t) covered.insert(t);
    }
    for (ip::Index64 t = T - 300; t < T; ++t) covered.insert(t);
    EXPECT_EQ(h.steps[q].layer_tokens, static_cast<double>(covered.size())) << q;
  }
  EXPECT_GT(h.local_prefill_ms, 0.0);
  // gate:0.5 moves the output (the local branch is not the dense output).
  p.hybrid.combine = ip::parse_combine("gate:0.5");
  const auto h2 = ip::run_request(*cpu, w, p);
  EXPECT_NE(h2.steps[0].layer_output_error, h2.steps[0].output_error);
}

TEST(Decode, GrowingContextEndsWithTheFromScratchIndex) {
  const int steps = 5, append = 3;
  const auto w = workload(append, steps);
  ASSERT_EQ(w.tokens(), 9000 + steps * append);
  for (Weighting s : {Weighting::uniform, Weighting::cosine}) {
    auto p = pipeline(s, Precision::int8);
    p.append_per_step = append;
    p.repool_tau = 0.0f;
    auto cpu = ip::make_cpu_backend(2);
    const auto r = ip::run_request(*cpu, w, p);
    for (int q = 0; q < steps; ++q) {
      EXPECT_EQ(r.steps[q].context_tokens, 9000 + (q + 1) * append);
      // 9000 + 3(q+1) tokens: from step 1 on, only the groups the 3 new tokens touch are pooled.
      if (q > 0) {
        EXPECT_LE(r.steps[q].repooled_fraction * static_cast<double>(ip::num_groups(9000 + (q + 1) * append, 4)), 2.0 + 1e-9);
      }
    }
    const auto scratch = ip::build_index(w.index_keys.mat(), p.pool, nullptr, nullptr);
    EXPECT_TRUE(r.index.rows.payload == scratch.rows.payload) << ip::to_string(s);
    EXPECT_TRUE(r.index.rows.scales == scratch.rows.scales) << ip::to_string(s);
    EXPECT_EQ(r.index.tokens, w.tokens());
  }
}

// Records the pool-related calls of a pipeline on the CPU backend, to check that every timed pool stage
// starts from staged keys (Backend::stage_keys): a device backend's pool_ms then excludes the upload;
// and that a request's first one follows a warm-up (Backend::warm_up_build / warm_up_update) that left
// its host storage sized: `in_place` says, per pool call, whether it wrote where the storage already was.
class RecordsPoolCalls final : public ip::Backend {
 public:
  std::vector<std::string> calls;
  std::vector<bool> in_place;
  std::string name() const override { return "records"; }
  std::string device() const override { return "cpu"; }
  void hold_inputs(bool hold) override { calls.push_back(hold ? "hold" : "release"); }
  void stage_keys(ip::MatrixView<const float> k, bool for_updates) override {
    calls.push_back(fmt::format("stage {} {}", k.rows, for_updates ? "update" : "build"));
  }
  void warm_up_build(ip::MatrixView<const float> k, const ip::PoolParams& p, const ip::AccessStats* s, const float* q,
                     ip::PooledIndex& out) override {
    calls.push_back(fmt::format("warm build {}", k.rows));
    in_->warm_up_build(k, p, s, q, out);
  }
  void warm_up_update(ip::MatrixView<const float> k, const ip::PoolParams& p, const ip::AccessStats* s, const float* q,
                      float tau, bool async, ip::IndexState& st) override {
    calls.push_back(fmt::format("warm update {}", k.rows));
    in_->warm_up_update(k, p, s, q, tau, async, st);
  }
  void build_index(ip::MatrixView<const float> k, const ip::PoolParams& p, const ip::AccessStats* s, const float* q,
                   ip::PooledIndex& out) override {
    calls.push_back(fmt::format("build {}", k.rows));
    const Storage before(out, nullptr);
    in_->build_index(k, p, s, q, out);
    in_place.push_back(before == Storage(out, nullptr));
  }
  ip::RepoolCount update_index(ip::MatrixView<const float> k, const ip::PoolParams& p, const ip::AccessStats* s,
                               const float* q, float tau, ip::IndexState& st) override {
    calls.push_back(fmt::format("update {}", k.rows));
    const Storage before(st.index, &st.weights);
    const auto r = in_->update_index(k, p, s, q, tau, st);
    in_place.push_back(before == Storage(st.index, &st.weights));
    return r;
  }
  PendingUpdate begin_update_index(ip::MatrixView<const float> k, const ip::PoolParams& p, const ip::AccessStats* s,
                                   const float* q, float tau, ip::IndexState& st) override {
    calls.push_back(fmt::format("update {}", k.rows));
    const Storage before(st.index, &st.weights);
    auto u = in_->begin_update_index(k, p, s, q, tau, st);
    in_place.push_back(before == Storage(st.index, &st.weights));
    return u;
  }
  void end_update_index(PendingUpdate& u) override { in_->end_update_index(u); }
  void score_index(const ip::PooledIndex& i, const ip::IndexQuery& q, float* out) override { in_->score_index(i, q, out); }
  void score_tokens(ip::MatrixView<const float> k, const ip::IndexQuery& q, float* out) override {
    in_->score_tokens(k, q, out);
  }
  std::vector<std::int32_t> topk(const float* s, ip::Index64 n, ip::Index64 k) override { return in_->topk(s, n, k); }
  ip::AttentionOutput attention(ip::MatrixView<const float> k, ip::MatrixView<const float> v,
                                ip::MatrixView<const float> q, std::span<const ip::Index64> t, bool probs) override {
    return in_->attention(k, v, q, t, probs);
  }
  void update_stats(ip::AccessStats& s, std::span<const float> m,
                    std::span<const std::pair<ip::Index64, ip::Index64>> r) override {
    in_->update_stats(s, m, r);
  }

 private:
  // Where an index's host storage is and how large (a pool call that reallocates changes it).
  struct Storage {
    const void* payload;
    std::size_t payload_size;
    const void* weights;
    std::size_t weights_size;
    Storage(const ip::PooledIndex& i, const std::vector<float>* w)
        : payload(i.rows.payload.data()), payload_size(i.rows.payload.size()), weights(w ? w->data() : nullptr),
          weights_size(w ? w->size() : 0) {}
    bool operator==(const Storage&) const = default;
  };
  std::unique_ptr<ip::Backend> in_ = ip::make_cpu_backend(1);
};

// Every build or update the pipelines time follows, within one hold, a staging of the same keys for that
// kind of call. The plain loop stages once (its keys never change); the growing context before each pool.
// The first follows a warm-up with the same keys, which sized the storage it writes (so it writes in place).
TEST(Decode, PoolStagesStartFromStagedKeys) {
  struct Run {
    Weighting scheme;
    int append;
    bool async;
  };
  for (const Run& run : {Run{Weighting::uniform, 0, false}, Run{Weighting::tfidf, 0, false}, Run{Weighting::tfidf, 2, false},
                         Run{Weighting::tfidf, 0, true}}) {
    SCOPED_TRACE(fmt::format("{} append {} async {}", ip::to_string(run.scheme), run.append, run.async));
    const auto w = workload(run.append, 4);
    auto p = pipeline(run.scheme);
    p.append_per_step = run.append;
    p.async_updates = run.async;
    RecordsPoolCalls be;
    const auto r = ip::run_request(be, w, p);
    ASSERT_FALSE(be.calls.empty());
    EXPECT_EQ(be.calls.front(), "hold");
    EXPECT_EQ(be.calls.back(), "release");
    std::string staged;  // the last staging, consumed by a matching pool call
    std::string previous;
    int pools = 0, warm_ups = 0;
    for (const std::string& c : be.calls) {
      if (c.rfind("stage ", 0) == 0) {
        staged = c;
      } else if (c.rfind("warm ", 0) == 0) {
        ++warm_ups;
        EXPECT_EQ(pools, 0) << c;  // before the first pool call only
        EXPECT_EQ(previous.rfind("stage ", 0), 0u) << c;
      } else if (c.rfind("build ", 0) == 0 || c.rfind("update ", 0) == 0) {
        const bool update = c[0] == 'u';
        const std::string rows = c.substr(c.find(' ') + 1);
        EXPECT_EQ(staged, fmt::format("stage {} {}", rows, update ? "update" : "build")) << c;
        if (pools == 0) {
          EXPECT_EQ(previous, fmt::format("warm {}", c)) << "the first pool call is not warmed up";
        }
        ++pools;
        if (p.extended()) staged.clear();  // a growing context stages before each pool
      }
      previous = c;
    }
    EXPECT_EQ(pools, r.rebuilds);
    EXPECT_EQ(warm_ups, 1);
    ASSERT_EQ(be.in_place.size(), static_cast<std::size_t>(pools));
    EXPECT_TRUE(be.in_place.front()) << "the first pool call reallocated its host storage inside the clock";
  }
}

TEST(Decode, AsynchronousUpdatesScoreWithThePreviousStepsIndex) {
  // Async: step q scores with the index started at step q-1. With rebuild_every = 2 the synchronous loop
  // rebuilds at steps 0, 2, 4 and the asynchronous one makes those builds visible at steps 1, 3, 5: so
  // steps 0 and 1 select the same (the step-0 index) in both, and the async run's step 3 equals a sync run whose
  // index is rebuilt at step 2 only... the simplest exact check: steps 0 and 1.
  const auto w = workload(0, 4);
  auto sync = pipeline(Weighting::tfidf);
  sync.rebuild_every = 2;
  auto async = sync;
  async.async_updates = true;
  async.repool_tau = 0.0f;
  auto cpu = ip::make_cpu_backend(2);
  const auto a = ip::run_request(*cpu, w, sync);
  const auto b = ip::run_request(*cpu, w, async);
  const auto kg = static_cast<std::ptrdiff_t>(a.k_groups);
  EXPECT_TRUE(std::equal(a.selected.begin(), a.selected.begin() + 2 * kg, b.selected.begin()));
  EXPECT_TRUE(std::isnan(b.steps[2].pool_hidden_ms));  // the cpu backend overlaps nothing
  EXPECT_TRUE(b.steps[2].pool_async);                  // step 2 began an update (steps 0: sync build, 1: none)
  EXPECT_FALSE(b.steps[0].pool_async || b.steps[1].pool_async);
  // At step 2 the sync loop uses its fresh step-2 index, the async loop still the step-0 one.
  EXPECT_FALSE(std::equal(a.selected.begin() + 2 * kg, a.selected.begin() + 3 * kg, b.selected.begin() + 2 * kg));
  // rebuild_every = 1, async: step 1 uses the step-0 index, i.e. what sync with rebuild_every = 2 uses.
  async.rebuild_every = 1;
  const auto c = ip::run_request(*cpu, w, async);
  EXPECT_TRUE(std::equal(a.selected.begin(), a.selected.begin() + 2 * kg, c.selected.begin()));
}

TEST(Decode, AdaptiveRunsWithinItsBudget) {
  const auto w = workload();
  auto p = pipeline(Weighting::tfidf);
  p.adaptive.enabled = true;
  p.adaptive.budget_bytes_per_token = 16.0;  // D = 16 fp32: 64-byte rows, i.e. G = 4 on average
  p.adaptive.segment = 256;
  auto cpu = ip::make_cpu_backend(2);
  const auto r = ip::run_request(*cpu, w, p);
  EXPECT_TRUE(r.variable_groups);
  EXPECT_LE(r.index_bytes, 16.0 * w.tokens());
  EXPECT_GT(r.index_bytes, 0.9 * 16.0 * w.tokens());
  for (const auto& s : r.steps) {
    EXPECT_TRUE(std::isnan(s.block_recall));
    EXPECT_GT(s.token_recall, 0.0);
    EXPECT_GE(s.layer_tokens, 256);
    EXPECT_LE(s.layer_tokens, 256 + 15);
  }
  // Rebuilds: the segment scores read the access statistics when adaptive.access_weight > 0, so the
  // adaptive index is rebuilt in full every step even for a scheme that learns nothing (uniform); with
  // access_weight = 0 and such a scheme it is built once.
  ASSERT_EQ(p.adaptive.access_weight, 1.0f);  // the default
  EXPECT_EQ(r.rebuilds, static_cast<int>(r.steps.size()));
  for (const auto& s : r.steps) EXPECT_EQ(s.repooled_fraction, 1.0);
  auto u = p;
  u.pool.weights.scheme = Weighting::uniform;
  const auto ru = ip::run_request(*cpu, w, u);
  EXPECT_EQ(ru.rebuilds, static_cast<int>(ru.steps.size()));
  for (const auto& s : ru.steps) EXPECT_EQ(s.repooled_fraction, 1.0);
  auto once = p;
  once.pool.weights.scheme = Weighting::uniform;
  once.adaptive.access_weight = 0.0f;
  const auto ro = ip::run_request(*cpu, w, once);
  EXPECT_EQ(ro.rebuilds, 1);
  ASSERT_EQ(ro.steps.size(), 5u);
  EXPECT_EQ(ro.steps[0].repooled_fraction, 1.0);
  for (size_t q = 1; q < ro.steps.size(); ++q) EXPECT_EQ(ro.steps[q].repooled_fraction, 0.0) << q;
}

// The cosine query reference is the EMA m <- a m + (1 - a) q of past queries (mean over heads), started by the
// first query, and the index built at step q uses the reference of steps 0..q-1, in both loops: the plain one
// (repool_tau = -1, pipeline.cc) and the extended one (repool_tau = 0, every moved group re-pooled). Keys:
// group 0 (1,0) (0,1), group 1 (2,0) (0,2); G = 2, one head, queries (1,0) (0,1) (1,1), EMA factor 0.75,
// rebuilt every step. The last index (step 2) uses m = 0.75 (1,0) + 0.25 (0,1) = (0.75, 0.25): the weights are
// cos(k_i, m) ~ (0.75, 0.25), so c0 = (0.75, 0.25) and c1 = (1.5, 0.5). (With a and 1 - a swapped m would stay
// 0 after step 0 and be (0, 0.75) at step 2: c0 ~ (0.001, 0.999).)
TEST(Decode, CosineQueryReferenceIsTheEmaOfPastQueries) {
  ip::Workload w;
  w.index_keys.reshape({4, 2});
  const float keys[] = {1, 0, 0, 1, 2, 0, 0, 2};
  std::copy(keys, keys + 8, w.index_keys.data());
  w.index_queries.reshape({3, 1, 2});
  const float queries[] = {1, 0, 0, 1, 1, 1};
  std::copy(queries, queries + 6, w.index_queries.data());
  w.head_weights.reshape({3, 1});
  for (int q = 0; q < 3; ++q) w.head_weights.data()[q] = 1;
  for (const float tau : {-1.0f, 0.0f}) {
    SCOPED_TRACE(tau < 0 ? "plain loop" : "extended loop");
    auto p = pipeline(Weighting::cosine, Precision::fp32, 2, 2);
    p.pool.weights.cosine_reference = ip::CosineReference::query;
    p.query_ema = 0.75f;
    p.rebuild_every = 1;
    p.repool_tau = tau;
    ASSERT_EQ(p.extended(), tau >= 0);
    auto cpu = ip::make_cpu_backend(1);
    const auto r = ip::run_request(*cpu, w, p);
    EXPECT_EQ(r.rebuilds, 3);
    const auto got = ip::dequantize(r.index.rows);
    ASSERT_EQ(got.dim(0), 2);
    EXPECT_NEAR(got.data()[0], 0.75f, 1e-6);
    EXPECT_NEAR(got.data()[1], 0.25f, 1e-6);
    EXPECT_NEAR(got.data()[2], 1.5f, 1e-6);
    EXPECT_NEAR(got.data()[3], 0.5f, 1e-6);
    const std::vector<float> ref = {0.75f, 0.25f};
    const auto want = ip::pool_fp32(w.index_keys.mat(), p.pool, nullptr, ref.data());
    for (int i = 0; i < 4; ++i) EXPECT_EQ(got.data()[i], want.data()[i]) << i;
  }
}

TEST(Decode, NewPathsGiveTheSameBitsOnOneAndTwoThreads) {
  std::vector<std::pair<ip::Workload, ip::PipelineParams>> cases;
  {
    auto p = pipeline(Weighting::hybrid, Precision::fp8);
    p.hybrid.enabled = true;
    p.hybrid.window = 700;
    p.hybrid.chunk = 32;
    p.repool_tau = 0.05f;
    p.append_per_step = 2;
    cases.emplace_back(workload(2), p);
  }
  {
    auto p = pipeline(Weighting::tfidf, Precision::int8);
    p.adaptive.enabled = true;
    p.adaptive.budget_bytes_per_token = 9.0;
    cases.emplace_back(workload(), p);
  }
  {
    auto p = pipeline(Weighting::tfidf, Precision::int8);
    p.async_updates = true;
    p.repool_tau = 0.1f;
    p.hybrid.enabled = true;
    p.hybrid.combine = ip::parse_combine("sum");
    cases.emplace_back(workload(), p);
  }
  for (const auto& [w, p] : cases) {
    auto one = ip::make_cpu_backend(1);
    const auto a = ip::run_request(*one, w, p);
    auto two = ip::make_cpu_backend(2);
    const auto b = ip::run_request(*two, w, p);
    ip::set_num_threads(0);
    expect_same(a, b);
    for (size_t q = 0; q < a.steps.size(); ++q) EXPECT_EQ(a.steps[q].repooled_fraction, b.steps[q].repooled_fraction);
  }
}

TEST(Decode, InvalidCombinationsAreRejected) {
  const auto w = workload();
  auto cpu = ip::make_cpu_backend(1);
  auto p = pipeline(Weighting::tfidf);
  p.adaptive.enabled = true;
  p.adaptive.budget_bytes_per_token = 16;
  p.repool_tau = 0;
  EXPECT_IP_ERROR(ip::run_request(*cpu, w, p), "pool.repool_tau must be -1");
  p = pipeline(Weighting::tfidf);
  p.async_updates = true;
  p.append_per_step = 1;
  EXPECT_IP_ERROR(ip::run_request(*cpu, workload(1), p), "not supported");
  p = pipeline(Weighting::maxmin);
  p.adaptive.enabled = true;
  p.adaptive.budget_bytes_per_token = 16;
  EXPECT_IP_ERROR(ip::run_request(*cpu, w, p), "maxmin");
  // A hybrid layer needs a window of at least one token (validate_hybrid names the key).
  p = pipeline(Weighting::uniform);
  p.hybrid.enabled = true;
  p.hybrid.window = 0;
  EXPECT_IP_ERROR(ip::validate_extended_params(p, true), "hybrid.window = 0");
  EXPECT_IP_ERROR(ip::run_request(*cpu, w, p), "hybrid.window = 0");
}

// The CPU backend, counting the calls that only the fidelity reference makes: exact scores and dense
// attention (an attention call over no listed tokens).
class CountsReferenceCalls final : public ip::Backend {
 public:
  int score_tokens_calls = 0, dense_calls = 0;
  std::string name() const override { return "counts"; }
  std::string device() const override { return "cpu"; }
  void build_index(ip::MatrixView<const float> k, const ip::PoolParams& p, const ip::AccessStats* s, const float* q,
                   ip::PooledIndex& out) override {
    in_->build_index(k, p, s, q, out);
  }
  void score_index(const ip::PooledIndex& index, const ip::IndexQuery& q, float* out) override {
    in_->score_index(index, q, out);
  }
  void score_tokens(ip::MatrixView<const float> keys, const ip::IndexQuery& q, float* out) override {
    ++score_tokens_calls;
    in_->score_tokens(keys, q, out);
  }
  std::vector<std::int32_t> topk(const float* scores, ip::Index64 n, ip::Index64 k) override {
    return in_->topk(scores, n, k);
  }
  ip::AttentionOutput attention(ip::MatrixView<const float> keys, ip::MatrixView<const float> values,
                                ip::MatrixView<const float> queries, std::span<const ip::Index64> tokens,
                                bool want_probs) override {
    dense_calls += tokens.empty();
    return in_->attention(keys, values, queries, tokens, want_probs);
  }
  void update_stats(ip::AccessStats& stats, std::span<const float> step_mass,
                    std::span<const std::pair<ip::Index64, ip::Index64>> ranges) override {
    in_->update_stats(stats, step_mass, ranges);
  }
  ip::RepoolCount update_index(ip::MatrixView<const float> k, const ip::PoolParams& p, const ip::AccessStats* s,
                               const float* q, float tau, ip::IndexState& st) override {
    return in_->update_index(k, p, s, q, tau, st);
  }

 private:
  std::unique_ptr<ip::Backend> in_ = ip::make_cpu_backend(2);
};

// Points of a sweep on one workload share its fidelity reference (StepReference): a request run with the
// references an earlier run filled computes no exact scores and no dense attention, and every metric is the
// bits it has when computed afresh, whatever the scheme, group size, k, and loop (plain, hybrid, growing
// context, adaptive groups).
TEST(Decode, FidelityReferencesAreReusedAndChangeNoResult) {
  struct Case {
    std::string what;
    int append;
    ip::PipelineParams p;
  };
  std::vector<Case> cases;
  for (int G : {2, 4})
    cases.push_back({fmt::format("plain uniform G={}", G), 0, pipeline(Weighting::uniform, Precision::fp32, G)});
  cases.push_back({"plain tfidf fp8 G=8", 0, pipeline(Weighting::tfidf, Precision::fp8, 8)});
  cases.push_back({"plain k=512", 0, pipeline(Weighting::uniform, Precision::fp32, 4, 512)});
  {
    auto p = pipeline(Weighting::hybrid, Precision::int8);
    p.hybrid.enabled = true;
    p.hybrid.window = 700;
    p.hybrid.combine = ip::parse_combine("gate:0.5");
    cases.push_back({"hybrid layer", 0, p});
  }
  for (int G : {4, 2}) {
    auto p = pipeline(Weighting::tfidf, Precision::fp32, G);
    p.append_per_step = 3;
    p.repool_tau = 0.05f;
    cases.push_back({fmt::format("growing context G={}", G), 3, p});
  }
  {
    auto p = pipeline(Weighting::tfidf, Precision::int8);
    p.adaptive.enabled = true;
    p.adaptive.budget_bytes_per_token = 9.0;
    cases.push_back({"adaptive groups", 0, p});
  }
  const ip::Workload plain = workload(), growing = workload(3);
  ip::RequestReferences refs_plain, refs_growing;
  refs_plain.max_bytes = refs_growing.max_bytes = 1e12;
  std::map<std::pair<int, ip::Index64>, int> runs_on;  // (append, k) -> earlier cases on it
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    const ip::Workload& w = c.append ? growing : plain;
    ip::RequestReferences& refs = c.append ? refs_growing : refs_plain;
    CountsReferenceCalls fresh_be, shared_be;
    const auto fresh = ip::run_request(fresh_be, w, c.p);
    const auto shared = ip::run_request(shared_be, w, c.p, &refs);
    expect_same(fresh, shared);
    for (size_t q = 0; q < fresh.steps.size(); ++q) EXPECT_FALSE(std::isnan(shared.steps[q].token_recall)) << q;
    const int Q = static_cast<int>(w.steps());
    EXPECT_EQ(fresh_be.score_tokens_calls, Q);
    EXPECT_EQ(fresh_be.dense_calls, Q);
    const bool first = runs_on[{c.append, c.p.topk_tokens}]++ == 0;
    EXPECT_EQ(shared_be.score_tokens_calls, first ? Q : 0);
    EXPECT_EQ(shared_be.dense_calls, first ? Q : 0);
  }
  // Both k of the plain workload kept, one entry per step and k.
  EXPECT_EQ(refs_plain.steps.size(), 2 * plain.steps());
  EXPECT_GT(refs_plain.bytes(), 0u);
}

// prepare_references computes, before a run, everything the run's fidelity reads: the run then computes no
// exact scores, no dense attention and no block oracle (the references' bytes do not change), with the bits
// of a run that computes them as it goes, in every loop.
TEST(Decode, PreparedFidelityReferencesLeaveNothingForTheRunToCompute) {
  struct Case {
    std::string what;
    int append;
    ip::PipelineParams p;
  };
  std::vector<Case> cases;
  cases.push_back({"plain uniform G=4", 0, pipeline(Weighting::uniform)});
  cases.push_back({"plain tfidf fp8 G=8 k=512", 0, pipeline(Weighting::tfidf, Precision::fp8, 8, 512)});
  {
    auto p = pipeline(Weighting::hybrid, Precision::int8);
    p.hybrid.enabled = true;
    p.hybrid.window = 700;
    cases.push_back({"hybrid layer", 0, p});
  }
  {
    auto p = pipeline(Weighting::tfidf, Precision::fp32, 2);
    p.append_per_step = 3;
    cases.push_back({"growing context G=2", 3, p});
  }
  {
    auto p = pipeline(Weighting::tfidf, Precision::int8);
    p.adaptive.enabled = true;
    p.adaptive.budget_bytes_per_token = 9.0;
    cases.push_back({"adaptive groups", 0, p});
  }
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    const ip::Workload w = workload(c.append);
    const int Q = static_cast<int>(w.steps());
    CountsReferenceCalls fresh_be, prep_be, run_be;
    const auto fresh = ip::run_request(fresh_be, w, c.p);
    ip::RequestReferences refs;
    refs.max_bytes = 1e12;
    EXPECT_EQ(ip::prepare_references(prep_be, w, c.p, refs), Q);
    EXPECT_EQ(prep_be.score_tokens_calls, Q);
    EXPECT_EQ(prep_be.dense_calls, Q);
    ASSERT_EQ(refs.steps.size(), static_cast<size_t>(Q));
    const std::size_t bytes = refs.bytes();
    const auto shared = ip::run_request(run_be, w, c.p, &refs);
    EXPECT_EQ(run_be.score_tokens_calls, 0);
    EXPECT_EQ(run_be.dense_calls, 0);
    EXPECT_EQ(refs.bytes(), bytes);  // the block oracle was there already
    expect_same(fresh, shared);
    EXPECT_EQ(ip::prepare_references(prep_be, w, c.p, refs), 0);  // nothing left to compute
    // Without fidelity there is nothing to prepare.
    auto off = c.p;
    off.fidelity = false;
    ip::RequestReferences none;
    none.max_bytes = 1e12;
    EXPECT_EQ(ip::prepare_references(prep_be, w, off, none), 0);
    EXPECT_TRUE(none.steps.empty());
  }
  // Room for two steps: the first two are kept, the run computes the others (and keeps none of them).
  const ip::Workload w = workload();
  const auto p = pipeline(Weighting::uniform);
  ip::RequestReferences all;
  all.max_bytes = 1e12;
  CountsReferenceCalls a, b, c;
  ip::prepare_references(a, w, p, all);
  ip::RequestReferences two;
  two.max_bytes = 2.5 * static_cast<double>(all.bytes()) / static_cast<double>(w.steps());
  ip::prepare_references(b, w, p, two);
  EXPECT_EQ(two.steps.size(), 2u);
  const auto run = ip::run_request(c, w, p, &two);
  EXPECT_EQ(c.score_tokens_calls, static_cast<int>(w.steps()) - 2);
  EXPECT_EQ(two.steps.size(), 2u);
  expect_same(ip::run_request(a, w, p), run);
}

// References that would pass max_bytes are not kept: the next run computes them again, with the same bits.
TEST(Decode, FidelityReferencesOverTheirByteLimitAreNotKept) {
  const ip::Workload w = workload();
  const auto p = pipeline(Weighting::uniform);
  ip::RequestReferences refs;
  refs.max_bytes = 0;
  CountsReferenceCalls a, b;
  const auto first = ip::run_request(a, w, p, &refs);
  EXPECT_TRUE(refs.steps.empty());
  const auto second = ip::run_request(b, w, p, &refs);
  EXPECT_EQ(b.score_tokens_calls, static_cast<int>(w.steps()));
  expect_same(first, second);
  // Room for two steps' references: the first two are kept, the rest computed each time.
  ip::RequestReferences some;
  CountsReferenceCalls c, d;
  some.max_bytes = 1e12;
  ip::run_request(c, w, p, &some);
  const double per_step = static_cast<double>(some.bytes()) / static_cast<double>(w.steps());
  some.steps.clear();
  some.max_bytes = 2.5 * per_step;
  ip::run_request(c, w, p, &some);
  EXPECT_EQ(some.steps.size(), 2u);
  const auto third = ip::run_request(d, w, p, &some);
  EXPECT_EQ(d.score_tokens_calls, static_cast<int>(w.steps()) - 2);
  expect_same(first, third);
}

}  // namespace
