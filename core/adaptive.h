// Adaptive compression (issue 7): the context is cut into segments of S tokens (the last may be
// shorter) and each segment s gets its own group size G_s in {1, 2, 4, 8, 16}, chosen to fit a memory
// budget of B bytes per token.
//
// Score of a segment: u_s = w_a * a_s / max_s' a_s' + w_d * d_s / max_s' d_s' (a term is 0 when its
// max is 0), with a_s = sum of the decayed attention mass of its tokens (the access statistics; 0 with
// no history) and d_s = mean_{i in s} (1 - cos(k_i, m_s)), m_s the segment's mean key (how much its
// keys disagree). w_a = adaptive.access_weight, w_d = adaptive.disagreement_weight.
//
// Sizes: every segment starts at G = 16. A greedy loop then halves the group size of the segment with
// the highest u_s / delta_s, delta_s the bytes that halving adds (ceil(n_s / (G_s/2)) - ceil(n_s / G_s)
// rows of R bytes; delta 0 ranks first; ties to the lower segment id), if it fits the budget; a segment
// whose halving does not fit leaves the loop. "Fits the budget exactly" means, and the tests check:
//   (1) total index bytes  <=  B * T, and
//   (2) no single further halving of any segment fits:  total + delta_s > B * T for every s with G_s > 1
// (the choices are powers of two per segment, so an exact equality is generally impossible; (2) says
// the budget is filled as far as one more step allows). A budget below the all-16 size is an error.
//
// Selection over variable-size groups for a token budget k: groups ranked by score (descending, ties to
// the lower id), taken in that order until their tokens reach k; the last one taken may overshoot, so a
// step reads between k and k + 15 tokens.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/pool.h"

namespace ip {

struct AdaptiveParams {
  bool enabled = false;
  double budget_bytes_per_token = 0;  // B
  int segment = 256;                  // S, tokens per segment (a multiple of 16)
  float access_weight = 1.0f;         // w_a
  float disagreement_weight = 1.0f;   // w_d
};

void validate_adaptive(const AdaptiveParams& a);

// The stored index: variable-size groups [begin[g], begin[g+1]) and one composite row each.
struct AdaptiveIndex {
  std::vector<Index64> begin;     // groups + 1 entries
  std::vector<int> segment_size;  // G_s per segment
  PooledIndex rows;               // one row per group, as a G = 1 index over `groups` entries (score_index reads it)
  Index64 groups() const { return static_cast<Index64>(begin.size()) - 1; }
  std::size_t bytes() const { return rows.bytes(); }
};

// Segment scores u_s (stats may be null: no history).
std::vector<double> segment_scores(MatrixView<const float> keys, const AccessStats* stats, const AdaptiveParams& a);

// The bytes of the smallest adaptive index over a context of T tokens (every segment at G = 16), which the
// budget must hold (choose_group_sizes refuses less).
double adaptive_smallest_index_bytes(Index64 T, int segment, double row_bytes);

// The first context a request of `prompt` tokens is built at (decode step q builds over prompt + (q + 1) x
// append tokens, q < steps; with append 0 once, over the prompt) whose budget (budget_bytes_per_token x
// context) is below the smallest index; 0 when every one fits. Lets a sweep refuse such a point before any
// point runs.
Index64 adaptive_budget_short_context(const AdaptiveParams& a, Index64 prompt, Index64 append, Index64 steps,
                                      double row_bytes);

// Group sizes per segment for segment lengths `seg_len`, scores `score`, R bytes per stored row and a
// total budget in bytes (see the header comment). Throws when even G = 16 everywhere does not fit.
std::vector<int> choose_group_sizes(std::span<const double> score, std::span<const Index64> seg_len, double row_bytes,
                                    double budget_bytes);

// Scores, sizes, weights and pooling (the schemes of weights.h inside each group of size G_s; maxmin
// and exact are not supported here).
void build_adaptive_index(MatrixView<const float> keys, const PoolParams& p, const AccessStats* stats,
                          const float* query_ref, const AdaptiveParams& a, AdaptiveIndex& out);

// Ranked groups until their tokens reach k (see above), in rank order.
std::vector<std::int32_t> select_variable(const float* scores, const AdaptiveIndex& idx, Index64 k_tokens);

}  // namespace ip
