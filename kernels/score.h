// Launcher of multi-head index scoring: s(e) = sum_j h_j max(0, q_j . row_e) (core/score.h), over the
// stored composites (compressed indexer) or over the keys themselves (exact indexer: the rows are the
// tokens, in fp32/fp16/bf16).
#pragma once

#include "core/quant.h"
#include "kernels/batch.h"

namespace ip::cuda {

struct ScoreArgs {
  Batch batch;  // entries of each request are scored against that request's query
  const void* rows = nullptr;    // [rows, dim] in `precision` (core/quant.h layout)
  const float* scales = nullptr; // [rows], int8 and fp8 only
  Precision precision = Precision::fp32;
  int dim = 0;
  bool maxmin = false;           // two rows per entry (max, min): Quest upper bound per head
  const float* queries = nullptr;       // [requests, heads, dim]
  const float* head_weights = nullptr;  // [requests, heads]
  int heads = 1;
  float* scores = nullptr;  // [total_entries]
};

void score(const ScoreArgs& a, cudaStream_t stream);

}  // namespace ip::cuda
