// lru: evict the least recently used entry. An intrusive list over slots, most recent at the front:
// a fill or a hit moves the slot to the front, the victim is the back. 8 bytes per slot.
#pragma once

#include "cache_sim/detail/slot_list.h"
#include "cache_sim/policy.h"

namespace ip::cache {

class Lru {
 public:
  static Lru make(PolicyArgs& args) {
    args.finish();
    return Lru();
  }
  void resize(Slot slots) { list_.resize(slots); }
  void on_fill(Slot s, const Touch&) { list_.push_front(s); }
  void on_hit(Slot s, const Touch&) { list_.move_to_front(s); }
  void on_remove(Slot s) { list_.remove(s); }
  Slot victim() { return list_.back(); }
  std::size_t bytes() const { return list_.bytes(); }
  Slot peek_victim(int k) const {
    const Slot v = list_.back();
    return k == 0 || v == kNoSlot ? v : list_.newer(v);
  }
  void prefetch(Slot s) const { list_.prefetch(s); }
  // Once s's node is loaded: the neighbours a hit on s rewrites (replay_dense, a quarter ahead). Only
  // for lists larger than kNeighboursAbove slots: measured (bench/RESULTS.md), it helped at 10^6
  // entries and not at 10^5, where the whole list (800 KB) stays in the core's L2.
  static constexpr Slot kNeighboursAbove = Slot{1} << 18;
  void prefetch_hit(Slot s) const {
    if (list_.slots() > kNeighboursAbove) list_.prefetch_neighbours(s);
  }

 private:
  detail::SlotList list_;
};

}  // namespace ip::cache
