#include "core/quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/numeric.h"
#include "core/parallel.h"
#include "core/quant_lanes.h"
#include "core/quant_math.h"

namespace ip {

std::string_view to_string(Precision p) {
  switch (p) {
    case Precision::fp32: return "fp32";
    case Precision::fp16: return "fp16";
    case Precision::bf16: return "bf16";
    case Precision::int8: return "int8";
    case Precision::fp8: return "fp8";
  }
  return "?";
}

Precision parse_precision(std::string_view s) {
  for (Precision p : {Precision::fp32, Precision::fp16, Precision::bf16, Precision::int8, Precision::fp8})
    if (s == to_string(p)) return p;
  throw Error(fmt::format("unknown precision '{}' (expected fp32, fp16, bf16, int8 or fp8)", s));
}

int element_bytes(Precision p) {
  switch (p) {
    case Precision::fp32: return 4;
    case Precision::fp16:
    case Precision::bf16: return 2;
    case Precision::int8:
    case Precision::fp8: return 1;
  }
  return 0;
}

int scale_bytes(Precision p) { return (p == Precision::int8 || p == Precision::fp8) ? 4 : 0; }

void resize(QuantizedMatrix& q, Precision p, Index64 rows, Index64 cols) {
  IP_REQUIRE(rows >= 0 && cols >= 0, "quantized matrix: negative shape [{}, {}]", rows, cols);
  q.precision = p;
  q.rows = rows;
  q.cols = cols;
  // resize() keeps existing storage when the size is unchanged (index rebuilds write every byte again).
  q.payload.resize(static_cast<std::size_t>(rows * cols * element_bytes(p)));
  q.scales.resize(scale_bytes(p) ? static_cast<std::size_t>(rows) : 0);
}

// The row loops of the CPU backend: the element math of core/numeric.h and core/quant_math.h, or where
// its branches keep the compiler from vectorizing a row, the branch-free forms of core/quant_lanes.h.
namespace {

// max_i |x_i| as abs_max folds it: NaN skipped (here: taken as 0, which cannot raise a maximum that
// starts at 0), so the maximum is order-free and the compiler may keep it in vector lanes.
float row_abs_max(const float* x, Index64 n) {
  float amax = 0.0f;
#pragma omp simd reduction(max : amax)
  for (Index64 i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    amax = abs_max(amax, ax == ax ? ax : 0.0f);
  }
  return amax;
}

}  // namespace

void quantize_row(const float* x, Index64 r, QuantizedMatrix& q) {
  const Index64 n = q.cols;
  std::uint8_t* dst = q.row_bytes(r);
  switch (q.precision) {
    case Precision::fp32:
      std::memcpy(dst, x, n * sizeof(float));
      return;
    case Precision::fp16: {
      auto* d = reinterpret_cast<std::uint16_t*>(dst);
      for (Index64 i = 0; i < n; ++i) d[i] = fp16_from_float(x[i]);
      return;
    }
    case Precision::bf16: {
      auto* d = reinterpret_cast<std::uint16_t*>(dst);
      for (Index64 i = 0; i < n; ++i) d[i] = bf16_from_float(x[i]);
      return;
    }
    case Precision::int8:
    case Precision::fp8: {
      const bool is_int8 = q.precision == Precision::int8;
      const float scale = row_scale(row_abs_max(x, n), is_int8);
      q.scales[r] = scale;
      const float inv = inverse_scale(scale);
      // encode_scaled(x[i], inv, is_int8), one loop per format.
      if (is_int8)
        for (Index64 i = 0; i < n; ++i) dst[i] = static_cast<std::uint8_t>(int8_from_scaled(x[i] * inv));
      else
        for (Index64 i = 0; i < n; ++i) dst[i] = lanes::fp8e4m3_from_float(x[i] * inv);
      return;
    }
  }
}

void dequantize_row(const QuantizedMatrix& q, Index64 r, float* out) {
  const Index64 n = q.cols;
  const std::uint8_t* src = q.row_bytes(r);
  switch (q.precision) {
    case Precision::fp32:
      std::memcpy(out, src, n * sizeof(float));
      return;
    case Precision::fp16: {
      auto* s = reinterpret_cast<const std::uint16_t*>(src);
      for (Index64 i = 0; i < n; ++i) out[i] = lanes::fp16_to_float(s[i]);
      return;
    }
    case Precision::bf16: {
      auto* s = reinterpret_cast<const std::uint16_t*>(src);
      for (Index64 i = 0; i < n; ++i) out[i] = bf16_to_float(s[i]);
      return;
    }
    case Precision::int8: {
      const float scale = q.scales[r];
      auto* s = reinterpret_cast<const std::int8_t*>(src);
      for (Index64 i = 0; i < n; ++i) out[i] = static_cast<float>(s[i]) * scale;
      return;
    }
    case Precision::fp8: {
      const float scale = q.scales[r];
      for (Index64 i = 0; i < n; ++i) out[i] = lanes::fp8e4m3_to_float(src[i]) * scale;
      return;
    }
  }
}

QuantizedMatrix quantize(MatrixView<const float> x, Precision p) {
  QuantizedMatrix q;
  resize(q, p, x.rows, x.cols);
  parallel_for(x.rows, 4096, [&](Index64 b, Index64 e) {
    for (Index64 r = b; r < e; ++r) quantize_row(x.row(r), r, q);
  });
  return q;
}

Tensor<float> dequantize(const QuantizedMatrix& q) {
  Tensor<float> out({q.rows, q.cols});
  parallel_for(q.rows, 4096, [&](Index64 b, Index64 e) {
    for (Index64 r = b; r < e; ++r) dequantize_row(q, r, out.data() + r * q.cols);
  });
  return out;
}

}  // namespace ip
