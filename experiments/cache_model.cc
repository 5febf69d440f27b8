#include "experiments/cache_model.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "cache_sim/capacity.h"
#include "cache_sim/hierarchy.h"
#include "cache_sim/mrc.h"
#include "core/error.h"

namespace ip::exp {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// "semantic(decay=0.9):8MiB" -> "opt:8MiB": the same capacity under Belady's policy.
cache::LevelSpec as_opt(const cache::LevelSpec& s) {
  cache::LevelSpec o = s;
  o.policy = "opt";
  return o;
}

// Objects that all the levels together can hold when every access has the same size: the sum over levels
// of entries (entry capacity) or floor(bytes / size) (byte capacity; size 0 takes no room), at most the
// number of distinct objects. NaN when sizes differ or the trace is empty.
//
// Why one opt cache of that capacity bounds the hierarchy: in every mode an object enters the hierarchy
// only when it is accessed, and the objects resident in some level never number more than that sum; the
// union of the levels is thus a demand-fetched cache of that many objects, and an access hits some level
// exactly when it hits that union. Belady's MIN is optimal among all such caches for one object size.
double single_opt_capacity(const std::vector<cache::LevelSpec>& specs, const cache::Trace& trace,
                           const std::vector<std::int64_t>& next) {
  if (trace.accesses.empty()) return kNaN;
  const std::uint32_t size = trace.accesses.front().size;
  for (const auto& a : trace.accesses)
    if (a.size != size) return kNaN;
  std::uint64_t distinct = 0;  // objects whose last access this is: one per object
  for (const std::int64_t n : next) distinct += n < 0;
  std::uint64_t total = 0;
  for (const auto& s : specs) {
    if (!s.capacity.bytes) total += s.capacity.value;
    else total += size == 0 ? distinct : s.capacity.value / size;
    total = std::min(total, distinct);
  }
  return static_cast<double>(total);
}

}  // namespace

void validate_cache(const CacheParams& p) {
  if (!p.enabled) return;
  IP_REQUIRE(!p.levels.empty(), "cache.levels: no levels");
  for (const auto& l : p.levels) {
    try {
      cache::parse_level_spec(l);
    } catch (const std::exception& e) {
      throw Error(fmt::format("cache.levels: '{}': {}", l, e.what()));
    }
  }
  try {
    cache::parse_mode(p.mode);
  } catch (const std::exception& e) {
    throw Error(fmt::format("cache.mode: {}", e.what()));
  }
  IP_REQUIRE(p.object == "kv" || p.object == "index", "cache.object: '{}' is not one of: kv, index", p.object);
  IP_REQUIRE(p.kv_bytes >= 1 && p.kv_bytes <= 8, "cache.kv_bytes: {} (must be 1..8)", p.kv_bytes);
  IP_REQUIRE(p.relevance == "mass" || p.relevance == "cosine", "cache.relevance: '{}' is not one of: mass, cosine",
             p.relevance);
}

void validate_cache_point(const CacheParams& p) {
  if (!p.enabled) return;
  validate_cache(p);
  for (const auto& l : p.levels) {
    const std::string policy = cache::parse_level_spec(l).policy;
    IP_REQUIRE(policy.substr(0, policy.find('(')) != "semantic-cos" || p.relevance == "cosine",
               "cache.levels: '{}' ranks entries by the cosine relevance; set cache.relevance = cosine (it is '{}')", l,
               p.relevance);
  }
}

double cache_object_bytes(const CacheParams& p, const PooledIndex& index, Index64 attn_dim, Index64 value_dim) {
  if (p.object == "index")
    return static_cast<double>(index.rows.cols * element_bytes(index.rows.precision) + scale_bytes(index.rows.precision)) *
           index.rows_per_group();
  return static_cast<double>(index.group_size) * static_cast<double>(attn_dim + value_dim) * p.kv_bytes;
}

