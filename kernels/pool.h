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
  // Update mode (core/incremental.h), optional: with prev_weights set, entry e of request b is pooled
  // only when it is fresh (its request-local index is >= fresh_from[b]) or its weights moved by more
  // than tau since prev_weights (core/incremental_math.h repool_group, the CPU's own decision). A
  // pooled entry writes its rows, stores its weights into prev_weights and adds 1 to *repooled; an
  // entry that is not pooled writes nothing (its rows keep the bytes they had).
  float* prev_weights = nullptr;             // [total_tokens] read and updated
  const long long* fresh_from = nullptr;     // [requests], required with prev_weights
  float tau = 0.0f;
  unsigned long long* repooled = nullptr;    // [1] counter, required with prev_weights
  // Experiment (kernel_bench compares both forms in one run; kernels/DEVICE_RUNS.md item 13): the
  // pipelined fast kernel, whose warps stride over the groups and load their next groups while pooling
  // the current ones. Only for fp16 and bf16 keys at D = 128, G = 4 (other shapes and fp32 keys, which
  // reach the copy bandwidth without it, ignore it); the same bytes either way.
  bool pipelined = false;
};

// Validates the arguments (throws ip::Error naming the bad one) and launches on `stream`.
// Device-side data (offsets, bias, statistics) is trusted: entry_offset must hold ceil(tokens_b / G)
// entries per request (the kernel never reads outside a request's tokens either way), and the keys
// must be finite (core/pool.cc validate_pool_inputs checks them on the host).
void pool(const PoolArgs& a, cudaStream_t stream);

// The host-side checks pool() runs before any CUDA call (kernels/pool_validate.cc); no GPU needed.
void validate_pool_args(const PoolArgs& a);

}  // namespace ip::cuda
