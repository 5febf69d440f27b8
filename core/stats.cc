#include "core/stats.h"

#include "core/error.h"
#include "core/parallel.h"
#include "core/stats_math.h"

namespace ip {

AccessStats::AccessStats(Index64 tokens, float gamma) : mass(tokens, 0.0f), count(tokens, 0u), decay(gamma) {
  IP_REQUIRE(gamma >= 0.0f && gamma <= 1.0f, "access statistics: decay {} outside [0, 1]", gamma);
}

void AccessStats::update(std::span<const float> step_mass,
                         std::span<const std::pair<Index64, Index64>> selected_ranges) {
  const Index64 T = tokens();
  IP_REQUIRE(static_cast<Index64>(step_mass.size()) == T,
             "access statistics: step mass has {} entries for {} tokens", step_mass.size(), T);
  for (const auto& [first, last] : selected_ranges)  // check everything before changing anything
    IP_REQUIRE(0 <= first && first <= last && last <= T, "access statistics: range [{}, {}) outside [0, {})",
               first, last, T);
  parallel_for(T, 1 << 16, [&](Index64 b, Index64 e) {
    for (Index64 i = b; i < e; ++i) mass[i] = decayed_mass(mass[i], decay, step_mass[i]);
  });
  for (const auto& [first, last] : selected_ranges)
    for (Index64 i = first; i < last; ++i) ++count[i];
  ++steps;
}

}  // namespace ip
