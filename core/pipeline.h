// One request through the whole pipeline, step by step: (re)build the index, score, select, attend,
// measure fidelity against the exact indexer and dense attention, feed the statistics back.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "core/adaptive.h"
#include "core/backend.h"
#include "core/hybrid.h"
#include "core/kernel_forms.h"
#include "core/workload.h"

namespace ip {

struct PipelineParams {
  PoolParams pool;
  Index64 topk_tokens = 2048;  // k, the token budget
  float stats_decay = 0.99f;   // gamma of the access statistics
  float query_ema = 0.9f;      // EMA factor of the query reference (cosine.reference = query)
  int rebuild_every = 1;       // steps between index rebuilds for schemes that learn from history
  bool fidelity = true;        // compute the exact indexer and dense attention for the metrics
  bool record_similarity = false;  // fill RequestResult::selected_similarity (a cache model's relevance)
  // Issue 7 (core/decode.cc runs them; all off by default, and then run_request is the loop below).
  HybridParams hybrid;          // local gated linear branch + the sparse branch
  float repool_tau = -1.0f;     // < 0: full rebuilds; >= 0: incremental re-pooling (core/incremental.h)
  bool async_updates = false;   // score step q with the index built during step q-1 (double-buffered)
  Index64 append_per_step = 0;  // growing context: tokens decode appends per step
  AdaptiveParams adaptive;      // per-segment group sizes under a byte budget (core/adaptive.h)
  KernelForms kernels;          // forms of the cuda backend's kernels (config [kernels]); the cpu ignores them
  bool extended() const {
    return hybrid.enabled || repool_tau >= 0.0f || async_updates || append_per_step > 0 || adaptive.enabled;
  }
};

// Checks of the parameters alone (no workload; config validation runs it for every point before any work):
// pool.group_size, select.topk_tokens >= 1 and >= the effective group size (except with adaptive sizes),
// pool.rebuild_every, pool.tfidf_decay, pool.query_ema and validate_pool_params. Messages name the keys.
void validate_pipeline_params(const PipelineParams& p);
// validate_pipeline_params, and the context against the budget.
void validate_pipeline(const PipelineParams& p, const Workload& w);

// Per decode step. Times in milliseconds of wall clock on the host.
struct StepRecord {
  double token_recall = 0, block_recall = 0, mass_recall = 0, output_error = 0;  // NaN when not measured
  double pool_ms = 0;   // 0 when the index was not rebuilt this step; keys staged before it (Backend::stage_keys)
  double score_ms = 0, topk_ms = 0, attention_ms = 0, fidelity_ms = 0;
  // Issue 7. The "layer" is what produces the attention output: the sparse branch alone, or the hybrid.
  double local_ms = 0;           // local branch this step (append, read-out, combine); 0 without hybrid
  double layer_ms = 0;           // score_ms + topk_ms + attention_ms + local_ms
  double layer_output_error = 0, layer_mass_recall = 0;  // of the layer's output / tokens it reads; NaN unmeasured
  double layer_tokens = 0;       // tokens the layer reads this step (selection, plus the local window)
  double repooled_fraction = 0;  // groups pooled this step / groups (1: full build; 0: no update)
  double context_tokens = 0;     // context length at this step
  // Asynchronous update begun this step (pool.async_updates): the part of the update's own run time that
  // overlapped the next step's main-stream work (cuda: from CUDA events, kernels/cuda_update.h; NaN: not
  // measured, as on cpu, where nothing overlaps). Filled when the update ends, one step later.
  double pool_hidden_ms = 0;
  bool pool_async = false;       // this step began an asynchronous update (its pool_hidden_ms is meaningful)
};

struct RequestResult {
  std::vector<StepRecord> steps;
  std::vector<std::int32_t> selected;  // [Q, k_g] selected group ids, best first
  std::vector<float> selected_mass;    // [Q, k_g] attention mass each selected group got (mean over heads;
                                       // 1/k_g each when the workload has no attention stage)
  std::vector<float> selected_similarity;  // [Q, k_g] (1 + cos(c_g, m_q)) / 2 of each selected group, with
                                           // c_g its composite key as the index stood at that step (maxmin:
                                           // the mean of its two bound rows) and m_q the EMA (factor
                                           // query_ema) of the queries up to and including step q, each the
                                           // mean over heads; 0.5 when a norm is 0. Empty unless
                                           // record_similarity.
  PooledIndex index;                   // the index as it stood after the last step
  Index64 tokens = 0, groups = 0, k_groups = 0;
  int group_size = 1;
  double index_bytes = 0;             // bytes of the stored index
  double exact_index_bytes = 0;       // bytes of uncompressed keys in the same precision
  double macs_per_query = 0;          // scoring multiply-adds per query (compressed)
  double exact_macs_per_query = 0;    // the same for the exact indexer
  int rebuilds = 0;
  double local_prefill_ms = 0;  // chunked gated linear attention over the window (hybrid; once per request)
  double tokens_per_group = 0;  // context tokens per stored group at the end (G, or the adaptive mean)
  bool variable_groups = false; // adaptive: `selected` holds a variable number of groups per step (cache model off)
};

// RequestResult::selected_similarity for one step: folds the step's query (mean over heads) into the EMA m
// (factor a; a = 0 starts it), then appends (1 + cos(c_g, m)) / 2 for each selected group g of `index`.
// m has D entries, row 2 D (scratch). Serial and in a fixed order: the same bits on every thread count.
// Both decode loops record it when PipelineParams::record_similarity is set.
void record_similarity(const PooledIndex& index, const IndexQuery& iq, Index64 H, float a, std::vector<float>& m,
                       std::vector<float>& row, const std::vector<std::int32_t>& sel, std::vector<float>& out);

// The attention mass each token got this step, into step_mass (resized to T, 0 outside the selection):
// the mean over heads of the sparse attention's probabilities, or 1/n over the n selected tokens when
// the workload has no attention stage. The feedback both decode loops give the access statistics.
void step_attention_mass(const Workload& w, const AttentionOutput& sparse, std::span<const Index64> sel_tokens,
                         Index64 T, std::vector<float>& step_mass);

// What a step's fidelity is measured against. It depends on the workload, the step, the context length
// and k, never on the index: the exact indexer's scores and top-k, the block oracle at each group size,
// and dense attention. Points of a sweep that share a workload can share it (the runner does on the cpu
// backend, whose results are the same bits on every call): the fidelity code fills a reference the first
// time and reads it afterwards, so every metric is exactly what computing it again would give.
struct StepReference {
  Index64 step = -1, tokens = 0, topk_tokens = 0;  // what it holds (step -1: nothing yet)
  std::vector<float> token_scores;      // [tokens] the exact indexer's scores
  std::vector<std::int32_t> exact;      // its top-topk_tokens token ids, in the backend's order
  // by (G, k_groups): the top-k_groups groups of G tokens by their best token score
  std::map<std::pair<int, Index64>, std::vector<std::int32_t>> oracle;
  AttentionOutput dense;                // dense attention with probabilities (empty without an attention stage)
  bool holds(Index64 q, Index64 T, Index64 k) const { return step == q && tokens == T && topk_tokens == k; }
  std::size_t bytes() const;
};

// Step q's reference over the first T rows of the workload (T = w.tokens() unless the context grows):
// `slot` itself when it holds (q, T, topk_tokens), else `slot` filled on `be` (scores, top-k, and dense
// attention when the workload has one), reusing its storage: a slot kept across the steps of a request
// scores into the same host array every step, as a device backend's residency by address expects of the
// arrays its score calls fill (Backend::hold_inputs).
const StepReference& step_reference(Backend& be, const Workload& w, Index64 q, Index64 T, Index64 topk_tokens,
                                    StepReference& slot);
// The block oracle of `ref` at group size G: the k_groups groups with the best token scores (computed on
// `be` the first time and kept in ref.oracle).
const std::vector<std::int32_t>& step_oracle(Backend& be, StepReference& ref, int G, Index64 k_groups);

// A request's references over a sweep, by (step, topk_tokens), kept while they fit max_bytes: run_request
// drops a step's reference again when keeping it would pass the limit (the next point computes it anew).
struct RequestReferences {
  std::map<std::pair<Index64, Index64>, StepReference> steps;
  double max_bytes = 0;
  std::size_t bytes() const;
  // The slot for step q at k = topk_tokens (created empty when new).
  StepReference& slot(Index64 q, Index64 topk_tokens) { return steps[{q, topk_tokens}]; }
  // Drops the slot again when the references now take more than max_bytes.
  void settle(Index64 q, Index64 topk_tokens);
};

// Fills `refs` with what the decode loop of p over `w` reads from it: every step's reference over that
// step's context (growing with p.append_per_step), and, with fixed groups, the block oracle at p's group size
// and k, in step order while they fit refs.max_bytes (the step that would pass it is dropped again and the steps
// after it are not computed: run_request computes those as it goes, as it does without this call). The runner calls it
// before a point's timed loop, so that the first point on a workload runs its stages after the same work as
// the later points, which read the references only. Returns the steps it computed.
Index64 prepare_references(Backend& be, const Workload& w, const PipelineParams& p, RequestReferences& refs);

// The fidelity of step q's selection `sel` (group ids, best first, G tokens each; `sel_tokens` their tokens,
// ascending) on `be`: token and block recall against the exact indexer (top-k of topk_tokens over all of
// `w`'s index keys) and the block oracle (top-k_groups of each group's best token score) into
// rec.token_recall and rec.block_recall; with an attention stage, attention-mass recall and the output error
// of `sparse_out` ([Ha, Dv]) against dense attention into rec.mass_recall and rec.output_error. Measured
// against `ref` (step_reference: filled when it does not hold this step yet). run_request and the batched
// runner (experiments/batched_run.cc) measure with it.
void measure_step_fidelity(Backend& be, const Workload& w, Index64 q, std::span<const std::int32_t> sel,
                           std::span<const Index64> sel_tokens, int G, Index64 topk_tokens, Index64 k_groups,
                           MatrixView<const float> sparse_out, StepReference& ref, StepRecord& rec);

// `refs`, when given, are the request's references from earlier points on the same workload and backend
// (results identical with or without them; see StepReference). `steps_done`, when given, is incremented
// (relaxed) after each decode step, for a progress line read by another thread; nothing else reads it.
RequestResult run_request(Backend& backend, const Workload& w, const PipelineParams& p,
                          RequestReferences* refs = nullptr, std::atomic<std::int64_t>* steps_done = nullptr);
// Checks of the issue-7 parameters that need no workload (config validation runs them for every point).
void validate_extended_params(const PipelineParams& p, bool has_attention);
// The loop with the issue-7 features (core/decode.cc); run_request calls it when p.extended().
RequestResult run_request_extended(Backend& backend, const Workload& w, const PipelineParams& p,
                                   RequestReferences* refs = nullptr,
                                   std::atomic<std::int64_t>* steps_done = nullptr);

}  // namespace ip
