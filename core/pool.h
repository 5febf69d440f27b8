// Pooling: from T index keys to the stored index (composites, bounds or the keys themselves).
#pragma once

#include <cstdint>
#include <vector>

#include "core/quant.h"
#include "core/stats.h"
#include "core/tensor.h"
#include "core/weights.h"

namespace ip {

struct PoolParams {
  int group_size = 4;  // G >= 1; forced to 1 for Weighting::exact
  WeightParams weights;
  Precision precision = Precision::fp32;
};

// The stored index of one request.
//   composites / exact: entries = groups, one row each.
//   maxmin:             entries = groups, two rows each (row 2g = max, row 2g+1 = min).
struct PooledIndex {
  Weighting method = Weighting::uniform;
  int group_size = 1;
  Index64 tokens = 0;
  QuantizedMatrix rows;

  Index64 groups() const { return (tokens + group_size - 1) / group_size; }
  int rows_per_group() const { return ip::rows_per_group(method); }
  // First token and one past the last token of group g.
  Index64 group_begin(Index64 g) const { return g * group_size; }
  Index64 group_end(Index64 g) const { return std::min(tokens, (g + 1) * group_size); }
  // Exact storage of the index, and per token of context.
  std::size_t bytes() const { return rows.bytes(); }
  double bytes_per_token() const { return tokens ? static_cast<double>(bytes()) / static_cast<double>(tokens) : 0.0; }
};

int effective_group_size(const PoolParams& p);
Index64 num_groups(Index64 tokens, int group_size);

// Checks the parameters alone (no keys needed; config validation runs it for every point before any
// work): G >= 1, bias length = effective G, lambda, bias, eps and cosine power in range. Messages name
// the config keys (pool.group_size, pool.eps, ...).
void validate_pool_params(const PoolParams& p);

// Checks keys and parameters (validate_pool_params, then the inputs); throws ip::Error naming the problem
// (empty context, G = 0, non-finite keys, bias of the wrong length, statistics of the wrong length).
void validate_pool_inputs(MatrixView<const float> keys, const PoolParams& p, const AccessStats* stats,
                          const float* query_ref);

// Per-token weights of the scheme (for inspection and tests; pooling computes them fused).
// `stats` is needed by tfidf/hybrid, `query_ref` (D floats) by cosine with reference = query.
std::vector<float> compute_weights(MatrixView<const float> keys, const PoolParams& p, const AccessStats* stats,
                                   const float* query_ref);

// Weights of the n tokens starting at `first` in a group of nominal size G (scratch: D + 16 floats, or
// D + G when G > 16): what build_index computes for a group (first = g * G), also used by
// incremental re-pooling and adaptive group sizes, so all give the same bits. No finiteness check of the keys.
void group_weights_at(MatrixView<const float> keys, const PoolParams& p, const AccessStats* stats,
                      const float* query_ref, Index64 first, int G, int n, float* w, float* scratch);

// Builds the index: weights, pooling and quantization fused per group, parallel over groups.
// The second form reuses `out`'s storage when its shape and precision already fit (index rebuilds).
PooledIndex build_index(MatrixView<const float> keys, const PoolParams& p, const AccessStats* stats,
                        const float* query_ref);
void build_index(MatrixView<const float> keys, const PoolParams& p, const AccessStats* stats, const float* query_ref,
                 PooledIndex& out);

// fp32 composites of groups [0, groups) without quantization (for tests and export).
Tensor<float> pool_fp32(MatrixView<const float> keys, const PoolParams& p, const AccessStats* stats,
                        const float* query_ref);

}  // namespace ip
