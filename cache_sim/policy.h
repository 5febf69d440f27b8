// The interface between the simulator core and an eviction policy.
//
// The core (Level) owns the id -> slot map, the sizes, the occupancy and all accounting; a policy
// only keeps its own per-slot metadata, answers "which victim?" and notes accesses:
//   on_fill(s, t)  the object just stored in slot s (a miss that was admitted, or a demotion);
//   on_hit(s, t)   an access found the object in slot s;
//   on_remove(s)   slot s leaves the level (after victim() chose it, or an invalidation/promotion);
//   victim()       a resident slot to evict; the core then calls on_remove on it.
// Slots are dense indices [0, slots); resize() announces more of them before they are used.
// peek_victim(k) and prefetch(s) are hints for speed only, never for results: the slot victim()
// would most likely choose now (k = 0) and the one after (k = 1), without changing anything
// (kNoSlot: no guess); and "start loading slot s's metadata".
//
// A policy is a plain class satisfying EvictionPolicy, with a static make(PolicyArgs&). The core is a
// template instantiated once per policy (detail/level_impl.h) from the explicit table in registry.cc,
// so these calls inline. (With virtual calls, as in the STYLE.md sketch, a miss made six indirect
// calls, a large share of the ~400 instructions an access then took; see bench/cache_bench.cc.)
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace ip::cache {

using Slot = std::uint32_t;
inline constexpr Slot kNoSlot = UINT32_MAX;

// What a policy may know of an access.
struct Touch {
  std::uint64_t tick = 0;   // accesses that have reached this level so far, this one included
  std::int64_t next = -1;   // trace index of the next access to this object (-1: none); for opt
  float score = 1.0f;       // relevance carried by the access (attention mass); for semantic
};

// Parameters of a policy spec such as "semantic(decay=0.95)". A factory reads the ones it knows with
// get(); finish() then rejects any it did not read, naming it.
class PolicyArgs {
 public:
  PolicyArgs(std::string policy, std::vector<std::pair<std::string, std::string>> kv)
      : policy_(std::move(policy)), kv_(std::move(kv)), used_(kv_.size(), false) {}
  // The value of `key` as a number, or `fallback` when absent; a malformed number is an error.
  double get(const std::string& key, double fallback);
  void finish() const;
  const std::string& policy() const { return policy_; }

 private:
  std::string policy_;
  std::vector<std::pair<std::string, std::string>> kv_;
  std::vector<bool> used_;
};

template <class P>
concept EvictionPolicy = requires(P p, const P cp, Slot s, const Touch& t, PolicyArgs& args) {
  { P::make(args) } -> std::same_as<P>;
  p.resize(s);
  p.on_fill(s, t);
  p.on_hit(s, t);
  p.on_remove(s);
  { p.victim() } -> std::same_as<Slot>;
  { cp.peek_victim(0) } -> std::same_as<Slot>;
  cp.prefetch(s);
  { cp.bytes() } -> std::convertible_to<std::size_t>;
};

// True for policies that read Touch::next (the simulator then precomputes next uses).
template <class P>
constexpr bool needs_future() {
  if constexpr (requires { P::kNeedsFuture; }) return P::kNeedsFuture;
  else return false;
}

}  // namespace ip::cache
