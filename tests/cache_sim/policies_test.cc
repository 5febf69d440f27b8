// Worked examples, one per policy, written out by hand: the sequence, and after each access what the
// level holds and which entry leaves. Notation: "m" miss, "h" hit, "m/x" a miss that evicted x.
// Lists are written newest (front) first; clock and sieve bits after the id (a1: bit set).
#include <gtest/gtest.h>

#include "cache_sim/registry.h"
#include "core/error.h"
#include "tests/cache_sim/test_util.h"

namespace ip::cache {
namespace {

using test::letters;
using test::replay;

TEST(Policies, TableNamesEveryPolicyOnce) {
  std::vector<std::string> names;
  for (const auto& p : policy_table()) names.push_back(p.name);
  EXPECT_EQ(names, (std::vector<std::string>{"lru", "clock", "fifo", "lfu", "sieve", "semantic", "semantic-cos", "opt"}));
  for (const auto& n : names) EXPECT_NO_THROW(check_policy(n)) << n;
}

// LRU, 3 entries, a b c b a d e:
//   a,b,c miss            [c b a]
//   b hit                 [b c a]
//   a hit                 [a b c]
//   d miss, evicts c      [d a b]
//   e miss, evicts b      [e d a]
TEST(Policies, LruWorkedExample) {
  EXPECT_EQ(replay("lru:3", letters("abcbade")), "m m m h h m/c m/b");
  // a b c a d b e a: a hit moves a to the front, so b is the oldest when d arrives:
  //   [c b a] -a-> [a c b] -d-> evict b [d a c] -b-> evict c [b d a] -e-> evict a [e b d] -a-> evict d
  EXPECT_EQ(replay("lru:3", letters("abcadbea")), "m m m h m/b m/c m/a m/d");
}

// FIFO, 3 entries, a b c a d b e a: hits do not reorder.
//   a,b,c miss [c b a]; a hit [c b a]; d evicts a (oldest) [d c b]; b hit; e evicts b [e d c];
//   a evicts c [a e d]
TEST(Policies, FifoWorkedExample) {
  EXPECT_EQ(replay("fifo:3", letters("abcadbea")), "m m m h m/a h m/b m/c");
}

// Clock (libCacheSim semantics), 3 entries, a b c b a d e:
//   a,b,c miss            [c0 b0 a0]
//   b hit, a hit          [c0 b1 a1]           (bits set, nothing moves)
//   d miss: a1 -> a0 to the front [a0 c0 b1]; b1 -> b0 to the front [b0 a0 c0]; c0 is the victim
//                         [d0 b0 a0]
//   e miss: a0 is the victim (LRU would evict b here)
TEST(Policies, ClockWorkedExample) {
  EXPECT_EQ(replay("clock:3", letters("abcbade")), "m m m h h m/c m/a");
  // a b c a d b e f:
  //   [c0 b0 a0] -a-> [c0 b0 a1] -d-> a1 to the front [a0 c0 b0], evict b: [d0 a0 c0]
  //   -b-> evict c [b0 d0 a0] -e-> evict a [e0 b0 d0] -f-> evict d
  EXPECT_EQ(replay("clock:3", letters("abcadbef")), "m m m h m/b m/c m/a m/d");
}

// SIEVE, 3 entries, a b c a d b e f (the same sequence as clock's second example):
//   a,b,c miss            [c0 b0 a0], hand unset
//   a hit                 [c0 b0 a1]
//   d miss: hand starts at the oldest, a1 -> a0 (stays in place), moves to b0: victim b; the hand
//           stays just in front of b, at c.           [d0 c0 a0]  hand c
//   b miss: c0 is the victim, hand moves to d.        [b0 d0 a0]  hand d
//   e miss: d0 is the victim, hand moves to b.        [e0 b0 a0]  hand b
//   f miss: b0 is the victim.                                   (clock evicted a, d instead)
TEST(Policies, SieveWorkedExample) {
  EXPECT_EQ(replay("sieve:3", letters("abcadbef")), "m m m h m/b m/c m/d m/b");
  // a b c b a d e: hand from a1 (cleared) to b1 (cleared) to c0: victim c, hand past the front
  // (unset); e: hand restarts at the oldest, a0: victim a.
  EXPECT_EQ(replay("sieve:3", letters("abcbade")), "m m m h h m/c m/a");
}

// LFU, 3 entries, a b a c d b e (counts in parentheses, t = time of last use):
//   a(1) b(1) a(2) c(1)   full: a2 b1@t1 c1@t3
//   d miss: b and c have count 1, b is least recently used: victim b      a2 c1@t3 d1@t4
//   b miss: c (t3) before d (t4): victim c                                 a2 d1@t4 b1@t5
//   e miss: victim d                                                       (LRU would evict a at b)
TEST(Policies, LfuWorkedExample) {
  EXPECT_EQ(replay("lfu:3", letters("abacdbe")), "m m h m m/b m/c m/d");
  EXPECT_EQ(replay("lru:3", letters("abacdbe")), "m m h m m/b m/a m/c");
}

// A hit refreshes the entry's recency for the tie-break, not only its count. LFU, 2 entries, a b b a c:
//   a miss (1, t1), b miss (1, t2)
//   b hit: b (2, t3)
//   a hit: a (2, t4)
//   c miss: a and b both count 2; b was used last at t3, a at t4: victim b
// (were the tie-break the time of the fill, or a hit kept the old time, a (t1) would go).
TEST(Policies, LfuHitRefreshesRecencyForTieBreaks) {
  EXPECT_EQ(replay("lfu:2", letters("abbac")), "m m h h m/b");
}

// semantic(decay=0.5), 2 entries; each access carries a score. r = relevance at the current tick.
//   t1 a(1.0) miss                   r_a = 1
//   t2 b(4.0) miss                   r_a = 0.5, r_b = 4
//   t3 c(1.0) miss: r_a = 0.25, r_b = 2: victim a; r_c = 1
//   t4 a(1.0) miss: r_b = 1, r_c = 0.5: victim c (LRU would evict b); r_a = 1
//   t5 b(1.0) hit:  r_b = 0.5 + 1 = 1.5, r_a = 0.5
//   t6 d(3.0) miss: r_b = 0.75, r_a = 0.25: victim a
TEST(Policies, SemanticWorkedExample) {
  EXPECT_EQ(replay("semantic(decay=0.5):2", letters("abcabd", {1, 4, 1, 1, 1, 3})), "m m m/a m/c h m/a");
  // decay = 1: the plain sum. a(1) b(1) c: tie 1 = 1, the least recently used (a) goes.
  EXPECT_EQ(replay("semantic(decay=1):2", letters("abc", {1, 1, 1})), "m m m/a");
  // A zero score adds nothing: a(0) b(0.1) c(5): a has relevance 0 < 0.1: victim a.
  EXPECT_EQ(replay("semantic:2", letters("abc", {0, 0.1f, 5})), "m m m/a");
  // a(0.1) b(0) a(0.1) c: b's relevance is 0, a's is not: victim b.
  EXPECT_EQ(replay("semantic:2", letters("abac", {0.1f, 0, 0.1f, 1})), "m m h m/b");
}

// semantic-cos, 2 entries: the rank is the score of the entry's latest access, nothing summed or decayed.
//   a(0.9) b(0.2) miss                  a .9, b .2
//   c(0.5) miss: victim b (.2 lowest)   a .9, c .5
//   a(0.1) hit: a's rank becomes .1     a .1, c .5       (semantic would sum: a 1.0)
//   d(0.7) miss: victim a               c .5, d .7       (semantic(decay=1) evicts c here)
//   c(0.5) hit: c .5, now the most recent access
//   e(0.5) miss: victim c (.5 < .7)     d .7, e .5
//   g(0.7) miss: victim e               d .7, g .7
//   h(0.9) miss: d and g tie at .7; d was accessed longer ago: victim d
TEST(Policies, SemanticCosWorkedExample) {
  const std::vector<float> scores = {0.9f, 0.2f, 0.5f, 0.1f, 0.7f, 0.5f, 0.5f, 0.7f, 0.9f};
  EXPECT_EQ(replay("semantic-cos:2", letters("abcadcegh", scores)), "m m m/b h m/a h m/c m/e m/d");
  EXPECT_EQ(replay("semantic(decay=1):2", letters("abcad", scores)), "m m m/b h m/c");
}

TEST(Policies, SemanticDefaultDecayIsPerAccessOfTheLevel) {
  // Default 0.99. a(1.0), then 69 accesses to b with score 0: r_a = 0.99^69 = 0.4998 at the 70th tick,
  // and c's score 0.5 at that tick; at the next miss (d) r_a = 0.99^70 = 0.4948, r_c = 0.495: victim a
  // (r_a < r_c by 0.0002), not c. With decay 0.999 r_a stays 0.93: victim c.
  std::vector<Access> t = letters("a");
  for (int i = 0; i < 68; ++i) t.push_back(letters("b", {0})[0]);
  t.push_back(letters("c", {0.5f})[0]);  // tick 70: evicts b (score 0)
  t.push_back(letters("d", {1})[0]);     // tick 71
  const std::string r = replay("semantic:2", t);
  EXPECT_EQ(r.substr(r.size() - 7), "m/b m/a");
  const std::string r2 = replay("semantic(decay=0.999):2", t);
  EXPECT_EQ(r2.substr(r2.size() - 7), "m/b m/c");
}

// The mirror of the test above, one access of b fewer: a(1.0) at tick 1, 67 x b(0) at ticks 2..68, c(0.5)
// at tick 69 (evicts b, relevance 0), d(1) at tick 70. At d's miss r_a = decay^69, r_c = 0.5 * decay: a
// stays iff decay^68 > 0.5. Default 0.99: 0.99^68 = 0.50488 > 0.5: victim c. Together with the test
// above (0.99^69 = 0.49983 < 0.5: victim a) this pins the default decay in (0.5^(1/68), 0.5^(1/69)) =
// (0.98986, 0.99000): 0.98 (0.98^68 = 0.253) or 0.95 evict a here.
TEST(Policies, SemanticDefaultDecayIsNotSmallerThan099) {
  std::vector<Access> t = letters("a");
  for (int i = 0; i < 67; ++i) t.push_back(letters("b", {0})[0]);
  t.push_back(letters("c", {0.5f})[0]);  // tick 69: evicts b (score 0)
  t.push_back(letters("d", {1})[0]);     // tick 70
  ASSERT_EQ(t.size(), 70u);
  const std::string r = replay("semantic:2", t);
  EXPECT_EQ(r.substr(r.size() - 7), "m/b m/c");
  EXPECT_EQ(replay("semantic(decay=0.99):2", t), r);  // the default is 0.99 itself
  const std::string r2 = replay("semantic(decay=0.98):2", t);
  EXPECT_EQ(r2.substr(r2.size() - 7), "m/b m/a");
  // The auditor's case, 58 x b: 0.99^59 = 0.553 > 0.5 keeps a; 0.95^59 = 0.049 does not.
  std::vector<Access> u = letters("a");
  for (int i = 0; i < 58; ++i) u.push_back(letters("b", {0})[0]);
  u.push_back(letters("c", {0.5f})[0]);
  u.push_back(letters("d", {1})[0]);
  const std::string r3 = replay("semantic:2", u);
  EXPECT_EQ(r3.substr(r3.size() - 7), "m/b m/c");
  const std::string r4 = replay("semantic(decay=0.95):2", u);
  EXPECT_EQ(r4.substr(r4.size() - 7), "m/b m/a");
}

// OPT (Belady), 2 entries, a b c a b c (next uses: a@0 -> 3, b@1 -> 4, c@2 -> 5, then none):
//   a,b miss
//   c miss: a is next used at 3, b at 4: b is farthest: victim b     [a c]
//   a hit (a is never used again now)
//   b miss: a (never again) vs c (at 5): victim a                   [c b]
//   c hit
// 4 misses; LRU misses all 6.
TEST(Policies, OptWorkedExample) {
  EXPECT_EQ(replay("opt:2", letters("abcabc")), "m m m/b h m/a h");
  EXPECT_EQ(replay("lru:2", letters("abcabc")), "m m m/a m/b m/c m/a");
}

TEST(Policies, SpecErrorsNameTheProblem) {
  const auto message = [](const std::string& spec) {
    try {
      check_policy(spec);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message("nosuch").find("unknown policy 'nosuch'"), std::string::npos);
  EXPECT_NE(message("semantic(decay=2)").find("decay"), std::string::npos);
  EXPECT_NE(message("semantic(decay=0)").find("decay"), std::string::npos);
  EXPECT_NE(message("semantic(decay=x)").find("not a number"), std::string::npos);
  EXPECT_NE(message("semantic(foo=1)").find("no parameter 'foo'"), std::string::npos);
  EXPECT_NE(message("lru(decay=0.5)").find("no parameter 'decay'"), std::string::npos);
  EXPECT_NE(message("semantic(decay)").find("key=value"), std::string::npos);
  EXPECT_NE(message("semantic-cos(decay=0.5)").find("no parameter 'decay'"), std::string::npos);
}

}  // namespace
}  // namespace ip::cache
