// The pool stage's (and the local branch's prefill's) one-time work on the cuda backend, on the CPU emulator (which counts allocations and
// first launches: emu/cuemu.h cuemu::counts). The pipelines warm the stage up before a request's first
// timed build or update (Backend::warm_up_build / warm_up_update), so every pool call they time allocates
// nothing and launches no kernel for the first time (on a GPU with lazy module loading, a first launch
// loads its kernel); and the warm-up changes no result. Emulator only: a GPU cannot count these.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/backend.h"
#include "core/pipeline.h"
#include "core/workload.h"
#include "kernels/cuda_backend.h"

namespace {

using ip::Index64;
using ip::Weighting;

// The cuda backend, with each pool call's allocations and first launches recorded; `warm` false makes
// the warm-ups do nothing (the pipelines' first pool call is then cold).
class CountsPoolCalls final : public ip::Backend {
 public:
  struct Call {
    std::string what;
    std::uint64_t allocations, first_launches;
  };
  std::vector<Call> calls;     // build_index, update_index, begin_update_index
  std::vector<Call> prefills;  // local_prefill
  bool warm = true;

  std::string name() const override { return in_->name(); }
  std::string device() const override { return in_->device(); }
  void hold_inputs(bool hold) override { in_->hold_inputs(hold); }
  void stage_keys(ip::MatrixView<const float> k, bool for_updates) override { in_->stage_keys(k, for_updates); }
  void warm_up_build(ip::MatrixView<const float> k, const ip::PoolParams& p, const ip::AccessStats* s, const float* q,
                     ip::PooledIndex& out) override {
    if (warm) in_->warm_up_build(k, p, s, q, out);
  }
  void warm_up_update(ip::MatrixView<const float> k, const ip::PoolParams& p, const ip::AccessStats* s, const float* q,
                      float tau, bool async, ip::IndexState& st) override {
    if (warm) in_->warm_up_update(k, p, s, q, tau, async, st);
  }
  void build_index(ip::MatrixView<const float> k, const ip::PoolParams& p, const ip::AccessStats* s, const float* q,
                   ip::PooledIndex& out) override {
    counted(fmt::format("build {}", k.rows), [&] { in_->build_index(k, p, s, q, out); });
  }
  ip::RepoolCount update_index(ip::MatrixView<const float> k, const ip::PoolParams& p, const ip::AccessStats* s,
                               const float* q, float tau, ip::IndexState& st) override {
    ip::RepoolCount r;
    counted(fmt::format("update {}", k.rows), [&] { r = in_->update_index(k, p, s, q, tau, st); });
    return r;
  }
  PendingUpdate begin_update_index(ip::MatrixView<const float> k, const ip::PoolParams& p, const ip::AccessStats* s,
                                   const float* q, float tau, ip::IndexState& st) override {
    PendingUpdate u;
    counted(fmt::format("begin update {}", k.rows), [&] { u = in_->begin_update_index(k, p, s, q, tau, st); });
    return u;
  }
  void end_update_index(PendingUpdate& u) override { in_->end_update_index(u); }
  void score_index(const ip::PooledIndex& i, const ip::IndexQuery& q, float* out) override { in_->score_index(i, q, out); }
  void score_tokens(ip::MatrixView<const float> k, const ip::IndexQuery& q, float* out) override {
    in_->score_tokens(k, q, out);
  }
  std::vector<std::int32_t> topk(const float* s, Index64 n, Index64 k) override { return in_->topk(s, n, k); }
  ip::AttentionOutput attention(ip::MatrixView<const float> k, ip::MatrixView<const float> v, ip::MatrixView<const float> q,
                                std::span<const Index64> t, bool probs) override {
    return in_->attention(k, v, q, t, probs);
  }
  void update_stats(ip::AccessStats& s, std::span<const float> m, std::span<const std::pair<Index64, Index64>> r) override {
    in_->update_stats(s, m, r);
  }
  void warm_up_local_prefill(const ip::Workload& w, Index64 b, Index64 e, int chunk) override {
    if (warm) in_->warm_up_local_prefill(w, b, e, chunk);
  }
  void local_prefill(const ip::Workload& w, Index64 b, Index64 e, int chunk, ip::LocalBranch& lb) override {
    counted(prefills, fmt::format("prefill {}", e - b), [&] { in_->local_prefill(w, b, e, chunk, lb); });
  }
  void local_append(const ip::Workload& w, Index64 e, ip::LocalBranch& lb) override { in_->local_append(w, e, lb); }
  void local_readout(const ip::LocalBranch& lb, ip::MatrixView<const float> q, float* out) override {
    in_->local_readout(lb, q, out);
  }

