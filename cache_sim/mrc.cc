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

struct LruCurveBuilder::State {
  LruCurve curve;
  detail::StackDistance sd;
  Histogram hist{curve.hist};
  State() { curve.hist.assign(1024, 0); }
};

LruCurveBuilder::LruCurveBuilder() : s_(std::make_unique<State>()) {}
LruCurveBuilder::~LruCurveBuilder() = default;

void LruCurveBuilder::add(const Access* accesses, std::size_t n) {
  constexpr std::size_t kAhead = 16;  // prefetch distance (accesses), see StackDistance::prefetch
  detail::StackDistance& sd = s_->sd;
  s_->curve.accesses += n;
  for (std::size_t i = 0; i < n; ++i) {
    if (i + kAhead < n) sd.prefetch(accesses[i + kAhead].id);
    if (i + kAhead / 2 < n) sd.prefetch_paths(accesses[i + kAhead / 2].id);
    const std::uint64_t d = sd.access(accesses[i].id);
    if (d == 0) ++s_->curve.cold;
    else s_->hist.add(d);
  }
}

LruCurve LruCurveBuilder::finish() {
  s_->hist.flush();
  LruCurve curve = std::move(s_->curve);
  std::size_t last = curve.hist.size();
  while (last > 1 && curve.hist[last - 1] == 0) --last;
  curve.hist.resize(std::max<std::size_t>(last, 1));
  curve.above.assign(curve.hist.size(), 0);
  for (std::size_t c = curve.hist.size() - 1; c-- > 0;) curve.above[c] = curve.above[c + 1] + curve.hist[c + 1];
  s_ = std::make_unique<State>();
  return curve;
}

LruCurve exact_lru_curve(const std::vector<Access>& accesses) {
  LruCurveBuilder b;
  b.add(accesses.data(), accesses.size());
  return b.finish();
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

struct ShardsBuilder::State {
  ShardsCurve curve;
  std::uint64_t threshold = 0, salt = 0;
  std::vector<std::uint64_t> hist = std::vector<std::uint64_t>(1024, 0);
  detail::StackDistance sd;
  Histogram h{hist};
};

ShardsBuilder::ShardsBuilder(double rate, std::uint64_t salt) : s_(std::make_unique<State>()) {
  IP_REQUIRE(rate > 0 && rate <= 1, "SHARDS rate {} is not in (0, 1]", rate);
  s_->threshold = static_cast<std::uint64_t>(std::llround(rate * static_cast<double>(kShardsModulus)));
  IP_REQUIRE(s_->threshold >= 1, "SHARDS rate {} is below 2^-24", rate);
  s_->curve.rate = static_cast<double>(s_->threshold) / static_cast<double>(kShardsModulus);
  // Salt 0 keeps the historical sample; others mix the salt in before hashing.
  s_->salt = salt ? detail::mix64(salt * 0x9e3779b97f4a7c15ULL) : 0;
}
ShardsBuilder::~ShardsBuilder() = default;
ShardsBuilder::ShardsBuilder(ShardsBuilder&&) noexcept = default;

void ShardsBuilder::add(const Access* accesses, std::size_t n) {
  State& s = *s_;
  s.curve.accesses += n;
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint64_t id = accesses[i].id;
    if ((detail::mix64((id ^ s.salt) ^ 0x5ca1ab1e5eedULL) & (kShardsModulus - 1)) >= s.threshold) continue;
    ++s.curve.sampled;
    const std::uint64_t d = s.sd.access(id);
    if (d == 0) ++s.curve.cold;
    else s.h.add(d);
  }
}

ShardsCurve ShardsBuilder::finish() {
  State& s = *s_;
  s.h.flush();
  ShardsCurve curve = std::move(s.curve);
  std::size_t last = s.hist.size();
  while (last > 2 && s.hist[last - 1] == 0) --last;
  curve.hist.assign(s.hist.begin(), s.hist.begin() + static_cast<std::ptrdiff_t>(last));
  // SHARDS-adj: the expected number of samples minus the actual goes to the smallest distance.
  curve.hist[1] += static_cast<double>(curve.accesses) * curve.rate - static_cast<double>(curve.sampled);
  curve.above.assign(curve.hist.size(), 0.0);
  for (std::size_t k = curve.hist.size() - 1; k-- > 0;) curve.above[k] = curve.above[k + 1] + curve.hist[k + 1];
  return curve;
}

ShardsCurve shards_lru_curve(const std::vector<Access>& accesses, double rate) {
  ShardsBuilder b(rate);
  b.add(accesses.data(), accesses.size());
  return b.finish();
}

SpreadEstimate spread(const std::vector<ShardsCurve>& replicas) {
  SpreadEstimate e;
  if (replicas.size() < 2) return e;
  const double rate = replicas[0].rate;
  double cold = 0;
  std::size_t ks = 0;
  for (const auto& r : replicas) {
    IP_REQUIRE(r.rate == rate, "spread: replicas at different rates ({} and {})", rate, r.rate);
    cold += static_cast<double>(r.cold) / static_cast<double>(replicas.size());
    ks = std::max(ks, r.hist.size());
  }
  const auto distinct = static_cast<std::uint64_t>(std::llround(cold / rate));
  if (distinct == 0) return e;
  // Every replica's miss ratio is constant while floor(capacity * rate) is: on [ceil(k / rate),
  // ceil((k + 1) / rate)) for k >= 1, and on [1, ceil(1 / rate)) for k = 0. Weight by those lengths.
  const auto start = [&](std::uint64_t k) {
    return k == 0 ? std::uint64_t{1} : static_cast<std::uint64_t>(std::ceil(static_cast<double>(k) / rate));
  };
  double sum = 0;
  for (std::uint64_t k = 0;; ++k) {
    const std::uint64_t lo = std::max<std::uint64_t>(start(k), 1);
    if (lo > distinct) break;
    // Past the longest histogram every replica is flat: the rest is one segment.
    const std::uint64_t hi = k + 1 >= ks ? distinct + 1 : std::min(start(k + 1), distinct + 1);
    if (hi <= lo) continue;
    // Sums of the differences from the first replica (shifted data): no cancellation between two large
    // sums, and exactly 0 when the replicas agree (the plain sums of x and x^2 left a spread of up to
    // 1.2e-8 there at -O2, 2026-12-05: the square root of their rounding).
    const double x0 = replicas[0].miss_ratio(lo);
    double m = 0, m2 = 0;
    for (const auto& r : replicas) {
      const double d = r.miss_ratio(lo) - x0;
      m += d, m2 += d * d;
    }
    const double n = static_cast<double>(replicas.size());
    const double sd = std::sqrt(std::max(0.0, (m2 - m * m / n) / (n - 1)));
    sum += sd * static_cast<double>(hi - lo);
    if (sd > e.max_sd) e.max_sd = sd, e.max_at = lo;
    if (hi == distinct + 1) break;
  }
  e.mean_sd = sum / static_cast<double>(distinct);
  return e;
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
