// The per-token access-statistics update shared by core/stats.cc and the CUDA kernel (kernels/stats.cu).
#pragma once

#include "core/hd.h"

namespace ip {

// a <- gamma * a + m: the decayed attention mass of one token after a step that gave it mass m.
// The device computes it as one fma; the host writes the plain expression, which compilers for FMA
// hardware (x86-64 -march=native, aarch64) contract to the same fma — then both give the same bits.
IP_HOST_DEVICE float decayed_mass(float a, float gamma, float m) {
#if defined(__CUDA_ARCH__)
  return fmaf(gamma, a, m);
#else
  return gamma * a + m;
#endif
}

}  // namespace ip
