// How every launcher sees a batch of B concurrent requests with different context lengths, laid back
// to back without padding (core/segments.h): request b owns tokens [token_offset[b], token_offset[b+1])
// of the per-token arrays and index entries [entry_offset[b], entry_offset[b+1]) of the per-entry
// arrays (one entry = one group: a composite, a maxmin pair, or one key for the exact indexer).
// Offsets live on the device, start at 0 and have requests + 1 entries. A single request is a batch
// of one ({0, T} and {0, groups}).
#pragma once

#include <cuda_runtime.h>

namespace ip::cuda {

struct Batch {
  int requests = 1;
  const long long* token_offset = nullptr;  // device [requests + 1]
  const long long* entry_offset = nullptr;  // device [requests + 1]
  long long total_tokens = 0;               // token_offset[requests], known on the host
  long long total_entries = 0;              // entry_offset[requests], known on the host
};

// Element type of keys handed to the kernels (the attention and exact-indexer inputs).
enum class KeyType { fp32, fp16, bf16 };
inline int key_bytes(KeyType t) { return t == KeyType::fp32 ? 4 : 2; }

}  // namespace ip::cuda
