#include "cache_sim/capacity.h"

#include <charconv>
#include <limits>

#include "core/error.h"
#include "cache_sim/registry.h"

namespace ip::cache {

namespace {

struct Unit {
  const char* name;
  std::uint64_t factor;
};
constexpr Unit kUnits[] = {
    {"B", 1},           {"KiB", 1ULL << 10}, {"MiB", 1ULL << 20}, {"GiB", 1ULL << 30},     {"TiB", 1ULL << 40},
    {"kB", 1000},       {"KB", 1000},        {"MB", 1000000},     {"GB", 1000000000ULL}, {"TB", 1000000000000ULL},
};
constexpr std::uint64_t kMaxEntries = std::numeric_limits<std::uint32_t>::max() - 1;

}  // namespace

std::string Capacity::text() const {
  if (!bytes) return fmt::format("{} entries", value);
  for (int i = 4; i >= 1; --i)
    if (value % kUnits[i].factor == 0) return fmt::format("{}{}", value / kUnits[i].factor, kUnits[i].name);
  return fmt::format("{} B", value);
}

Capacity parse_capacity(std::string_view text) {
  const std::string t(text);
  std::uint64_t n = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  IP_REQUIRE(!text.empty() && ec != std::errc::invalid_argument,
             "capacity '{}': expected a number of entries or bytes with a unit (e.g. 1000, 16KiB, 8MiB)", t);
  IP_REQUIRE(ec != std::errc::result_out_of_range, "capacity '{}' is too large", t);
  const std::string_view unit = text.substr(end - text.data());
  // The unit first: "0.5MiB" is a fraction this parser does not read, not a level of 0 bytes.
  const Unit* found = nullptr;
  for (const Unit& u : kUnits)
    if (unit == u.name) found = &u;
  IP_REQUIRE(unit.empty() || found || unit.front() != '.',
             "capacity '{}': a whole number of entries or bytes, with a unit (fractions are not read: write 512KiB "
             "for 0.5MiB)",
             t);
  if (!unit.empty() && !found)
    throw Error(fmt::format("capacity '{}': unknown unit '{}' (B, KiB, MiB, GiB, TiB, kB, MB, GB, TB; none: entries)",
                            t, unit));
  IP_REQUIRE(n > 0, "capacity '{}' is impossible: a level holds at least one entry or byte", t);
  if (!found) {
    IP_REQUIRE(n <= kMaxEntries, "capacity '{}' is impossible: at most {} entries", t, kMaxEntries);
    return Capacity{n, false};
  }
  IP_REQUIRE(n <= std::numeric_limits<std::uint64_t>::max() / found->factor, "capacity '{}' is too large", t);
  return Capacity{n * found->factor, true};
}

LevelSpec parse_level_spec(std::string_view text) {
  const auto colon = text.rfind(':');
  IP_REQUIRE(colon != std::string_view::npos && colon > 0,
             "level '{}': expected POLICY:CAPACITY, e.g. lru:16KiB or clock:100000", std::string(text));
  LevelSpec spec;
  spec.policy = std::string(text.substr(0, colon));
  try {
    spec.capacity = parse_capacity(text.substr(colon + 1));
    check_policy(spec.policy);  // validates the name and parameters now, before any simulation
  } catch (const Error& e) {
    throw Error(fmt::format("level '{}': {}", std::string(text), e.what()));
  }
  return spec;
}

}  // namespace ip::cache
