// Access statistics that the tfidf (and hybrid) weighting reads, fed by every decode step.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/tensor.h"

namespace ip {

struct AccessStats {
  std::vector<float> mass;           // a_i: attention mass token i received, decayed by `decay` per step
  std::vector<std::uint32_t> count;  // n_i: past steps whose selection contained token i
  std::int64_t steps = 0;            // N: past steps
  float decay = 0.99f;               // gamma

  explicit AccessStats(Index64 tokens = 0, float gamma = 0.99f);
  Index64 tokens() const { return static_cast<Index64>(mass.size()); }

  // One decode step: a <- gamma * a + step_mass (step_mass[i] is the attention mass token i got this
  // step, 0 outside the selection), n_i += 1 for every token in [begin, end) of each selected range,
  // N += 1. Ranges are token intervals [first, last) and must not overlap.
  void update(std::span<const float> step_mass, std::span<const std::pair<Index64, Index64>> selected_ranges);
};

}  // namespace ip
