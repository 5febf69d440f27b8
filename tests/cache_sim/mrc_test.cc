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

TEST(Mrc, ShardsRejectsBadRates) {
  const auto t = test::letters("abc");
  EXPECT_THROW(shards_lru_curve(t, 0.0), std::exception);
  EXPECT_THROW(shards_lru_curve(t, 1.5), std::exception);
}

}  // namespace
}  // namespace ip::cache
