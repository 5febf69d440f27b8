// The level core, instantiated once per policy (from the table in registry.cc).
#pragma once

#include <algorithm>
#include <cstring>
#include <utility>

#include "core/error.h"
#include "cache_sim/detail/slot_map.h"
#include "cache_sim/level.h"

namespace ip::cache::detail {

template <class T>
void grow_exact(std::vector<T>& v, std::size_t n) {
  v.reserve(n);  // exactly n: the bytes reported are the bytes held
  v.resize(n);
}

template <EvictionPolicy P>
class LevelImpl final : public Level {
 public:
  LevelImpl(std::string name, const Capacity& cap, P policy, bool keep_touches)
      : Level(std::move(name), cap), policy_(std::move(policy)), keep_touches_(keep_touches) {}

  bool needs_future() const override { return cache::needs_future<P>(); }

  using Level::find;
  using Level::insert;

  Slot find(std::uint64_t id, std::uint64_t h) const override {
    return map_.find(id, h, [this](Slot s) { return entries_[s].id(); });
  }

  void hit(Slot s, std::int64_t next, float score) override {
    if (keep_touches_) next_[s] = next, score_[s] = score;
    policy_.on_hit(s, Touch{tick_, next, score});
  }

  std::size_t insert(std::uint64_t id, std::uint64_t h, std::uint32_t size, std::int64_t next, float score,
                     std::vector<Victim>* out) override {
    IP_REQUIRE(fits(size), "level '{}': object {} of {} bytes is larger than the level", policy_name_, id, size);
    std::size_t evicted = 0;
    while (cap_.bytes ? used_ + size > cap_.value : count_ >= cap_.value) {
      const Slot v = policy_.victim();
      const Victim gone = victim_of(v);
      if (out) out->push_back(gone);
      policy_.on_remove(v);
      map_.erase(hash(gone.id), v);
      used_ -= gone.size;
      --count_;
      release(v);
      ++evicted;
    }
    const Slot s = allocate();
    entries_[s].set(id, size);
    if (keep_touches_) next_[s] = next, score_[s] = score;
    map_.insert(h, s, [this](Slot x) { return entries_[x].id(); });
    used_ += size;
    ++count_;
    policy_.on_fill(s, Touch{tick_, next, score});
    if (evicted) {
      // The level is full: later misses evict again. A pipeline of loads so that eviction does not
      // wait on memory: the next victim's entry and metadata were requested at the previous eviction,
      // so its map bucket can be requested now; the one after it gets its entry and metadata requested.
      if (const Slot v1 = policy_.peek_victim(0); v1 != kNoSlot) map_.prefetch(hash(entries_[v1].id()));
      if (const Slot v2 = policy_.peek_victim(1); v2 != kNoSlot) {
        __builtin_prefetch(entries_.data() + v2);
        policy_.prefetch(v2);
      }
    }
    return evicted;
  }

  bool erase(std::uint64_t id, Victim* removed) override {
    const std::uint64_t h = hash(id);
    const Slot s = find(id, h);
    if (s == kNoSlot) return false;
    if (removed) *removed = victim_of(s);
    policy_.on_remove(s);
    map_.erase(h, s);
    used_ -= entries_[s].size;
    --count_;
    release(s);
    return true;
  }

  void prefetch(std::uint64_t h) const override { map_.prefetch(h); }
  void prefetch_entry(std::uint64_t h) const override {
    const Slot s = map_.candidate(h);
    if (s == kNoSlot) return;
    __builtin_prefetch(entries_.data() + s);
    policy_.prefetch(s);
  }

  std::uint32_t size_of(Slot s) const override { return entries_[s].size; }
  void for_each_id(const std::function<void(std::uint64_t)>& f) const override {
    map_.for_each_slot([&](Slot s) { f(entries_[s].id()); });
  }

  std::size_t metadata_bytes() const override {
    return map_.bytes() + entries_.capacity() * sizeof(Entry) + next_.capacity() * sizeof(std::int64_t) +
           score_.capacity() * sizeof(float) + policy_.bytes();
  }

 private:
  // Id and size of a slot, packed in 12 bytes. A free slot keeps the index of the next free slot in
  // `size` (the free list).
  struct Entry {
    std::uint32_t id_part[2];
    std::uint32_t size;
    std::uint64_t id() const {
      std::uint64_t v;
      std::memcpy(&v, id_part, sizeof v);
      return v;
    }
    void set(std::uint64_t id, std::uint32_t sz) {
      std::memcpy(id_part, &id, sizeof id);
      size = sz;
    }
  };
  static_assert(sizeof(Entry) == 12);

  Slot allocate() {
    if (free_head_ != kNoSlot) {
      const Slot s = free_head_;
      free_head_ = entries_[s].size;
      return s;
    }
    if (used_slots_ == slots_) grow();
    return used_slots_++;
  }
  void release(Slot s) {
    entries_[s].size = free_head_;
    free_head_ = s;
  }
  // Doubles the slots; an entry-capacity level never holds more slots than its capacity.
  void grow() {
    std::uint64_t n = std::max<std::uint64_t>(64, std::uint64_t{slots_} * 2);
    if (!cap_.bytes) n = std::min<std::uint64_t>(n, cap_.value);
    IP_REQUIRE(n < kNoSlot && n > slots_, "level '{}': more than {} resident entries", policy_name_, kNoSlot - 1);
    slots_ = static_cast<Slot>(n);
    grow_exact(entries_, slots_);
    if (keep_touches_) grow_exact(next_, slots_), grow_exact(score_, slots_);
    policy_.resize(slots_);
    map_.reserve(slots_, [this](Slot s) { return entries_[s].id(); });
  }
  Victim victim_of(Slot s) const {
    return Victim{entries_[s].id(), entries_[s].size, keep_touches_ ? score_[s] : 1.0f, keep_touches_ ? next_[s] : -1};
  }

  P policy_;
  bool keep_touches_;
  SlotMap map_;
  std::vector<Entry> entries_;
  std::vector<std::int64_t> next_;  // kept touches (keep_touches_ only)
  std::vector<float> score_;
  Slot slots_ = 0;           // slots announced to the policy
  Slot used_slots_ = 0;      // slots [0, used_slots_) have been handed out at least once
  Slot free_head_ = kNoSlot;
};

template <EvictionPolicy P>
std::unique_ptr<Level> make_level(std::string name, const Capacity& cap, PolicyArgs& args, bool keep_touches) {
  return std::make_unique<LevelImpl<P>>(std::move(name), cap, P::make(args), keep_touches);
}

}  // namespace ip::cache::detail
