// The policy-dependent part of a level, instantiated once per policy (from the table in registry.cc).
#pragma once

#include <algorithm>
#include <utility>

#include "core/error.h"
#include "cache_sim/level.h"

namespace ip::cache::detail {

template <EvictionPolicy P>
class LevelImpl final : public Level {
 public:
  LevelImpl(std::string name, const Capacity& cap, P policy, bool keep_touches)
      : Level(std::move(name), cap, keep_touches), policy_(std::move(policy)) {}

  using Level::insert;
  bool needs_future() const override { return cache::needs_future<P>(); }

  void hit(Slot s, std::int64_t next, float score) override {
    if (keep_touches_) next_[s] = next, score_[s] = score;
    policy_.on_hit(s, Touch{tick_, next, score});
  }

  std::size_t insert(std::uint64_t id, std::uint64_t h, std::uint32_t size, std::int64_t next, float score,
                     std::vector<Victim>* out) override {
    IP_REQUIRE(fits(size), "level '{}': object {} of {} bytes is larger than the level", policy_name_, id, size);
    settle_size(size);
    settle_id(id);
    std::size_t evicted = 0;
    Slot s = kNoSlot;  // the last victim's slot is reused for the new entry
    while (full_for(size)) {
      if (s != kNoSlot) release(s);
      s = policy_.victim();
      const std::uint64_t gone = id_of(s);
      if (out) out->push_back(victim_of(s));
      policy_.on_remove(s);
      map_erase(key(gone), s);
      used_ -= size_word(s);
      --count_;
      ++evicted;
    }
    if (s == kNoSlot) s = allocate();
    set_entry(s, id, size);
    if (keep_touches_) next_[s] = next, score_[s] = score;
    map_insert(dense_ ? id : h, s);
    used_ += size;
    ++count_;
    policy_.on_fill(s, Touch{tick_, next, score});
    if (evicted) {
      // The level is full: later misses evict again. A pipeline of loads so that eviction does not
      // wait on memory. A policy that knows its victims ahead (lru's log) says which; otherwise the
      // next victim's entry and metadata were requested at the previous eviction, so its map bucket
      // can be requested now, and the one after it gets its entry and metadata requested.
      bool ahead = false;
      if constexpr (requires { policy_.upcoming([](Slot) {}, [](Slot) {}); })
        ahead = policy_.upcoming([this](Slot v) { detail::prefetch_kept(entry(v)); },
                                 [this](Slot v) { Level::prefetch_kept(key(id_of(v))); });
      if (!ahead) {
        if (const Slot v1 = policy_.peek_victim(0); v1 != kNoSlot) map_prefetch(key(id_of(v1)));
        if (const Slot v2 = policy_.peek_victim(1); v2 != kNoSlot) {
          __builtin_prefetch(entry(v2));
          policy_.prefetch(v2);
        }
      }
    }
    return evicted;
  }

  Replay replay(const Access* t, const std::int64_t* next, std::size_t n, std::size_t ahead) override {
    IP_REQUIRE(!dense_ && ahead >= 2, "level '{}': replay takes a level without dense ids", policy_name_);
    return replay_loop<false>([t](std::size_t i) -> std::uint64_t { return t[i].id; }, t, next, n, ahead);
  }

  Replay replay_dense(const std::uint32_t* ids, const Access* t, const std::int64_t* next, std::size_t n,
                      std::size_t ahead) override {
    IP_REQUIRE(ahead >= 2, "level '{}': replay_dense needs a prefetch distance of at least 2", policy_name_);
    const auto id_at = [ids](std::size_t i) -> std::uint64_t { return ids[i]; };
    return dense_ ? replay_loop<true>(id_at, t, next, n, ahead) : replay_loop<false>(id_at, t, next, n, ahead);
  }

  bool erase(std::uint64_t id, Victim* removed) override {
    const std::uint64_t h = key(id);
    const Slot s = find(id, h);
    if (s == kNoSlot) return false;
    if (removed) *removed = victim_of(s);
    policy_.on_remove(s);
    map_erase(h, s);
    used_ -= size_word(s);
    --count_;
    release(s);
    return true;
  }

 private:
  // The replay loop, for the id -> slot array (Array: the id indexes it) or the hash map (the id's
  // hash, table_hash, recomputed where needed: four instructions, cheaper than keeping a ring).
  template <bool Array, class IdAt>
  Replay replay_loop(IdAt id_at, const Access* t, const std::int64_t* next, std::size_t n, std::size_t ahead) {
    Replay r;
    const Slot* slot_of = slot_of_.data();
    const auto id_at_slot = [this](Slot s) { return id_of(s); };
    // Stage 1: the map's bucket (array element or hash group).
    const auto stage1 = [&](std::size_t i) {
      if constexpr (Array) __builtin_prefetch(slot_of + id_at(i));
      else map_.prefetch(hash(id_at(i)));
    };
    // The slot the map holds (Array) or probably holds (hash map: the first tag match, unconfirmed)
    // for access i, once its bucket is in cache.
    const auto guess = [&](std::size_t i) -> Slot {
      if constexpr (Array) return slot_of[id_at(i)];
      else return map_.candidate(hash(id_at(i)));
    };
    for (std::size_t i = 0; i < std::min(ahead, n); ++i) stage1(i);
    for (std::size_t i = 0; i < n; ++i) {
      if (i + ahead < n) stage1(i + ahead);
      if (i + ahead / 2 < n)
        if (const Slot p = guess(i + ahead / 2); p != kNoSlot) {
          if constexpr (!Array) __builtin_prefetch(entry(p));  // the id that confirms a match
          policy_.prefetch(p);
        }
      ++tick_;
      const std::uint64_t id = id_at(i);
      const Access& a = t[i];
      const std::int64_t nx = next ? next[i] : -1;
      std::uint64_t h = 0;
      Slot s;
      if constexpr (Array) {
        s = slot_of[id];
      } else {
        h = hash(id);
        s = map_.find(id, h, id_at_slot);
      }
      if (s != kNoSlot) {
        ++r.hits;
        r.hit_bytes += a.size;
        if (keep_touches_) next_[s] = nx, score_[s] = a.score;
        policy_.on_hit(s, Touch{tick_, nx, a.score});
        continue;
      }
      ++r.misses;
      r.miss_bytes += a.size;
      if (!fits(a.size)) {
        ++r.bypasses;
        continue;
      }
      r.evictions += LevelImpl::insert(id, h, a.size, nx, a.score, nullptr);
    }
    return r;
  }

  void prefetch_policy(Slot s) const override { policy_.prefetch(s); }
  void resize_policy(Slot slots) override { policy_.resize(slots); }
  std::size_t policy_bytes() const override { return policy_.bytes(); }

  P policy_;
};

template <EvictionPolicy P>
std::unique_ptr<Level> make_level(std::string name, const Capacity& cap, PolicyArgs& args, bool keep_touches) {
  return std::make_unique<LevelImpl<P>>(std::move(name), cap, P::make(args), keep_touches);
}

}  // namespace ip::cache::detail
