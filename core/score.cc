#include "core/score.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/hd.h"
#include "core/parallel.h"
#include "core/weights.h"

namespace ip {
namespace {

constexpr Index64 kRowsPerBlock = 256;   // rows scored per step of a chunk
constexpr Index64 kBlocksPerChunk = 16;  // parallel chunk = 4096 rows, fixed

// Score of each of n rows: the head dot products (core/weights.h rows_head_dots), then the weighted ReLU
// sum. dots holds n x H floats.
template <class Dim>
void score_block(MatrixView<const float> rows, const IndexQuery& q, Dim D, float* dots, float* out) {
  const int H = static_cast<int>(q.heads.rows);
  rows_head_dots(rows.data, rows.ld, rows.rows, q.heads.data, q.heads.ld, H, D, dots);
  for (Index64 r = 0; r < rows.rows; ++r) out[r] = head_weighted_relu(dots + r * H, q.head_weights, H);
}

template <class RowSource>
void score_rows(Index64 nrows, Index64 D, const IndexQuery& q, RowSource&& source, float* out) {
  const int H = static_cast<int>(q.heads.rows);
  with_dim(static_cast<int>(D), [&](auto Dc) {
    parallel_for(nrows, kRowsPerBlock * kBlocksPerChunk, [&](Index64 b, Index64 e) {
      std::vector<float> buf(kRowsPerBlock * D), dots(kRowsPerBlock * H);
      for (Index64 r0 = b; r0 < e; r0 += kRowsPerBlock) {
        const Index64 n = std::min(kRowsPerBlock, e - r0);
        score_block(source(r0, n, buf.data()), q, Dc, dots.data(), out + r0);
      }
    });
  });
}

}  // namespace

void validate_query(const IndexQuery& q, Index64 dim) {
  IP_REQUIRE(q.heads.rows >= 1, "scoring: query has no heads");
  IP_REQUIRE(q.heads.cols == dim, "scoring: query dimension {} does not match key dimension {}", q.heads.cols, dim);
  IP_REQUIRE(q.head_weights != nullptr, "scoring: head weights missing");
  for (Index64 j = 0; j < q.heads.rows; ++j) {
    IP_REQUIRE(std::isfinite(q.head_weights[j]) && q.head_weights[j] >= 0.0f,
               "scoring: head weight {} = {} (must be finite and >= 0)", j, q.head_weights[j]);
    for (Index64 d = 0; d < dim; ++d)
      IP_REQUIRE(std::isfinite(q.heads(j, d)), "scoring: query head {} contains NaN or infinity", j);
  }
}

void score_tokens(MatrixView<const float> keys, const IndexQuery& q, float* out) {
  validate_query(q, keys.cols);
  score_rows(keys.rows, keys.cols, q,
             [&](Index64 r0, Index64 n, float*) { return keys.rows_range(r0, r0 + n); }, out);
}

void score_index(const PooledIndex& index, const IndexQuery& q, float* out) {
  const QuantizedMatrix& m = index.rows;
  const Index64 D = m.cols;
  validate_query(q, D);
  const bool fp32 = m.precision == Precision::fp32;
  auto source = [&](Index64 r0, Index64 n, float* buf) {
    if (fp32) return MatrixView<const float>(reinterpret_cast<const float*>(m.row_bytes(r0)), n, D);
    for (Index64 r = 0; r < n; ++r) dequantize_row(m, r0 + r, buf + r * D);
    return MatrixView<const float>(buf, n, D);
  };
  if (index.method != Weighting::maxmin) {
    score_rows(m.rows, D, q, source, out);
    return;
  }
  const int H = static_cast<int>(q.heads.rows);
  const Index64 groups = index.groups();
  with_dim(static_cast<int>(D), [&](auto Dc) {
    parallel_for(groups, 2048, [&](Index64 b, Index64 e) {
      std::vector<float> buf(2 * D), ub(H);
      for (Index64 g = b; g < e; ++g) {
        const float* rows = source(2 * g, 2, buf.data()).data;
        for (int j = 0; j < H; ++j) ub[j] = box_bound_lanes(q.heads.row(j), rows, rows + D, Dc);
        out[g] = head_weighted_relu(ub.data(), q.head_weights, H);
      }
    });
  });
}

}  // namespace ip
