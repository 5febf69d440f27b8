// Launcher of the fused weighting + pooling + quantization kernel (kernels/pool.cuh, pool.cu).
// Same math as core/pool.cc: the per-group functions of core/weights.h and core/numeric.h run on both.
#pragma once

#include <cstdint>

#include "core/quant.h"
#include "core/weights.h"
#include "kernels/batch.h"

namespace ip::cuda {

struct PoolArgs {
  Batch batch;  // entries = groups of each request: ceil(tokens_b / G)
  // Input keys [total_tokens, dim], row-major, contiguous.
  const void* keys = nullptr;
  KeyType key_type = KeyType::fp32;
  int dim = 0;
  int group_size = 4;  // G (1 for Weighting::exact)
  // Weights (core/weights.h). Device pointers; null where the scheme does not need them.
  Weighting scheme = Weighting::uniform;
  float lambda = 1.0f;
  const float* bias = nullptr;       // [G] explicit positional bias, or null
  float eps = 1e-3f;
  float power = 1.0f;
  const float* query_ref = nullptr;  // [requests, dim] cosine reference = query, or null (group mean)
  float alpha_positional = 1.0f, alpha_cosine = 1.0f, alpha_tfidf = 1.0f;
  const float* stats_mass = nullptr;           // [total_tokens] tfidf / hybrid
  const std::uint32_t* stats_count = nullptr;  // [total_tokens]
  const long long* stats_steps = nullptr;      // [requests] N of each request
  // Output: rows in the layout of core/quant.h (maxmin: rows 2g (max) and 2g+1 (min) of entry g).
  Precision precision = Precision::fp32;
  void* payload = nullptr;   // [rows, dim] elements
  float* scales = nullptr;   // [rows], int8 and fp8 only
  float* weights = nullptr;  // optional [total_tokens]: the per-token weights
};

// Validates the arguments (throws ip::Error naming the bad one) and launches on `stream`.
// Device-side data (offsets, bias, statistics) is trusted: entry_offset must hold ceil(tokens_b / G)
// entries per request (the kernel never reads outside a request's tokens either way), and the keys
// must be finite (core/pool.cc validate_pool_inputs checks them on the host).
void pool(const PoolArgs& a, cudaStream_t stream);

// The host-side checks pool() runs before any CUDA call (kernels/pool_validate.cc); no GPU needed.
void validate_pool_args(const PoolArgs& a);

}  // namespace ip::cuda
