// Test-side helpers of tests/gpu/pool_test.cc: one pooling case, its inputs, the CPU reference
// (core/pool.cc build_index and compute_weights, request by request) and the comparison rules.
#pragma once

#include <cmath>
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/numeric.h"
#include "core/pool.h"
#include "core/stats.h"
#include "kernels/batch.h"

namespace ip::test {

struct PoolCase {
  Weighting scheme = Weighting::uniform;
  bool bias = false;   // positional / hybrid: explicit bias vector instead of lambda
  bool query = false;  // cosine / hybrid: reference = the request's query instead of the group mean
  Precision precision = Precision::fp32;
  cuda::KeyType key_type = cuda::KeyType::fp32;
  int G = 4;
  int D = 128;
  std::vector<long long> lengths;  // tokens of each request (0 allowed)
  int key_offset = 0;              // keys start this many elements into their buffer (misalignment)
  int payload_offset = 0;          // payload starts this many elements into its buffer
  bool integer_keys = false;       // small integers (exact arithmetic) instead of normal values
  bool pipelined = false;          // PoolArgs::pipelined (2-byte keys at D = 128, G = 4)
  unsigned seed = 1;

  int group_size() const { return scheme == Weighting::exact ? 1 : G; }
  int rows_per_group() const { return scheme == Weighting::maxmin ? 2 : 1; }
  std::string name() const {
    return fmt::format("{}{}{} {} keys={} G={} D={} B={} offsets={}/{}{}", to_string(scheme), bias ? "+bias" : "",
                       query ? "+query" : "", to_string(precision),
                       key_type == cuda::KeyType::fp32 ? "fp32" : key_type == cuda::KeyType::fp16 ? "fp16" : "bf16",
                       group_size(), D, lengths.size(), key_offset, payload_offset,
                       std::string(integer_keys ? " int" : "") + (pipelined ? " pipelined" : ""));
  }
};

// Inputs of every request, and the key bytes of the whole batch in the case's key type.
struct PoolInputs {
  std::vector<std::vector<float>> keys;  // per request [t_b * D], exactly representable in the key type
  std::vector<AccessStats> stats;        // per request
  std::vector<float> query;              // [B * D]
  std::vector<float> bias;               // [G]
  std::vector<std::uint8_t> key_bytes;   // [key_offset + T] elements of the key type, back to back

