// Prepared traces (dense ids, in an array or a hash map per level) and the one-level replay loops give
// the same results as the per-access path on the original ids: every policy, every mode, entry and
// byte capacities, on random traces; per-level totals, per request and per step, evictions, and the
// contents of every level at the end.
#include <gtest/gtest.h>

#include <functional>
#include <memory>
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

// uniform > 0: the first uniform_until accesses (all by default) get that size (the levels then keep no
// per-entry size while it lasts). wide_from < n: the accesses before it use the lower half of the
// universe only, and the ids of the upper half become ids of 2^32 and more whose low 32 bits are
// those of lower-half ids, so the levels on the trace's own ids keep 32-bit ids until then.
void check_same(Mode mode, const std::vector<std::string>& levels, std::size_t n, std::uint64_t universe,
                std::uint32_t max_size, std::uint64_t seed, std::uint32_t uniform = 0,
                std::size_t uniform_until = SIZE_MAX, std::size_t wide_from = SIZE_MAX) {
  Trace trace;
  trace.accesses = test::random_trace(seed, n, universe, max_size);
  if (uniform)
    for (std::size_t i = 0; i < std::min(n, uniform_until); ++i) trace.accesses[i].size = uniform;
  if (wide_from < n) {
    const std::uint64_t half = universe / 2;
    for (std::size_t i = 0; i < n; ++i) {
      std::uint64_t& id = trace.accesses[i].id;
      if (i < wide_from) id %= half;
      if (id >= half) id = (id - half) + ((1 + id % 3) << 32);
    }
  }
  const HierarchyOptions options{mode, true, true};
  Hierarchy ref(specs(levels), options);
  ref.run(trace);
  const PreparedTrace p = prepare(trace);
  const std::string what = fmt::format("{} seed {} levels {}", mode_name(mode), seed, fmt::join(levels, " "));
  const auto same_groups = [&](const std::vector<GroupStats>& a, const std::vector<GroupStats>& b, const std::string& how) {
    ASSERT_EQ(a.size(), b.size()) << what << how;
    for (std::size_t g = 0; g < a.size(); ++g) {
      ASSERT_EQ(a[g].key, b[g].key) << what << how;
      ASSERT_EQ(a[g].levels, b[g].levels) << what << how << " group " << a[g].key;
    }
  };
  // Each way of mapping the dense ids to slots (array, hash map, the automatic choice per level).
  for (const IdMap map : {IdMap::automatic, IdMap::array, IdMap::hash}) {
    const std::string how = fmt::format(" id map {}", static_cast<int>(map));
    HierarchyOptions o = options;
    o.id_map = map;
    Hierarchy fast(specs(levels), o);
    fast.run(p);
    ASSERT_EQ(fast.accesses(), ref.accesses()) << what << how;
    ASSERT_EQ(fast.hits(), ref.hits()) << what << how;
    for (std::size_t l = 0; l < ref.levels(); ++l) {
      ASSERT_EQ(fast.stats(l), ref.stats(l)) << what << how << " level " << l;
      ASSERT_EQ(ids(fast.level(l), &p.original), ids(ref.level(l))) << what << how << " level " << l;
    }
    same_groups(fast.per_request(), ref.per_request(), how);
    same_groups(fast.per_step(), ref.per_step(), how);
    // Totals only: a one-level hierarchy then replays in the level's own loop (replay_dense); several
    // prefetch distances (speed only) give the same counts.
    for (const std::size_t ahead : {2, 16, 64}) {
      Hierarchy totals(specs(levels), HierarchyOptions{mode, false, false, ahead, map});
      totals.run(p);
      ASSERT_EQ(totals.hits(), ref.hits()) << what << how << " ahead " << ahead;
      for (std::size_t l = 0; l < ref.levels(); ++l) {
        ASSERT_EQ(totals.stats(l), ref.stats(l)) << what << how << " level " << l << " ahead " << ahead;
        ASSERT_EQ(ids(totals.level(l), &p.original), ids(ref.level(l))) << what << how << " level " << l;
      }
    }
  }
  // The trace's own ids, totals only: one level replays in Level::replay (hash map, the same loop).
  for (const std::size_t ahead : {2, 16, 64}) {
    Hierarchy totals(specs(levels), HierarchyOptions{mode, false, false, ahead});
    totals.run(trace);
    ASSERT_EQ(totals.hits(), ref.hits()) << what << " original ids, ahead " << ahead;
    for (std::size_t l = 0; l < ref.levels(); ++l) {
      ASSERT_EQ(totals.stats(l), ref.stats(l)) << what << " original ids, level " << l << " ahead " << ahead;
      ASSERT_EQ(ids(totals.level(l)), ids(ref.level(l))) << what << " original ids, level " << l;
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
      // The automatic choice mixes the maps: 4 B x 120 ids is more than 12 B x 4 entries (hash map)
      // and less than 12 B x 60 (array).
      check_same(mode, {"lru:4", n + ":60"}, 3000, 120, 1, seed++);
    }
}

TEST(Prepared, AutomaticChoiceMixesArrayAndHashMapLevels) {
  Trace t;
  t.accesses = test::random_trace(7, 3000, 120, 1);
  const PreparedTrace p = prepare(t);
  ASSERT_EQ(p.universe(), 120u);
  Hierarchy h(specs({"lru:4", "lru:60"}));
  h.run(p);
  EXPECT_FALSE(h.level(0).dense());
  EXPECT_TRUE(h.level(1).dense());
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

// Byte capacities on a trace of one object size: no per-entry sizes, slots capped at what fits.
TEST(Prepared, SameCountsAsTheOriginalIdsUniformBytes) {
  std::uint64_t seed = 300;
  for (Mode mode : {Mode::nine, Mode::inclusive, Mode::exclusive})
    for (const auto& pol : policy_table()) {
      const std::string n = pol.name;
      check_same(mode, {n + ":56B", "sieve:400B", n + ":1000B"}, 3000, 120, 1, seed++, 8);
      check_same(mode, {"fifo:300B", n + ":36B"}, 3000, 120, 1, seed++, 8);  // 4 entries (36 / 8)
      check_same(mode, {n + ":4B", n + ":800B"}, 3000, 120, 1, seed++, 8);   // every object bypasses L1
    }
}

// Levels on the trace's own ids keep no sizes while every object has the first one's size; the first
// object of another size gives every slot its size (free slots keep their place in the free list).
// The prepared trace, whose sizes differ, keeps sizes from the start: the same counts and contents.
TEST(Prepared, LevelsWidenWhenASecondSizeComes) {
  std::uint64_t seed = 700;
  for (Mode mode : {Mode::nine, Mode::inclusive, Mode::exclusive})
    for (const auto& pol : policy_table()) {
      const std::string n = pol.name;
      check_same(mode, {n + ":4", "lru:9", n + ":20"}, 3000, 120, 40, seed++, 8, 1500);
      check_same(mode, {n + ":56B", "sieve:400B", n + ":1000B"}, 3000, 120, 40, seed++, 8, 1500);
      check_same(mode, {n + ":20"}, 3000, 120, 40, seed++, 8, 1500);
      check_same(mode, {n + ":400B"}, 3000, 120, 40, seed++, 8, 1500);
    }
}

// Levels on the trace's own ids keep 32-bit ids until an id of 2^32 or more comes, then give every
// slot a 64-bit id; the same counts and contents as the prepared trace (32-bit dense ids throughout),
// with ids that share their low 32 bits present together.
TEST(Prepared, LevelsWidenTheirIdsWhenAnIdNeeds64Bits) {
  std::uint64_t seed = 900;
  for (Mode mode : {Mode::nine, Mode::inclusive, Mode::exclusive})
    for (const auto& pol : policy_table()) {
      const std::string n = pol.name;
      check_same(mode, {n + ":4", "lru:9", n + ":20"}, 3000, 120, 1, seed++, 0, SIZE_MAX, 1000);
      check_same(mode, {n + ":56B", "sieve:400B", n + ":1000B"}, 3000, 120, 40, seed++, 0, SIZE_MAX, 1000);
      check_same(mode, {n + ":20"}, 3000, 120, 40, seed++, 8, 1500, 1000);  // ids widen, then sizes
      check_same(mode, {n + ":400B"}, 3000, 120, 40, seed++, 8, 1000, 1500);  // sizes widen, then ids
      check_same(mode, {n + ":50"}, 3000, 120, 1, seed++, 8, SIZE_MAX, 0);   // wide ids among the first
    }
}

// lru:1000 over 5000 accesses to 3001 objects of 8 bytes, and over the same trace with access 4000
// changed by `change` (`changed` gets that trace); both levels end full.
struct TwoRuns {
  Trace base, changed;
  std::unique_ptr<Hierarchy> a, b;
};
TwoRuns run_with_one_access_changed(const std::function<void(Access&)>& change) {
  TwoRuns r;
  for (std::uint64_t i = 0; i < 5000; ++i) r.base.accesses.push_back(Access{(i * 7919) % 3001, 8u});
  r.changed = r.base;
  change(r.changed.accesses[4000]);
  r.a = std::make_unique<Hierarchy>(specs({"lru:1000"}));
  r.b = std::make_unique<Hierarchy>(specs({"lru:1000"}));
  r.a->run(r.base);
  r.b->run(r.changed);
  EXPECT_EQ(r.a->level(0).entries(), 1000u);
  EXPECT_EQ(r.b->level(0).entries(), 1000u);
  return r;
}

TEST(Prepared, PlainLevelsKeepNarrowIdsUntilAWideOne) {
  const TwoRuns r = run_with_one_access_changed([](Access& a) { a.id += std::uint64_t{1} << 32; });
  EXPECT_EQ(r.b->level(0).resident_bytes() - r.a->level(0).resident_bytes(), 1000u * 4);  // 4 B a slot, then 8
  EXPECT_TRUE(r.b->level(0).contains(r.changed.accesses[4000].id));
  EXPECT_FALSE(r.b->level(0).contains(r.base.accesses[4000].id));  // same low 32 bits, not stored
}

TEST(Prepared, PlainLevelsKeepNoSizeUntilASecondSize) {
  const TwoRuns r = run_with_one_access_changed([](Access& a) { a.size = 9; });
  EXPECT_EQ(r.b->level(0).resident_bytes() - r.a->level(0).resident_bytes(), 1000u * 4);  // 8 B a slot, then 12
  EXPECT_EQ(r.b->level(0).used_bytes(), r.a->level(0).used_bytes() + 1);
}

// A trace of one object size: entries keep their 32-bit id only (4 bytes instead of 8), and a byte
// capacity gets exactly the slots its objects can fill.
TEST(Prepared, UniformSizesKeepNoSizePerEntry) {
  Trace uniform, mixed;
  for (std::uint64_t i = 0; i < 5000; ++i) uniform.accesses.push_back(Access{(i * 7919) % 3001, 8u});
  mixed = uniform;
  mixed.accesses[17].size = 9;
  const PreparedTrace pu = prepare(uniform), pm = prepare(mixed);
  EXPECT_EQ(pu.uniform_size(), 8u);
  EXPECT_EQ(pm.uniform_size(), 0u);
  HierarchyOptions o;
  o.id_map = IdMap::hash;
  Hierarchy hu(specs({"lru:1000"}), o), hm(specs({"lru:1000"}), o), hb(specs({"lru:8000B"}), o);
  hu.run(pu);
  hm.run(pm);
  hb.run(pu);
  ASSERT_EQ(hu.level(0).entries(), 1000u);
  ASSERT_EQ(hm.level(0).entries(), 1000u);
  EXPECT_EQ(hm.level(0).resident_bytes() - hu.level(0).resident_bytes(), 1000u * 4);
  EXPECT_EQ(hb.level(0).resident_bytes(), hu.level(0).resident_bytes());  // 8000 B / 8 B: 1000 slots
  EXPECT_EQ(hb.stats(0), hu.stats(0));
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

// The automatic choice: the id -> slot array when 4 bytes per distinct id cost at most 12 bytes per
// entry the level can hold (byte capacities: counted with the smallest object), else the hash map.
TEST(Prepared, ArrayOnlyWhereItCostsAtMostTheHashMap) {
  Trace t;
  for (std::uint64_t i = 0; i < 1000; ++i) t.accesses.push_back(Access{i * 7919, i == 500 ? 10u : 40u});
  const PreparedTrace p = prepare(t);
  EXPECT_EQ(p.universe(), 1000u);
  EXPECT_EQ(p.min_size, 10u);
  // 4 B x 1000 ids = 4000 B: an array for 334 entries or more (12 B x 334 = 4008 B), not for 333.
  Hierarchy h(specs({"lru:333", "lru:334", "lru:3330B", "lru:3340B"}));
  h.run(p);
  EXPECT_FALSE(h.level(0).dense());
  EXPECT_TRUE(h.level(1).dense());
  EXPECT_FALSE(h.level(2).dense());  // 3330 B / 10 B = 333 entries at most
  EXPECT_TRUE(h.level(3).dense());
  EXPECT_EQ(h.level(0).universe_bytes(), 0u);
  EXPECT_EQ(h.level(1).universe_bytes(), 4000u);
  for (const IdMap forced : {IdMap::array, IdMap::hash}) {
    HierarchyOptions o;
    o.id_map = forced;
    Hierarchy f(specs({"lru:333", "lru:334"}), o);
    f.run(p);
    EXPECT_EQ(f.level(0).dense(), forced == IdMap::array);
    EXPECT_EQ(f.level(1).dense(), forced == IdMap::array);
  }
}

// Progress reports (every 7 accesses here): in order, every 7th access and the last, with the same
// results as a run without them (one-level replays then run in chunks of 7).
TEST(Prepared, ProgressEveryNAccessesChangesNothing) {
  Trace t;
  t.accesses = test::random_trace(11, 3000, 400, 1);
  const PreparedTrace p = prepare(t);
  for (const std::vector<std::string>& levels : {std::vector<std::string>{"lru:50"}, {"lru:8", "clock:50", "semantic:90"}})
    for (const bool prepared : {false, true}) {
      const std::string what = fmt::format("{} {}", fmt::join(levels, " "), prepared ? "prepared" : "plain");
      Hierarchy ref(specs(levels));
      if (prepared) ref.run(p);
      else ref.run(t);
      std::vector<std::uint64_t> done;
      HierarchyOptions o;
      o.progress_every = 7;
      o.progress = [&](std::uint64_t d, std::uint64_t all) {
        EXPECT_EQ(all, 3000u) << what;
        done.push_back(d);
      };
      Hierarchy h(specs(levels), o);
      if (prepared) h.run(p);
      else h.run(t);
      std::vector<std::uint64_t> expected;
      for (std::uint64_t d = 7; d < 3000; d += 7) expected.push_back(d);
      expected.push_back(3000);
      EXPECT_EQ(done, expected) << what;
      for (std::size_t l = 0; l < ref.levels(); ++l) EXPECT_EQ(h.stats(l), ref.stats(l)) << what << " level " << l;
    }
  HierarchyOptions zero;
  zero.progress_every = 0;
  EXPECT_THROW(Hierarchy(specs({"lru:2"}), zero), std::exception);
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
