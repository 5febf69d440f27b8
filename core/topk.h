// Exact top-k with DESIGN.md's tie rule: higher score first, equal scores to the lower id.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace ip {

// Ids of the k best of n scores, best first (score descending, ties by ascending id).
// Throws ip::Error if k < 1, k > n, or a score is NaN.
std::vector<std::int32_t> topk(const float* scores, Index64 n, Index64 k);

// Groups needed for a token budget: ceil(k / G).
inline Index64 groups_for_budget(Index64 k_tokens, int group_size) { return (k_tokens + group_size - 1) / group_size; }

}  // namespace ip
