// The data structures under the levels, against plain references: the id -> slot map under heavy
// churn in small, nearly full tables (every group overflowing), the winner tree against a linear
// scan, the order-preserving double encoding, the intrusive list, lru's list and log.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <stdexcept>
#include <random>
#include <unordered_map>

#include "cache_sim/detail/flat_map.h"
#include "cache_sim/detail/hash.h"
#include "cache_sim/detail/slot_list.h"
#include "cache_sim/detail/slot_map.h"
#include "cache_sim/detail/slot_tournament.h"
#include "cache_sim/policies/lru.h"

namespace ip::cache::detail {
namespace {

TEST(SlotMap, MatchesAReferenceUnderChurnAtEveryLoad) {
  for (const std::size_t capacity : {1, 5, 12, 40, 84, 300, 2000}) {
    std::mt19937_64 rng(capacity);
    std::vector<std::uint64_t> ids(capacity);  // slot -> id
    SlotMap map;
    const auto id_of = [&](std::uint32_t s) { return ids[s]; };
    map.reserve(capacity, id_of);
    std::unordered_map<std::uint64_t, std::uint32_t> ref;
    std::vector<std::uint32_t> free_slots;
    for (std::uint32_t s = 0; s < capacity; ++s) free_slots.push_back(s);
    // Ids from a small universe so that lookups hit, miss, and collide; the table stays as full as
    // the capacity allows (7/8 of the buckets at most), so groups overflow.
    for (int step = 0; step < 20000; ++step) {
      const std::uint64_t id = rng() % (3 * capacity + 7) * 0x100000001ULL;  // ids differing in high bits too
      const std::uint64_t h = table_hash(id);
      const std::uint32_t got = map.find(id, h, id_of);
      const auto it = ref.find(id);
      ASSERT_EQ(got, it == ref.end() ? SlotMap::kNone : it->second) << "capacity " << capacity << " step " << step;
      if (it != ref.end()) {
        if (rng() % 2) {  // erase
          map.erase(h, it->second);
          free_slots.push_back(it->second);
          ref.erase(it);
        }
        continue;
      }
      if (free_slots.empty()) {  // evict a random entry first
        auto victim = ref.begin();
        std::advance(victim, static_cast<long>(rng() % ref.size()));
        map.erase(table_hash(victim->first), victim->second);
        free_slots.push_back(victim->second);
        ref.erase(victim);
      }
      const std::uint32_t s = free_slots.back();
      free_slots.pop_back();
      ids[s] = id;
      map.insert(h, s, id_of);
      ref[id] = s;
    }
    std::size_t listed = 0;
    map.for_each_slot([&](std::uint32_t s) {
      ++listed;
      ASSERT_EQ(ref.at(ids[s]), s);
    });
    EXPECT_EQ(listed, ref.size());
  }
}

// Erasing a slot the map does not hold is a caller's bug; it throws instead of probing forever.
TEST(SlotMap, ErasingAnAbsentSlotThrows) {
  std::vector<std::uint64_t> ids = {11, 22, 33};
  SlotMap map;
  const auto id_of = [&](std::uint32_t s) { return ids[s]; };
  map.reserve(100, id_of);
  for (std::uint32_t s = 0; s < 3; ++s) map.insert(table_hash(ids[s]), s, id_of);
  EXPECT_THROW(map.erase(table_hash(44), 7), std::logic_error);
  EXPECT_THROW(map.erase(table_hash(11), 1), std::logic_error);  // present id, wrong slot
  map.erase(table_hash(22), 1);
  EXPECT_EQ(map.find(22, table_hash(22), id_of), SlotMap::kNone);
  EXPECT_EQ(map.find(33, table_hash(33), id_of), 2u);
}

TEST(SlotMap, MemoryStaysWithinTheStatedBound) {
  for (const std::size_t n : {1000, 100000, 1000000}) {
    SlotMap map;
    map.reserve(n, [](std::uint32_t) { return std::uint64_t{0}; });
    const double per_entry = static_cast<double>(map.bytes()) / static_cast<double>(n);
    EXPECT_LE(per_entry, 12.2) << n;
    EXPECT_GE(per_entry, 6.0) << n;
  }
}

TEST(SlotTournament, TopIsTheSmallestPresentKey) {
  std::mt19937_64 rng(3);
  SlotTournament t;
  std::map<std::uint32_t, RankKey> ref;
  std::uint32_t slots = 5;
  t.resize(slots);
  for (int step = 0; step < 20000; ++step) {
    if (step % 3000 == 2999) t.resize(slots += 7);  // growing keeps every key
    const auto s = static_cast<std::uint32_t>(rng() % slots);
    const RankKey k{rng() % 4, static_cast<std::uint32_t>(rng() % 1000)};  // many ties in major
    if (!ref.count(s)) {
      t.push(s, k);
      ref[s] = k;
    } else if (rng() % 3 == 0) {
      t.erase(s);
      ref.erase(s);
    } else {
      t.update(s, k);
      ref[s] = k;
    }
    ASSERT_EQ(t.empty(), ref.empty());
    if (ref.empty()) continue;
    const auto best = std::min_element(ref.begin(), ref.end(), [](const auto& a, const auto& b) {
      return a.second < b.second || (!(b.second < a.second) && a.first < b.first);
    });
    ASSERT_FALSE(best->second < t.key(t.top()) || t.key(t.top()) < best->second) << "step " << step;
    ASSERT_TRUE(ref.count(t.top())) << "step " << step;
  }
}

TEST(SlotTournament, KeysCompareAsPairs) {
  EXPECT_TRUE((RankKey{1, 9} < RankKey{2, 0}));
  EXPECT_TRUE((RankKey{2, 0} < RankKey{2, 1}));
  EXPECT_FALSE((RankKey{2, 1} < RankKey{2, 1}));
  EXPECT_TRUE((RankKey{0, UINT32_MAX} < RankKey{1, 0}));
  EXPECT_EQ(sizeof(RankKey), 12u);
}

// Minors from next_minor() renumbered every few operations (limits 12 and 40, up to 11 slots) rank the slots exactly as
// unbounded sequence numbers do: the same top after every operation, on keys with many equal majors.
TEST(SlotTournament, RenumberedMinorsKeepEveryComparison) {
  for (const std::uint32_t limit : {12u, 40u}) {
    std::mt19937_64 rng(limit);
    SlotTournament small, big;
    small.set_minor_limit(limit);
    std::uint32_t slots = 5;
    small.resize(slots), big.resize(slots);
    std::set<std::uint32_t> present;
    for (int step = 0; step < 20000; ++step) {
      if (step % 3000 == 2999) small.resize(++slots), big.resize(slots);
      const auto s = static_cast<std::uint32_t>(rng() % slots);
      const std::uint64_t major = rng() % 3;
      if (!present.count(s)) {
        small.push(s, RankKey{major, small.next_minor()});
        big.push(s, RankKey{major, big.next_minor()});
        present.insert(s);
      } else if (rng() % 3 == 0) {
        small.erase(s), big.erase(s);
        present.erase(s);
      } else {
        small.update(s, RankKey{major, small.next_minor()});
        big.update(s, RankKey{major, big.next_minor()});
      }
      ASSERT_EQ(small.empty(), big.empty());
      if (present.empty()) continue;
      ASSERT_EQ(small.top(), big.top()) << "limit " << limit << " step " << step;
      ASSERT_LE(small.key(small.top()).minor, limit) << "step " << step;
    }
  }
}

// Keys for whole buckets of 4 slots (12 B each), one tree node (4 B) and the winner's index (1 B) per
// bucket: 13.25 B a slot.
TEST(SlotTournament, AnyNumberOfSlotsHoldsThirteenAndAQuarterBytesASlot) {
  for (const std::uint32_t n : {1u, 2u, 3u, 4u, 5u, 8u, 9u, 1000u, 1025u}) {
    SlotTournament t;
    t.resize(n);
    const std::size_t buckets = (n + 3) / 4;
    EXPECT_EQ(t.bytes(), buckets * 4 * 12 + std::max<std::size_t>(buckets, 2) * 4 + buckets) << n;
    for (std::uint32_t s = 0; s < n; ++s) t.push(s, RankKey{(s * 7919u) % n, s});
    for (std::uint32_t want = 0; want < n; ++want) {  // majors are a permutation of 0..n-1
      ASSERT_EQ(t.key(t.top()).major, want) << n;
      t.erase(t.top());
    }
    EXPECT_TRUE(t.empty());
  }
}

TEST(SlotTournament, OrderedDoublesKeepTheirOrder) {
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<double> v = {-inf, -1e300, -2.5, -1e-300, -0.0, 1e-310, 1e-300, 0.5, 1.0, 3e300, inf};
  for (std::size_t i = 0; i + 1 < v.size(); ++i) {
    EXPECT_LT(ordered(v[i]), ordered(v[i + 1])) << v[i] << " " << v[i + 1];
    EXPECT_EQ(unordered(ordered(v[i])), v[i]);
  }
}

TEST(SlotList, FrontBackAndNeighbours) {
  SlotList l;
  l.resize(4);
  EXPECT_TRUE(l.empty());
  EXPECT_EQ(l.back(), SlotList::kNone);
  l.push_front(2);
  l.push_front(0);
  l.push_front(3);  // 3 0 2
  EXPECT_EQ(l.front(), 3u);
  EXPECT_EQ(l.back(), 2u);
  EXPECT_EQ(l.newer(2), 0u);
  EXPECT_EQ(l.older(3), 0u);
  EXPECT_EQ(l.newer(3), SlotList::kNone);
  l.move_to_front(2);  // 2 3 0
  EXPECT_EQ(l.back(), 0u);
  l.remove(3);  // 2 0
  EXPECT_EQ(l.older(2), 0u);
  l.remove(2);
  l.remove(0);
  EXPECT_TRUE(l.empty());
}

TEST(FlatMap, GetFindAndTheReservedKey) {
  FlatMap<int> m(2);
  bool inserted = false;
  for (std::uint64_t i = 0; i < 1000; ++i) m.get(i * 7919, static_cast<int>(i), inserted);
  m.get(UINT64_MAX, 42, inserted);  // the table's empty marker is an ordinary key to callers
  EXPECT_TRUE(inserted);
  EXPECT_EQ(m.size(), 1001u);
  EXPECT_EQ(*m.find(999 * 7919), 999);
  EXPECT_EQ(*m.find(UINT64_MAX), 42);
  EXPECT_EQ(m.find(5), nullptr);
  m.get(999 * 7919, -1, inserted);
  EXPECT_FALSE(inserted);
}

// lru keeps one order two ways (policies/lru.h). Both, and a level that switches from the list to
// the log part-way (as slots grow past its limit), against a plain vector, under random fills, hits,
// invalidations and evictions; the small buffers compact often. After every operation the order of
// the resident slots and the victim agree.
TEST(LruOrder, ListAndLogMatchAReference) {
  for (const Slot log_above : {Slot{0}, Slot{37}, Slot{1} << 30}) {
    for (const std::uint64_t seed : {1, 2, 3}) {
      std::mt19937_64 rng(seed * 97 + log_above);
      Lru lru = Lru::with_log_above(log_above);
      std::vector<Slot> ref;   // least recently used first
      std::vector<Slot> free;  // slots not resident
      Slot slots = 0;
      const Touch t;
      for (int step = 0; step < 20000; ++step) {
        const int op = static_cast<int>(rng() % 10);
        if (slots < 90 && (free.empty() || rng() % 50 == 0)) {  // more slots, as a level grows
          const Slot more = 1 + static_cast<Slot>(rng() % 12);
          lru.resize(slots + more);
          for (Slot s = slots; s < slots + more; ++s) free.push_back(s);
          slots += more;
        }
        if (op < 3 && !free.empty()) {  // fill
          const std::size_t k = rng() % free.size();
          const Slot s = free[k];
          free.erase(free.begin() + static_cast<std::ptrdiff_t>(k));
          lru.on_fill(s, t);
          ref.push_back(s);
        } else if (op < 8 && !ref.empty()) {  // hit, mostly on recent entries
          const std::size_t k = rng() % 2 ? ref.size() - 1 - rng() % std::min<std::size_t>(ref.size(), 4)
                                          : rng() % ref.size();
          const Slot s = ref[k];
          ref.erase(ref.begin() + static_cast<std::ptrdiff_t>(k));
          ref.push_back(s);
          lru.on_hit(s, t);
        } else if (op == 8 && !ref.empty()) {  // invalidation
          const std::size_t k = rng() % ref.size();
          const Slot s = ref[k];
          ref.erase(ref.begin() + static_cast<std::ptrdiff_t>(k));
          lru.on_remove(s);
          free.push_back(s);
        } else if (!ref.empty()) {  // eviction
          ASSERT_EQ(lru.victim(), ref.front()) << "log above " << log_above << ", step " << step;
          lru.on_remove(ref.front());
          free.push_back(ref.front());
          ref.erase(ref.begin());
        }
        ASSERT_EQ(lru.order(), ref) << "log above " << log_above << ", seed " << seed << ", step " << step;
        if (!ref.empty()) {
          ASSERT_TRUE(lru.peek_victim(0) == kNoSlot || lru.peek_victim(0) == ref.front());
          ASSERT_EQ(lru.victim(), ref.front());
        }
      }
      EXPECT_EQ(lru.uses_log(), slots > log_above) << "log above " << log_above;
    }
  }
}

}  // namespace
}  // namespace ip::cache::detail