cache::Trace cache_trace(const CacheParams& p, const std::vector<RequestSelections>& requests) {
  cache::Trace trace;
  trace.has_request = trace.has_step = true;
  const bool cosine = p.relevance == "cosine";
  Index64 steps = 0;
  std::size_t total = 0;
  for (const auto& r : requests) {
    steps = std::max(steps, r.steps);
    total += static_cast<std::size_t>(r.steps * r.k_groups);
    IP_REQUIRE(!cosine || (r.similarity && r.similarity->size() == r.mass->size()),
               "cache.relevance = cosine: the pipeline recorded no similarity for a request");
  }
  trace.accesses.reserve(total);
  for (Index64 q = 0; q < steps; ++q)
    for (std::size_t b = 0; b < requests.size(); ++b) {
      const auto& r = requests[b];
      if (q >= r.steps) continue;
      const double bytes = std::min<double>(r.object_bytes, std::numeric_limits<std::uint32_t>::max());
      const std::vector<float>& score = cosine ? *r.similarity : *r.mass;
      for (Index64 i = 0; i < r.k_groups; ++i) {
        cache::Access a;
        a.id = (static_cast<std::uint64_t>(b) << 40) | static_cast<std::uint32_t>((*r.selected)[q * r.k_groups + i]);
        a.size = static_cast<std::uint32_t>(bytes);
        a.score = score[q * r.k_groups + i];
        a.request = static_cast<std::uint32_t>(b);
        a.step = static_cast<std::uint32_t>(q);
        trace.accesses.push_back(a);
      }
    }
  return trace;
}

CacheResult simulate_cache(const CacheParams& p, const std::vector<RequestSelections>& requests) {
  return simulate_cache(p, cache_trace(p, requests));
}

CacheResult simulate_cache(const CacheParams& p, const cache::Trace& trace) {
  CacheResult res;
  res.accesses = static_cast<double>(trace.accesses.size());

  std::vector<cache::LevelSpec> specs;
  for (const auto& l : p.levels) specs.push_back(cache::parse_level_spec(l));
  cache::HierarchyOptions opt;
  opt.mode = cache::parse_mode(p.mode);
  cache::Hierarchy h(specs, opt);
  h.run(trace);
  for (std::size_t i = 0; i < h.levels(); ++i) {
    const auto& s = h.stats(i);
    CacheLevelResult l;
    l.policy = h.level(i).policy_name();
    l.capacity = h.level(i).capacity().text();
    l.accesses = static_cast<double>(s.accesses);
    l.hits = static_cast<double>(s.hits);
    l.misses = static_cast<double>(s.misses);
    l.evictions = static_cast<double>(s.evictions);
    l.bytes_from_below = static_cast<double>(s.bytes_from_below);
    l.hit_rate = s.hit_rate();
    l.opt_hit_rate = kNaN;
    res.levels.push_back(l);
  }
  res.hit_rate = res.accesses > 0 ? static_cast<double>(h.hits()) / res.accesses : 0.0;
  res.opt_hit_rate = res.opt_single_hit_rate = res.opt_single_entries = kNaN;
  if (p.opt_bound) {
    const std::vector<std::int64_t> next = cache::next_uses(trace.accesses);
    std::vector<cache::LevelSpec> opt_specs;
    for (const auto& s : specs) opt_specs.push_back(as_opt(s));
    cache::Hierarchy o(opt_specs, opt);
    o.run(trace, &next);
    for (std::size_t i = 0; i < o.levels(); ++i) res.levels[i].opt_hit_rate = o.stats(i).hit_rate();
    res.opt_hit_rate = res.accesses > 0 ? static_cast<double>(o.hits()) / res.accesses : 0.0;
    const double single = single_opt_capacity(specs, trace, next);
    if (!std::isnan(single)) {
      res.opt_single_entries = single;
      res.opt_single_hit_rate = 0.0;
      if (single >= 1) {
        cache::Hierarchy one({cache::LevelSpec{"opt", cache::Capacity{static_cast<std::uint64_t>(single), false}}});
        one.run(trace, &next);
        res.opt_single_hit_rate = static_cast<double>(one.hits()) / res.accesses;
      }
    }
  }
  if (p.mrc && !trace.accesses.empty()) {
    // Every capacity up to 4096 entries, then about 64 per factor of two (the curve is flat past the
    // number of distinct objects).
    const cache::LruCurve curve = cache::exact_lru_curve(trace.accesses);
    for (std::uint64_t c = 1; c <= std::max<std::uint64_t>(curve.cold, 1);) {
      res.mrc_capacity.push_back(static_cast<double>(c));
      res.mrc_miss_ratio.push_back(curve.miss_ratio(c));
      c = c < 4096 ? c + 1 : c + std::max<std::uint64_t>(1, c / 64);
    }
  }
  return res;
}

}  // namespace ip::exp
