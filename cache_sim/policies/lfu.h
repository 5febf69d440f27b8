// lfu: evict the entry with the fewest hits since it was stored; ties evict the least recently used.
// Counts are forgotten when an entry leaves (in-cache LFU). A winner tree on
// (count, last-use sequence number). 13.25 bytes per slot (detail/slot_tournament.h).
#pragma once

#include <cstdint>

#include "cache_sim/detail/slot_tournament.h"
#include "cache_sim/policy.h"

namespace ip::cache {

class Lfu {
 public:
  static Lfu make(PolicyArgs& args) {
    args.finish();
    return Lfu();
  }
  void resize(Slot slots) { rank_.resize(slots); }
  void on_fill(Slot s, const Touch&) { rank_.push(s, detail::RankKey{1, rank_.next_minor()}); }
  void on_hit(Slot s, const Touch&) {
    rank_.update(s, detail::RankKey{rank_.key(s).major + 1, rank_.next_minor()});
  }
  void on_remove(Slot s) { rank_.erase(s); }
  Slot victim() { return rank_.top(); }
  std::size_t bytes() const { return rank_.bytes(); }
  Slot peek_victim(int k) const { return rank_.empty() ? kNoSlot : k == 0 ? rank_.top() : rank_.second(); }
  void prefetch(Slot s) const { rank_.prefetch(s); }

 private:
  detail::SlotTournament rank_;  // key: (hits + 1, last-use sequence number; larger: more recent)
};

}  // namespace ip::cache
