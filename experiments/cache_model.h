// The cache model of a sweep point: the groups each decode step selects (per request, B requests
// interleaved step by step) become an access trace that the cache hierarchy of cache_sim/ replays.
#pragma once

#include <string>
#include <vector>

#include "core/pipeline.h"

namespace ip::exp {

struct CacheParams {
  bool enabled = true;
  std::vector<std::string> levels = {"lru:16KiB", "clock:256KiB", "semantic:8MiB"};  // level 0 first
  std::string mode = "nine";    // nine | inclusive | exclusive
  std::string object = "kv";    // kv: the KV of the selected group; index: its stored index entry
  int kv_bytes = 2;             // bytes per KV element (2: bf16/fp16 KV cache)
  bool opt_bound = true;        // also replay with every level's policy replaced by opt (Belady)
  bool mrc = true;              // exact LRU miss-ratio curve of the trace
};

// Checks level specs, mode and object; throws ip::Error naming the bad item.
void validate_cache(const CacheParams& p);

// What one request contributes to the trace.
struct RequestSelections {
  const std::vector<std::int32_t>* selected;  // [steps, k_groups]
  const std::vector<float>* mass;             // [steps, k_groups]
  Index64 k_groups = 0;
  Index64 steps = 0;
  double object_bytes = 0;  // size of one accessed object
};

struct CacheLevelResult {
  std::string policy, capacity;
  double accesses = 0, hits = 0, misses = 0, evictions = 0, bytes_from_below = 0;
  double hit_rate = 0;      // hits / accesses reaching this level
  double opt_hit_rate = 0;  // the same level with opt (NaN when the bound is off)
};

struct CacheResult {
  std::vector<CacheLevelResult> levels;
  double accesses = 0;
  double hit_rate = 0;      // accesses that hit some level / all accesses
  double opt_hit_rate = 0;  // the same with every policy replaced by opt (NaN when off)
  std::vector<double> mrc_capacity, mrc_miss_ratio;  // entries, fraction (empty when off)
};

// Object size per accessed group for request data of this shape.
double cache_object_bytes(const CacheParams& p, const PooledIndex& index, Index64 attn_dim, Index64 value_dim);

CacheResult simulate_cache(const CacheParams& p, const std::vector<RequestSelections>& requests);

}  // namespace ip::exp
