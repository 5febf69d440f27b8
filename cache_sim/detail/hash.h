// Hashing of object ids for the open-addressing tables (splitmix64 finalizer: cheap, and it spreads
// sequential and strided ids over every bucket).
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

}  // namespace ip::cache::detail
