// Branch-free forms of element conversions of core/numeric.h, for the CPU backend's row loops
// (core/quant.cc): the shared host-device functions, which the CUDA kernels use one element at a time,
// branch in ways that keep GCC from vectorizing a row. Each function here gives the same bits as the one
// it names for every input (tests/core/quant_test.cc compares them over every fp16 and fp8 code and every
// fp8 rounding boundary; the fp8 encoder was also compared over all 2^32 floats once, by hand). Host only:
// the device code keeps the shared functions.
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/numeric.h"

namespace ip::lanes {

// fp8e4m3_from_float(v) without branches. Below 2^-6 the code is rint(|v| * 512), taken from the bits of
// |v| * 512 + 2^23 (|v| * 512 is exact and below 8, so the sum rounds it to an integer, ties to even);
// above, the exponent and top 3 mantissa bits of |v| rounded to nearest even at bit 20, less the bias
// difference (127 - 7) << 3, clamped at 0x7E (448; larger values and infinity saturate); NaN is 0x7F.
inline std::uint8_t fp8e4m3_from_float(float v) {
  const std::uint32_t x = f32_bits(v);
  const std::uint32_t a = x & 0x7FFFFFFFu;
  const std::uint32_t small = f32_bits(f32_from_bits(a) * 512.0f + 8388608.0f) - 0x4B000000u;
  const std::uint32_t normal = std::min<std::uint32_t>(((a + 0x7FFFFu + ((a >> 20) & 1u)) >> 20) - 960u, 0x7Eu);
  const std::uint32_t code = (a < 0x3C800000u ? small : normal) | ((x >> 24) & 0x80u);  // 0x3C800000 = 2^-6
  return static_cast<std::uint8_t>(a > 0x7F800000u ? 0x7Fu : code);
}

// fp16_to_float(h) without branches: normal codes by moving the bits and rebiasing the exponent (+112),
// subnormal ones as m * 2^-24, infinity and NaN by setting the exponent (the payload kept, as there).
// The selects are masks: GCC 12 turns the same choice written with ?: into branches here.
inline float fp16_to_float(std::uint16_t h) {
  const std::uint32_t e = (h >> 10) & 0x1Fu;
  const std::uint32_t m = h & 0x3FFu;
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t normal = (static_cast<std::uint32_t>(h & 0x7FFFu) << 13) + (112u << 23);
  const std::uint32_t special = 0x7F800000u | (m << 13);
  const std::uint32_t small = f32_bits(static_cast<float>(static_cast<int>(m)) * 5.9604644775390625e-8f);  // 2^-24
  const std::uint32_t is_special = 0u - static_cast<std::uint32_t>(e == 31u);
  const std::uint32_t is_small = 0u - static_cast<std::uint32_t>(e == 0u);
  std::uint32_t bits = (special & is_special) | (normal & ~is_special);
  bits = (small & is_small) | (bits & ~is_small);
  return f32_from_bits(sign | bits);
}

// fp8e4m3_to_float(c) without branches: normal codes by moving the bits and rebiasing the exponent
// (+120), subnormal ones as m * 2^-9, 0x7F and 0xFF as that function's NaN; masks as above.
inline float fp8e4m3_to_float(std::uint8_t c) {
  const std::uint32_t m7 = c & 0x7Fu;
  const std::uint32_t normal = (m7 << 20) + (120u << 23);
  const std::uint32_t small = f32_bits(static_cast<float>(static_cast<int>(m7)) * 0.001953125f);  // 2^-9
  const std::uint32_t is_small = 0u - static_cast<std::uint32_t>(m7 < 8u);
  const std::uint32_t is_nan = 0u - static_cast<std::uint32_t>(m7 == 0x7Fu);
  std::uint32_t bits = (small & is_small) | (normal & ~is_small);
  bits = (0x7FC00000u & is_nan) | (bits & ~is_nan);
  return f32_from_bits((static_cast<std::uint32_t>(c & 0x80u) << 24) | bits);
}
}  // namespace ip::lanes
