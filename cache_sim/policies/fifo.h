// fifo: evict the entry stored longest ago; hits change nothing. 8 bytes per slot.
#pragma once

#include "cache_sim/detail/slot_list.h"
#include "cache_sim/policy.h"

namespace ip::cache {

class Fifo {
 public:
  static Fifo make(PolicyArgs& args) {
    args.finish();
    return Fifo();
  }
  void resize(Slot slots) { list_.resize(slots); }
  void on_fill(Slot s, const Touch&) { list_.push_front(s); }
  void on_hit(Slot, const Touch&) {}
  void on_remove(Slot s) { list_.remove(s); }
  Slot victim() { return list_.back(); }
  std::size_t bytes() const { return list_.bytes(); }
  Slot peek_victim(int k) const {
    const Slot v = list_.back();
    return k == 0 || v == kNoSlot ? v : list_.newer(v);
  }
  void prefetch(Slot s) const { list_.prefetch(s); }

 private:
  detail::SlotList list_;
};

}  // namespace ip::cache
