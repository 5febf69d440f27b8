// sieve: SIEVE (Zhang et al., NSDI 2024). A FIFO queue with one visited bit per entry: a miss inserts
// at the front with the bit clear, a hit sets the bit. The hand starts at the oldest entry and moves
// toward the front: a set bit is cleared and the hand moves on (the entry stays where it is — unlike
// clock, survivors are not moved); the first clear bit is the victim, and the hand stays just in front
// of it for the next eviction. Past the front the hand wraps to the oldest entry. 9 bytes per slot.
#pragma once

#include <cstdint>
#include <vector>

#include "cache_sim/detail/slot_list.h"
#include "cache_sim/policy.h"

namespace ip::cache {

class Sieve {
 public:
  static Sieve make(PolicyArgs& args) {
    args.finish();
    return Sieve();
  }
  void resize(Slot slots) {
    list_.resize(slots);
    visited_.reserve(slots);
    visited_.resize(slots, 0);
  }
  void on_fill(Slot s, const Touch&) {
    visited_[s] = 0;
    list_.push_front(s);
  }
  void on_hit(Slot s, const Touch&) { visited_[s] = 1; }
  void on_remove(Slot s) {
    if (hand_ == s) hand_ = list_.newer(s);
    list_.remove(s);
  }
  Slot victim() {
    Slot s = hand_ == kNoSlot ? list_.back() : hand_;
    while (visited_[s]) {
      visited_[s] = 0;
      s = list_.newer(s);
      if (s == kNoSlot) s = list_.back();
    }
    hand_ = list_.newer(s);
    return s;
  }
  std::size_t bytes() const { return list_.bytes() + visited_.capacity(); }
  Slot peek_victim(int k) const {
    const Slot v = hand_ == kNoSlot ? list_.back() : hand_;
    return k == 0 || v == kNoSlot ? v : list_.newer(v);
  }
  void prefetch(Slot s) const {
    list_.prefetch(s);
    __builtin_prefetch(visited_.data() + s);
  }

 private:
  detail::SlotList list_;
  std::vector<std::uint8_t> visited_;
  Slot hand_ = kNoSlot;  // next entry to examine; kNoSlot: start from the oldest
};

}  // namespace ip::cache
