#include "core/pipeline.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include "core/metrics.h"
#include "core/ranges.h"
#include "core/topk.h"

namespace ip {
namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

}  // namespace

void record_similarity(const PooledIndex& index, const IndexQuery& iq, Index64 H, float a, std::vector<float>& m,
                       std::vector<float>& row, const std::vector<std::int32_t>& sel, std::vector<float>& out) {
  const Index64 D = static_cast<Index64>(m.size());
  double mm = 0;
  for (Index64 d = 0; d < D; ++d) {
    float s = 0.0f;
    for (Index64 j = 0; j < H; ++j) s += iq.heads(j, d);
    m[d] = a * m[d] + (1.0f - a) * (s / static_cast<float>(H));
    mm += static_cast<double>(m[d]) * m[d];
  }
  const int rows = index.rows_per_group();
  for (const std::int32_t g : sel) {
    for (int r = 0; r < rows; ++r) dequantize_row(index.rows, Index64{g} * rows + r, row.data() + r * D);
    double cm = 0, cc = 0;
    for (Index64 d = 0; d < D; ++d) {
      const double c = rows == 2 ? 0.5 * (static_cast<double>(row[d]) + row[D + d]) : row[d];
      cm += c * m[d];
      cc += c * c;
    }
    const double cosine = cc > 0 && mm > 0 ? cm / std::sqrt(cc * mm) : 0.0;
    out.push_back(static_cast<float>(0.5 * (1.0 + std::clamp(cosine, -1.0, 1.0))));
  }
}

void validate_pipeline_params(const PipelineParams& p) {
  IP_REQUIRE(p.pool.group_size >= 1, "pool.group_size = {} (must be >= 1)", p.pool.group_size);
  IP_REQUIRE(p.topk_tokens >= 1, "select.topk_tokens = {} (must be >= 1)", p.topk_tokens);
  IP_REQUIRE(p.rebuild_every >= 1, "pool.rebuild_every = {} (must be >= 1)", p.rebuild_every);
  IP_REQUIRE(p.stats_decay >= 0.0f && p.stats_decay <= 1.0f, "pool.tfidf_decay = {} outside [0, 1]", p.stats_decay);
  IP_REQUIRE(p.query_ema >= 0.0f && p.query_ema < 1.0f, "pool.query_ema = {} outside [0, 1)", p.query_ema);
  validate_pool_params(p.pool);
  // k_g = ceil(k / G) rounds a budget up to whole groups (G = 3 at k = 512 reads 513 tokens), but a group
  // larger than the whole budget would read G tokens for a budget of k. Adaptive sizes choose their own G.
  const int G = effective_group_size(p.pool);
  IP_REQUIRE(p.adaptive.enabled || G <= p.topk_tokens,
             "pool.group_size = {} exceeds select.topk_tokens = {}: one group is larger than the whole token budget "
             "(each step would read {} tokens for a budget of {})",
             G, p.topk_tokens, G, p.topk_tokens);
}

void validate_pipeline(const PipelineParams& p, const Workload& w) {
  const Index64 T = w.tokens();
  IP_REQUIRE(T >= 1, "pipeline: empty context");
  validate_pipeline_params(p);
  IP_REQUIRE(p.topk_tokens <= T, "select.topk_tokens = {} exceeds the context of {} tokens", p.topk_tokens, T);
}

void step_attention_mass(const Workload& w, const AttentionOutput& sparse, std::span<const Index64> sel_tokens,
                         Index64 T, std::vector<float>& step_mass) {
  step_mass.assign(static_cast<std::size_t>(T), 0.0f);
  const Index64 n = static_cast<Index64>(sel_tokens.size());
  for (Index64 i = 0; i < n; ++i) {
    float m = 0.0f;
    if (w.has_attention()) {
      const Index64 Ha = sparse.probs.dim(0);
      for (Index64 h = 0; h < Ha; ++h) m += sparse.probs.data()[h * n + i];
      m /= static_cast<float>(Ha);
    } else {
      m = 1.0f / static_cast<float>(n);
    }
    step_mass[sel_tokens[i]] = m;
  }
}

std::size_t StepReference::bytes() const {
  std::size_t b = token_scores.size() * sizeof(float) + exact.size() * sizeof(std::int32_t) + dense.out.bytes() +
                  dense.probs.bytes();
  for (const auto& [g, o] : oracle) b += o.size() * sizeof(std::int32_t);
  return b;
}

std::size_t RequestReferences::bytes() const {
  std::size_t b = 0;
  for (const auto& [key, r] : steps) b += r.bytes();
  return b;
}

void RequestReferences::settle(Index64 q, Index64 topk_tokens) {
  if (static_cast<double>(bytes()) > max_bytes) steps.erase({q, topk_tokens});
}

