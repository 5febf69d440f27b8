// Per-row scale and element encoding of the int8 and fp8 formats (core/quant.h documents the layout),
// shared by core/quant.cc and the CUDA pooling kernel so both produce the same bytes.
//   amax  = max_i |x_i|                  (abs_max folded over the row; order-free, so exact anywhere)
//   scale = amax / 127 (int8) or amax / 448 (fp8 e4m3), at least 2^-126 (kMinRowScale); 0 for an all-zero row
//   inv   = 1 / scale, or 0 when scale is 0 (the row then encodes to zeros)
// The floor keeps inv finite: a row with amax below 127 x 2^-126 (int8; 448 x 2^-126 for fp8, about 1e-36)
// would have a scale whose inverse overflows, and every value would saturate (fp8: 0 x inf, NaN). Such a row
// is stored at that absolute step instead: |error| <= scale / 2 still holds with the stored scale.
//   q_i   = int8: rint(x_i * inv) clamped to [-127, 127];  fp8: e4m3(x_i * inv)
#pragma once

#include <cmath>
#include <cstdint>

#include "core/hd.h"
#include "core/numeric.h"

namespace ip {

// max(amax, |x|) with std::max's semantics (amax < |x| ? |x| : amax).
IP_HOST_DEVICE float abs_max(float amax, float x) {
  const float ax = fabsf(x);
  return amax < ax ? ax : amax;
}

inline constexpr float kMinRowScale = 0x1p-126f;  // the smallest normal float: 1 / kMinRowScale = 2^126 is finite

IP_HOST_DEVICE float row_scale(float amax, bool is_int8) {
  const float s = amax / (is_int8 ? 127.0f : kFp8E4M3Max);
  return amax > 0.0f && s < kMinRowScale ? kMinRowScale : s;
}

IP_HOST_DEVICE float inverse_scale(float scale) { return scale > 0.0f ? 1.0f / scale : 0.0f; }

// The stored byte of x in a row with inverse scale inv (int8 as its two's-complement byte).
IP_HOST_DEVICE std::uint8_t encode_scaled(float x, float inv, bool is_int8) {
  const float v = x * inv;
  return is_int8 ? static_cast<std::uint8_t>(int8_from_scaled(v)) : fp8e4m3_from_float(v);
}

}  // namespace ip
