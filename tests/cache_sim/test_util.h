// Helpers shared by the cache_sim suites: replay a single level by hand, random traces.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cache_sim/capacity.h"
#include "cache_sim/level.h"
#include "cache_sim/trace.h"

namespace ip::cache::test {

// Ids from a string of letters: "a b c" -> 'a', 'b', 'c' (the letter's code is the id).
inline std::vector<Access> letters(const std::string& s, const std::vector<float>& scores = {}) {
  std::vector<Access> out;
  for (char c : s)
    if (c != ' ') out.push_back(Access{static_cast<std::uint64_t>(c), 1, 1.0f, 0, 0});
  for (std::size_t i = 0; i < scores.size() && i < out.size(); ++i) out[i].score = scores[i];
  return out;
}

// Replays accesses through one level; returns, per access, "h" (hit), "m" (miss, no eviction) or
// "m/x" (miss that evicted x; several victims: "m/xy"), separated by spaces.
inline std::string replay(const std::string& level_spec, const std::vector<Access>& accesses) {
  const auto level = make_level(parse_level_spec(level_spec));
  const auto next = next_uses(accesses);
  std::string out;
  std::vector<Victim> victims;
  for (std::size_t i = 0; i < accesses.size(); ++i) {
    const Access& a = accesses[i];
    level->arrive();
    if (!out.empty()) out += ' ';
    const Slot s = level->find(a.id);
    if (s != kNoSlot) {
      level->hit(s, next[i], a.score);
      out += 'h';
      continue;
    }
    victims.clear();
    level->insert(a.id, a.size, next[i], a.score, &victims);
    out += 'm';
    if (!victims.empty()) out += '/';
    for (const Victim& v : victims) out += static_cast<char>(v.id);
  }
  return out;
}

// Misses of one entry-capacity level over the accesses.
inline std::uint64_t misses(const std::string& level_spec, const std::vector<Access>& accesses) {
  const std::string r = replay(level_spec, accesses);
  std::uint64_t m = 0;
  for (char c : r) m += c == 'm';
  return m;
}

// `n` accesses over ids [0, universe), skewed toward small ids (a mix of a hot set and uniform),
// sizes in [1, max_size], scores in [0, 1).
inline std::vector<Access> random_trace(std::uint64_t seed, std::size_t n, std::uint64_t universe,
                                        std::uint32_t max_size = 1) {
  std::mt19937_64 rng(seed);
  std::vector<Access> out(n);
  std::uniform_real_distribution<float> score(0.0f, 1.0f);
  for (auto& a : out) {
    const std::uint64_t r = rng();
    a.id = (r & 3) ? (rng() % std::max<std::uint64_t>(1, universe / 4)) : (rng() % universe);
    a.id = a.id * 1000003ULL + 17;  // not dense, not starting at zero
    a.size = 1 + static_cast<std::uint32_t>(a.id % max_size);  // one size per id
    a.score = score(rng);
    a.request = static_cast<std::uint32_t>(rng() % 3);
    a.step = static_cast<std::uint32_t>(rng() % 5);
  }
  return out;
}

}  // namespace ip::cache::test
