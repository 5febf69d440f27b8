// One cache level: a policy and a capacity (entries or bytes). The level owns the id -> slot map, the
// object sizes, the occupancy; the policy only ranks. The hierarchy owns the statistics.
//
// Level is the interface the hierarchy sees; make_level() builds the implementation for the spec's
// policy (detail/level_impl.h, one instantiation per policy), so per-access calls into the policy
// inline and only the level's own operations go through a virtual call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cache_sim/capacity.h"
#include "cache_sim/detail/hash.h"
#include "cache_sim/policy.h"

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
  static std::uint64_t hash(std::uint64_t id) { return detail::mix64(id); }

  virtual Slot find(std::uint64_t id, std::uint64_t h) const = 0;
  Slot find(std::uint64_t id) const { return find(id, hash(id)); }
  bool contains(std::uint64_t id) const { return find(id) != kNoSlot; }
  // False when the object is larger than a byte-capacity level: it bypasses the level.
  bool fits(std::uint32_t size) const { return !cap_.bytes || size <= cap_.value; }

  virtual void hit(Slot s, std::int64_t next, float score) = 0;
  // Stores `id` (absent, fits), evicting first; the victims are appended to `out` when not null.
  // Returns how many were evicted.
  virtual std::size_t insert(std::uint64_t id, std::uint64_t h, std::uint32_t size, std::int64_t next, float score,
                             std::vector<Victim>* out) = 0;
  std::size_t insert(std::uint64_t id, std::uint32_t size, std::int64_t next, float score, std::vector<Victim>* out) {
    return insert(id, hash(id), size, next, score, out);
  }
  // Removes `id` when present (invalidation, promotion); returns whether it was.
  virtual bool erase(std::uint64_t id, Victim* removed = nullptr) = 0;

  // Start loading what an access to `id` will read, in two stages that the trace replay issues some
  // accesses ahead: the map buckets, then (once those are in cache) the entry and policy metadata.
  virtual void prefetch(std::uint64_t h) const = 0;
  virtual void prefetch_entry(std::uint64_t h) const = 0;

  std::size_t entries() const { return count_; }
  std::uint64_t used_bytes() const { return used_; }
  virtual std::uint32_t size_of(Slot s) const = 0;
  virtual void for_each_id(const std::function<void(std::uint64_t)>& f) const = 0;

  // Bytes of metadata held now: map, ids and sizes, kept touches and the policy's own.
  virtual std::size_t metadata_bytes() const = 0;

 protected:
  Level(std::string policy_name, const Capacity& cap) : policy_name_(std::move(policy_name)), cap_(cap) {}

  std::string policy_name_;
  Capacity cap_;
  std::uint64_t tick_ = 0;
  std::size_t count_ = 0;
  std::uint64_t used_ = 0;
};

// The level for a spec. keep_touches: remember per slot the next use and score of the last access,
// so that victims carry them (exclusive mode moves entries between levels).
std::unique_ptr<Level> make_level(const LevelSpec& spec, bool keep_touches = false);

}  // namespace ip::cache
