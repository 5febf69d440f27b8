// The per-group decision of incremental re-pooling (core/incremental.h), shared by the CPU
// (core/incremental.cc) and the CUDA pooling kernels' update mode (kernels/pool.cuh), so both decide
// with the same arithmetic: sums in double, sequential over the group's tokens.
#pragma once

#include <cmath>

#include "core/hd.h"

namespace ip {

// Relative L1 movement of one group's n weights: sum |now - before| / sum |before| (0 when nothing
// moved, +infinity when weights moved away from an all-zero `before`).
IP_HOST_DEVICE double weight_movement(const float* now, const float* before, int n) {
  double num = 0.0, den = 0.0;
  for (int i = 0; i < n; ++i) {
    num += fabs(static_cast<double>(now[i]) - static_cast<double>(before[i]));
    den += fabs(static_cast<double>(before[i]));
  }
  return den > 0.0 ? num / den : (num > 0.0 ? static_cast<double>(INFINITY) : 0.0);
}

// Whether a group is (re-)pooled: always when it is fresh (holds tokens the index did not cover) or
// tau < 0 (or NaN); otherwise when its weights moved by more than tau (strictly; a NaN movement
// re-pools). The movement is computed only when needed (`before` of a fresh group is not read).
IP_HOST_DEVICE bool repool_group(bool fresh, float tau, const float* now, const float* before, int n) {
  if (fresh || !(tau >= 0.0f)) return true;
  return !(weight_movement(now, before, n) <= static_cast<double>(tau));
}

}  // namespace ip
