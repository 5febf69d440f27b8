// Quantized row storage for composite (and exact) index keys.
//
// Byte layout of a QuantizedMatrix with R rows of D values:
//   payload: R * D elements, row-major, of 4 (fp32), 2 (fp16, bf16) or 1 (int8, fp8 e4m3) bytes;
//   scales:  for int8 and fp8 only, one fp32 scale per row (the DeepSeek indexer layout: 128 fp8 values
//            plus one fp32 scale per key), stored apart from the payload.
// Value r,d decodes to decode(payload[r,d]) * scale[r] (scale 1 for the float formats).
// int8:  scale = max|x| / 127, q = rint(x * (1 / scale)) in [-127, 127]; |error| <= scale / 2.
// fp8:   scale = max|x| / 448, q = e4m3(x * (1 / scale));  |error| <= |x| / 16 + scale * 2^-10.
// The scale is at least 2^-126 (core/quant_math.h: a row of max|x| below about 1e-36 is stored at that step).
// An all-zero row gets scale 0 and decodes to zeros.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/tensor.h"

namespace ip {

enum class Precision { fp32, fp16, bf16, int8, fp8 };

std::string_view to_string(Precision p);
Precision parse_precision(std::string_view s);  // throws ip::Error naming the accepted values

// Bytes of one stored element, and of the per-row scale (0 for float formats).
int element_bytes(Precision p);
int scale_bytes(Precision p);

struct QuantizedMatrix {
  Precision precision = Precision::fp32;
  Index64 rows = 0;
  Index64 cols = 0;
  std::vector<std::uint8_t> payload;  // rows * cols * element_bytes
  std::vector<float> scales;          // rows, int8 and fp8 only

  // Exact storage in bytes: payload plus scales.
  std::size_t bytes() const { return payload.size() + scales.size() * sizeof(float); }
  const std::uint8_t* row_bytes(Index64 r) const { return payload.data() + r * cols * element_bytes(precision); }
  std::uint8_t* row_bytes(Index64 r) { return payload.data() + r * cols * element_bytes(precision); }
  float scale(Index64 r) const { return scales.empty() ? 1.0f : scales[r]; }
};

// Allocates storage for rows x cols of the given precision.
void resize(QuantizedMatrix& q, Precision p, Index64 rows, Index64 cols);
// Encodes one row of `cols` floats into row r.
void quantize_row(const float* x, Index64 r, QuantizedMatrix& q);
// Decodes row r into cols floats.
void dequantize_row(const QuantizedMatrix& q, Index64 r, float* out);
// Whole-matrix helpers (parallel over rows).
QuantizedMatrix quantize(MatrixView<const float> x, Precision p);
Tensor<float> dequantize(const QuantizedMatrix& q);

}  // namespace ip