const StepReference& step_reference(Backend& be, const Workload& w, Index64 q, Index64 T, Index64 topk_tokens,
                                    StepReference& slot) {
  if (slot.holds(q, T, topk_tokens)) return slot;
  slot.step = -1;  // holds nothing until filled
  slot.oracle.clear();
  const Index64 H = w.index_heads();
  const IndexQuery iq{w.index_queries.slice(q), w.head_weights.data() + q * H};
  slot.token_scores.resize(static_cast<std::size_t>(T));
  be.score_tokens(w.index_keys.mat().rows_range(0, T), iq, slot.token_scores.data());
  slot.exact = be.topk(slot.token_scores.data(), T, topk_tokens);
  if (w.has_attention())
    slot.dense = be.attention(w.attn_keys.mat().rows_range(0, T), w.values.mat().rows_range(0, T),
                              w.attn_queries.slice(q), {}, true);
  else
    slot.dense = AttentionOutput{};
  slot.step = q;
  slot.tokens = T;
  slot.topk_tokens = topk_tokens;
  return slot;
}

const std::vector<std::int32_t>& step_oracle(Backend& be, StepReference& ref, int G, Index64 k_groups) {
  IP_REQUIRE(ref.step >= 0, "step_oracle: the reference holds no step");
  auto it = ref.oracle.find({G, k_groups});
  if (it == ref.oracle.end()) {
    std::vector<float> group_scores(static_cast<std::size_t>(num_groups(ref.tokens, G)));
    group_max_scores(ref.token_scores.data(), ref.tokens, G, group_scores.data());
    it = ref.oracle
             .emplace(std::pair{G, k_groups},
                      be.topk(group_scores.data(), static_cast<Index64>(group_scores.size()), k_groups))
             .first;
  }
  return it->second;
}

Index64 prepare_references(Backend& be, const Workload& w, const PipelineParams& p, RequestReferences& refs) {
  if (!p.fidelity) return 0;
  validate_pipeline(p, w);
  const Index64 Q = w.steps(), A = p.append_per_step, Tfull = w.tokens();
  const int G = effective_group_size(p.pool);
  const Index64 k_groups = groups_for_budget(p.topk_tokens, G);
  Index64 computed = 0;
  for (Index64 q = 0; q < Q; ++q) {
    const Index64 T = Tfull - (Q - 1 - q) * A;  // the context decode step q scores (both loops)
    StepReference& slot = refs.slot(q, p.topk_tokens);
    if (!slot.holds(q, T, p.topk_tokens)) ++computed;
    step_reference(be, w, q, T, p.topk_tokens, slot);
    if (!p.adaptive.enabled) step_oracle(be, slot, G, k_groups);
    if (static_cast<double>(refs.bytes()) > refs.max_bytes) {
      refs.steps.erase({q, p.topk_tokens});
      break;
    }
  }
  return computed;
}

void measure_step_fidelity(Backend& be, const Workload& w, Index64 q, std::span<const std::int32_t> sel,
                           std::span<const Index64> sel_tokens, int G, Index64 topk_tokens, Index64 k_groups,
                           MatrixView<const float> sparse_out, StepReference& ref, StepRecord& rec) {
  const StepReference& r = step_reference(be, w, q, w.tokens(), topk_tokens, ref);
  rec.token_recall = token_recall(sel, G, r.exact);
  rec.block_recall = block_recall(sel, step_oracle(be, ref, G, k_groups));
  if (w.has_attention()) {
    rec.mass_recall = attention_mass_recall(r.dense.probs.mat(), sel_tokens);
    rec.output_error = output_error(sparse_out, r.dense.out.mat());
  }
}

