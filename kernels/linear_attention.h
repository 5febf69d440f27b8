// Launchers of gated linear attention on the device (issue 7, the hybrid layer's local branch).
// CPU reference: core/linear_attention.h (gla_naive, gla_chunked, gla_readout) and core/hybrid.h
// (local_prefill / local_append / local_readout). All arrays are contiguous row-major device arrays.
#pragma once

#include <cstddef>

#include <cuda_runtime.h>

#include "core/linear_attention.h"

namespace ip::cuda {

// S_t = diag(a_t) S_{t-1} + k_t v_t^T over n tokens from `state` (updated in place); with queries,
// out_t = S_t^T q_t.
struct GlaArgs {
  const float* keys = nullptr;     // [n, dk]
  const float* values = nullptr;   // [n, dv]
  const float* gates = nullptr;    // [n, dk], in (0, 1]
  const float* queries = nullptr;  // [n, dk] or null (then no outputs)
  float* out = nullptr;            // [n, dv] when queries are given
  float* state = nullptr;          // [dk, dv], read and written
  long long n = 0;                 // tokens (0: nothing to do)
  int dk = 0, dv = 0;
  int chunk = 64;                  // C of the chunked form (gla_chunked only)
  // gla_chunked only. Null: the sequential kernel. Else at least gla_chunked_workspace_bytes(n, dk, dv,
  // chunk) bytes of device memory (no initialization needed), and the chunks run in parallel: every
  // chunk's decay and state sum at once, the recurrence over the chunks per state element, every chunk's
  // outputs at once. The same bits as the sequential kernel (the same functions in the same order).
  void* workspace = nullptr;
  std::size_t workspace_bytes = 0;
};

// The chunked form (core/gla_tile.h): without a workspace one block per tile of value columns walks the
// chunks in order with its state tile in shared memory; with one, the chunk-parallel form above. chunk
// must fit the shared memory (gla_max_chunk).
void gla_chunked(const GlaArgs& a, cudaStream_t stream);
// Workspace of the chunk-parallel form: a [dk, dv] state sum and a [dk] decay per chunk (4 B each).
std::size_t gla_chunked_workspace_bytes(long long n, int dk, int dv, int chunk);
// The recurrence, one thread per state element (the decode append: a few tokens). No queries.
void gla_append(const GlaArgs& a, cudaStream_t stream);
// Largest chunk <= `want` whose staging fits this device's shared memory for key dimension dk (0: none).
int gla_max_chunk(int dk, bool outputs, int want);

// Read-out: o_h = S^T x_h for each head, x_h = feature_map(feature_scale * q_h) when feature_scale > 0
// (else q_h itself); normalised: out_h[j] = o_h[j] / o_h[dv - 1] for j < dv - 1 (out [heads, dv - 1]),
// else out = o ([heads, dv]).
struct GlaReadoutArgs {
  const float* state = nullptr;    // [dk, dv]
  const float* queries = nullptr;  // [heads, dk]
  float* out = nullptr;
  int dk = 0, dv = 0, heads = 0;
  float feature_scale = 0.0f;
  bool normalise = false;
};
void gla_readout(const GlaReadoutArgs& a, cudaStream_t stream);

// Inputs of the hybrid layer's local branch for tokens [first, first + n) (core/hybrid.cc):
//   out_keys = feature_map(scale * keys), out_values = [values, 1], out_gates = gate_value(gates, t, d).
struct LocalInputArgs {
  const float* keys = nullptr;    // [n, dk] raw attention keys of the tokens
  const float* values = nullptr;  // [n, dv] raw values
  long long first = 0, n = 0;
  int dk = 0, dv = 0;
  float scale = 1.0f;             // 1 / Da^{1/4}
  GateParams gates;
  float* out_keys = nullptr;      // [n, dk]
  float* out_values = nullptr;    // [n, dv + 1]
  float* out_gates = nullptr;     // [n, dk]
};
void local_inputs(const LocalInputArgs& a, cudaStream_t stream);

}  // namespace ip::cuda
