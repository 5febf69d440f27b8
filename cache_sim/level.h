// One cache level: a policy and a capacity (entries or bytes). The level owns the id -> slot map, the
// object ids and sizes, the occupancy; the policy only ranks. The hierarchy owns the statistics.
//
// Level holds everything that does not depend on the policy (lookups are plain inline calls);
// make_level() builds the LevelImpl<P> of the spec's policy (detail/level_impl.h, one instantiation
// per policy), whose hit/insert/erase call the policy inline — one virtual call per operation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cache_sim/capacity.h"
#include "cache_sim/detail/hash.h"
#include "cache_sim/detail/prefetch.h"
#include "cache_sim/detail/slot_map.h"
#include "cache_sim/policy.h"
#include "cache_sim/trace.h"

namespace ip::cache {

// An entry that left a level, with what a lower level needs to store it (exclusive mode).
struct Victim {
  std::uint64_t id;
  std::uint32_t size;
  float score;        // score of the last access to it (1 unless the level keeps touches)
  std::int64_t next;  // next use (-1 unless the level keeps touches)
};

class Level {
 public:
  virtual ~Level() = default;

  const std::string& policy_name() const { return policy_name_; }
  const Capacity& capacity() const { return cap_; }
  virtual bool needs_future() const = 0;

  // Counts an access reaching this level (the policies' clock).
  void arrive() { ++tick_; }
  std::uint64_t tick() const { return tick_; }

  // The hash every lookup uses; the hierarchy computes it once per access for all levels.
  static std::uint64_t hash(std::uint64_t id) { return detail::table_hash(id); }

  // Dense ids (a prepared trace, prepared.h): every id is below `universe` (< 2^32), so entries keep
  // 32-bit ids for good (a level on a trace's own ids keeps them only until an id of 2^32 or more
  // comes: stride()); with `array`, the id -> slot map is a plain array of
  // `universe` slots (4 bytes per distinct id of the trace) instead of the hash map, and find() and
  // insert() look the id up there and ignore h. `uniform_size` > 0: every object of the trace has that
  // size, so entries keep no size (4 bytes a slot). Only on an empty level. (Without it, a level keeps
  // no sizes for as long as every object it stores has the size of the first: stride().) While sizes
  // are uniform, a byte-capacity level never has more slots than the objects it can hold.
  void use_dense_ids(std::size_t universe, bool array, std::uint32_t uniform_size = 0);
  // The id -> slot map is the array.
  bool dense() const { return dense_; }
  // What prefetch() and prefetch_entry() take for `id`: its hash, or the id itself with dense ids.
  std::uint64_t key(std::uint64_t id) const { return dense_ ? id : hash(id); }

  Slot find(std::uint64_t id, std::uint64_t h) const {
    if (dense_) return id < slot_of_.size() ? slot_of_[id] : kNoSlot;
    return map_.find(id, h, [this](Slot s) { return id_of(s); });
  }
  Slot find(std::uint64_t id) const { return find(id, key(id)); }
  bool contains(std::uint64_t id) const { return find(id) != kNoSlot; }
  // False when the object is larger than a byte-capacity level: it bypasses the level.
  bool fits(std::uint32_t size) const { return !cap_.bytes || size <= cap_.value; }

  virtual void hit(Slot s, std::int64_t next, float score) = 0;
  // Stores `id` (absent, fits; h = hash(id), ignored with the array), evicting first; the victims are
  // appended to `out` when not null. Returns how many were evicted.
  virtual std::size_t insert(std::uint64_t id, std::uint64_t h, std::uint32_t size, std::int64_t next, float score,
                             std::vector<Victim>* out) = 0;
  std::size_t insert(std::uint64_t id, std::uint32_t size, std::int64_t next, float score, std::vector<Victim>* out) {
    return insert(id, key(id), size, next, score, out);
  }
  // Removes `id` when present (invalidation, promotion); returns whether it was.
  virtual bool erase(std::uint64_t id, Victim* removed = nullptr) = 0;

