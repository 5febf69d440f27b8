// Launcher of the access-statistics update (core/stats.h: a <- gamma a + step mass, n += 1 over the
// selected token ranges, N += 1 is kept by the caller).
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

namespace ip::cuda {

struct StatsArgs {
  float* mass = nullptr;            // [tokens]
  std::uint32_t* count = nullptr;   // [tokens]
  long long tokens = 0;
  float decay = 0.99f;
  const float* step_mass = nullptr;  // [tokens], 0 outside the selection
  const long long* ranges = nullptr; // [n_ranges, 2] token intervals [first, last), not overlapping
  int n_ranges = 0;
};

void update_stats(const StatsArgs& a, cudaStream_t stream);

}  // namespace ip::cuda
