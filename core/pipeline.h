// One request through the whole pipeline, step by step: (re)build the index, score, select, attend,
// measure fidelity against the exact indexer and dense attention, feed the statistics back.
#pragma once

#include <cstdint>
#include <vector>

#include "core/backend.h"
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
};

void validate_pipeline(const PipelineParams& p, const Workload& w);

// Per decode step. Times in milliseconds of wall clock on the host.
struct StepRecord {
  double token_recall = 0, block_recall = 0, mass_recall = 0, output_error = 0;  // NaN when not measured
  double pool_ms = 0;   // 0 when the index was not rebuilt this step
  double score_ms = 0, topk_ms = 0, attention_ms = 0, fidelity_ms = 0;
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
};

RequestResult run_request(Backend& backend, const Workload& w, const PipelineParams& p);

}  // namespace ip