  // Replays accesses t[0..n) through this level alone (nine or inclusive mode, a one-level hierarchy):
  // the whole loop inlined with the policy, the id -> slot map read `ahead` accesses early and the
  // entry and policy metadata ahead / 2 early. next: next uses (opt), or null. The counts are those of
  // n accesses to hit/insert. replay() takes the trace's own ids (hash map; not with dense ids);
  // replay_dense() the dense ids ids[0..n) of a prepared trace, looked up in the id -> slot array
  // when the level uses one (use_dense_ids) and in the hash map otherwise.
  struct Replay {
    std::uint64_t hits = 0, hit_bytes = 0, misses = 0, miss_bytes = 0, evictions = 0, bypasses = 0;
  };
  virtual Replay replay(const Access* t, const std::int64_t* next, std::size_t n, std::size_t ahead) = 0;
  virtual Replay replay_dense(const std::uint32_t* ids, const Access* t, const std::int64_t* next, std::size_t n,
                              std::size_t ahead) = 0;

  // Whether prefetching this level's metadata pays: only once it is larger than a core's L2 could
  // hold (kPrefetchAbove bytes; updated as the level grows). A hierarchy skips prefetch() and
  // prefetch_entry() on the other levels: their metadata stays in cache, and the calls only cost
  // (default hierarchy: 10% faster without them, bench/RESULTS.md).
  static constexpr std::size_t kPrefetchAbove = std::size_t{1} << 20;
  bool prefetching() const { return prefetching_; }

  // Start loading what an access with key h = key(id) will read, in two stages that the trace replay
  // issues some accesses ahead: the map buckets, then (once those are in cache) the entry and policy
  // metadata. With the array a hit reads no entry (nothing to confirm), so only the policy's metadata
  // is loaded.
  void prefetch(std::uint64_t h) const {
    if (dense_) __builtin_prefetch(slot_of_.data() + h);
    else map_.prefetch(h);
  }
  // The same, as a prefetch the compiler cannot delete (detail/prefetch.h): for loops of prefetches.
  void prefetch_kept(std::uint64_t h) const {
    if (!dense_) map_.prefetch_kept(h);
    else if (h < slot_of_.size()) detail::prefetch_kept(slot_of_.data() + h);
  }
  void prefetch_entry(std::uint64_t h) const {
    if (dense_) {
      const Slot s = slot_of_[h];
      if (s != kNoSlot) prefetch_policy(s);
      return;
    }
    const Slot s = map_.candidate(h);
    if (s == kNoSlot) return;
    __builtin_prefetch(entry(s));
    prefetch_policy(s);
  }

  std::size_t entries() const { return count_; }
  std::uint64_t used_bytes() const { return used_; }
  std::uint32_t size_of(Slot s) const { return size_word(s); }
  void for_each_id(const std::function<void(std::uint64_t)>& f) const;

  // Bytes of metadata held now: map, ids and sizes, kept touches and the policy's own. With dense ids
  // the map is the id -> slot array, sized by the trace's distinct ids, not by the resident entries:
  // universe_bytes() is that part, resident_bytes() the rest (what grows with the entries held).
  std::size_t metadata_bytes() const { return resident_bytes() + universe_bytes(); }
  std::size_t resident_bytes() const;
  std::size_t universe_bytes() const { return slot_of_.capacity() * sizeof(Slot); }

 protected:
  Level(std::string policy_name, const Capacity& cap, bool keep_touches)
      : policy_name_(std::move(policy_name)), cap_(cap), keep_touches_(keep_touches) {}

  virtual void prefetch_policy(Slot s) const = 0;
  virtual void resize_policy(Slot slots) = 0;
  virtual std::size_t policy_bytes() const = 0;