 private:
  template <class F>
  void counted(std::vector<Call>& into, std::string what, F&& f) {
    const cuemu::Counts a = cuemu::counts();
    f();
    const cuemu::Counts b = cuemu::counts();
    into.push_back({std::move(what), b.allocations - a.allocations, b.first_launches - a.first_launches});
  }
  template <class F>
  void counted(std::string what, F&& f) {
    counted(calls, std::move(what), std::forward<F>(f));
  }
  std::unique_ptr<ip::Backend> in_ = ip::cuda::make_cuda_backend(0);
};

ip::Workload workload(int append, int steps, bool attention) {
  ip::WorkloadSpec s;
  s.tokens = 3000;
  s.dim = 32;
  s.index_heads = 4;
  s.attn_dim = attention ? 16 : 0;
  s.attn_heads = 2;
  s.value_dim = 16;
  s.steps = steps;
  s.append_per_step = append;
  s.seed = 11;
  return ip::generate_request(s, 0);
}

struct Case {
  Weighting scheme;
  float tau;  // < 0: the plain loop (build_index); >= 0: the decode loop (update_index)
  bool async;
  int append;
  bool hybrid = false;  // the local branch too (its prefill is timed once a request: local_prefill_ms)
};

std::string describe(const Case& c) {
  return fmt::format("{} tau {} async {} append {} hybrid {}", ip::to_string(c.scheme), c.tau, c.async, c.append,
                     c.hybrid);
}

ip::PipelineParams params(const Case& c) {
  ip::PipelineParams p;
  p.pool.weights.scheme = c.scheme;
  p.pool.group_size = 4;
  p.topk_tokens = 256;
  p.repool_tau = c.tau;
  p.async_updates = c.async;
  p.append_per_step = c.append;
  p.hybrid.enabled = c.hybrid;
  p.hybrid.window = 256;
  p.hybrid.chunk = 32;
  return p;
}

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

const Case kCases[] = {
    {Weighting::uniform, -1.0f, false, 0},  // built once
    {Weighting::tfidf, -1.0f, false, 0},    // rebuilt every step
    {Weighting::positional, 0.0f, false, 0},
    {Weighting::tfidf, 0.05f, false, 0},
    {Weighting::tfidf, 0.05f, true, 0},  // both of the updater's slots in use
    {Weighting::cosine, 0.0f, false, 8},  // a growing context: the first update only (later ones grow)
    {Weighting::uniform, -1.0f, false, 0, true},
};

// Every pool call the pipelines time, warmed up, allocates nothing and loads no kernel; cold, the first
// one does both (so the counts can see what the warm-up moves out of the clock).
TEST(WarmUp, TimedPoolCallsAllocateNothingAndLoadNoKernel) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(describe(c));
    const auto w = workload(c.append, 4, true);
    CountsPoolCalls be;
    const auto r = ip::run_request(be, w, params(c));
    ASSERT_EQ(static_cast<int>(be.calls.size()), r.rebuilds);
    ASSERT_GE(be.calls.size(), 1u);
    const std::size_t checked = c.append > 0 ? 1 : be.calls.size();
    for (std::size_t i = 0; i < checked; ++i) {
      EXPECT_EQ(be.calls[i].allocations, 0u) << "pool call " << i << " (" << be.calls[i].what << ")";
      EXPECT_EQ(be.calls[i].first_launches, 0u) << "pool call " << i << " (" << be.calls[i].what << ")";
    }
    ASSERT_EQ(be.prefills.size(), c.hybrid ? 1u : 0u);
    for (const auto& call : be.prefills) {
      EXPECT_EQ(call.allocations, 0u) << call.what;
      EXPECT_EQ(call.first_launches, 0u) << call.what;
    }
  }
  // Cold (a fresh backend whose warm-ups do nothing): the first pool call allocates and loads.
  for (const Case& c : {kCases[0], kCases[3], kCases[6]}) {
    SCOPED_TRACE(describe(c) + ", cold");
    const auto w = workload(c.append, 2, true);
    CountsPoolCalls be;
    be.warm = false;
    ip::run_request(be, w, params(c));
    ASSERT_GE(be.calls.size(), 1u);
    EXPECT_GT(be.calls[0].allocations, 0u);
    if (c.hybrid) {
      ASSERT_EQ(be.prefills.size(), 1u);
      EXPECT_GT(be.prefills[0].allocations, 0u);
    }
  }
}

// The warm-up changes nothing the pipelines compute: the same selections and metrics, to the bit, with
// and without it.
TEST(WarmUp, ResultsAreTheSameWithoutIt) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(describe(c));
    const auto w = workload(c.append, 4, true);
    CountsPoolCalls warm, cold;
    cold.warm = false;
    const auto a = ip::run_request(warm, w, params(c));
    const auto b = ip::run_request(cold, w, params(c));
    EXPECT_EQ(a.selected, b.selected);
    EXPECT_EQ(a.index.rows.payload, b.index.rows.payload);
    ASSERT_EQ(a.steps.size(), b.steps.size());
    for (std::size_t q = 0; q < a.steps.size(); ++q) {
      EXPECT_TRUE(same_bits(a.steps[q].token_recall, b.steps[q].token_recall)) << "step " << q;
      EXPECT_TRUE(same_bits(a.steps[q].output_error, b.steps[q].output_error)) << "step " << q;
      EXPECT_TRUE(same_bits(a.steps[q].repooled_fraction, b.steps[q].repooled_fraction)) << "step " << q;
      EXPECT_TRUE(same_bits(a.steps[q].layer_output_error, b.steps[q].layer_output_error)) << "step " << q;
    }
  }
}

}  // namespace
