// Host-side checks of the access-statistics launcher's arguments (no CUDA call).
#include <cmath>

#include "core/error.h"
#include "kernels/stats.h"

namespace ip::cuda {

void validate_stats_args(const StatsArgs& a) {
  IP_REQUIRE(a.tokens >= 0, "cuda update_stats: tokens = {} (must be >= 0)", a.tokens);
  IP_REQUIRE(a.n_ranges >= 0, "cuda update_stats: n_ranges = {} (must be >= 0)", a.n_ranges);
  IP_REQUIRE(std::isfinite(a.decay) && a.decay >= 0.0f && a.decay <= 1.0f,
             "cuda update_stats: decay = {} (must be in [0, 1])", a.decay);
  if (a.tokens > 0)
    IP_REQUIRE(a.mass != nullptr && a.count != nullptr && a.step_mass != nullptr,
               "cuda update_stats: mass, count and step_mass must not be null for {} tokens", a.tokens);
  IP_REQUIRE(a.n_ranges == 0 || a.ranges != nullptr, "cuda update_stats: ranges is null for {} ranges", a.n_ranges);
}

}  // namespace ip::cuda
