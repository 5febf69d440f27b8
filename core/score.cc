#include "core/score.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/hd.h"
#include "core/parallel.h"
#include "core/weights.h"

namespace ip {
namespace {

constexpr Index64 kChunkRows = 4096;  // rows of a parallel chunk, fixed
// Rows scored per step of a chunk: read in place, or decoded into a buffer first (kept small enough to
// stay in L1 between its decoding and its scoring: 32 x 128 floats is 16 KiB).
constexpr Index64 kRowsPerBlock = 256;
constexpr Index64 kDecodedRowsPerBlock = 32;

// Rows [r0, r0 + rows.rows) of a chunk as floats; `ahead` rows after them, same stride, are the chunk's
// next rows in the same memory (prefetched while these are scored), 0 when the floats are a copy.
struct RowBlock {
  MatrixView<const float> rows;
  Index64 ahead = 0;
};

// Score of each of n rows: the head dot products (core/weights.h rows_head_dots), then the weighted ReLU
// sum. dots holds n x H floats.
template <class Dim>
void score_block(RowBlock block, const IndexQuery& q, Dim D, float* dots, float* out) {
  const int H = static_cast<int>(q.heads.rows);
  const MatrixView<const float>& rows = block.rows;
  rows_head_dots(rows.data, rows.ld, rows.rows, q.heads.data, q.heads.ld, H, D, dots, block.ahead);
  for (Index64 r = 0; r < rows.rows; ++r) out[r] = head_weighted_relu(dots + r * H, q.head_weights, H);
}

// source(r0, n, e, buf) gives rows [r0, r0 + n) of the chunk ending at row e, in its memory or decoded
// into buf (n x D floats).
template <class RowSource>
void score_rows(Index64 nrows, Index64 D, const IndexQuery& q, Index64 block_rows, RowSource&& source, float* out) {
  const int H = static_cast<int>(q.heads.rows);
  with_dim(static_cast<int>(D), [&](auto Dc) {
    parallel_for(nrows, kChunkRows, [&](Index64 b, Index64 e) {
      std::vector<float> buf(block_rows * D), dots(block_rows * H);
      for (Index64 r0 = b; r0 < e; r0 += block_rows) {
        const Index64 n = std::min(block_rows, e - r0);
        score_block(source(r0, n, e, buf.data()), q, Dc, dots.data(), out + r0);
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
  score_rows(keys.rows, keys.cols, q, kRowsPerBlock,
             [&](Index64 r0, Index64 n, Index64 e, float*) {
               return RowBlock{keys.rows_range(r0, r0 + n), std::min<Index64>(kPrefetchRows, e - r0 - n)};
             },
             out);
}

void score_index(const PooledIndex& index, const IndexQuery& q, float* out) {
  const QuantizedMatrix& m = index.rows;
  const Index64 D = m.cols;
  validate_query(q, D);
  const bool fp32 = m.precision == Precision::fp32;
  const Index64 row_bytes = D * element_bytes(m.precision);
  auto source = [&](Index64 r0, Index64 n, Index64 e, float* buf) {
    if (fp32)
      return RowBlock{MatrixView<const float>(reinterpret_cast<const float*>(m.row_bytes(r0)), n, D),
                      std::min<Index64>(kPrefetchRows, e - r0 - n)};
    for (Index64 r = 0; r < n; ++r) {
      if (r0 + r + kPrefetchRows < e) prefetch_bytes(m.row_bytes(r0 + r + kPrefetchRows), row_bytes);
      dequantize_row(m, r0 + r, buf + r * D);
    }
    return RowBlock{MatrixView<const float>(buf, n, D), 0};
  };
  if (index.method != Weighting::maxmin) {
    score_rows(m.rows, D, q, fp32 ? kRowsPerBlock : kDecodedRowsPerBlock, source, out);
    return;
  }
  const int H = static_cast<int>(q.heads.rows);
  const Index64 groups = index.groups();
  // Group g's bounds are rows 2g (max) and 2g + 1 (min). In place, an fp32 index's rows are prefetched 4
  // groups ahead here (a stored precision's as it is decoded).
  with_dim(static_cast<int>(D), [&](auto Dc) {
    parallel_for(groups, 2048, [&](Index64 b, Index64 e) {
      std::vector<float> buf(8 * D), ub(4 * H);
      Index64 g = b;
#if IP_X86_AVX512
      // Four groups and four heads at a time (core/weights.h groups4_head4_bounds), the same bits.
      if (D % 16 == 0 && H >= 4)
        for (; g + 4 <= e; g += 4) {
          if (fp32 && g + 8 <= e) prefetch_bytes(m.row_bytes(2 * (g + 4)), 8 * row_bytes);
          const float* rows = source(2 * g, 8, 2 * e, buf.data()).rows.data;
          const float* hi[4] = {rows, rows + 2 * D, rows + 4 * D, rows + 6 * D};
          const float* lo[4] = {rows + D, rows + 3 * D, rows + 5 * D, rows + 7 * D};
          int j = 0;
          for (; j + 4 <= H; j += 4) groups4_head4_bounds(hi, lo, q.heads.row(j), q.heads.ld, Dc, ub.data() + j, H);
          for (; j < H; ++j)
            for (int r = 0; r < 4; ++r) ub[r * H + j] = box_bound_lanes(q.heads.row(j), hi[r], lo[r], Dc);
          for (int r = 0; r < 4; ++r) out[g + r] = head_weighted_relu(ub.data() + r * H, q.head_weights, H);
        }
#endif
      for (; g < e; ++g) {
        if (fp32 && g + kPrefetchRows / 2 < e) prefetch_bytes(m.row_bytes(2 * (g + kPrefetchRows / 2)), 2 * row_bytes);
        const float* rows = source(2 * g, 2, 2 * e, buf.data()).rows.data;
        for (int j = 0; j < H; ++j) ub[j] = box_bound_lanes(q.heads.row(j), rows, rows + D, Dc);
        out[g] = head_weighted_relu(ub.data(), q.head_weights, H);
      }
    });
  });
}

}  // namespace ip