  PoolInputs(const PoolCase& c) {
    std::mt19937 gen(c.seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::uniform_int_distribution<int> small(-6, 6);
    std::uniform_real_distribution<float> unit(0.0f, 1.0f);
    const int kb = cuda::key_bytes(c.key_type);
    auto round_to_key = [&](float x) {
      if (c.key_type == cuda::KeyType::fp16) return fp16_to_float(fp16_from_float(x));
      if (c.key_type == cuda::KeyType::bf16) return bf16_to_float(bf16_from_float(x));
      return x;
    };
    key_bytes.assign(static_cast<std::size_t>(c.key_offset) * kb, 0x3C);
    for (std::size_t b = 0; b < c.lengths.size(); ++b) {
      const long long t = c.lengths[b];
      std::vector<float> k(static_cast<std::size_t>(t) * c.D);
      for (auto& v : k) v = round_to_key(c.integer_keys ? static_cast<float>(small(gen)) : 2.0f * normal(gen));
      for (float v : k) {
        std::uint8_t bytes[4];
        if (kb == 4) {
          std::memcpy(bytes, &v, 4);
        } else {
          const std::uint16_t h = c.key_type == cuda::KeyType::fp16 ? fp16_from_float(v) : bf16_from_float(v);
          std::memcpy(bytes, &h, 2);
        }
        key_bytes.insert(key_bytes.end(), bytes, bytes + kb);
      }
      keys.push_back(std::move(k));
      AccessStats s(t);
      for (long long i = 0; i < t; ++i) {
        s.mass[i] = unit(gen) < 0.3f ? 0.0f : unit(gen) * 4.0f;  // some tokens never attended
        s.count[i] = static_cast<std::uint32_t>(unit(gen) * 9.0f);
      }
      s.steps = b % 3 == 0 ? 0 : 5 + static_cast<long long>(b);  // every third request has no history
      stats.push_back(std::move(s));
      for (int d = 0; d < c.D; ++d) query.push_back(normal(gen));
    }
    for (int r = 0; r < c.group_size(); ++r) bias.push_back(0.3f * static_cast<float>(r % 5) - 0.5f);
  }
};

inline PoolParams pool_params(const PoolCase& c) {
  PoolParams p;
  p.group_size = c.group_size();
  p.precision = c.precision;
  WeightParams& w = p.weights;
  w.scheme = c.scheme;
  w.positional_lambda = 0.7f;
  if (c.bias) w.positional_bias.assign(c.group_size(), 0.0f);  // values filled by the caller
  w.eps = 1e-3f;
  w.cosine_power = c.query ? 2.0f : 1.0f;
  w.cosine_reference = c.query ? CosineReference::query : CosineReference::group_mean;
  w.alpha_positional = 0.5f;
  w.alpha_cosine = 1.5f;
  w.alpha_tfidf = 1.0f;
  return p;
}

// The CPU's stored rows and weights of the whole batch, requests back to back.
struct PoolReference {
  std::vector<std::uint8_t> payload;
  std::vector<float> scales;
  std::vector<float> weights;
  std::vector<float> row_key_max;          // per row: max |key| over its group (the tolerance's scale)
  std::vector<long long> row_first_token;  // per row: its group's first token (index into weights)
  std::vector<int> row_tokens;             // per row: its group's tokens
  std::vector<float> token_wmax;           // per token: max weight of its group
};

inline PoolReference pool_reference(const PoolCase& c, const PoolInputs& in) {
  PoolReference ref;
  PoolParams p = pool_params(c);
  if (c.bias) p.weights.positional_bias = in.bias;
  const int G = c.group_size();
  long long first_token = 0;
  for (std::size_t b = 0; b < c.lengths.size(); ++b) {
    const Index64 t = c.lengths[b];
    if (t == 0) continue;  // the CPU rejects an empty context; the batch gives it no entries
    const MatrixView<const float> k(in.keys[b].data(), t, c.D);
    const float* q = in.query.data() + b * c.D;
    const PooledIndex idx = build_index(k, p, &in.stats[b], q);
    ref.payload.insert(ref.payload.end(), idx.rows.payload.begin(), idx.rows.payload.end());
    ref.scales.insert(ref.scales.end(), idx.rows.scales.begin(), idx.rows.scales.end());
    const std::vector<float> w = compute_weights(k, p, &in.stats[b], q);
    ref.weights.insert(ref.weights.end(), w.begin(), w.end());
    for (Index64 g = 0; g < idx.groups(); ++g) {
      float km = 0.0f, wm = 0.0f;
      for (Index64 i = g * G; i < std::min(t, (g + 1) * G); ++i) {
        wm = std::max(wm, w[i]);
        for (int d = 0; d < c.D; ++d) km = std::max(km, std::fabs(in.keys[b][i * c.D + d]));
      }
      for (int r = 0; r < c.rows_per_group(); ++r) {
        ref.row_key_max.push_back(km);
        ref.row_first_token.push_back(first_token + g * G);
        ref.row_tokens.push_back(static_cast<int>(std::min(t, (g + 1) * G) - g * G));
      }
      for (Index64 i = g * G; i < std::min(t, (g + 1) * G); ++i) ref.token_wmax.push_back(wm);
    }
    first_token += t;
  }
  return ref;
}

// Decoded value of element i of a row of `prec` (scale 1 for the float formats).
inline float decode(Precision prec, const std::uint8_t* row, int i, float scale) {
  switch (prec) {
    case Precision::fp32: { float f; std::memcpy(&f, row + 4 * i, 4); return f; }
    case Precision::fp16: { std::uint16_t h; std::memcpy(&h, row + 2 * i, 2); return fp16_to_float(h); }
    case Precision::bf16: { std::uint16_t h; std::memcpy(&h, row + 2 * i, 2); return bf16_to_float(h); }
    case Precision::int8: return static_cast<float>(static_cast<std::int8_t>(row[i])) * scale;
    case Precision::fp8: return fp8e4m3_to_float(row[i]) * scale;
  }
  return NAN;
}

// How far a decoded value may sit from the value it encodes (core/quant.h bounds), given the decoded
// value y and the row's scale s.
inline float format_error(Precision prec, float y, float s) {
  switch (prec) {
    case Precision::fp32: return 0.0f;
    case Precision::fp16: return std::fabs(y) * 0x1p-10f + 0x1p-24f;
    case Precision::bf16: return std::fabs(y) * 0x1p-7f;
    case Precision::int8: return 0.5f * s;
    case Precision::fp8: return std::fabs(y) / 15.0f + s * 0x1p-10f;
  }
  return 0.0f;
}

}  // namespace ip::test
