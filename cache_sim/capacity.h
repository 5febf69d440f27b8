// Level capacities and level specs: "lru:1000" (entries), "clock:256KiB" (bytes).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace ip::cache {

struct Capacity {
  std::uint64_t value = 0;
  bool bytes = false;  // false: a number of entries
  std::string text() const;  // "1000 entries", "16KiB", "1000000 B"
};

// A plain integer is a number of entries (1 .. 2^32 - 2); an integer with a unit is bytes: B, KiB, MiB,
// GiB, TiB (powers of 1024) or kB, MB, GB, TB (powers of 1000). Zero, fractions, unknown units and
// overflow are errors naming the text.
Capacity parse_capacity(std::string_view text);

struct LevelSpec {
  std::string policy;  // policy spec, e.g. "semantic(decay=0.95)"
  Capacity capacity;
};

// "POLICY:CAPACITY" (the capacity after the last ':'); the policy name is checked against the table.
LevelSpec parse_level_spec(std::string_view text);

}  // namespace ip::cache
