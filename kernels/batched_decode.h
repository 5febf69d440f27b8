// B concurrent requests with different context lengths, one launch per stage (issue 5, item 2):
// load() builds the B indexes with one pool launch; step() runs one decode step for all B with one
// score launch, one top-k launch and one attention launch. Requests lie back to back (CSR, no padding
// to the longest). Device memory is plain cudaMalloc, all of it allocated by the constructor, sized by
// estimate_device_bytes() so a caller can skip a point that does not fit (check_fits) instead of
// crashing a sweep. Host-only header.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/kernel_forms.h"
#include "core/pool.h"

namespace ip::cuda {

struct BatchedDecodeConfig {
  int requests = 1;             // B
  long long total_tokens = 0;   // sum of the requests' tokens (upper bound)
  long long max_tokens = 0;     // longest request (upper bound)
  int dim = 128;                // index key dimension D
  int index_heads = 8;          // H
  int attn_dim = 128;           // Da
  int attn_heads = 4;           // Ha (MQA)
  int value_dim = 128;          // Dv
  // Scheme, group size and precision. Schemes that learn from a request's history (tfidf, hybrid,
  // cosine with reference = query) are not supported here: they need the per-request pipeline.
  PoolParams pool;
  long long topk_tokens = 2048;  // k: every request selects ceil(k / G) groups; every request needs >= k tokens
  bool want_probs = false;
  KernelForms forms;  // the score, top-k and attention kernels' forms (core/kernel_forms.h)
};

// Checks the configuration (throws ip::Error naming the bad field).
void validate(const BatchedDecodeConfig& c);
// Device bytes the decoder allocates for this configuration (everything, workspaces included).
std::size_t estimate_device_bytes(const BatchedDecodeConfig& c);
// Empty when the estimate fits in the free memory of `device` (less `reserve_bytes`), else the reason
// ("needs 61.2 GiB, 55.0 GiB free on device 0").
std::string check_fits(const BatchedDecodeConfig& c, int device = 0, std::size_t reserve_bytes = 256ull << 20);

// The contexts of the B requests (host arrays). Request b owns rows [token_offset[b], token_offset[b+1]).
// Either packed (the three arrays of all B back to back) or per request (B pointers each, request b's
// [T_b, D] rows): load() copies each request into its rows on the device, so a caller holding separate
// requests needs no packed host copy. Both give the same bits.
struct BatchedContext {
  std::span<const long long> token_offset;  // [B + 1], token_offset[0] = 0
  const float* index_keys = nullptr;        // [total, D]
  const float* attn_keys = nullptr;         // [total, Da]
  const float* values = nullptr;            // [total, Dv]
  // Per request, used when the packed pointers above are null: [B] pointers to [T_b, D], [T_b, Da], [T_b, Dv].
  std::span<const float* const> request_index_keys, request_attn_keys, request_values;
};

// One decode query per request (host arrays).
struct BatchedQueries {
  const float* index_queries = nullptr;  // [B, H, D]
  const float* head_weights = nullptr;   // [B, H]
  const float* attn_queries = nullptr;   // [B, Ha, Da]
};

struct BatchedStep {
  long long k_groups = 0;
  std::vector<std::int32_t> selected;  // [B, k_groups] group ids relative to each request, best first
  std::vector<float> out;              // [B, Ha, Dv]
  // [B, Ha, k_groups * G] when want_probs: request b's row holds its attended tokens in selection order
  // (tokens ascending within a group), then zeros (a partial last group attends fewer than G tokens).
  std::vector<float> probs;
  float device_ms = 0;  // score + top-k + attention, CUDA events
  float score_ms = 0, topk_ms = 0, attention_ms = 0;  // its three launches (the events between them)
};

class BatchedDecoder {
 public:
  // Allocates estimate_device_bytes(c) on `device` (throws ip::Error when it fails).
  explicit BatchedDecoder(const BatchedDecodeConfig& c, int device = 0);
  ~BatchedDecoder();
  BatchedDecoder(const BatchedDecoder&) = delete;
  BatchedDecoder& operator=(const BatchedDecoder&) = delete;

  // Uploads the contexts and builds the B indexes (one pool launch, timed; an identical untimed one before
  // it takes the kernel's one-time loading). Returns device milliseconds of the timed pool launch.
  float load(const BatchedContext& ctx);
  // One decode step for all B requests.
  BatchedStep step(const BatchedQueries& q);
  // The index rows of every request, as stored on the device ([rows, D] in the configured precision).
  std::vector<std::uint8_t> index_payload() const;
  // The kernel forms the steps so far resolved to, e.g. "attention tiles, score bf16x2, top-k chain".
  std::string kernel_forms() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ip::cuda
