// The CPU backend's scoring (core/score.h) behind a header nvcc can read (core/score.h needs C++20):
// the GPU score test compares against it. Compiled by the host compiler (score_reference.cc).
#pragma once

#include <vector>

#include "core/quant.h"

namespace ip::test {

// score_index of one request whose index rows are `rows` (maxmin: two rows per entry), query [heads, dim].
std::vector<float> cpu_score_index(const QuantizedMatrix& rows, bool maxmin, const float* query,
                                   const float* head_weights, int heads);

}  // namespace ip::test
