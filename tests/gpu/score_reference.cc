#include "tests/gpu/score_reference.h"

#include "core/pool.h"
#include "core/score.h"

namespace ip::test {

std::vector<float> cpu_score_index(const QuantizedMatrix& rows, bool maxmin, const float* query,
                                   const float* head_weights, int heads) {
  PooledIndex idx;
  idx.method = maxmin ? Weighting::maxmin : Weighting::uniform;
  idx.group_size = 1;
  idx.tokens = maxmin ? rows.rows / 2 : rows.rows;
  idx.rows = rows;
  std::vector<float> out(static_cast<std::size_t>(idx.groups()));
  if (!out.empty()) score_index(idx, IndexQuery{MatrixView<const float>(query, heads, rows.cols), head_weights}, out.data());
  return out;
}

}  // namespace ip::test
