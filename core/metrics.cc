#include "core/metrics.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/parallel.h"

namespace ip {

double token_recall(std::span<const std::int32_t> selected_groups, int group_size,
                    std::span<const std::int32_t> exact_topk_tokens) {
  IP_REQUIRE(!exact_topk_tokens.empty(), "token recall: empty exact top-k");
  IP_REQUIRE(group_size >= 1, "token recall: group size {}", group_size);
  std::vector<std::int32_t> sel(selected_groups.begin(), selected_groups.end());
  std::sort(sel.begin(), sel.end());
  Index64 hit = 0;
  for (std::int32_t t : exact_topk_tokens) hit += std::binary_search(sel.begin(), sel.end(), t / group_size);
  return static_cast<double>(hit) / static_cast<double>(exact_topk_tokens.size());
}

double block_recall(std::span<const std::int32_t> selected_groups, std::span<const std::int32_t> oracle_groups) {
  IP_REQUIRE(!oracle_groups.empty(), "block recall: empty oracle selection");
  IP_REQUIRE(selected_groups.size() == oracle_groups.size(), "block recall: {} selected groups vs {} oracle groups",
             selected_groups.size(), oracle_groups.size());
  std::vector<std::int32_t> sel(selected_groups.begin(), selected_groups.end());
  std::sort(sel.begin(), sel.end());
  Index64 hit = 0;
  for (std::int32_t g : oracle_groups) hit += std::binary_search(sel.begin(), sel.end(), g);
  return static_cast<double>(hit) / static_cast<double>(oracle_groups.size());
}

double attention_mass_recall(MatrixView<const float> dense_probs, std::span<const Index64> selected_tokens) {
  IP_REQUIRE(dense_probs.rows >= 1, "mass recall: no heads");
  double total = 0.0;
  for (Index64 h = 0; h < dense_probs.rows; ++h) {
    double m = 0.0;
    for (Index64 t : selected_tokens) {
      IP_REQUIRE(t >= 0 && t < dense_probs.cols, "mass recall: token {} outside [0, {})", t, dense_probs.cols);
      m += dense_probs(h, t);
    }
    total += m;
  }
  return total / static_cast<double>(dense_probs.rows);
}

double output_error(MatrixView<const float> sparse_out, MatrixView<const float> dense_out) {
  IP_REQUIRE(sparse_out.rows == dense_out.rows && sparse_out.cols == dense_out.cols,
             "output error: shapes [{}, {}] and [{}, {}] differ", sparse_out.rows, sparse_out.cols, dense_out.rows,
             dense_out.cols);
  double num = 0.0, den = 0.0;
  for (Index64 r = 0; r < dense_out.rows; ++r)
    for (Index64 c = 0; c < dense_out.cols; ++c) {
      const double d = static_cast<double>(sparse_out(r, c)) - dense_out(r, c);
      num += d * d;
      den += static_cast<double>(dense_out(r, c)) * dense_out(r, c);
    }
  return den > 0.0 ? std::sqrt(num / den) : std::sqrt(num);
}

void group_max_scores(const float* token_scores, Index64 tokens, int group_size, float* out) {
  const Index64 groups = (tokens + group_size - 1) / group_size;
  parallel_for(groups, 1 << 14, [&](Index64 b, Index64 e) {
    for (Index64 g = b; g < e; ++g) {
      const Index64 t0 = g * group_size, t1 = std::min(tokens, t0 + group_size);
      float m = token_scores[t0];
      for (Index64 t = t0 + 1; t < t1; ++t) m = std::max(m, token_scores[t]);
      out[g] = m;
    }
  });
}

}  // namespace ip
