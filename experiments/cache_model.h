// The cache model of a sweep point: the groups each decode step selects (per request, B requests
// interleaved step by step) become an access trace that the cache hierarchy of cache_sim/ replays.
#pragma once

#include <string>
#include <vector>

#include "cache_sim/trace.h"
#include "core/pipeline.h"

namespace ip::exp {

struct CacheParams {
  bool enabled = true;
  std::vector<std::string> levels = {"lru:16KiB", "clock:256KiB", "semantic:8MiB"};  // level 0 first
  std::string mode = "nine";    // nine | inclusive | exclusive
  std::string object = "kv";    // kv: the KV of the selected group; index: its stored index entry
  int kv_bytes = 2;             // bytes per KV element (2: bf16/fp16 KV cache)
  std::string relevance = "mass";  // score of an access: mass (attention mass the step gave the group) or
                                   // cosine ((1 + cos(composite key, EMA of the queries)) / 2)
  bool opt_bound = true;        // also replay under Belady: every level's policy replaced by opt, and
                                // one opt cache of all levels' capacity (the upper bound)
  bool mrc = true;              // exact LRU miss-ratio curve of the trace
};

// Checks level specs, mode, object and relevance; throws ip::Error naming the bad item.
void validate_cache(const CacheParams& p);
// Checks that involve several cache keys (after every key is applied): a semantic-cos level needs
// cache.relevance = cosine.
void validate_cache_point(const CacheParams& p);

// What one request contributes to the trace.
struct RequestSelections {
  const std::vector<std::int32_t>* selected;  // [steps, k_groups]
  const std::vector<float>* mass;             // [steps, k_groups]
  const std::vector<float>* similarity;       // [steps, k_groups] for relevance = cosine, else unused
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
  double opt_hit_rate = 0;  // the same hierarchy with every policy replaced by opt (NaN when off); not a bound
  // Belady's OPT on one cache holding as many objects as all levels together: an upper bound on
  // hit_rate for any policies and any mode of these levels. NaN when off, or when the accesses differ in
  // size (Belady is then not optimal for byte capacities).
  double opt_single_hit_rate = 0;
  double opt_single_entries = 0;  // that cache's capacity in objects (NaN when not computed)
  std::vector<double> mrc_capacity, mrc_miss_ratio;  // entries, fraction (empty when off)
};

// Object size per accessed group for request data of this shape.
double cache_object_bytes(const CacheParams& p, const PooledIndex& index, Index64 attn_dim, Index64 value_dim);

// The access trace of the requests: step by step, each request's selections in selection order;
// id = (request << 40) | group, size = object_bytes, score = mass or similarity (p.relevance),
// request and step set.
cache::Trace cache_trace(const CacheParams& p, const std::vector<RequestSelections>& requests);

CacheResult simulate_cache(const CacheParams& p, const cache::Trace& trace);
CacheResult simulate_cache(const CacheParams& p, const std::vector<RequestSelections>& requests);

}  // namespace ip::exp
