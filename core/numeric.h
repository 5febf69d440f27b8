// Reduced-precision number formats, shared by the CPU backend and the CUDA kernels.
// All conversions from float round to nearest, ties to even.
//   fp16: IEEE binary16.  bf16: the upper half of binary32.
//   fp8 e4m3 (OCP "e4m3fn", as in DeepSeek's indexer cache): 1 sign, 4 exponent (bias 7), 3 mantissa
//   bits, no infinities, 0x7F/0xFF are NaN, largest finite 448. Encoding saturates at +-448.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/hd.h"

namespace ip {

IP_HOST_DEVICE std::uint32_t f32_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
#endif
}

IP_HOST_DEVICE float f32_from_bits(std::uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}

// ---- fp16 ----
IP_HOST_DEVICE std::uint16_t fp16_from_float(float f) {
  std::uint32_t x = f32_bits(f);
  const std::uint32_t sign = (x >> 16) & 0x8000u;
  x &= 0x7FFFFFFFu;
  if (x >= 0x7F800000u) return static_cast<std::uint16_t>(sign | (x > 0x7F800000u ? 0x7E00u : 0x7C00u));
  if (x >= 0x477FF000u) return static_cast<std::uint16_t>(sign | 0x7C00u);  // >= 65520 rounds to inf
  if (x < 0x38800000u) {                                                     // below 2^-14: subnormal
    // a * 2^24 is exact; rintf rounds half to even. 1024 lands on the smallest normal, as it should.
    const std::uint32_t m = static_cast<std::uint32_t>(rintf(f32_from_bits(x) * 16777216.0f));
    return static_cast<std::uint16_t>(sign | m);
  }
  std::uint32_t h = (((x >> 23) - 112u) << 10) | ((x & 0x7FFFFFu) >> 13);
  const std::uint32_t rem = x & 0x1FFFu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return static_cast<std::uint16_t>(sign | h);
}

IP_HOST_DEVICE float fp16_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t e = (h >> 10) & 0x1Fu;
  const std::uint32_t m = h & 0x3FFu;
  if (e == 0) {
    const float v = static_cast<float>(m) * 5.9604644775390625e-8f;  // 2^-24
    return (h & 0x8000u) ? -v : v;
  }
  if (e == 31) return f32_from_bits(sign | 0x7F800000u | (m << 13));
  return f32_from_bits(sign | ((e + 112u) << 23) | (m << 13));
}

// ---- bf16 ----
IP_HOST_DEVICE std::uint16_t bf16_from_float(float f) {
  const std::uint32_t x = f32_bits(f);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<std::uint16_t>((x >> 16) | 0x40u);  // quiet NaN
  return static_cast<std::uint16_t>((x + 0x7FFFu + ((x >> 16) & 1u)) >> 16);
}

IP_HOST_DEVICE float bf16_to_float(std::uint16_t b) { return f32_from_bits(static_cast<std::uint32_t>(b) << 16); }

// ---- fp8 e4m3 ----
constexpr float kFp8E4M3Max = 448.0f;

IP_HOST_DEVICE std::uint8_t fp8e4m3_from_float(float f) {
  const std::uint32_t x = f32_bits(f);
  const std::uint8_t sign = static_cast<std::uint8_t>((x >> 24) & 0x80u);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) return 0x7F;  // NaN
  const float a = fabsf(f);
  if (a >= kFp8E4M3Max) return static_cast<std::uint8_t>(sign | 0x7E);  // saturate
  if (a < 0.015625f) {                                                  // below 2^-6: subnormal, step 2^-9
    // a * 512 is exact; a result of 8 is the smallest normal (code 0x08), as it should be.
    return static_cast<std::uint8_t>(sign | static_cast<std::uint8_t>(rintf(a * 512.0f)));
  }
  const int e = static_cast<int>((f32_bits(a) >> 23) & 0xFFu) - 127;  // -6..8
  const float frac = f32_from_bits((f32_bits(a) & 0x7FFFFFu) | 0x3F800000u);  // [1, 2)
  int q = static_cast<int>(rintf((frac - 1.0f) * 8.0f));                      // exact scaling, 0..8
  int ef = e + 7;
  if (q == 8) {
    q = 0;
    ++ef;
  }
  int code = (ef << 3) | q;
  if (code > 0x7E) code = 0x7E;
  return static_cast<std::uint8_t>(sign | code);
}

IP_HOST_DEVICE float fp8e4m3_to_float(std::uint8_t c) {
  const int e = (c >> 3) & 0xF;
  const int m = c & 0x7;
  float v;
  if ((c & 0x7F) == 0x7F) {
    v = f32_from_bits(0x7FC00000u);
  } else if (e == 0) {
    v = static_cast<float>(m) * 0.001953125f;  // 2^-9
  } else {
    v = f32_from_bits(static_cast<std::uint32_t>(e + 120) << 23) * (1.0f + static_cast<float>(m) * 0.125f);
  }
  return (c & 0x80) ? -v : v;
}

// ---- int8 with a per-vector scale ----
IP_HOST_DEVICE std::int8_t int8_from_scaled(float x) {
  float r = rintf(x);
  r = r > 127.0f ? 127.0f : (r < -127.0f ? -127.0f : r);
  return static_cast<std::int8_t>(r);
}

}  // namespace ip
