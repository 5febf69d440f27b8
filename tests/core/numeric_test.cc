// Scalar number formats of core/numeric.h: known encodings, round-half-even, saturation, and full
// code-space round trips. Every expected code is derived by hand in the comment next to it.
#include <cmath>
#include <cstdint>
#include <limits>

#include <gtest/gtest.h>

#include "core/numeric.h"

namespace {

const float kInf = std::numeric_limits<float>::infinity();
const float kNaN = std::numeric_limits<float>::quiet_NaN();

// ---- fp16: 1 sign, 5 exponent (bias 15), 10 mantissa bits ----

TEST(Fp16, KnownEncodings) {
  EXPECT_EQ(ip::fp16_from_float(1.0f), 0x3C00);    // exponent 15 -> 01111 << 10
  EXPECT_EQ(ip::fp16_from_float(-2.0f), 0xC000);   // sign | 16 << 10
  EXPECT_EQ(ip::fp16_from_float(0.5f), 0x3800);    // 14 << 10
  EXPECT_EQ(ip::fp16_from_float(0.0f), 0x0000);
  EXPECT_EQ(ip::fp16_from_float(-0.0f), 0x8000);
  EXPECT_EQ(ip::fp16_from_float(0.1f), 0x2E66);    // 1.6 * 2^-4: exp 11, mantissa rint(0.6 * 1024) = 614 = 0x266
  EXPECT_EQ(ip::fp16_from_float(1.0f / 3), 0x3555);  // 1.333 * 2^-2: exp 13, mantissa rint(341.33) = 341 = 0x155
}

TEST(Fp16, LargestFiniteAndOverflow) {
  EXPECT_EQ(ip::fp16_from_float(65504.0f), 0x7BFF);  // (2 - 2^-10) * 2^15, the largest finite
  EXPECT_EQ(ip::fp16_from_float(65519.0f), 0x7BFF);  // below the midpoint 65520 to the next step (65536)
  EXPECT_EQ(ip::fp16_from_float(65520.0f), 0x7C00);  // exactly half-way; 0x7BFF is odd -> rounds up to inf
  EXPECT_EQ(ip::fp16_from_float(1e6f), 0x7C00);
  EXPECT_EQ(ip::fp16_from_float(-1e6f), 0xFC00);
  EXPECT_EQ(ip::fp16_from_float(kInf), 0x7C00);
  EXPECT_EQ(ip::fp16_from_float(-kInf), 0xFC00);
  const std::uint16_t n = ip::fp16_from_float(kNaN);
  EXPECT_EQ(n & 0x7C00, 0x7C00);  // NaN stays NaN: all-ones exponent, non-zero mantissa
  EXPECT_NE(n & 0x03FF, 0);
}

TEST(Fp16, SubnormalsRoundHalfToEven) {
  EXPECT_EQ(ip::fp16_from_float(std::ldexp(1.0f, -14)), 0x0400);  // smallest normal
  EXPECT_EQ(ip::fp16_from_float(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(ip::fp16_from_float(std::ldexp(1.0f, -25)), 0x0000);  // 0.5 step: tie -> even 0
  EXPECT_EQ(ip::fp16_from_float(std::ldexp(3.0f, -25)), 0x0002);  // 1.5 steps: tie -> even 2
  EXPECT_EQ(ip::fp16_from_float(std::ldexp(5.0f, -25)), 0x0002);  // 2.5 steps: tie -> even 2
  EXPECT_EQ(ip::fp16_from_float(std::ldexp(1.0f, -26)), 0x0000);  // 0.25 step -> 0
  // 2^-14 - 2^-26 = 1023.75 steps -> 1024, the smallest normal.
  EXPECT_EQ(ip::fp16_from_float(std::ldexp(1.0f, -14) - std::ldexp(1.0f, -26)), 0x0400);
}

TEST(Fp16, NormalsRoundHalfToEven) {
  EXPECT_EQ(ip::fp16_from_float(1.0f + std::ldexp(1.0f, -11)), 0x3C00);  // half-way 1 | 1+2^-10: even is 0x3C00
  EXPECT_EQ(ip::fp16_from_float(1.0f + std::ldexp(3.0f, -11)), 0x3C02);  // half-way 0x3C01 | 0x3C02: even
  EXPECT_EQ(ip::fp16_from_float(1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20)), 0x3C01);  // above half
  EXPECT_EQ(ip::fp16_from_float(2049.0f), 0x6800);  // step 2 at 2^11 (26 << 10): 2049 ties to 2048
  EXPECT_EQ(ip::fp16_from_float(2051.0f), 0x6802);  // 2051 ties to 2052 (mantissa 2, even)
  EXPECT_EQ(ip::fp16_from_float(2047.0f), 0x67FF);  // 2047 = (2 - 2^-10) * 2^10, exact
}

TEST(Fp16, Decoding) {
  EXPECT_EQ(ip::fp16_to_float(0x3C00), 1.0f);
  EXPECT_EQ(ip::fp16_to_float(0xC000), -2.0f);
  EXPECT_EQ(ip::fp16_to_float(0x7BFF), 65504.0f);
  EXPECT_EQ(ip::fp16_to_float(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(ip::fp16_to_float(0x03FF), std::ldexp(1023.0f, -24));
  EXPECT_EQ(ip::fp16_to_float(0x3555), 0.333251953125f);  // 1365/4096
  EXPECT_EQ(ip::fp16_to_float(0x7C00), kInf);
  EXPECT_EQ(ip::fp16_to_float(0xFC00), -kInf);
  EXPECT_TRUE(std::isnan(ip::fp16_to_float(0x7E00)));
  EXPECT_TRUE(std::signbit(ip::fp16_to_float(0x8000)));
  EXPECT_EQ(ip::fp16_to_float(0x8000), 0.0f);
}

TEST(Fp16, EveryNonNanCodeRoundTrips) {
  for (std::uint32_t h = 0; h <= 0xFFFF; ++h) {
    if ((h & 0x7C00) == 0x7C00 && (h & 0x03FF) != 0) continue;  // NaN
    ASSERT_EQ(ip::fp16_from_float(ip::fp16_to_float(static_cast<std::uint16_t>(h))), h) << std::hex << h;
  }
}

// ---- bf16: the upper 16 bits of binary32 ----

TEST(Bf16, KnownEncodingsAndRounding) {
  EXPECT_EQ(ip::bf16_from_float(1.0f), 0x3F80);
  EXPECT_EQ(ip::bf16_from_float(-2.0f), 0xC000);
  EXPECT_EQ(ip::bf16_from_float(3.0f), 0x4040);
  EXPECT_EQ(ip::bf16_from_float(1.0f + std::ldexp(1.0f, -8)), 0x3F80);  // half-way 1 | 1+2^-7: even 0x3F80
  EXPECT_EQ(ip::bf16_from_float(1.0f + std::ldexp(3.0f, -8)), 0x3F82);  // half-way 0x3F81 | 0x3F82: even
  EXPECT_EQ(ip::bf16_from_float(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20)), 0x3F81);  // above half
  EXPECT_EQ(ip::bf16_from_float(kInf), 0x7F80);
  EXPECT_EQ(ip::bf16_from_float(-kInf), 0xFF80);
  // FLT_MAX = (2 - 2^-23) 2^127 is above the midpoint (2 - 2^-8) 2^127 of bf16 max and "inf": rounds to inf.
  EXPECT_EQ(ip::bf16_from_float(std::numeric_limits<float>::max()), 0x7F80);
  EXPECT_EQ(ip::bf16_from_float(std::numeric_limits<float>::denorm_min()), 0x0000);  // 2^-149 -> 0
}

TEST(Bf16, NanStaysNanEvenWithOnlyLowMantissaBits) {
  // 0x7F800001 is a NaN whose set bit lies in the discarded half: truncation/rounding alone would give inf.
  const std::uint16_t b = ip::bf16_from_float(ip::f32_from_bits(0x7F800001u));
  EXPECT_EQ(b & 0x7F80, 0x7F80);
  EXPECT_NE(b & 0x007F, 0);
  EXPECT_TRUE(std::isnan(ip::bf16_to_float(ip::bf16_from_float(kNaN))));
}

TEST(Bf16, DecodingAndEveryNonNanCodeRoundTrips) {
  EXPECT_EQ(ip::bf16_to_float(0x3F80), 1.0f);
  EXPECT_EQ(ip::bf16_to_float(0x4049), 3.140625f);  // 1.5703125 * 2 = 1 + 73/128 -> * 2
  for (std::uint32_t b = 0; b <= 0xFFFF; ++b) {
    if ((b & 0x7F80) == 0x7F80 && (b & 0x007F) != 0) continue;  // NaN
    ASSERT_EQ(ip::bf16_from_float(ip::bf16_to_float(static_cast<std::uint16_t>(b))), b) << std::hex << b;
  }
}

// ---- fp8 e4m3fn: 1 sign, 4 exponent (bias 7), 3 mantissa, no inf, 0x7F/0xFF NaN, max 448 ----

TEST(Fp8, KnownEncodings) {
  EXPECT_EQ(ip::fp8e4m3_from_float(448.0f), 0x7E);  // 1.75 * 2^8: exp 15, mantissa 6 -> 1111 110
  EXPECT_EQ(ip::fp8e4m3_from_float(1.0f), 0x38);    // exp 7 -> 0111 000
  EXPECT_EQ(ip::fp8e4m3_from_float(-1.0f), 0xB8);
  EXPECT_EQ(ip::fp8e4m3_from_float(240.0f), 0x77);  // 1.875 * 2^7: exp 14, mantissa 7
  EXPECT_EQ(ip::fp8e4m3_from_float(416.0f), 0x7D);  // 1.625 * 2^8: mantissa 5
  EXPECT_EQ(ip::fp8e4m3_from_float(0.1f), 0x1D);    // 1.6 * 2^-4: exp 3, mantissa rint(4.8) = 5 (0.1015625)
  EXPECT_EQ(ip::fp8e4m3_from_float(0.0f), 0x00);
  EXPECT_EQ(ip::fp8e4m3_from_float(-0.0f), 0x80);
  EXPECT_EQ(ip::fp8e4m3_from_float(std::ldexp(1.0f, -6)), 0x08);  // smallest normal
  EXPECT_EQ(ip::fp8e4m3_from_float(std::ldexp(1.0f, -9)), 0x01);  // smallest subnormal
  EXPECT_EQ(ip::fp8e4m3_from_float(std::ldexp(7.0f, -9)), 0x07);  // largest subnormal
}

TEST(Fp8, SaturatesAtPlusMinus448AndKeepsNan) {
  EXPECT_EQ(ip::fp8e4m3_from_float(1000.0f), 0x7E);
  EXPECT_EQ(ip::fp8e4m3_from_float(-1000.0f), 0xFE);
  EXPECT_EQ(ip::fp8e4m3_from_float(464.0f), 0x7E);  // half-way to the (NaN) code 480: still 448
  EXPECT_EQ(ip::fp8e4m3_from_float(447.0f), 0x7E);  // 1.746 * 2^8: mantissa rint(5.97) = 6
  EXPECT_EQ(ip::fp8e4m3_from_float(kInf), 0x7E);
  EXPECT_EQ(ip::fp8e4m3_from_float(-kInf), 0xFE);
  EXPECT_EQ(ip::fp8e4m3_from_float(kNaN) & 0x7F, 0x7F);
}

TEST(Fp8, RoundHalfToEven) {
  EXPECT_EQ(ip::fp8e4m3_from_float(1.0625f), 0x38);  // 1 + 1/16: half-way m0 | m1 -> m0
  EXPECT_EQ(ip::fp8e4m3_from_float(1.1875f), 0x3A);  // 1 + 3/16: half-way m1 | m2 -> m2
  EXPECT_EQ(ip::fp8e4m3_from_float(1.9375f), 0x40);  // 1 + 15/16: half-way m7 | 2.0 -> 2.0 (exp 8, m0)
  EXPECT_EQ(ip::fp8e4m3_from_float(17.0f), 0x58);    // half-way 16 | 18 -> 16 (exp 11, m0)
  EXPECT_EQ(ip::fp8e4m3_from_float(19.0f), 0x5A);    // half-way 18 | 20 -> 20 (m2)
  EXPECT_EQ(ip::fp8e4m3_from_float(432.0f), 0x7E);   // half-way 416 (m5) | 448 (m6) -> 448
  EXPECT_EQ(ip::fp8e4m3_from_float(std::ldexp(1.0f, -10)), 0x00);  // 0.5 subnormal step -> 0
  EXPECT_EQ(ip::fp8e4m3_from_float(std::ldexp(3.0f, -10)), 0x02);  // 1.5 steps -> 2
  EXPECT_EQ(ip::fp8e4m3_from_float(std::ldexp(5.0f, -10)), 0x02);  // 2.5 steps -> 2
  EXPECT_EQ(ip::fp8e4m3_from_float(std::ldexp(15.0f, -10)), 0x08);  // 7.5 steps -> 8 = smallest normal
}

TEST(Fp8, Decoding) {
  EXPECT_EQ(ip::fp8e4m3_to_float(0x7E), 448.0f);
  EXPECT_EQ(ip::fp8e4m3_to_float(0x38), 1.0f);
  EXPECT_EQ(ip::fp8e4m3_to_float(0xB8), -1.0f);
  EXPECT_EQ(ip::fp8e4m3_to_float(0x77), 240.0f);
  EXPECT_EQ(ip::fp8e4m3_to_float(0x01), std::ldexp(1.0f, -9));
  EXPECT_EQ(ip::fp8e4m3_to_float(0x07), std::ldexp(7.0f, -9));
  EXPECT_EQ(ip::fp8e4m3_to_float(0x08), std::ldexp(1.0f, -6));
  EXPECT_EQ(ip::fp8e4m3_to_float(0x0F), std::ldexp(1.875f, -6));
  EXPECT_TRUE(std::isnan(ip::fp8e4m3_to_float(0x7F)));
  EXPECT_TRUE(std::isnan(ip::fp8e4m3_to_float(0xFF)));
  EXPECT_EQ(ip::fp8e4m3_to_float(0x80), 0.0f);
  EXPECT_TRUE(std::signbit(ip::fp8e4m3_to_float(0x80)));
}

TEST(Fp8, All256CodesRoundTripAndAreOrdered) {
  for (int c = 0; c < 256; ++c) {
    if ((c & 0x7F) == 0x7F) continue;  // the two NaN codes
    const auto code = static_cast<std::uint8_t>(c);
    EXPECT_EQ(ip::fp8e4m3_from_float(ip::fp8e4m3_to_float(code)), code) << "code " << c;
    // Sign-magnitude: code c | 0x80 is the negation of c.
    EXPECT_EQ(ip::fp8e4m3_to_float(static_cast<std::uint8_t>(c | 0x80)), -ip::fp8e4m3_to_float(code & 0x7F));
  }
  for (int c = 1; c <= 0x7E; ++c)
    EXPECT_LT(ip::fp8e4m3_to_float(static_cast<std::uint8_t>(c - 1)), ip::fp8e4m3_to_float(static_cast<std::uint8_t>(c)));
}

TEST(Int8, RoundsHalfToEvenAndClampsTo127) {
  EXPECT_EQ(ip::int8_from_scaled(2.5f), 2);
  EXPECT_EQ(ip::int8_from_scaled(3.5f), 4);
  EXPECT_EQ(ip::int8_from_scaled(-2.5f), -2);
  EXPECT_EQ(ip::int8_from_scaled(2.51f), 3);
  EXPECT_EQ(ip::int8_from_scaled(127.4f), 127);
  EXPECT_EQ(ip::int8_from_scaled(200.0f), 127);
  EXPECT_EQ(ip::int8_from_scaled(-200.0f), -127);  // symmetric range: -128 is never produced
}

}  // namespace
