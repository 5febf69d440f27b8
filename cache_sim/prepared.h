// A prepared trace: a trace in memory whose object ids are renumbered densely, 0..n-1 in order of
// first access, once, before replay. Levels that replay it index flat arrays by id (an id -> slot
// array of 4 bytes per distinct id) instead of hashing, and the replay loop can prefetch each
// access's metadata some accesses ahead. Renumbering keeps every decision of every policy: a level's
// slots are handed out in the same order, so hits, misses, evictions and victims are identical to a
// replay of the original ids (tests/cache_sim/prepared_test.cc checks that on random traces).
//
// Each level of a hierarchy that replays it chooses its id -> slot map (HierarchyOptions::id_map):
// the array when it costs at most what the hash map can (12 bytes per entry the level can hold,
// counted with the trace's smallest object for byte capacities), the hash map of the dense ids
// otherwise, so that metadata stays bounded per resident entry however many ids the trace has.
//
// The prepared trace refers to the trace it was made from (sizes, scores, request and step ids are
// read from there): that trace must outlive it and stay unchanged.
#pragma once

#include <cstdint>
#include <vector>

#include "cache_sim/trace.h"

namespace ip::cache {

struct PreparedTrace {
  const Trace* trace = nullptr;
  std::vector<std::uint32_t> ids;        // dense id of each access
  std::vector<std::uint64_t> original;   // original id of each dense id
  std::uint32_t min_size = 0;            // smallest object size in the trace (bytes)
  std::uint32_t max_size = 0;            // largest
  std::size_t universe() const { return original.size(); }
  // The size of every object when they all have one size (> 0 bytes), else 0: levels replaying the
  // trace then keep no per-entry size (level.h, use_dense_ids).
  std::uint32_t uniform_size() const { return min_size == max_size ? min_size : 0; }
  std::size_t size() const { return ids.size(); }
  // Bytes held by the renumbering (ids and the table back to the original ids).
  std::size_t bytes() const { return ids.capacity() * sizeof(std::uint32_t) + original.capacity() * sizeof(std::uint64_t); }
};

// Renumbers the ids of `trace` (at most 2^32 - 1 distinct ids). O(n), one hash lookup per access.
PreparedTrace prepare(const Trace& trace);

}  // namespace ip::cache
