// The decode loop with the issue-7 features: hybrid layer (local gated linear branch + sparse branch),
// incremental re-pooling, asynchronous (one-step-stale, double-buffered) index updates, growing
// contexts and adaptive per-segment group sizes. With all of them off, run_request (pipeline.cc) runs
// its own loop; with pool.repool_tau = 0 and nothing else on, this loop gives that loop's bits
// (tests/core/decode_test.cc).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <optional>

#include "core/metrics.h"
#include "core/pipeline.h"
#include "core/topk.h"

namespace ip {
namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

}  // namespace

void validate_extended_params(const PipelineParams& p, bool has_attention) {
  validate_hybrid(p.hybrid);
  validate_adaptive(p.adaptive);
  IP_REQUIRE(p.append_per_step >= 0, "workload.append_per_step = {} (must be >= 0)", p.append_per_step);
  IP_REQUIRE(!p.hybrid.enabled || has_attention,
             "hybrid.enabled needs attention keys, values and queries (workload.attn_dim > 0)");
  IP_REQUIRE(std::isfinite(p.repool_tau), "pool.repool_tau = {} (must be finite)", p.repool_tau);
  IP_REQUIRE(!p.adaptive.enabled || p.repool_tau < 0.0f,
             "adaptive.enabled rebuilds its variable-size groups in full: pool.repool_tau must be -1 (it is {})",
             p.repool_tau);
  IP_REQUIRE(!p.adaptive.enabled || !p.async_updates, "adaptive.enabled with pool.async_updates is not supported");
  IP_REQUIRE(!p.adaptive.enabled ||
                 (p.pool.weights.scheme != Weighting::maxmin && p.pool.weights.scheme != Weighting::exact),
             "adaptive.enabled pools composites: pool.weighting = {} is not supported", to_string(p.pool.weights.scheme));
  IP_REQUIRE(!p.async_updates || p.append_per_step == 0,
             "pool.async_updates with a growing context (workload.append_per_step > 0) is not supported: the "
             "stale index would not cover the appended tokens");
}

namespace {

void validate_extended(const PipelineParams& p, const Workload& w, Index64 T0) {
  validate_extended_params(p, w.has_attention());
  IP_REQUIRE(T0 >= 1, "growing context: the workload has {} tokens, not more than steps x append_per_step = {}",
             w.tokens(), w.tokens() - T0);
  IP_REQUIRE(p.topk_tokens <= T0 + p.append_per_step,
             "select.topk_tokens = {} exceeds the context of {} tokens at the first decode step", p.topk_tokens,
             T0 + p.append_per_step);
}

// Tokens of [b, e) ranges (disjoint), ascending.
std::vector<Index64> tokens_of_ranges(std::vector<std::pair<Index64, Index64>> r) {
  std::sort(r.begin(), r.end());
  std::vector<Index64> out;
  for (auto [b, e] : r)
    for (Index64 t = b; t < e; ++t) out.push_back(t);
  return out;
}

}  // namespace

