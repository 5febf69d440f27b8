// Prepared traces (dense ids) give the same results as the original ids: every policy, every mode,
// entry and byte capacities, on random traces; per-level totals, per request and per step, evictions,
// and the contents of every level at the end.
#include <gtest/gtest.h>

#include <set>

#include "cache_sim/hierarchy.h"
#include "cache_sim/prepared.h"
#include "cache_sim/registry.h"
#include "tests/cache_sim/test_util.h"

namespace ip::cache {
namespace {

std::vector<LevelSpec> specs(const std::vector<std::string>& levels) {
  std::vector<LevelSpec> out;
  for (const auto& l : levels) out.push_back(parse_level_spec(l));
  return out;
}

std::set<std::uint64_t> ids(const Level& l, const std::vector<std::uint64_t>* original = nullptr) {
  std::set<std::uint64_t> s;
  l.for_each_id([&](std::uint64_t id) { s.insert(original ? (*original)[id] : id); });
  return s;
}

void check_same(Mode mode, const std::vector<std::string>& levels, std::size_t n, std::uint64_t universe,
                std::uint32_t max_size, std::uint64_t seed) {
  Trace trace;
  trace.accesses = test::random_trace(seed, n, universe, max_size);
  const HierarchyOptions options{mode, true, true};
  Hierarchy ref(specs(levels), options);
  ref.run(trace);
  const PreparedTrace p = prepare(trace);
  Hierarchy fast(specs(levels), options);
  fast.run(p);
  const std::string what = fmt::format("{} seed {} levels {}", mode_name(mode), seed, fmt::join(levels, " "));
  ASSERT_EQ(fast.accesses(), ref.accesses()) << what;
  ASSERT_EQ(fast.hits(), ref.hits()) << what;
  for (std::size_t l = 0; l < ref.levels(); ++l) {
    ASSERT_EQ(fast.stats(l), ref.stats(l)) << what << " level " << l;
    ASSERT_EQ(ids(fast.level(l), &p.original), ids(ref.level(l))) << what << " level " << l;
  }
  const auto same_groups = [&](const std::vector<GroupStats>& a, const std::vector<GroupStats>& b) {
    ASSERT_EQ(a.size(), b.size()) << what;
    for (std::size_t g = 0; g < a.size(); ++g) {
      ASSERT_EQ(a[g].key, b[g].key) << what;
      ASSERT_EQ(a[g].levels, b[g].levels) << what << " group " << a[g].key;
    }
  };
  same_groups(fast.per_request(), ref.per_request());
  same_groups(fast.per_step(), ref.per_step());
  // Totals only: a one-level hierarchy then replays in the level's own loop (replay_dense); several
  // prefetch distances (speed only) give the same counts.
  for (const std::size_t ahead : {2, 16, 64}) {
    Hierarchy totals(specs(levels), HierarchyOptions{mode, false, false, ahead});
    totals.run(p);
    ASSERT_EQ(totals.hits(), ref.hits()) << what << " ahead " << ahead;
    for (std::size_t l = 0; l < ref.levels(); ++l) {
      ASSERT_EQ(totals.stats(l), ref.stats(l)) << what << " level " << l << " ahead " << ahead;
      ASSERT_EQ(ids(totals.level(l), &p.original), ids(ref.level(l))) << what << " level " << l;
    }
  }
}

TEST(Prepared, DenseIdsInOrderOfFirstAccess) {
  Trace t;
  t.accesses = test::letters("cabcca");
  const PreparedTrace p = prepare(t);
  EXPECT_EQ(p.ids, (std::vector<std::uint32_t>{0, 1, 2, 0, 0, 1}));
  EXPECT_EQ(p.original, (std::vector<std::uint64_t>{'c', 'a', 'b'}));
  EXPECT_EQ(p.universe(), 3u);
}

TEST(Prepared, SameCountsAsTheOriginalIdsEntries) {
  std::uint64_t seed = 1;
  for (Mode mode : {Mode::nine, Mode::inclusive, Mode::exclusive})
    for (const auto& pol : policy_table()) {
      const std::string n = pol.name;
      check_same(mode, {n + ":50"}, 4000, 400, 1, seed++);
      check_same(mode, {n + ":4", "lru:9", n + ":20"}, 3000, 120, 1, seed++);
      check_same(mode, {"clock:12", n + ":6"}, 3000, 120, 1, seed++);
    }
}

TEST(Prepared, SameCountsAsTheOriginalIdsBytes) {
  std::uint64_t seed = 100;
  for (Mode mode : {Mode::nine, Mode::inclusive, Mode::exclusive})
    for (const auto& pol : policy_table()) {
      const std::string n = pol.name;
      check_same(mode, {n + ":30B", "sieve:200B", n + ":600B"}, 3000, 120, 40, seed++);
      check_same(mode, {"fifo:300B", n + ":35B"}, 3000, 120, 40, seed++);
      check_same(mode, {n + ":30B"}, 3000, 120, 40, seed++);  // one level, some objects bypass it
      check_same(mode, {n + ":900B"}, 3000, 120, 40, seed++);
    }
}

// Long enough for single levels of 1000 to 5000 entries to fill, grow and churn.
TEST(Prepared, SameCountsOnLongerTraces) {
  std::uint64_t seed = 500;
  for (const auto& pol : policy_table()) {
    const std::string n = pol.name;
    check_same(Mode::nine, {n + ":1000"}, 60000, 20000, 1, seed++);
    check_same(Mode::nine, {n + ":5000"}, 60000, 20000, 1, seed++);
    check_same(Mode::nine, {"lru:64", "clock:700", n + ":3000"}, 60000, 20000, 1, seed++);
  }
}

TEST(Prepared, OnlyOnAFreshHierarchyAndNothingAfter) {
  Trace t;
  t.accesses = test::letters("abcab");
  const PreparedTrace p = prepare(t);
  Hierarchy used(specs({"lru:2"}));
  used.access(t.accesses[0]);
  EXPECT_THROW(used.run(p), std::exception);
  Hierarchy h(specs({"lru:2"}));
  h.run(p);
  EXPECT_THROW(h.access(t.accesses[0]), std::exception);
  EXPECT_THROW(h.run(t), std::exception);
}

}  // namespace
}  // namespace ip::cache