RequestResult run_request(Backend& be, const Workload& w, const PipelineParams& p, RequestReferences* refs,
                          std::atomic<std::int64_t>* steps_done) {
  if (p.extended()) return run_request_extended(be, w, p, refs, steps_done);
  validate_pipeline(p, w);
  const HeldInputs held(be);  // the workload, index, statistics and score buffers change only through `be`
  const Index64 T = w.tokens(), D = w.dim(), Q = w.steps(), H = w.index_heads();
  const MatrixView<const float> keys = w.index_keys.mat();
  const WeightParams& wp = p.pool.weights;
  const bool learns = uses_stats(wp.scheme) || uses_query_reference(wp);

  RequestResult res;
  res.tokens = T;
  res.group_size = effective_group_size(p.pool);
  const int G = res.group_size;
  res.groups = num_groups(T, G);
  res.k_groups = groups_for_budget(p.topk_tokens, G);
  res.selected.reserve(static_cast<std::size_t>(Q * res.k_groups));
  res.selected_mass.reserve(static_cast<std::size_t>(Q * res.k_groups));

  AccessStats stats(T, p.stats_decay);
  std::vector<float> query_ref;  // EMA of past queries (mean over heads); empty until one step has run
  std::vector<float> sim_ref(p.record_similarity ? D : 0), sim_row(p.record_similarity ? 2 * D : 0);
  if (p.record_similarity) res.selected_similarity.reserve(static_cast<std::size_t>(Q * res.k_groups));
  std::vector<float> group_scores(res.groups), step_mass(T);

  StepReference own;  // without refs: each step's reference in turn, in the same storage
  be.stage_keys(keys, /*for_updates=*/false);  // on a device: pool_ms without the keys' upload
  for (Index64 q = 0; q < Q; ++q) {
    StepRecord rec;
    // 1. (Re)build the index when the scheme learns from history, or on the first step.
    const bool rebuild = q == 0 || (learns && q % p.rebuild_every == 0);
    if (rebuild) {
      PoolParams pp = p.pool;
      if (uses_query_reference(wp) && query_ref.empty()) pp.weights.cosine_reference = CosineReference::group_mean;
      const float* qref = query_ref.empty() ? nullptr : query_ref.data();
      if (q == 0) be.warm_up_build(keys, pp, &stats, qref, res.index);  // one-time costs outside pool_ms
      IP_RANGE(pool);
      const auto t0 = Clock::now();
      be.build_index(keys, pp, &stats, qref, res.index);
      rec.pool_ms = ms_since(t0);
      ++res.rebuilds;
    }
    const IndexQuery iq{w.index_queries.slice(q), w.head_weights.data() + q * H};

    // 2. Compressed scoring and selection.
    auto t0 = Clock::now();
    {
      IP_RANGE(score);
      be.score_index_for_topk(res.index, iq, group_scores.data());  // read by topk only
    }
    rec.score_ms = ms_since(t0);
    t0 = Clock::now();
    const auto sel = [&] {
      IP_RANGE(topk);
      return be.topk(group_scores.data(), res.groups, res.k_groups);
    }();
    rec.topk_ms = ms_since(t0);
    res.selected.insert(res.selected.end(), sel.begin(), sel.end());
    if (p.record_similarity) record_similarity(res.index, iq, H, q == 0 ? 0.0f : p.query_ema, sim_ref, sim_row,
                                               sel, res.selected_similarity);
    const auto sel_tokens = tokens_of_groups(sel, G, T);

    // 3. Block-sparse attention over the selected groups.
    AttentionOutput sparse;
    if (w.has_attention()) {
      IP_RANGE(attention);
      t0 = Clock::now();
      sparse = be.attention(w.attn_keys.mat(), w.values.mat(), w.attn_queries.slice(q), sel_tokens, true);
      rec.attention_ms = ms_since(t0);
    }

    // 4. Fidelity against the exact indexer, the block oracle and dense attention.
    rec.token_recall = rec.block_recall = rec.mass_recall = rec.output_error = kNaN;
    if (p.fidelity) {
      IP_RANGE(fidelity);
      t0 = Clock::now();
      measure_step_fidelity(be, w, q, sel, sel_tokens, G, p.topk_tokens, res.k_groups,
                            w.has_attention() ? sparse.out.mat() : MatrixView<const float>(),
                            refs ? refs->slot(q, p.topk_tokens) : own, rec);
      if (refs) refs->settle(q, p.topk_tokens);
      rec.fidelity_ms = ms_since(t0);
    }

    // 5. Feedback: this step's attention mass (mean over heads; uniform over the selection when the
    //    workload has no attention stage) and selection go into the access statistics.
    IP_RANGE(stats);
    step_attention_mass(w, sparse, sel_tokens, T, step_mass);
    // Mass per selected group, in selection order (the relevance a cache model sees).
    for (std::int32_t g : sel) {
      float m = 0.0f;
      for (Index64 t = Index64{g} * G; t < std::min(T, (Index64{g} + 1) * G); ++t) m += step_mass[t];
      res.selected_mass.push_back(m);
    }
    std::vector<std::pair<Index64, Index64>> ranges;
    ranges.reserve(sel.size());
    for (std::int32_t g : sel) ranges.emplace_back(Index64{g} * G, std::min(T, (Index64{g} + 1) * G));
    be.update_stats(stats, step_mass, ranges);
    if (uses_query_reference(wp)) {
      if (query_ref.empty()) query_ref.assign(D, 0.0f);
      const float a = q == 0 ? 0.0f : p.query_ema;  // the first query starts the average
      for (Index64 d = 0; d < D; ++d) {
        float m = 0.0f;
        for (Index64 j = 0; j < H; ++j) m += iq.heads(j, d);
        query_ref[d] = a * query_ref[d] + (1.0f - a) * (m / static_cast<float>(H));
      }
    }
    rec.local_ms = 0;  // issue-7 columns for the plain sparse layer
    rec.layer_ms = rec.score_ms + rec.topk_ms + rec.attention_ms;
    rec.layer_output_error = rec.output_error;
    rec.layer_mass_recall = rec.mass_recall;
    rec.layer_tokens = static_cast<double>(sel_tokens.size());
    rec.repooled_fraction = rebuild ? 1.0 : 0.0;
    rec.context_tokens = static_cast<double>(T);
    rec.pool_hidden_ms = 0;
    res.steps.push_back(rec);
    if (steps_done) steps_done->fetch_add(1, std::memory_order_relaxed);
  }
  res.tokens_per_group = G;

  res.index_bytes = static_cast<double>(res.index.bytes());
  res.exact_index_bytes = static_cast<double>(T) * (D * element_bytes(p.pool.precision) + scale_bytes(p.pool.precision));
  res.macs_per_query = scoring_macs(res.index.rows.rows, H, D);
  res.exact_macs_per_query = scoring_macs(T, H, D);
  return res;
}

}  // namespace ip
