// DSA-style multi-head index scoring: s = sum_j h_j * max(0, q_j . k).
#pragma once

#include "core/pool.h"
#include "core/score_math.h"
#include "core/tensor.h"

namespace ip {

// A decode query for the indexer: H heads of dimension D and H non-negative head weights.
struct IndexQuery {
  MatrixView<const float> heads;  // [H, D]
  const float* head_weights = nullptr;  // [H]
};

void validate_query(const IndexQuery& q, Index64 dim);

// Exact score of every token: out[t] = s(t), T floats.
void score_tokens(MatrixView<const float> keys, const IndexQuery& q, float* out);

// Compressed score of every group of the index: out[g] = s(g) (maxmin: the upper bound), groups floats.
void score_index(const PooledIndex& index, const IndexQuery& q, float* out);

// Multiply-adds of scoring one query against `rows` stored rows.
inline double scoring_macs(Index64 rows, Index64 heads, Index64 dim) {
  return static_cast<double>(rows) * static_cast<double>(heads) * static_cast<double>(dim);
}

}  // namespace ip
