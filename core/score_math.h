// The per-entry math of multi-head index scoring, shared by the CPU backend (core/score.cc) and the
// CUDA kernels (kernels/score.cuh). Apart from core/score.h so that nvcc (C++17) need not see core/pool.h.
#pragma once

#include "core/hd.h"

namespace ip {

// Combines H per-head dot products into one score.
IP_HOST_DEVICE float head_weighted_relu(const float* dots, const float* hw, int H) {
  float s = 0.0f;
  for (int j = 0; j < H; ++j) s += hw[j] * (dots[j] > 0.0f ? dots[j] : 0.0f);
  return s;
}

// Quest-style upper bound of q . k over a box [lo, hi]: sum_d max(q_d hi_d, q_d lo_d).
IP_HOST_DEVICE float box_upper_bound(const float* q, const float* hi, const float* lo, int D) {
  float s = 0.0f;
  for (int d = 0; d < D; ++d) {
    const float a = q[d] * hi[d], b = q[d] * lo[d];
    s += a > b ? a : b;
  }
  return s;
}

}  // namespace ip
