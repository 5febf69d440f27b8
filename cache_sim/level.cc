#include "cache_sim/level.h"

#include <algorithm>

#include "core/error.h"

namespace ip::cache {

namespace {

template <class T>
void grow_exact(std::vector<T>& v, std::size_t n) {
  v.reserve(n);  // exactly n: the bytes reported are the bytes held
  v.resize(n);
}

}  // namespace

// Doubles the slots; an entry-capacity level never holds more slots than its capacity.
void Level::grow() {
  std::uint64_t n = std::max<std::uint64_t>(64, std::uint64_t{slots_} * 2);
  if (!cap_.bytes) n = std::min<std::uint64_t>(n, cap_.value);
  else if (uniform_size_) n = std::min<std::uint64_t>(n, std::max<std::uint64_t>(1, cap_.value / uniform_size_));
  IP_REQUIRE(n < kNoSlot && n > slots_, "level '{}': more than {} resident entries", policy_name_, kNoSlot - 1);
  slots_ = static_cast<Slot>(n);
  grow_exact(words_, std::size_t{slots_} * stride());
  if (keep_touches_) grow_exact(next_, slots_), grow_exact(score_, slots_);
  resize_policy(slots_);
  if (!dense_) map_.reserve(slots_, [this](Slot s) { return id_of(s); });
  prefetching_ = metadata_bytes() > kPrefetchAbove;
}

void Level::use_dense_ids(std::size_t universe, bool array, std::uint32_t uniform_size) {
  IP_REQUIRE(count_ == 0 && used_slots_ == 0 && slots_ == 0, "level '{}': dense ids need an empty level", policy_name_);
  IP_REQUIRE(universe < kNoSlot, "level '{}': {} ids is too many for dense ids", policy_name_, universe);
  narrow_ = true;
  uniform_size_ = uniform_size;
  sizes_settled_ = true;
  if (!array) return;
  dense_ = true;
  slot_of_.assign(universe, kNoSlot);
  slot_of_.shrink_to_fit();
  prefetching_ = metadata_bytes() > kPrefetchAbove;
}

// Reads every slot in the present layout and writes it in the new one. Slots never handed out hold
// nothing, and are copied like the others; a free slot's link moves to the new layout's last word.
void Level::relayout(bool narrow, std::uint32_t uniform_size) {
  const std::size_t to = (narrow ? 1 : 2) + (uniform_size ? 0 : 1);
  std::vector<std::uint32_t> out;
  out.reserve(std::size_t{slots_} * to);  // exactly: the bytes reported are the bytes held
  out.resize(std::size_t{slots_} * to);
  for (Slot s = 0; s < slots_; ++s) {
    std::uint32_t* w = out.data() + std::size_t{s} * to;
    const std::uint64_t id = id_of(s);
    if (narrow) w[0] = static_cast<std::uint32_t>(id);
    else std::memcpy(w, &id, sizeof id);
    if (!uniform_size) w[to - 1] = size_word(s);
  }
  for (Slot s = free_head_; s != kNoSlot;) {
    const Slot next = link_word(s);  // the present layout's link
    out[std::size_t{s} * to + to - 1] = next;
    s = next;
  }
  words_ = std::move(out);
  narrow_ = narrow;
  uniform_size_ = uniform_size;
}

void Level::for_each_id(const std::function<void(std::uint64_t)>& f) const {
  if (dense_) {
    for (std::size_t id = 0; id < slot_of_.size(); ++id)
      if (slot_of_[id] != kNoSlot) f(id);
    return;
  }
  map_.for_each_slot([&](Slot s) { f(id_of(s)); });
}

std::size_t Level::resident_bytes() const {
  return (dense_ ? 0 : map_.bytes()) + words_.capacity() * sizeof(std::uint32_t) +
         next_.capacity() * sizeof(std::int64_t) + score_.capacity() * sizeof(float) + policy_bytes();
}

}  // namespace ip::cache
