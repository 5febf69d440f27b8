// OPT is the bound: on random traces (one level, unit sizes, capacity in entries) no policy misses
// less; on tiny traces it matches the true optimum found by trying every eviction choice.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <set>

#include "cache_sim/registry.h"
#include "tests/cache_sim/test_util.h"

namespace ip::cache {
namespace {

TEST(Opt, NeverWorseThanAnyPolicyOnRandomTraces) {
  int compared = 0;
  for (std::uint64_t seed = 1; seed <= 12; ++seed) {
    const std::uint64_t universe = 8 + seed * 7;
    const auto trace = test::random_trace(seed, 3000, universe);
    for (const std::uint64_t cap : std::vector<std::uint64_t>{1, 2, 5, universe / 3, universe / 2}) {
      const std::uint64_t opt = test::misses(fmt::format("opt:{}", cap), trace);
      for (const auto& p : policy_table()) {
        const std::uint64_t m = test::misses(fmt::format("{}:{}", p.name, cap), trace);
        EXPECT_LE(opt, m) << p.name << " capacity " << cap << " seed " << seed;
        ++compared;
      }
    }
  }
  EXPECT_EQ(compared, 12 * 5 * 8);  // every policy of the table, semantic-cos included
}

// The fewest misses any eviction sequence achieves (fills forced), by exhaustive search.
std::uint64_t brute_force_min_misses(const std::vector<Access>& t, std::size_t cap) {
  std::function<std::uint64_t(std::size_t, std::set<std::uint64_t>)> go = [&](std::size_t i, std::set<std::uint64_t> c) {
    for (; i < t.size() && c.count(t[i].id); ++i) {
    }
    if (i == t.size()) return std::uint64_t{0};
    if (c.size() < cap) {
      c.insert(t[i].id);
      return 1 + go(i + 1, c);
    }
    std::uint64_t best = UINT64_MAX;
    for (const std::uint64_t v : std::set<std::uint64_t>(c)) {
      auto d = c;
      d.erase(v);
      d.insert(t[i].id);
      best = std::min(best, 1 + go(i + 1, d));
    }
    return best;
  };
  return go(0, {});
}

TEST(Opt, MatchesExhaustiveSearchOnTinyTraces) {
  for (std::uint64_t seed = 1; seed <= 30; ++seed) {
    const auto trace = test::random_trace(seed, 11, 6);
    for (std::size_t cap : {1, 2, 3}) {
      EXPECT_EQ(test::misses(fmt::format("opt:{}", cap), trace), brute_force_min_misses(trace, cap))
          << "seed " << seed << " capacity " << cap;
    }
  }
}

}  // namespace
}  // namespace ip::cache
