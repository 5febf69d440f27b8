// clock: one-bit second chance, with exactly the semantics of libCacheSim's Clock (the golden miss
// counts in ../shared/data/README.md): entries form a queue in insertion order; a miss inserts at the
// front with the bit clear; a hit sets the bit without moving the entry; to evict, the hand looks at
// the oldest entry: a set bit is cleared and the entry goes back to the front (its second chance), a
// clear bit makes it the victim. 9 bytes per slot (two links and the bit).
#pragma once

#include <cstdint>
#include <vector>

#include "cache_sim/detail/slot_list.h"
#include "cache_sim/policy.h"

namespace ip::cache {

class Clock {
 public:
  static Clock make(PolicyArgs& args) {
    args.finish();
    return Clock();
  }
  void resize(Slot slots) {
    list_.resize(slots);
    ref_.reserve(slots);
    ref_.resize(slots, 0);
  }
  void on_fill(Slot s, const Touch&) {
    ref_[s] = 0;
    list_.push_front(s);
  }
  void on_hit(Slot s, const Touch&) { ref_[s] = 1; }
  void on_remove(Slot s) { list_.remove(s); }
  Slot victim() {
    for (;;) {
      const Slot s = list_.back();
      if (!ref_[s]) return s;
      ref_[s] = 0;
      list_.move_to_front(s);
    }
  }
  std::size_t bytes() const { return list_.bytes() + ref_.capacity(); }
  Slot peek_victim(int k) const {
    const Slot v = list_.back();
    return k == 0 || v == kNoSlot ? v : list_.newer(v);
  }
  void prefetch(Slot s) const {
    list_.prefetch(s);
    __builtin_prefetch(ref_.data() + s);
  }

 private:
  detail::SlotList list_;
  std::vector<std::uint8_t> ref_;
};

}  // namespace ip::cache
