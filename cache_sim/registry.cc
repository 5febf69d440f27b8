#include "cache_sim/registry.h"

#include <charconv>
#include <cmath>
#include <utility>
#include <vector>

#include "core/error.h"
#include "cache_sim/detail/level_impl.h"
#include "cache_sim/policies/clock.h"
#include "cache_sim/policies/fifo.h"
#include "cache_sim/policies/lfu.h"
#include "cache_sim/policies/lru.h"
#include "cache_sim/policies/opt.h"
#include "cache_sim/policies/semantic.h"
#include "cache_sim/policies/semantic_cos.h"
#include "cache_sim/policies/sieve.h"

namespace ip::cache {

namespace {

// The table. A new policy: one file under policies/, one line here.
using detail::make_level;
constexpr PolicyInfo kPolicies[] = {
    {"lru", "least recently used", make_level<Lru>},
    {"clock", "one-bit second chance (libCacheSim semantics)", make_level<Clock>},
    {"fifo", "first in, first out", make_level<Fifo>},
    {"lfu", "fewest hits while resident; ties: least recently used", make_level<Lfu>},
    {"sieve", "SIEVE: FIFO queue, visited bit, hand that does not move survivors", make_level<Sieve>},
    {"semantic", "lowest decayed sum of access scores; semantic(decay=0.99)", make_level<Semantic>},
    {"semantic-cos", "lowest score of the latest access (no sum, no decay); for cache.relevance = cosine",
     make_level<SemanticCos>},
    {"opt", "Belady: next use farthest in the future (needs the whole trace)", make_level<Opt>},
};

std::string trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return std::string(s);
}

}  // namespace

double PolicyArgs::get(const std::string& key, double fallback) {
  for (std::size_t i = 0; i < kv_.size(); ++i) {
    if (kv_[i].first != key) continue;
    used_[i] = true;
    const std::string& v = kv_[i].second;
    double x = 0;
    const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
    IP_REQUIRE(ec == std::errc() && end == v.data() + v.size() && std::isfinite(x),
               "policy '{}': parameter {}='{}' is not a number", policy_, key, v);
    return x;
  }
  return fallback;
}

void PolicyArgs::finish() const {
  for (std::size_t i = 0; i < kv_.size(); ++i)
    IP_REQUIRE(used_[i], "policy '{}' has no parameter '{}'", policy_, kv_[i].first);
}

std::span<const PolicyInfo> policy_table() { return kPolicies; }

std::string policy_names() {
  std::string out;
  for (const auto& p : kPolicies) out += (out.empty() ? "" : ", ") + std::string(p.name);
  return out;
}

namespace {

struct ParsedSpec {
  const PolicyInfo* info;
  PolicyArgs args;
};

ParsedSpec parse_policy(std::string_view spec) {
  const std::string text(spec);
  std::string_view name = spec;
  std::vector<std::pair<std::string, std::string>> kv;
  if (const auto open = spec.find('('); open != std::string_view::npos) {
    IP_REQUIRE(spec.back() == ')', "policy '{}': expected NAME(key=value,...)", text);
    name = spec.substr(0, open);
    std::string_view inner = spec.substr(open + 1, spec.size() - open - 2);
    while (!inner.empty()) {
      const auto comma = inner.find(',');
      const std::string_view item = inner.substr(0, comma);
      const auto eq = item.find('=');
      IP_REQUIRE(eq != std::string_view::npos, "policy '{}': parameter '{}' is not key=value", text, trim(item));
      kv.emplace_back(trim(item.substr(0, eq)), trim(item.substr(eq + 1)));
      if (comma == std::string_view::npos) break;
      inner.remove_prefix(comma + 1);
    }
  }
  const std::string n = trim(name);
  for (const auto& p : kPolicies)
    if (n == p.name) return ParsedSpec{&p, PolicyArgs(n, std::move(kv))};
  throw Error(fmt::format("unknown policy '{}' (known: {})", n, policy_names()));
}

}  // namespace

void check_policy(std::string_view spec) {
  ParsedSpec p = parse_policy(spec);
  p.info->make(std::string(spec), Capacity{1, false}, p.args, false);
}

std::unique_ptr<Level> make_level(const LevelSpec& spec, bool keep_touches) {
  ParsedSpec p = parse_policy(spec.policy);
  IP_REQUIRE(spec.capacity.value > 0, "level '{}': capacity must be positive", spec.policy);
  return p.info->make(spec.policy, spec.capacity, p.args, keep_touches);
}

}  // namespace ip::cache
