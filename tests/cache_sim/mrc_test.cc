// The exact LRU curve equals a full LRU simulation at every capacity; SHARDS at rate 1 is exact and
// at lower rates stays close to it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "cache_sim/hierarchy.h"
#include "cache_sim/mrc.h"
#include "tests/cache_sim/test_util.h"

namespace ip::cache {
namespace {

// a b c a b d a: stack distances: a, b, c, d first accesses (4 cold); the 2nd a sees {a,b,c} -> 3;
// the 2nd b sees {b,c,a} -> 3; the 3rd a sees {a,b,d} -> 3. So hist[3] = 3:
// misses(1) = misses(2) = 7 (by hand: with 2 entries every access misses), misses(3) = misses(4) = 4.
TEST(Mrc, HandExample) {
  const LruCurve c = exact_lru_curve(test::letters("abcabda"));
  EXPECT_EQ(c.accesses, 7u);
  EXPECT_EQ(c.cold, 4u);
  EXPECT_EQ(c.misses(0), 7u);
  EXPECT_EQ(c.misses(1), 7u);
  EXPECT_EQ(c.misses(2), 7u);
  EXPECT_EQ(c.misses(3), 4u);
  EXPECT_EQ(c.misses(4), 4u);
  EXPECT_EQ(c.misses(1000), 4u);
  EXPECT_EQ(c.misses_by_capacity(), (std::vector<std::uint64_t>{7, 7, 7, 4, 4}));
  // a a a: distance 1 twice.
  EXPECT_EQ(exact_lru_curve(test::letters("aaa")).misses(1), 1u);
}

std::uint64_t simulate_lru(const std::vector<Access>& t, std::uint64_t cap) {
  Hierarchy h({LevelSpec{"lru", Capacity{cap, false}}});
  for (const Access& a : t) h.access(a);
  return h.stats(0).misses;
}

TEST(Mrc, ExactCurveEqualsFullSimulationAtEveryCapacity) {
  int checked = 0;
  for (std::uint64_t seed = 1; seed <= 8; ++seed) {
    // Long enough (6000 accesses) that the stack-distance positions are compacted several times.
    const auto trace = test::random_trace(seed, 6000, 20 + 25 * seed);
    const LruCurve curve = exact_lru_curve(trace);
    const auto by_cap = curve.misses_by_capacity();
    ASSERT_EQ(by_cap.size(), curve.cold + 1);
    for (std::uint64_t cap = 1; cap <= curve.cold + 1; ++cap) {
      const std::uint64_t sim = simulate_lru(trace, cap);
      ASSERT_EQ(curve.misses(cap), sim) << "seed " << seed << " capacity " << cap;
      if (cap <= curve.cold) { ASSERT_EQ(by_cap[cap], sim); }
      ++checked;
    }
  }
  EXPECT_GT(checked, 1000);
}

TEST(Mrc, ShardsAtRateOneIsExact) {
  const auto trace = test::random_trace(7, 5000, 300);
  const LruCurve exact = exact_lru_curve(trace);
  const ShardsCurve s = shards_lru_curve(trace, 1.0);
  EXPECT_EQ(s.sampled, trace.size());
  for (std::uint64_t cap = 1; cap <= exact.cold; ++cap) EXPECT_DOUBLE_EQ(s.miss_ratio(cap), exact.miss_ratio(cap));
  const CurveError e = compare(exact, s);
  EXPECT_EQ(e.max_abs, 0.0);
}

TEST(Mrc, ShardsSamplesByIdAndStaysClose) {
  // 400k accesses, Zipf(0.8) over 50k ids. SHARDS-adj at R = 0.1 should be within about a percent on
  // average (Waldspurger et al. report mean absolute errors near 0.01), and coarser at R = 0.01.
  std::mt19937_64 rng(42);
  const int n_ids = 50000;
  std::vector<double> cdf(n_ids);
  double total = 0;
  for (int i = 0; i < n_ids; ++i) cdf[i] = total += 1.0 / std::pow(i + 1.0, 0.8);
  std::vector<Access> trace(400000);
  for (auto& a : trace) {
    const double u = std::uniform_real_distribution<double>(0, total)(rng);
    a.id = static_cast<std::uint64_t>(std::lower_bound(cdf.begin(), cdf.end(), u) - cdf.begin()) * 7919 + 3;
  }
  const LruCurve exact = exact_lru_curve(trace);
  const ShardsCurve s = shards_lru_curve(trace, 0.1);
  // Spatial sampling keeps all or none of an id's accesses: about 10% of them, not exactly.
  EXPECT_GT(s.sampled, trace.size() / 20);
  EXPECT_LT(s.sampled, trace.size() / 5);
  const CurveError e = compare(exact, s);
  EXPECT_LT(e.mean_abs, 0.03);
  EXPECT_GT(e.mean_abs, 0.0);  // it is an estimate
  const CurveError coarse = compare(exact, shards_lru_curve(trace, 0.01));
  EXPECT_GT(coarse.mean_abs, e.mean_abs);
}

// The builders fed in pieces give the curves of the whole-trace functions, bit for bit.
TEST(Mrc, BuildersFedInPiecesGiveTheSameCurves) {
  const auto trace = test::random_trace(11, 20000, 3000);
  const LruCurve whole = exact_lru_curve(trace);
  const ShardsCurve whole_s = shards_lru_curve(trace, 0.25);
  for (const std::size_t piece : {std::size_t{1}, std::size_t{13}, std::size_t{4096}}) {
    LruCurveBuilder b;
    ShardsBuilder sb(0.25);
    for (std::size_t i = 0; i < trace.size(); i += piece) {
      b.add(trace.data() + i, std::min(piece, trace.size() - i));
      sb.add(trace.data() + i, std::min(piece, trace.size() - i));
    }
    const LruCurve c = b.finish();
    EXPECT_EQ(c.accesses, whole.accesses);
    EXPECT_EQ(c.cold, whole.cold);
    EXPECT_EQ(c.hist, whole.hist) << piece;
    EXPECT_EQ(c.above, whole.above) << piece;
    const ShardsCurve s = sb.finish();
    EXPECT_EQ(s.sampled, whole_s.sampled);
    EXPECT_EQ(s.hist, whole_s.hist) << piece;
  }
}

// Independent samples (salts): all identical at rate 1 (spread 0); at rate 0.1 they sample different
// ids, and their spread is of the order of the error against the exact curve.
TEST(Mrc, SpreadOfIndependentSamples) {
  const auto trace = test::random_trace(12, 200000, 20000);
  std::vector<ShardsCurve> all, tenth;
  for (std::uint64_t salt = 0; salt < 4; ++salt) {
    ShardsBuilder one(1.0, salt), part(0.1, salt);
    one.add(trace.data(), trace.size());
    part.add(trace.data(), trace.size());
    all.push_back(one.finish());
    tenth.push_back(part.finish());
  }
  const SpreadEstimate zero = spread(all);
  EXPECT_EQ(zero.mean_sd, 0.0);
  EXPECT_EQ(zero.max_sd, 0.0);
  EXPECT_NE(tenth[0].sampled, tenth[1].sampled);
  const SpreadEstimate e = spread(tenth);
  const CurveError truth = compare(exact_lru_curve(trace), tenth[0]);
  EXPECT_GT(e.mean_sd, 0.0);
  EXPECT_GT(e.mean_sd, truth.mean_abs / 10) << truth.mean_abs;
  EXPECT_LT(e.mean_sd, truth.mean_abs * 10) << truth.mean_abs;
  EXPECT_EQ(spread({tenth[0]}).mean_sd, 0.0);  // one sample: no spread to measure
}

// A hand-made SHARDS curve at rate 0.5: 8 accesses, so 4 expected samples; 1 cold, sampled reuses at
// distances 1 (twice) and 2 (once). A sampled distance d stands for d / 0.5 = 2d: the reuses stand for
// distances 2, 2 and 4. Capacity 3: the two at 2 hit, the one at 4 misses: (1 + 1) / 4 = 0.5. k =
// floor(3 * 0.5) = 1 (hits at d <= 1); ceil would give k = 2 and count the reuse at 4 as a hit: 0.25.
TEST(Mrc, ShardsMissRatioScalesDistancesDownByFloor) {
  ShardsCurve c;
  c.rate = 0.5;
  c.accesses = 8;
  c.sampled = 4;
  c.cold = 1;
  c.hist = {0, 2, 1};
  c.above = {3, 1, 0};
  EXPECT_EQ(c.miss_ratio(0), 1.0);
  EXPECT_EQ(c.miss_ratio(1), 1.0);   // k = 0: (1 + 3) / 4
  EXPECT_EQ(c.miss_ratio(2), 0.5);   // k = 1: (1 + 1) / 4
  EXPECT_EQ(c.miss_ratio(3), 0.5);   // k = floor(1.5) = 1
  EXPECT_EQ(c.miss_ratio(4), 0.25);  // k = 2: the cold miss only
  EXPECT_EQ(c.miss_ratio(5), 0.25);  // k = floor(2.5) = 2
}

// SHARDS-adj after finish(): hist[1] gets accesses * rate - sampled, the rest is the plain histogram of
// the sampled accesses' stack distances. Which ids the sample keeps is read off one-id builders, and the
// unadjusted histogram is the exact curve of the sampled sub-trace (all or none of an id's accesses).
TEST(Mrc, ShardsAdjCorrectionIsAddedToTheSmallestDistance) {
  const double rate = 0.25;
  std::vector<Access> trace;
  for (int rep = 0; rep < 2; ++rep)
    for (std::uint64_t id = 1; id <= 40; ++id) trace.push_back(Access{id, 1, 1.0f, 0, 0});
  for (std::uint64_t id = 1; id <= 40; ++id) trace.push_back(Access{id, 1, 1.0f, 0, 0}), trace.push_back(trace.back());
  trace.push_back(trace.front());  // 161 accesses: n R = 40.25, never a whole number of samples
  std::vector<Access> sub;
  for (const Access& a : trace) {
    ShardsBuilder one(rate);
    one.add(&a, 1);
    if (one.finish().sampled == 1) sub.push_back(a);
  }
  const ShardsCurve s = shards_lru_curve(trace, rate);
  EXPECT_EQ(s.rate, rate);
  EXPECT_EQ(s.accesses, trace.size());
  ASSERT_EQ(s.sampled, sub.size());
  const double adj = static_cast<double>(trace.size()) * rate - static_cast<double>(sub.size());
  ASSERT_NE(adj, 0.0) << "the sample must differ from the expected count for the test to mean anything";
  ASSERT_FALSE(sub.empty());
  const LruCurve raw = exact_lru_curve(sub);
  EXPECT_EQ(s.cold, raw.cold);
  ASSERT_GE(s.hist.size(), 2u);
  ASSERT_GE(s.hist.size(), raw.hist.size());
  for (std::size_t d = 0; d < s.hist.size(); ++d) {
    const double plain = d < raw.hist.size() ? static_cast<double>(raw.hist[d]) : 0.0;
    EXPECT_EQ(s.hist[d], plain + (d == 1 ? adj : 0.0)) << "distance " << d;
  }
  // So the adjusted curve counts exactly the expected number of samples: cold + every reuse = n R.
  EXPECT_EQ(static_cast<double>(s.cold) + s.above[0], static_cast<double>(trace.size()) * rate);
  // And the miss ratio at a capacity past every distance is cold / (n R).
  EXPECT_DOUBLE_EQ(s.miss_ratio(1000), static_cast<double>(s.cold) / (static_cast<double>(trace.size()) * rate));
}

// The spread is the sample standard deviation (n - 1). Two hand-made replicas at rate 1 with 2 distinct
// ids each: one misses every access (ratio 1.0 at every capacity), the other half of them (0.5). Their
// sample sd: sqrt(((1 - 0.75)^2 + (0.5 - 0.75)^2) / (2 - 1)) = sqrt(0.125) = 0.35355 (the population sd,
// dividing by n, would be 0.25), at both capacities 1 and 2: mean and max alike.
TEST(Mrc, SpreadIsTheSampleStandardDeviation) {
  ShardsCurve all_miss;
  all_miss.rate = 1;
  all_miss.accesses = all_miss.sampled = 2;
  all_miss.cold = 2;
  all_miss.hist = {0};
  all_miss.above = {0};
  ShardsCurve half;
  half.rate = 1;
  half.accesses = half.sampled = 4;
  half.cold = 2;
  half.hist = {0, 2};
  half.above = {2, 0};
  for (std::uint64_t c = 1; c <= 2; ++c) {
    ASSERT_EQ(all_miss.miss_ratio(c), 1.0);
    ASSERT_EQ(half.miss_ratio(c), 0.5);
  }
  const SpreadEstimate e = spread({all_miss, half});
  EXPECT_NEAR(e.mean_sd, std::sqrt(0.125), 1e-12);
  EXPECT_NEAR(e.max_sd, std::sqrt(0.125), 1e-12);
  EXPECT_EQ(e.max_at, 1u);
  // Three replicas 1.0, 0.5, 0.5: mean 2/3, sum of squares 1/9 + 2/36 = 1/6, / 2 = 1/12.
  const SpreadEstimate e3 = spread({all_miss, half, half});
  EXPECT_NEAR(e3.mean_sd, std::sqrt(1.0 / 12), 1e-12);
}

TEST(Mrc, ShardsRejectsBadRates) {
  const auto t = test::letters("abc");
  EXPECT_THROW(shards_lru_curve(t, 0.0), std::exception);
  EXPECT_THROW(shards_lru_curve(t, 1.5), std::exception);
}

}  // namespace
}  // namespace ip::cache
