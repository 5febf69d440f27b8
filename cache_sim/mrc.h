// Miss-ratio curves of LRU in entries.
//
// exact_lru_curve: Mattson's stack distances in one pass (Fenwick tree, O(n log n)); misses(C) equals
// a full LRU simulation with C entries at every C (tests/cache_sim/mrc_test.cc checks every C).
// shards_lru_curve: SHARDS (Waldspurger et al., FAST 2015), fixed rate R: an id is sampled when
// hash(id) mod 2^24 < R * 2^24 (spatial sampling: all or none of an id's accesses); the sampled
// stack distances, scaled by 1/R, estimate the curve. SHARDS-adj: the shortfall between the expected
// (n R) and actual number of samples is added to the smallest distance. compare() reports its error
// against the exact curve.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "cache_sim/trace.h"

namespace ip::cache {

struct LruCurve {
  std::uint64_t accesses = 0;
  std::uint64_t cold = 0;            // first accesses = distinct ids: misses at any capacity
  std::vector<std::uint64_t> hist;   // hist[d]: reuses at stack distance d (d >= 1; hist[0] = 0)
  std::vector<std::uint64_t> above;  // above[c] = sum of hist[d] for d > c (so misses() is O(1))

  // Misses of an LRU cache of `capacity` entries (capacity 0: every access).
  std::uint64_t misses(std::uint64_t capacity) const;
  double miss_ratio(std::uint64_t capacity) const;
  // misses(c) for c = 0 .. cold (beyond `cold` entries the curve is flat).
  std::vector<std::uint64_t> misses_by_capacity() const;
};

LruCurve exact_lru_curve(const std::vector<Access>& accesses);

// The same curve from a trace fed in pieces (add() in order, then finish()): O(distinct ids) memory,
// never the trace. exact_lru_curve(t) is one add() of the whole trace.
class LruCurveBuilder {
 public:
  LruCurveBuilder();
  ~LruCurveBuilder();
  void add(const Access* accesses, std::size_t n);
  LruCurve finish();

 private:
  struct State;
  std::unique_ptr<State> s_;
};

struct ShardsCurve {
  double rate = 1;                 // effective rate (threshold / 2^24)
  std::uint64_t accesses = 0;      // every access seen
  std::uint64_t sampled = 0;       // accesses sampled
  std::uint64_t cold = 0;          // sampled first accesses
  std::vector<double> hist;        // sampled reuses by sampled distance, SHARDS-adj applied to hist[1]
  std::vector<double> above;       // above[k] = sum of hist[d] for d > k

  // Estimated miss ratio of an LRU cache of `capacity` entries.
  double miss_ratio(std::uint64_t capacity) const;
};

ShardsCurve shards_lru_curve(const std::vector<Access>& accesses, double rate);

// SHARDS on a trace fed in pieces; `salt` selects which ids are sampled (0: the sample of
// shards_lru_curve). Memory O(sampled distinct ids).
class ShardsBuilder {
 public:
  explicit ShardsBuilder(double rate, std::uint64_t salt = 0);
  ~ShardsBuilder();
  ShardsBuilder(ShardsBuilder&&) noexcept;
  void add(const Access* accesses, std::size_t n);
  ShardsCurve finish();

 private:
  struct State;
  std::unique_ptr<State> s_;
};

// When the exact curve is out of reach (a trace read as a stream), the sampling error of a SHARDS
// estimate is estimated from independent samples: `replicas` builders with different salts at the
// same rate. spread: at each capacity the standard deviation of their miss ratios; its mean over the
// capacities 1 .. the estimated distinct ids (cold / rate) and its maximum.
struct SpreadEstimate {
  double mean_sd = 0;
  double max_sd = 0;
  std::uint64_t max_at = 0;
};
SpreadEstimate spread(const std::vector<ShardsCurve>& replicas);

struct CurveError {
  double mean_abs = 0;   // mean |estimated - exact| miss ratio over capacities 1 .. distinct ids
  double max_abs = 0;
  std::uint64_t max_at = 0;  // the capacity of the largest error
};

CurveError compare(const LruCurve& exact, const ShardsCurve& estimate);

}  // namespace ip::cache
