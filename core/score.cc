#include "core/score.h"

#include <cmath>
#include <vector>

#include "core/hd.h"
#include "core/parallel.h"

namespace ip {
namespace {

constexpr Index64 kRowsPerBlock = 256;   // rows scored with one small GEMM (fits in L1/L2)
constexpr Index64 kBlocksPerChunk = 16;  // parallel chunk = 4096 rows, fixed

// dots[r, j] = rows[r] . q_j for a block of fp32 rows.
void block_dots(MatrixView<const float> rows, const IndexQuery& q, Eigen::MatrixXf& dots) {
  dots.noalias() = rows.eigen() * q.heads.eigen().transpose();  // [n, H], column-major
}

template <class RowSource>
void score_rows(Index64 nrows, Index64 D, const IndexQuery& q, RowSource&& source, float* out) {
  const int H = static_cast<int>(q.heads.rows);
  parallel_for(nrows, kRowsPerBlock * kBlocksPerChunk, [&](Index64 b, Index64 e) {
    Eigen::MatrixXf dots;
    std::vector<float> buf(kRowsPerBlock * D);
    std::vector<float> d(H);
    for (Index64 r0 = b; r0 < e; r0 += kRowsPerBlock) {
      const Index64 n = std::min(kRowsPerBlock, e - r0);
      const MatrixView<const float> rows = source(r0, n, buf.data());
      if (H == 1) {  // a plain dot product per row: memory-bound, no GEMM needed
        const float h = q.head_weights[0];
        const float* qv = q.heads.row(0);
        for (Index64 r = 0; r < n; ++r) {
          const float* k = rows.row(r);
          float acc = 0.0f;
          IP_SIMD_REDUCE(+ : acc)
          for (Index64 i = 0; i < D; ++i) acc += k[i] * qv[i];
          out[r0 + r] = h * std::max(0.0f, acc);
        }
      } else {
        block_dots(rows, q, dots);
        for (Index64 r = 0; r < n; ++r) {
          for (int j = 0; j < H; ++j) d[j] = dots(r, j);
          out[r0 + r] = head_weighted_relu(d.data(), q.head_weights, H);
        }
      }
    }
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
  parallel_for(groups, 2048, [&](Index64 b, Index64 e) {
    std::vector<float> buf(2 * D), ub(H);
    for (Index64 g = b; g < e; ++g) {
      const float* rows = source(2 * g, 2, buf.data()).data;
      for (int j = 0; j < H; ++j) ub[j] = box_upper_bound(q.heads.row(j), rows, rows + D, static_cast<int>(D));
      out[g] = head_weighted_relu(ub.data(), q.head_weights, H);
    }
  });
}

}  // namespace ip
