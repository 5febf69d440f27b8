// fp16 bits to float on the device: one cvt.f32.f16 (exact, subnormals included) instead of
// core/numeric.h's branchy decode, which the CPU emulator keeps. The two agree on every code but NaN
// payloads (a NaN either way); test gpu.Score.Fp16DecodeEqualsTheSoftwareDecode checks all 65536 codes.
// Used by the scoring (fp16 rows) and pooling (fp16 keys) kernels.
#pragma once

#include <cstdint>

#include "core/numeric.h"

namespace ip::cuda::detail {

__device__ __forceinline__ float fp16_bits_to_float(std::uint16_t h) {
#if defined(__CUDA_ARCH__) && !defined(IP_CUEMU)
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
#else
  return fp16_to_float(h);
#endif
}

}  // namespace ip::cuda::detail