  // Id and size of each slot, packed in words_: the id in one word while every id stored so far is
  // below 2^32 (narrow_: always with a prepared trace's dense ids), in two once a larger one comes;
  // then the size, except while every object stored so far has had one size (uniform_size_: the id
  // alone). So 12 bytes a slot, 8 with one size or narrow ids, 4 with both. Each switch rewrites
  // every slot once (relayout()). A free slot keeps the index of the next free slot in its last word
  // (the free list).
  std::uint32_t stride() const { return (narrow_ ? 1 : 2) + (uniform_size_ ? 0 : 1); }
  // Before storing `id`: an id of 2^32 or more gives every slot a 64-bit id (once per level). While
  // the ids are narrow a lookup of a wide id finds nothing: no stored id equals it.
  void settle_id(std::uint64_t id) {
    if (narrow_ && (id >> 32)) relayout(false, uniform_size_);
  }
  // Before storing an object of `size`: the first object of a new level sets the one size; an
  // object of another size gives every slot its size word (relayout(), once per level).
  void settle_size(std::uint32_t size) {
    if (size == uniform_size_) return;
    if (!sizes_settled_) {
      sizes_settled_ = true;
      if (slots_ == 0) {
        uniform_size_ = size;  // 0: sizes kept from the start
        return;
      }
    }
    if (uniform_size_) relayout(narrow_, 0);
  }
  // Rewrites every slot for 32-bit ids or not (narrow) and for no size words (uniform_size > 0) or a
  // size word per slot (0): ids and sizes kept, free slots keep their place in the free list.
  void relayout(bool narrow, std::uint32_t uniform_size);
  const std::uint32_t* entry(Slot s) const { return words_.data() + std::size_t{s} * stride(); }
  std::uint64_t id_of(Slot s) const {
    const std::uint32_t* w = entry(s);
    if (narrow_) return w[0];
    std::uint64_t v;
    std::memcpy(&v, w, sizeof v);
    return v;
  }
  std::uint32_t size_word(Slot s) const { return uniform_size_ ? uniform_size_ : entry(s)[stride() - 1]; }
  std::uint32_t& link_word(Slot s) { return words_[std::size_t{s} * stride() + stride() - 1]; }
  void set_entry(Slot s, std::uint64_t id, std::uint32_t size) {
    std::uint32_t* w = words_.data() + std::size_t{s} * stride();
    if (narrow_) w[0] = static_cast<std::uint32_t>(id);
    else std::memcpy(w, &id, sizeof id);
    if (!uniform_size_) w[stride() - 1] = size;
  }

  // The id -> slot map, hash map or dense array (h = key(id)).
  void map_insert(std::uint64_t h, Slot s) {
    if (dense_) slot_of_[h] = s;
    else map_.insert(h, s, [this](Slot x) { return id_of(x); });
  }
  void map_erase(std::uint64_t h, Slot s) {
    if (dense_) slot_of_[h] = kNoSlot;
    else map_.erase(h, s);
  }
  void map_prefetch(std::uint64_t h) const { prefetch(h); }

  bool full_for(std::uint32_t size) const { return cap_.bytes ? used_ + size > cap_.value : count_ >= cap_.value; }
  Slot allocate() {
    if (free_head_ != kNoSlot) {
      const Slot s = free_head_;
      free_head_ = link_word(s);
      return s;
    }
    if (used_slots_ == slots_) grow();
    return used_slots_++;
  }
  void release(Slot s) {
    link_word(s) = free_head_;
    free_head_ = s;
  }
  void grow();
  Victim victim_of(Slot s) const {
    return Victim{id_of(s), size_word(s), keep_touches_ ? score_[s] : 1.0f, keep_touches_ ? next_[s] : -1};
  }

  std::string policy_name_;
  Capacity cap_;
  bool keep_touches_;
  std::uint64_t tick_ = 0;
  std::size_t count_ = 0;
  std::uint64_t used_ = 0;
  detail::SlotMap map_;
  bool dense_ = false;
  std::vector<Slot> slot_of_;  // dense ids: slot of each id, kNoSlot when absent
  bool prefetching_ = false;          // see prefetching()
  bool narrow_ = true;                // 32-bit ids: every id stored so far is below 2^32 (see stride())
  std::uint32_t uniform_size_ = 0;    // > 0: every object so far has had this size (entries keep no size)
  bool sizes_settled_ = false;        // the first object (or the prepared trace) has decided uniform_size_
  std::vector<std::uint32_t> words_;  // stride() words per slot
  std::vector<std::int64_t> next_;  // kept touches (keep_touches_ only)
  std::vector<float> score_;
  Slot slots_ = 0;           // slots announced to the policy
  Slot used_slots_ = 0;      // slots [0, used_slots_) have been handed out at least once
  Slot free_head_ = kNoSlot;
};

// The level for a spec. keep_touches: remember per slot the next use and score of the last access,
// so that victims carry them (exclusive mode moves entries between levels).
std::unique_ptr<Level> make_level(const LevelSpec& spec, bool keep_touches = false);

}  // namespace ip::cache
