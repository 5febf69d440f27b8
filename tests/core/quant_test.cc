// QuantizedMatrix: layout, scales, and round-trip error bounds per format on random data.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "core/numeric.h"
#include "core/quant.h"
#include "core/quant_lanes.h"
#include "core/quant_math.h"
#include "tests/core/test_helpers.h"

namespace {

using iptest::view;
using ip::Precision;

// R rows of D values whose magnitudes spread over [2^-8, 2^8] with random signs (all normal in fp16).
std::vector<float> spread_data(int R, int D, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> e(-8.0f, 8.0f);
  std::bernoulli_distribution neg(0.5);
  std::vector<float> x(static_cast<size_t>(R) * D);
  for (auto& v : x) v = (neg(gen) ? -1.0f : 1.0f) * std::exp2(e(gen));
  return x;
}

std::vector<float> normal_data(int R, int D, unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> n(0.0f, 3.0f);
  std::vector<float> x(static_cast<size_t>(R) * D);
  for (auto& v : x) v = n(gen);
  return x;
}

std::vector<float> round_trip(const std::vector<float>& x, int R, int D, Precision p) {
  const auto q = ip::quantize(view(x, R, D), p);
  const auto y = ip::dequantize(q);
  return std::vector<float>(y.data(), y.data() + y.size());
}

float row_amax(const std::vector<float>& x, int r, int D) {
  float m = 0;
  for (int d = 0; d < D; ++d) m = std::max(m, std::fabs(x[r * D + d]));
  return m;
}

constexpr int R = 64, D = 96;

TEST(Quant, Fp32IsExact) {
  const auto x = normal_data(R, D, 1);
  const auto y = round_trip(x, R, D, Precision::fp32);
  EXPECT_EQ(std::memcmp(x.data(), y.data(), x.size() * sizeof(float)), 0);
}

TEST(Quant, Fp16RelativeErrorAtMostHalfUlp) {
  // 10 explicit mantissa bits: |err| <= 2^-11 |x| for normal values.
  const auto x = spread_data(R, D, 2);
  const auto y = round_trip(x, R, D, Precision::fp16);
  for (size_t i = 0; i < x.size(); ++i) ASSERT_LE(std::fabs(y[i] - x[i]), std::ldexp(std::fabs(x[i]), -11)) << i;
}

TEST(Quant, Fp16SubnormalAbsoluteErrorAtMostHalfStep) {
  // Below 2^-14 the step is 2^-24: |err| <= 2^-25.
  std::vector<float> x;
  for (int i = 0; i < 1000; ++i) x.push_back(std::ldexp(static_cast<float>(i) * 0.37f, -24));
  const auto y = round_trip(x, 10, 100, Precision::fp16);
  for (size_t i = 0; i < x.size(); ++i) ASSERT_LE(std::fabs(y[i] - x[i]), std::ldexp(1.0f, -25)) << i;
}

TEST(Quant, Bf16RelativeErrorAtMostHalfUlp) {
  // 7 explicit mantissa bits: |err| <= 2^-8 |x|.
  for (const auto& x : {spread_data(R, D, 3), normal_data(R, D, 4)}) {
    const auto y = round_trip(x, R, D, Precision::bf16);
    for (size_t i = 0; i < x.size(); ++i) ASSERT_LE(std::fabs(y[i] - x[i]), std::ldexp(std::fabs(x[i]), -8)) << i;
  }
}

TEST(Quant, Int8AbsoluteErrorAtMostHalfScale) {
  // scale = max|x| / 127 per row; |err| <= scale / 2, plus 1e-6 |x| for the fp32 products x / scale, q * scale.
  for (const auto& x : {spread_data(R, D, 5), normal_data(R, D, 6)}) {
    const auto q = ip::quantize(view(x, R, D), Precision::int8);
    const auto y = ip::dequantize(q);
    for (int r = 0; r < R; ++r) {
      const float scale = row_amax(x, r, D) / 127.0f;
      EXPECT_FLOAT_EQ(q.scale(r), scale);
      for (int d = 0; d < D; ++d) {
        const float xi = x[r * D + d];
        ASSERT_LE(std::fabs(y.data()[r * D + d] - xi), scale / 2 + 1e-6f * std::fabs(xi)) << r << "," << d;
      }
    }
  }
}

TEST(Quant, Fp8ErrorWithinRelativeAndSubnormalBound) {
  // scale = max|x| / 448; |err| <= |x| / 16 (3 mantissa bits) + scale * 2^-10 (half the subnormal step),
  // plus 1e-6 |x| for the fp32 scaling.
  for (const auto& x : {spread_data(R, D, 7), normal_data(R, D, 8)}) {
    const auto q = ip::quantize(view(x, R, D), Precision::fp8);
    const auto y = ip::dequantize(q);
    for (int r = 0; r < R; ++r) {
      const float scale = row_amax(x, r, D) / 448.0f;
      EXPECT_FLOAT_EQ(q.scale(r), scale);
      for (int d = 0; d < D; ++d) {
        const float xi = std::fabs(x[r * D + d]);
        ASSERT_LE(std::fabs(y.data()[r * D + d] - x[r * D + d]), xi / 16 + std::ldexp(scale, -10) + 1e-6f * xi)
            << r << "," << d;
      }
    }
  }
}

TEST(Quant, Int8KnownRowIsStoredAsExpected) {
  // Row {127, -63.5, 1.5, 0}: scale = 127/127 = 1; q = rint = {127, -64 (tie to even), 2 (tie to even), 0}.
  const std::vector<float> x = {127.0f, -63.5f, 1.5f, 0.0f};
  const auto q = ip::quantize(view(x, 1, 4), Precision::int8);
  EXPECT_EQ(q.scale(0), 1.0f);
  const auto* s = reinterpret_cast<const std::int8_t*>(q.row_bytes(0));
  EXPECT_EQ(s[0], 127);
  EXPECT_EQ(s[1], -64);
  EXPECT_EQ(s[2], 2);
  EXPECT_EQ(s[3], 0);
}

// int8 codes round ties to even (rint), not half away from zero (std::round): 2.5 -> 2, -0.5 -> 0.
TEST(Quant, Int8TiesRoundToEven) {
  // Row {127, 2.5, -0.5, 0}: scale = 127/127 = 1; half away from zero would give {127, 3, -1, 0}.
  const std::vector<float> x = {127.0f, 2.5f, -0.5f, 0.0f};
  const auto q = ip::quantize(view(x, 1, 4), Precision::int8);
  EXPECT_EQ(q.scale(0), 1.0f);
  const auto* s = reinterpret_cast<const std::int8_t*>(q.row_bytes(0));
  EXPECT_EQ(s[0], 127);
  EXPECT_EQ(s[1], 2);
  EXPECT_EQ(s[2], 0);
  EXPECT_EQ(s[3], 0);
}

TEST(Quant, Fp8KnownRowIsStoredAsExpected) {
  // Row {896, 2, -1}: scale = 896/448 = 2; x/scale = {448, 1, -0.5} -> codes {0x7E, 0x38, 0xB0}.
  const std::vector<float> x = {896.0f, 2.0f, -1.0f};
  const auto q = ip::quantize(view(x, 1, 3), Precision::fp8);
  EXPECT_EQ(q.scale(0), 2.0f);
  EXPECT_EQ(q.row_bytes(0)[0], 0x7E);
  EXPECT_EQ(q.row_bytes(0)[1], 0x38);
  EXPECT_EQ(q.row_bytes(0)[2], 0xB0);  // -0.5: sign | exp 6 (0110) | m0
  const auto y = ip::dequantize(q);
  EXPECT_EQ(y.data()[0], 896.0f);
  EXPECT_EQ(y.data()[1], 2.0f);
  EXPECT_EQ(y.data()[2], -1.0f);
}

TEST(Quant, AllZeroRowHasZeroScaleAndDecodesToZero) {
  const std::vector<float> x = {0, 0, 0, 1, -2, 4};  // row 0 zero, row 1 not
  for (Precision p : {Precision::int8, Precision::fp8}) {
    const auto q = ip::quantize(view(x, 2, 3), p);
    EXPECT_EQ(q.scale(0), 0.0f) << ip::to_string(p);
    const auto y = ip::dequantize(q);
    for (int d = 0; d < 3; ++d) EXPECT_EQ(y.data()[d], 0.0f) << ip::to_string(p);
    EXPECT_EQ(y.data()[5], 4.0f) << ip::to_string(p);  // the row maximum is exact in both
  }
}

TEST(Quant, LayoutSizes) {
  // R x D elements of 4/2/2/1/1 bytes, plus one fp32 scale per row for int8 and fp8.
  struct Case { Precision p; int elem, scale; std::size_t bytes; };
  for (const Case c : {Case{Precision::fp32, 4, 0, 5 * 7 * 4}, Case{Precision::fp16, 2, 0, 5 * 7 * 2},
                       Case{Precision::bf16, 2, 0, 5 * 7 * 2}, Case{Precision::int8, 1, 4, 5 * 7 + 5 * 4},
                       Case{Precision::fp8, 1, 4, 5 * 7 + 5 * 4}}) {
    EXPECT_EQ(ip::element_bytes(c.p), c.elem);
    EXPECT_EQ(ip::scale_bytes(c.p), c.scale);
    ip::QuantizedMatrix q;
    ip::resize(q, c.p, 5, 7);
    EXPECT_EQ(q.bytes(), c.bytes) << ip::to_string(c.p);
    EXPECT_EQ(q.payload.size(), static_cast<std::size_t>(5 * 7 * c.elem));
    EXPECT_EQ(ip::parse_precision(ip::to_string(c.p)), c.p);
  }
}

// The host-device row math of core/quant_math.h (shared with the CUDA pooling kernel), by hand.
TEST(Quant, RowMathByHand) {
  // abs_max folds |x| like std::max.
  float amax = 0.0f;
  for (float x : {1.5f, -4.0f, 3.0f, -0.0f}) amax = ip::abs_max(amax, x);
  EXPECT_EQ(amax, 4.0f);
  // int8: scale 127/127 = 1 -> inv 1; fp8: 448/448 = 1.
  EXPECT_EQ(ip::row_scale(127.0f, true), 1.0f);
  EXPECT_EQ(ip::row_scale(448.0f, false), 1.0f);
  EXPECT_EQ(ip::row_scale(254.0f, true), 2.0f);
  EXPECT_EQ(ip::inverse_scale(2.0f), 0.5f);
  EXPECT_EQ(ip::inverse_scale(0.0f), 0.0f);  // all-zero row
  // int8: rint, ties to even, clamp at +-127, two's-complement byte.
  EXPECT_EQ(ip::encode_scaled(5.0f, 0.5f, true), 2);     // 2.5 -> 2
  EXPECT_EQ(ip::encode_scaled(7.0f, 0.5f, true), 4);     // 3.5 -> 4
  EXPECT_EQ(ip::encode_scaled(-3.0f, 1.0f, true), 0xFD);  // -3
  EXPECT_EQ(ip::encode_scaled(1000.0f, 1.0f, true), 127);
  EXPECT_EQ(ip::encode_scaled(-1000.0f, 1.0f, true), 0x81);  // -127
  EXPECT_EQ(ip::encode_scaled(9.0f, 0.0f, true), 0);
  // fp8 e4m3: 1.0 = 0x38, -448 = 0xFE, 0.5 * 4 = 2.0 = 0x40.
  EXPECT_EQ(ip::encode_scaled(1.0f, 1.0f, false), 0x38);
  EXPECT_EQ(ip::encode_scaled(-448.0f, 1.0f, false), 0xFE);
  EXPECT_EQ(ip::encode_scaled(0.5f, 4.0f, false), 0x40);
}

// Rows whose max |x| is so small that 1 / (max|x| / 127) overflows (below about 1.5e-36; fp8 below about
// 5.3e-36): the scale stops at 2^-126, so the inverse stays finite and every value encodes within the error
// bound of the stored scale; zeros stay zeros (fp8 stored NaN for them: 0 x inf; found by an audit).
TEST(Quant, TinyRowsKeepAFiniteInverseScale) {
  EXPECT_EQ(ip::row_scale(1e-37f, true), 0x1p-126f);
  EXPECT_EQ(ip::row_scale(1e-37f, false), 0x1p-126f);
  EXPECT_EQ(ip::row_scale(0.0f, true), 0.0f);  // an all-zero row keeps scale 0
  EXPECT_EQ(ip::row_scale(127.0f * 0x1p-126f, true), 0x1p-126f);  // at the floor: unchanged
  const std::vector<float> row = {1e-37f, -5e-38f, 2.5e-38f, 0.0f, 1e-38f, 0.0f, -1e-37f, 3e-38f};
  const ip::Index64 n = static_cast<ip::Index64>(row.size());
  for (Precision p : {Precision::int8, Precision::fp8}) {
    SCOPED_TRACE(ip::to_string(p));
    const auto q = ip::quantize(view(row, 1, n), p);
    EXPECT_EQ(q.scale(0), 0x1p-126f);
    std::vector<float> back(row.size());
    ip::dequantize_row(q, 0, back.data());
    for (std::size_t i = 0; i < row.size(); ++i) {
      ASSERT_TRUE(std::isfinite(back[i])) << i;
      if (row[i] == 0.0f) {
        EXPECT_EQ(back[i], 0.0f) << i;
      }
      // int8: half a step; fp8: the format's relative bound plus half its subnormal step.
      const double bound = p == Precision::int8 ? 0x1p-127 : std::fabs(row[i]) / 16 + 0x1p-126 * 0x1p-10;
      EXPECT_LE(std::fabs(static_cast<double>(back[i]) - row[i]), bound) << i;
    }
  }
}

// quantize_row() is abs_max + row_scale + inverse_scale + encode_scaled: same bytes.
TEST(Quant, QuantizeRowEqualsTheRowMath) {
  const auto x = normal_data(3, D, 9);
  for (Precision p : {Precision::int8, Precision::fp8}) {
    const bool i8 = p == Precision::int8;
    const auto q = ip::quantize(view(x, 3, D), p);
    for (int r = 0; r < 3; ++r) {
      float amax = 0.0f;
      for (int d = 0; d < D; ++d) amax = ip::abs_max(amax, x[r * D + d]);
      const float scale = ip::row_scale(amax, i8);
      ASSERT_EQ(q.scale(r), scale);
      for (int d = 0; d < D; ++d)
        ASSERT_EQ(q.row_bytes(r)[d], ip::encode_scaled(x[r * D + d], ip::inverse_scale(scale), i8)) << r << " " << d;
    }
  }
}

namespace lanes_checks {

std::uint32_t bits_of(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
float from_bits(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// The branch-free fp16 decoder of the CPU's rows gives the bits of the shared one for all 65,536 codes
// (NaN payloads included), and dequantize_row uses it.
TEST(QuantLanes, Fp16DecoderEqualsTheSharedOneForEveryCode) {
  ip::QuantizedMatrix q;
  ip::resize(q, Precision::fp16, 1, 65536);
  for (int c = 0; c < 65536; ++c) {
    const auto h = static_cast<std::uint16_t>(c);
    ASSERT_EQ(bits_of(ip::lanes::fp16_to_float(h)), bits_of(ip::fp16_to_float(h))) << std::hex << c;
    std::memcpy(q.row_bytes(0) + 2 * c, &h, 2);
  }
  std::vector<float> out(65536);
  ip::dequantize_row(q, 0, out.data());
  for (int c = 0; c < 65536; ++c)
    ASSERT_EQ(bits_of(out[c]), bits_of(ip::fp16_to_float(static_cast<std::uint16_t>(c)))) << std::hex << c;
}

// The branch-free fp8 decoder gives the shared one's bits for every code, and dequantize_row of fp8 rows
// gives fp8e4m3_to_float(code) * scale, bit for bit, for every code and a few scales (0, subnormal,
// ordinary, huge), in a row of odd length.
TEST(QuantLanes, Fp8RowsDecodeAsTheSharedFunctionForEveryCode) {
  for (int c = 0; c < 256; ++c) {
    const auto code = static_cast<std::uint8_t>(c);
    ASSERT_EQ(bits_of(ip::lanes::fp8e4m3_to_float(code)), bits_of(ip::fp8e4m3_to_float(code))) << c;
  }
  constexpr int n = 259;
  for (float scale : {1.0f, 0.0f, 0.3712f, 1e-40f, 3.0e37f}) {
    ip::QuantizedMatrix q;
    ip::resize(q, Precision::fp8, 2, n);
    for (int r = 0; r < 2; ++r) {
      q.scales[r] = scale;
      for (int i = 0; i < n; ++i) q.row_bytes(r)[i] = static_cast<std::uint8_t>((i * 7 + r) & 0xFF);
    }
    std::vector<float> out(n);
    for (int r = 0; r < 2; ++r) {
      ip::dequantize_row(q, r, out.data());
      for (int i = 0; i < n; ++i) {
        const std::uint8_t c = q.row_bytes(r)[i];
        ASSERT_EQ(bits_of(out[i]), bits_of(ip::fp8e4m3_to_float(c) * scale)) << scale << " code " << int{c};
      }
    }
  }
}

// Every float whose e4m3 code a rounding decision could change: each code's value and the midpoint to
// the next, 8 ulps either side, both signs; then the zeros, float subnormals, the subnormal/normal and
// saturation borders, infinities and NaNs, and every 997th bit pattern. The branch-free encoder of the
// CPU's rows gives the shared function's byte for each.
TEST(QuantLanes, Fp8EncoderEqualsTheSharedOneAtEveryRoundingBoundary) {
  std::vector<float> probes;
  auto around = [&](float v) {
    const std::uint32_t b = bits_of(v);
    for (std::uint32_t d = 0; d <= 8; ++d) {
      if (b >= d) probes.push_back(from_bits(b - d));
      probes.push_back(from_bits(b + d));
    }
  };
  for (int c = 0; c <= 0x7E; ++c) {
    const float v = ip::fp8e4m3_to_float(static_cast<std::uint8_t>(c));
    const float next = c < 0x7E ? ip::fp8e4m3_to_float(static_cast<std::uint8_t>(c + 1)) : 512.0f;
    around(v);
    around(0.5f * (v + next));  // exact: both are multiples of a power of two well inside float's range
  }
  for (float v : {0.0f, 1e-45f, 1e-40f, 1.1754942e-38f, 1.17549435e-38f, 0.015625f, 0.0146484375f, 448.0f,
                  464.0f, 480.0f, 1e30f, 3.4028235e38f, std::numeric_limits<float>::infinity()})
    around(v);
  for (std::uint32_t b : {0x7F800001u, 0x7FC00000u, 0x7FFFFFFFu, 0x7FA00000u}) probes.push_back(from_bits(b));
  for (std::uint64_t b = 0; b <= 0x7FFFFFFFu; b += 997) probes.push_back(from_bits(static_cast<std::uint32_t>(b)));
  const std::size_t n = probes.size();
  for (std::size_t i = 0; i < n; ++i) probes.push_back(-probes[i]);
  for (float v : probes)
    ASSERT_EQ(ip::lanes::fp8e4m3_from_float(v), ip::fp8e4m3_from_float(v)) << std::hexfloat << v;
}

// quantize_row's scale is the abs_max fold (NaN skipped, -0 and infinity as there) and its bytes are
// encode_scaled's, for rows of odd length holding NaNs, zeros, subnormals and a saturating element.
TEST(QuantLanes, QuantizedRowsWithSpecialValuesAreTheRowMath) {
  constexpr int n = 37;
  std::vector<std::vector<float>> rows;
  rows.push_back(std::vector<float>(n, 0.0f));
  rows.push_back(std::vector<float>(n, -0.0f));
  rows.push_back(std::vector<float>(n, std::nanf("")));
  std::vector<float> mixed = normal_data(1, n, 3);
  mixed[0] = std::nanf("");
  mixed[5] = -std::nanf("");
  mixed[9] = 1e-41f;
  mixed[36] = -0.0f;
  rows.push_back(mixed);
  mixed[17] = -std::numeric_limits<float>::infinity();
  rows.push_back(mixed);
  std::vector<float> tiny(n);
  for (int i = 0; i < n; ++i) tiny[i] = (i % 2 ? -1.0f : 1.0f) * 1e-42f * static_cast<float>(i);
  rows.push_back(tiny);
  for (Precision p : {Precision::int8, Precision::fp8}) {
    const bool i8 = p == Precision::int8;
    for (std::size_t k = 0; k < rows.size(); ++k) {
      const std::vector<float>& x = rows[k];
      ip::QuantizedMatrix q;
      ip::resize(q, p, 1, n);
      ip::quantize_row(x.data(), 0, q);
      float amax = 0.0f;
      for (float v : x) amax = ip::abs_max(amax, v);
      const float scale = ip::row_scale(amax, i8);
      ASSERT_EQ(bits_of(q.scales[0]), bits_of(scale)) << ip::to_string(p) << " row " << k;
      const float inv = ip::inverse_scale(scale);
      for (int i = 0; i < n; ++i) {
        if (i8 && std::isnan(x[i] * inv)) continue;  // int8 of NaN: the cast is undefined, no byte to compare
        ASSERT_EQ(q.row_bytes(0)[i], ip::encode_scaled(x[i], inv, i8)) << ip::to_string(p) << " row " << k << " " << i;
      }
    }
  }
}

}  // namespace lanes_checks

}  // namespace
