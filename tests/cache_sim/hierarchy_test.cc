// Hierarchy modes: hand-worked sequences, and the invariants of each mode checked after every access
// of random traces (entries and bytes, every policy).
#include <gtest/gtest.h>

#include <set>

#include "cache_sim/hierarchy.h"
#include "cache_sim/registry.h"
#include "tests/cache_sim/test_util.h"

namespace ip::cache {
namespace {

using test::letters;

Hierarchy make(const std::vector<std::string>& levels, Mode mode, bool groups = false) {
  std::vector<LevelSpec> specs;
  for (const auto& l : levels) specs.push_back(parse_level_spec(l));
  return Hierarchy(specs, HierarchyOptions{mode, groups, groups});
}

void run(Hierarchy& h, const std::vector<Access>& t) {
  const auto next = next_uses(t);
  for (std::size_t i = 0; i < t.size(); ++i) h.access(t[i], next[i]);
}

std::set<std::uint64_t> ids(const Level& l) {
  std::set<std::uint64_t> s;
  l.for_each_id([&](std::uint64_t id) { s.insert(id); });
  return s;
}

// L1 lru:2, L2 lru:2, a b a a c a.
//   nine:      a, b fill both: L1 [b a], L2 [b a]. a, a hit L1 (L2 never sees them: a stays its LRU).
//              c misses both: L2 evicts a -> [c b]; L1 evicts b -> [c a]. a hits L1.
//              L1: 6 accesses, 3 hits, 3 misses, 1 eviction; L2: 3 accesses, 0 hits, 3 misses, 1 eviction.
//   inclusive: as nine until c: L2 evicts a and invalidates L1's copy -> L1 [b]; L1 takes c without
//              evicting -> [c b]. a misses both: L2 [c b] evicts b, invalidating L1's b -> L1 [c];
//              L2 [a c], L1 [a c].
//              L1: 6 accesses, 2 hits, 4 misses, 0 evictions, 2 invalidations; L2: 4, 0, 4, 2 evictions.
TEST(Hierarchy, NineAndInclusiveWorkedExample) {
  Hierarchy nine = make({"lru:2", "lru:2"}, Mode::nine);
  run(nine, letters("abaaca"));
  EXPECT_EQ(nine.stats(0), (LevelStats{6, 3, 3, 1, 0, 0, 3}));
  EXPECT_EQ(nine.stats(1), (LevelStats{3, 0, 3, 1, 0, 0, 3}));
  EXPECT_EQ(ids(nine.level(0)), (std::set<std::uint64_t>{'c', 'a'}));
  EXPECT_EQ(ids(nine.level(1)), (std::set<std::uint64_t>{'c', 'b'}));

  Hierarchy inc = make({"lru:2", "lru:2"}, Mode::inclusive);
  run(inc, letters("abaaca"));
  EXPECT_EQ(inc.stats(0), (LevelStats{6, 2, 4, 0, 2, 0, 4}));
  EXPECT_EQ(inc.stats(1), (LevelStats{4, 0, 4, 2, 0, 0, 4}));
  EXPECT_EQ(ids(inc.level(0)), (std::set<std::uint64_t>{'a', 'c'}));
  EXPECT_EQ(ids(inc.level(1)), (std::set<std::uint64_t>{'a', 'c'}));
}

// L1 lru:1, L2 lru:2, a b a c b a.
//   exclusive: a -> L1 [a]. b -> L1 [b], a demoted: L2 [a]. a hits L2: leaves L2, L1 evicts b to L2:
//              L1 [a], L2 [b]. c -> L1 [c], a demoted: L2 [a b]. b hits L2: L1 [b], c demoted: L2 [c a].
//              a hits L2: L1 [a], b demoted: L2 [b c].
//              L1: 6 accesses, 0 hits, 6 misses, 5 evictions; L2: 6, 3 hits, 3 misses, 0 evictions.
//   nine:      only the third access (a, in L2) hits: L2 holds a copy of L1's entry, so 2 distinct
//              entries fit in total where exclusive keeps 3.
TEST(Hierarchy, ExclusiveWorkedExample) {
  Hierarchy ex = make({"lru:1", "lru:2"}, Mode::exclusive);
  run(ex, letters("abacba"));
  EXPECT_EQ(ex.stats(0), (LevelStats{6, 0, 6, 5, 0, 0, 6}));
  EXPECT_EQ(ex.stats(1), (LevelStats{6, 3, 3, 0, 0, 0, 3}));
  EXPECT_EQ(ex.hits(), 3u);
  EXPECT_EQ(ids(ex.level(0)), (std::set<std::uint64_t>{'a'}));
  EXPECT_EQ(ids(ex.level(1)), (std::set<std::uint64_t>{'b', 'c'}));

  Hierarchy nine = make({"lru:1", "lru:2"}, Mode::nine);
  run(nine, letters("abacba"));
  EXPECT_EQ(nine.hits(), 1u);
}

TEST(Hierarchy, LargeObjectsBypassByteLevels) {
  // L1 1 KiB, L2 4 KiB; a 2048-byte object misses L1 without entering it, and fills L2.
  Hierarchy h = make({"lru:1KiB", "lru:4KiB"}, Mode::nine);
  h.access(Access{7, 2048, 1, 0, 0});
  h.access(Access{7, 2048, 1, 0, 0});
  EXPECT_EQ(h.stats(0), (LevelStats{2, 0, 2, 0, 0, 2, 4096}));
  EXPECT_EQ(h.stats(1), (LevelStats{2, 1, 1, 0, 0, 0, 2048}));
  EXPECT_FALSE(h.level(0).contains(7));

  // Inclusive: an object too large for L2 may not stay in L1 either (L1 would not be a subset).
  Hierarchy inc = make({"lru:4KiB", "lru:1KiB"}, Mode::inclusive);
  inc.access(Access{7, 2048, 1, 0, 0});
  EXPECT_FALSE(inc.level(0).contains(7));
  EXPECT_FALSE(inc.level(1).contains(7));
  EXPECT_EQ(inc.stats(0).bypasses, 1u);
  EXPECT_EQ(inc.stats(1).bypasses, 1u);

  // Exclusive: it skips L1 and lives in L2.
  Hierarchy ex = make({"lru:1KiB", "lru:4KiB"}, Mode::exclusive);
  ex.access(Access{7, 2048, 1, 0, 0});
  ex.access(Access{7, 2048, 1, 0, 0});
  EXPECT_FALSE(ex.level(0).contains(7));
  EXPECT_TRUE(ex.level(1).contains(7));
  EXPECT_EQ(ex.stats(1).hits, 1u);
}

TEST(Hierarchy, ByteCapacityEvictsUntilTheObjectFits) {
  // lru:1000B holding 400 + 400; a 500-byte object evicts both (400 + 500 > 1000, then 500 fits).
  Hierarchy h = make({"lru:1000B"}, Mode::nine);
  h.access(Access{1, 400, 1, 0, 0});
  h.access(Access{2, 400, 1, 0, 0});
  h.access(Access{3, 500, 1, 0, 0});
  EXPECT_EQ(h.stats(0).evictions, 1u);  // 400 + 500 = 900 fits after evicting id 1 only
  EXPECT_EQ(h.level(0).used_bytes(), 900u);
  h.access(Access{4, 1000, 1, 0, 0});
  EXPECT_EQ(h.stats(0).evictions, 3u);
  EXPECT_EQ(h.level(0).used_bytes(), 1000u);
}

TEST(Hierarchy, PerRequestAndPerStepStatisticsAddUpToTotals) {
  // Hand example: L1 lru:1; request 0 accesses a, a; request 1 accesses b, then a (evicted by b).
  Hierarchy h = make({"lru:1"}, Mode::nine, true);
  h.access(Access{'a', 1, 1, 0, 0});
  h.access(Access{'a', 1, 1, 0, 1});
  h.access(Access{'b', 1, 1, 1, 1});
  h.access(Access{'a', 1, 1, 1, 2});
  const auto req = h.per_request();
  ASSERT_EQ(req.size(), 2u);
  EXPECT_EQ(req[0].key, 0u);
  EXPECT_EQ(req[0].levels[0], (LevelStats{2, 1, 1, 0, 0, 0, 1}));
  EXPECT_EQ(req[1].levels[0], (LevelStats{2, 0, 2, 2, 0, 0, 2}));
  const auto steps = h.per_step();
  ASSERT_EQ(steps.size(), 3u);
  EXPECT_EQ(steps[1].levels[0], (LevelStats{2, 1, 1, 1, 0, 0, 1}));  // a hit, b missed and evicted a

  // Random traces, three levels, every mode: the groups sum to the totals.
  for (Mode mode : {Mode::nine, Mode::inclusive, Mode::exclusive}) {
    Hierarchy r = make({"lru:5", "clock:11", "semantic:23"}, mode, true);
    run(r, test::random_trace(3, 4000, 80));
    for (const auto& groups : {r.per_request(), r.per_step()}) {
      for (std::size_t l = 0; l < r.levels(); ++l) {
        LevelStats sum;
        for (const auto& g : groups) {
          sum.accesses += g.levels[l].accesses, sum.hits += g.levels[l].hits, sum.misses += g.levels[l].misses;
          sum.evictions += g.levels[l].evictions, sum.invalidations += g.levels[l].invalidations;
          sum.bypasses += g.levels[l].bypasses, sum.bytes_from_below += g.levels[l].bytes_from_below;
        }
        EXPECT_EQ(sum, r.stats(l)) << mode_name(mode) << " level " << l;
      }
    }
  }
}

// Invariants after every access of random traces, for every mode, policy and capacity kind.
void check_invariants(Mode mode, const std::vector<std::string>& levels, std::uint32_t max_size, std::uint64_t seed) {
  Hierarchy h = make(levels, mode);
  const auto trace = test::random_trace(seed, 2500, 120, max_size);
  const auto next = next_uses(trace);
  const std::string what = fmt::format("{} seed {} levels {}", mode_name(mode), seed, fmt::join(levels, " "));
  for (std::size_t i = 0; i < trace.size(); ++i) {
    const Access& a = trace[i];
    const std::size_t k = h.access(a, next[i]);
    std::vector<std::set<std::uint64_t>> content;
    for (std::size_t l = 0; l < h.levels(); ++l) {
      const Level& lv = h.level(l);
      content.push_back(ids(lv));
      ASSERT_EQ(content.back().size(), lv.entries()) << what;
      if (lv.capacity().bytes) { ASSERT_LE(lv.used_bytes(), lv.capacity().value) << what; }
      else { ASSERT_LE(lv.entries(), lv.capacity().value) << what; }
      const LevelStats& s = h.stats(l);
      ASSERT_EQ(s.accesses, s.hits + s.misses) << what;
      if (l > 0) { ASSERT_EQ(s.accesses, h.stats(l - 1).misses) << what; }
    }
    if (mode == Mode::inclusive) {
      for (std::size_t l = 0; l + 1 < h.levels(); ++l)
        for (const auto id : content[l]) { ASSERT_TRUE(content[l + 1].count(id)) << what << " access " << i << " id " << id; }
      // The object is everywhere it can be: in levels 0..k unless some level at or below bypassed it.
      bool fits_below = true;
      for (std::size_t l = h.levels(); l-- > 0;) {
        fits_below = fits_below && h.level(l).fits(a.size);
        if (l <= k && fits_below) { ASSERT_TRUE(content[l].count(a.id)) << what << " access " << i; }
      }
    } else if (mode == Mode::exclusive) {
      std::set<std::uint64_t> seen;
      for (const auto& c : content)
        for (const auto id : c) { ASSERT_TRUE(seen.insert(id).second) << what << " access " << i << ": id " << id << " twice"; }
      std::size_t first_fit = 0;
      while (first_fit < h.levels() && !h.level(first_fit).fits(a.size)) ++first_fit;
      if (first_fit < h.levels()) { ASSERT_TRUE(content[first_fit].count(a.id)) << what << " access " << i; }
    } else {
      for (std::size_t l = 0; l <= std::min(k, h.levels() - 1); ++l)
        if (h.level(l).fits(a.size)) { ASSERT_TRUE(content[l].count(a.id)) << what << " access " << i; }
    }
  }
}

TEST(Hierarchy, InvariantsAfterEveryAccessEntries) {
  std::uint64_t seed = 1;
  for (Mode mode : {Mode::nine, Mode::inclusive, Mode::exclusive})
    for (const auto& p : policy_table()) {
      const std::string n = p.name;
      check_invariants(mode, {n + ":4", "lru:9", n + ":20"}, 1, seed++);
      check_invariants(mode, {"clock:12", n + ":6"}, 1, seed++);  // a lower level smaller than the upper
    }
}

TEST(Hierarchy, InvariantsAfterEveryAccessBytes) {
  std::uint64_t seed = 100;
  for (Mode mode : {Mode::nine, Mode::inclusive, Mode::exclusive})
    for (const auto& p : policy_table()) {
      const std::string n = p.name;
      // Sizes 1..40 bytes; 30 B levels make some objects bypass.
      check_invariants(mode, {n + ":30B", "sieve:200B", n + ":600B"}, 40, seed++);
      check_invariants(mode, {"fifo:300B", n + ":35B"}, 40, seed++);
    }
}

TEST(Hierarchy, ModeNamesAndErrors) {
  EXPECT_EQ(parse_mode("nine"), Mode::nine);
  EXPECT_EQ(parse_mode("inclusive"), Mode::inclusive);
  EXPECT_EQ(parse_mode("exclusive"), Mode::exclusive);
  EXPECT_THROW(parse_mode("NINE"), std::exception);
  EXPECT_THROW(Hierarchy(std::vector<LevelSpec>{}), std::exception);
}

}  // namespace
}  // namespace ip::cache
