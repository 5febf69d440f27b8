// The per-entry math of multi-head index scoring, shared by the CPU backend (core/score.cc) and the
// CUDA kernels (kernels/score.cuh). Apart from core/score.h so that nvcc (C++17) need not see core/pool.h.
#pragma once

#include <cstdint>

#include "core/hd.h"
#include "core/numeric.h"

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

// Tensor-core scoring with f16 parts (kernels/score.h: f16x2, f16): each head's query is multiplied by a
// power of two that puts its largest magnitude `amax` in [2^14, 2^15), so that its f16 parts neither
// overflow (f16's largest finite value is 65504) nor fall into f16's subnormals, and the head's dot
// products are multiplied back by the inverse power, exactly. The exponent is clamped to [-126, 126] so
// that factor and inverse are both normal floats (an amax below 2^-112 keeps less headroom, nothing
// worse); a head of zeros or with a non-finite amax gets 1. Returns the factor; *inverse its inverse.
IP_HOST_DEVICE float f16_query_factor(float amax, float* inverse) {
  const std::uint32_t u = f32_bits(amax);
  const int biased = static_cast<int>((u >> 23) & 0xFFu);
  int k = 0;
  if ((u & 0x7FFFFFFFu) != 0u && biased != 0xFF && (u >> 31) == 0u) {
    // amax in [2^(biased - 127), 2^(biased - 126)) (a subnormal amax: below 2^-126, biased 0): times 2^k
    // with k = 141 - biased lands in [2^14, 2^15).
    k = biased == 0 ? 126 : 141 - biased;
    k = k > 126 ? 126 : (k < -126 ? -126 : k);
  }
  *inverse = f32_from_bits(static_cast<std::uint32_t>(127 - k) << 23);
  return f32_from_bits(static_cast<std::uint32_t>(127 + k) << 23);
}

}  // namespace ip