RequestResult run_request_extended(Backend& be, const Workload& w, const PipelineParams& p,
                                   RequestReferences* refs, std::atomic<std::int64_t>* steps_done) {
  validate_pipeline(p, w);
  const Index64 Tfull = w.tokens(), D = w.dim(), Q = w.steps(), H = w.index_heads(), A = p.append_per_step;
  const Index64 T0 = Tfull - Q * A;
  validate_extended(p, w, T0);
  const MatrixView<const float> all_keys = w.index_keys.mat();
  const WeightParams& wp = p.pool.weights;
  const bool learns = uses_stats(wp.scheme) || uses_query_reference(wp);
  const bool adaptive = p.adaptive.enabled;
  const bool hybrid = p.hybrid.enabled;
  const int G = effective_group_size(p.pool);

  // Residency (Backend::hold_inputs), as run_request holds: the workload, the fixed-group index states
  // and the statistics change only through `be` here (growing contexts change the statistics' size,
  // which a device backend notices). Not with adaptive groups: those are rebuilt on the host.
  std::optional<HeldInputs> held;
  if (!adaptive) held.emplace(be);

  RequestResult res;
  res.group_size = G;
  res.variable_groups = adaptive;
  AccessStats stats(T0, p.stats_decay);
  std::vector<float> query_ref;
  IndexState front, back;  // back: the buffer an asynchronous update writes
  Backend::PendingUpdate pending;
  bool back_pending = false;
  std::size_t pending_step = 0;  // the step that began the pending update
  // The count and times of an asynchronous update are final only after end_update_index (a device
  // backend measures them there): they go into the record of the step that began it.
  auto end_pending = [&] {
    be.end_update_index(pending);
    back_pending = false;
    StepRecord& began = res.steps.at(pending_step);
    began.repooled_fraction = pending.count.fraction();
    began.pool_hidden_ms = pending.hidden_ms;
  };
  AdaptiveIndex aidx;
  LocalBranch local;
  std::vector<float> group_scores, step_mass, local_out, layer_out;
  // RequestResult::selected_similarity (fixed groups; a cache model's relevance): the query EMA, scratch.
  const bool similarity = p.record_similarity && !adaptive;
  std::vector<float> sim_ref(similarity ? D : 0), sim_row(similarity ? 2 * D : 0);
  if (similarity) res.selected_similarity.reserve(static_cast<std::size_t>(Q * groups_for_budget(p.topk_tokens, G)));
  StepReference own;  // without refs: each step's fidelity reference in turn, in the same storage

  for (Index64 q = 0; q < Q; ++q) {
    StepRecord rec;
    const Index64 T = T0 + (q + 1) * A;  // decode step q appends its tokens, then queries
    const MatrixView<const float> keys = all_keys.rows_range(0, T);
    if (stats.tokens() < T) {
      stats.mass.resize(T, 0.0f);
      stats.count.resize(T, 0u);
    }
    rec.context_tokens = static_cast<double>(T);
    rec.pool_hidden_ms = 0;

    // 1. Index: build, update incrementally or swap in the asynchronous update.
    const bool due = q == 0 || A > 0 || ((learns || (adaptive && p.adaptive.access_weight > 0)) && q % p.rebuild_every == 0);
    PoolParams pp = p.pool;
    if (uses_query_reference(wp) && query_ref.empty()) pp.weights.cosine_reference = CosineReference::group_mean;
    const float* qref = query_ref.empty() ? nullptr : query_ref.data();
    if (p.async_updates && back_pending) {  // the update started last step is what this step scores with
      end_pending();
      std::swap(front, back);
    }
    if (due) {
      // On a device, under the hold: the new keys' upload before the clock, as the CPU reads them in place.
      if (!adaptive) be.stage_keys(keys, /*for_updates=*/true);
      if (q == 0 && !adaptive)  // one-time costs outside pool_ms
        be.warm_up_update(keys, pp, &stats, qref, p.repool_tau, p.async_updates, front);
      const auto t0 = Clock::now();
      if (adaptive) {
        build_adaptive_index(keys, pp, &stats, qref, p.adaptive, aidx);
        rec.repooled_fraction = 1.0;
      } else if (p.async_updates && q > 0) {
        pending = be.begin_update_index(keys, pp, &stats, qref, p.repool_tau, back);
        back_pending = true;
        pending_step = res.steps.size();  // this step's record: end_pending fills it
        rec.pool_async = true;
      } else {
        rec.repooled_fraction = be.update_index(keys, pp, &stats, qref, p.repool_tau, front).fraction();
        if (p.async_updates) back = front;
      }
      rec.pool_ms = ms_since(t0);
      ++res.rebuilds;
    }
    const IndexQuery iq{w.index_queries.slice(q), w.head_weights.data() + q * H};

    // 2. Compressed scoring and selection.
    std::vector<std::int32_t> sel;
    std::vector<std::pair<Index64, Index64>> ranges;
    auto t0 = Clock::now();
    if (adaptive) {
      group_scores.resize(aidx.groups());
      be.score_index(aidx.rows, iq, group_scores.data());
      rec.score_ms = ms_since(t0);
      t0 = Clock::now();
      sel = select_variable(group_scores.data(), aidx, p.topk_tokens);
      rec.topk_ms = ms_since(t0);
      for (std::int32_t g : sel) ranges.emplace_back(aidx.begin[g], aidx.begin[g + 1]);
    } else {
      const PooledIndex& index = front.index;
      res.groups = index.groups();
      res.k_groups = groups_for_budget(p.topk_tokens, G);
      group_scores.resize(res.groups);
      be.score_index_for_topk(index, iq, group_scores.data());  // read by topk only
      rec.score_ms = ms_since(t0);
      t0 = Clock::now();
      sel = be.topk(group_scores.data(), res.groups, res.k_groups);
      rec.topk_ms = ms_since(t0);
      for (std::int32_t g : sel) ranges.emplace_back(Index64{g} * G, std::min(T, (Index64{g} + 1) * G));
      if (similarity)  // of the index this step scored (an asynchronous update's result only from the next)
        record_similarity(index, iq, H, q == 0 ? 0.0f : p.query_ema, sim_ref, sim_row, sel, res.selected_similarity);
    }
    res.selected.insert(res.selected.end(), sel.begin(), sel.end());
    const auto sel_tokens = tokens_of_ranges(ranges);

    // 3. Sparse branch, then the local branch and the combination.
    AttentionOutput sparse;
    MatrixView<const float> akeys, vals;
    if (w.has_attention()) {
      akeys = w.attn_keys.mat().rows_range(0, T);
      vals = w.values.mat().rows_range(0, T);
      t0 = Clock::now();
      sparse = be.attention(akeys, vals, w.attn_queries.slice(q), sel_tokens, true);
      rec.attention_ms = ms_since(t0);
    }
    if (hybrid) {
      if (q == 0) {
        const Index64 begin = std::max<Index64>(0, T - p.hybrid.window);
        be.warm_up_local_prefill(w, begin, T, p.hybrid.chunk);  // one-time costs outside local_prefill_ms
        t0 = Clock::now();
        be.local_prefill(w, begin, T, p.hybrid.chunk, local);
        res.local_prefill_ms = ms_since(t0);
      }
      const Index64 out_n = sparse.out.size();
      local_out.resize(out_n);
      layer_out.resize(out_n);
      t0 = Clock::now();
      be.local_append(w, T, local);
      be.local_readout(local, w.attn_queries.slice(q), local_out.data());
      combine_outputs(p.hybrid.combine, sparse.out.data(), local_out.data(), out_n, layer_out.data());
      rec.local_ms = ms_since(t0);
    }
    rec.layer_ms = rec.score_ms + rec.topk_ms + rec.attention_ms + rec.local_ms;
    // Tokens the layer covers: the selection, plus the local window (its state stands for those tokens).
    std::vector<Index64> layer_tokens = sel_tokens;
    if (hybrid) {
      for (Index64 t = local.begin; t < local.end; ++t) layer_tokens.push_back(t);
      std::sort(layer_tokens.begin(), layer_tokens.end());
      layer_tokens.erase(std::unique(layer_tokens.begin(), layer_tokens.end()), layer_tokens.end());
    }
    rec.layer_tokens = static_cast<double>(layer_tokens.size());

    // 4. Fidelity against the exact indexer, the block oracle and dense attention.
    rec.token_recall = rec.block_recall = rec.mass_recall = rec.output_error = kNaN;
    rec.layer_output_error = rec.layer_mass_recall = kNaN;
    if (p.fidelity) {
      t0 = Clock::now();
      StepReference& slot = refs ? refs->slot(q, p.topk_tokens) : own;
      const StepReference& ref = step_reference(be, w, q, T, p.topk_tokens, slot);
      if (adaptive) {
        Index64 hit = 0;
        for (std::int32_t t : ref.exact) hit += std::binary_search(sel_tokens.begin(), sel_tokens.end(), Index64{t});
        rec.token_recall = static_cast<double>(hit) / static_cast<double>(ref.exact.size());
      } else {
        rec.token_recall = token_recall(sel, G, ref.exact);
        rec.block_recall = block_recall(sel, step_oracle(be, slot, G, res.k_groups));
      }
      if (w.has_attention()) {
        const AttentionOutput& dense = ref.dense;
        rec.mass_recall = attention_mass_recall(dense.probs.mat(), sel_tokens);
        rec.output_error = output_error(sparse.out.mat(), dense.out.mat());
        rec.layer_mass_recall = hybrid ? attention_mass_recall(dense.probs.mat(), layer_tokens) : rec.mass_recall;
        rec.layer_output_error =
            hybrid ? output_error(MatrixView<const float>(layer_out.data(), dense.out.dim(0), dense.out.dim(1)),
                                  dense.out.mat())
                   : rec.output_error;
      }
      if (refs) refs->settle(q, p.topk_tokens);
      rec.fidelity_ms = ms_since(t0);
    }

    // 5. Feedback: the sparse branch's attention mass (mean over heads; uniform over the selection
    //    without an attention stage) and the selection go into the access statistics.
    step_attention_mass(w, sparse, sel_tokens, T, step_mass);
    for (const auto& [b, e] : ranges) {
      float m = 0.0f;
      for (Index64 t = b; t < e; ++t) m += step_mass[t];
      res.selected_mass.push_back(m);
    }
    be.update_stats(stats, step_mass, ranges);
    if (uses_query_reference(wp)) {
      if (query_ref.empty()) query_ref.assign(D, 0.0f);
      const float a = q == 0 ? 0.0f : p.query_ema;
      for (Index64 d = 0; d < D; ++d) {
        float m = 0.0f;
        for (Index64 j = 0; j < H; ++j) m += iq.heads(j, d);
        query_ref[d] = a * query_ref[d] + (1.0f - a) * (m / static_cast<float>(H));
      }
    }
    res.steps.push_back(rec);
    if (steps_done) steps_done->fetch_add(1, std::memory_order_relaxed);
  }
  if (p.async_updates && back_pending) end_pending();  // never leave an update running

  res.tokens = Tfull;
  res.index = adaptive ? aidx.rows : front.index;
  res.groups = adaptive ? aidx.groups() : front.index.groups();
  if (adaptive) res.k_groups = 0;
  res.index_bytes = static_cast<double>(res.index.bytes());
  res.exact_index_bytes =
      static_cast<double>(Tfull) * (D * element_bytes(p.pool.precision) + scale_bytes(p.pool.precision));
  res.macs_per_query = scoring_macs(res.index.rows.rows, H, D);
  res.exact_macs_per_query = scoring_macs(Tfull, H, D);
  // G, as the plain loop and the batched decoder say; adaptive groups: their mean size (pipeline.h).
  res.tokens_per_group =
      adaptive ? static_cast<double>(Tfull) / static_cast<double>(res.groups) : static_cast<double>(G);
  return res;
}

}  // namespace ip
