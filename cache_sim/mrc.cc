#include "cache_sim/mrc.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "cache_sim/detail/hash.h"
#include "cache_sim/detail/stack_distance.h"

namespace ip::cache {

namespace {

constexpr std::uint64_t kShardsModulus = 1ULL << 24;

// Histogram of stack distances, filled in batches: the increments of one batch are independent of
// each other, so their cache misses overlap (done one per access, each waited on memory).
class Histogram {
 public:
  explicit Histogram(std::vector<std::uint64_t>& hist) : hist_(hist) { batch_.reserve(kBatch); }
  ~Histogram() { flush(); }
  void add(std::uint64_t d) {
    batch_.push_back(d);
    if (batch_.size() == kBatch) flush();
  }
  void flush() {
    for (const std::uint64_t d : batch_)
      if (d >= hist_.size()) hist_.resize(std::max<std::size_t>(d + 1, hist_.size() * 2));
    for (const std::uint64_t d : batch_) ++hist_[d];
    batch_.clear();
  }

 private:
  static constexpr std::size_t kBatch = 4096;
  std::vector<std::uint64_t>& hist_;
  std::vector<std::uint64_t> batch_;
};

}  // namespace

std::uint64_t LruCurve::misses(std::uint64_t capacity) const {
  if (capacity == 0) return accesses;
  return cold + (capacity < above.size() ? above[capacity] : 0);
}

double LruCurve::miss_ratio(std::uint64_t capacity) const {
  return accesses ? static_cast<double>(misses(capacity)) / static_cast<double>(accesses) : 0.0;
}

std::vector<std::uint64_t> LruCurve::misses_by_capacity() const {
  std::vector<std::uint64_t> m(cold + 1);
  for (std::uint64_t c = 0; c <= cold; ++c) m[c] = misses(c);
  return m;
}

LruCurve exact_lru_curve(const std::vector<Access>& accesses) {
  LruCurve curve;
  curve.accesses = accesses.size();
  curve.hist.assign(1024, 0);
  detail::StackDistance sd;
  constexpr std::size_t kAhead = 16;  // prefetch distance (accesses), see StackDistance::prefetch
  const std::size_t n = accesses.size();
  {
    Histogram hist(curve.hist);
    for (std::size_t i = 0; i < n; ++i) {
      if (i + kAhead < n) sd.prefetch(accesses[i + kAhead].id);
      if (i + kAhead / 2 < n) sd.prefetch_paths(accesses[i + kAhead / 2].id);
      const std::uint64_t d = sd.access(accesses[i].id);
      if (d == 0) ++curve.cold;
      else hist.add(d);
    }
  }
  std::size_t last = curve.hist.size();
  while (last > 1 && curve.hist[last - 1] == 0) --last;
  curve.hist.resize(std::max<std::size_t>(last, 1));
  curve.above.assign(curve.hist.size(), 0);
  for (std::size_t c = curve.hist.size() - 1; c-- > 0;) curve.above[c] = curve.above[c + 1] + curve.hist[c + 1];
  return curve;
}

double ShardsCurve::miss_ratio(std::uint64_t capacity) const {
  const double expected = static_cast<double>(accesses) * rate;
  if (capacity == 0 || expected <= 0) return 1.0;
  // A sampled reuse at distance d stands for one at d / rate: it misses when d / rate > capacity,
  // i.e. when d > floor(capacity * rate).
  const auto k = static_cast<std::uint64_t>(std::floor(static_cast<double>(capacity) * rate));
  const double m = static_cast<double>(cold) + (k < above.size() ? above[k] : 0.0);
  return std::clamp(m / expected, 0.0, 1.0);
}

ShardsCurve shards_lru_curve(const std::vector<Access>& accesses, double rate) {
  IP_REQUIRE(rate > 0 && rate <= 1, "SHARDS rate {} is not in (0, 1]", rate);
  const auto threshold = static_cast<std::uint64_t>(std::llround(rate * static_cast<double>(kShardsModulus)));
  IP_REQUIRE(threshold >= 1, "SHARDS rate {} is below 2^-24", rate);
  ShardsCurve curve;
  curve.rate = static_cast<double>(threshold) / static_cast<double>(kShardsModulus);
  curve.accesses = accesses.size();
  std::vector<std::uint64_t> hist(1024, 0);
  detail::StackDistance sd;
  {
    Histogram h(hist);
    for (const Access& a : accesses) {
      if ((detail::mix64(a.id ^ 0x5ca1ab1e5eedULL) & (kShardsModulus - 1)) >= threshold) continue;
      ++curve.sampled;
      const std::uint64_t d = sd.access(a.id);
      if (d == 0) ++curve.cold;
      else h.add(d);
    }
  }
  std::size_t last = hist.size();
  while (last > 2 && hist[last - 1] == 0) --last;
  curve.hist.assign(hist.begin(), hist.begin() + static_cast<std::ptrdiff_t>(last));
  // SHARDS-adj: the expected number of samples minus the actual goes to the smallest distance.
  curve.hist[1] += static_cast<double>(accesses.size()) * curve.rate - static_cast<double>(curve.sampled);
  curve.above.assign(curve.hist.size(), 0.0);
  for (std::size_t k = curve.hist.size() - 1; k-- > 0;) curve.above[k] = curve.above[k + 1] + curve.hist[k + 1];
  return curve;
}

CurveError compare(const LruCurve& exact, const ShardsCurve& estimate) {
  CurveError e;
  if (exact.cold == 0) return e;
  const auto misses = exact.misses_by_capacity();
  double sum = 0;
  for (std::uint64_t c = 1; c <= exact.cold; ++c) {
    const double err = std::abs(estimate.miss_ratio(c) - static_cast<double>(misses[c]) / static_cast<double>(exact.accesses));
    sum += err;
    if (err > e.max_abs) e.max_abs = err, e.max_at = c;
  }
  e.mean_abs = sum / static_cast<double>(exact.cold);
  return e;
}

}  // namespace ip::cache
