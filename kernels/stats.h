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

// Validates (throws ip::Error naming the bad argument) and launches on `stream`. The ranges live on the
// device: a range is clipped to [0, tokens) there, and counts use integer atomics, so overlapping
// ranges count twice, as on the CPU (which rejects out-of-range ones instead).
void update_stats(const StatsArgs& a, cudaStream_t stream);

// The host-side checks update_stats() runs before any CUDA call (kernels/stats_validate.cc).
void validate_stats_args(const StatsArgs& a);

}  // namespace ip::cuda
