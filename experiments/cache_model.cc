#include "experiments/cache_model.h"

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
}

double cache_object_bytes(const CacheParams& p, const PooledIndex& index, Index64 attn_dim, Index64 value_dim) {
  if (p.object == "index")
    return static_cast<double>(index.rows.cols * element_bytes(index.rows.precision) + scale_bytes(index.rows.precision)) *
           index.rows_per_group();
  return static_cast<double>(index.group_size) * static_cast<double>(attn_dim + value_dim) * p.kv_bytes;
}

CacheResult simulate_cache(const CacheParams& p, const std::vector<RequestSelections>& requests) {
  CacheResult res;
  // The trace: step by step, each request's selections in selection order; ids unique per request.
  cache::Trace trace;
  Index64 steps = 0;
  for (const auto& r : requests) steps = std::max(steps, r.steps);
  for (Index64 q = 0; q < steps; ++q)
    for (std::size_t b = 0; b < requests.size(); ++b) {
      const auto& r = requests[b];
      if (q >= r.steps) continue;
      const double bytes = std::min<double>(r.object_bytes, std::numeric_limits<std::uint32_t>::max());
      for (Index64 i = 0; i < r.k_groups; ++i) {
        cache::Access a;
        a.id = (static_cast<std::uint64_t>(b) << 40) | static_cast<std::uint32_t>((*r.selected)[q * r.k_groups + i]);
        a.size = static_cast<std::uint32_t>(bytes);
        a.score = (*r.mass)[q * r.k_groups + i];
        a.request = static_cast<std::uint32_t>(b);
        a.step = static_cast<std::uint32_t>(q);
        trace.accesses.push_back(a);
      }
    }
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
  res.opt_hit_rate = kNaN;
  if (p.opt_bound) {
    std::vector<cache::LevelSpec> opt_specs;
    for (const auto& s : specs) opt_specs.push_back(as_opt(s));
    cache::Hierarchy o(opt_specs, opt);
    o.run(trace);
    for (std::size_t i = 0; i < o.levels(); ++i) res.levels[i].opt_hit_rate = o.stats(i).hit_rate();
    res.opt_hit_rate = res.accesses > 0 ? static_cast<double>(o.hits()) / res.accesses : 0.0;
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
