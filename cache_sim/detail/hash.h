// Hashing of object ids.
//  mix64:      splitmix64's finalizer; every output bit depends on every input bit. For sampling
//              (SHARDS) and the trace-side maps.
//  table_hash: one multiply (Fibonacci hashing) folded onto itself, 4 instructions, for the level
//              maps, which hash several times per access: the top 7 bits (the map's tag) and the
//              low bits (its group) both depend on all of the id.
#pragma once

#include <cstdint>

namespace ip::cache::detail {

inline std::uint64_t mix64(std::uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

inline std::uint64_t table_hash(std::uint64_t x) {
  x *= 0x9e3779b97f4a7c15ULL;
  return x ^ (x >> 32);
}

}  // namespace ip::cache::detail
