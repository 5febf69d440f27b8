// lfu: evict the entry with the fewest hits since it was stored; ties evict the least recently used.
// Counts are forgotten when an entry leaves (in-cache LFU). An indexed min-heap on
// (count, last-use sequence number). 24 bytes per slot.
#pragma once

#include <cstdint>

#include "cache_sim/detail/slot_heap.h"
#include "cache_sim/policy.h"

namespace ip::cache {

class Lfu {
 public:
  static Lfu make(PolicyArgs& args) {
    args.finish();
    return Lfu();
  }
  void resize(Slot slots) { heap_.resize(slots); }
  void on_fill(Slot s, const Touch&) { heap_.push(s, Key{1, ++seq_}); }
  void on_hit(Slot s, const Touch&) { heap_.update(s, Key{heap_.key(s).count + 1, ++seq_}); }
  void on_remove(Slot s) { heap_.erase(s); }
  Slot victim() { return heap_.top(); }
  std::size_t bytes() const { return heap_.bytes(); }
  Slot peek_victim(int k) const { return k == 0 && !heap_.empty() ? heap_.top() : kNoSlot; }
  void prefetch(Slot s) const { heap_.prefetch(s); }

 private:
  struct Key {
    std::uint64_t count;
    std::uint64_t seq;  // larger: used more recently
    bool operator<(const Key& o) const { return count != o.count ? count < o.count : seq < o.seq; }
  };
  detail::SlotHeap<Key> heap_;
  std::uint64_t seq_ = 0;
};

}  // namespace ip::cache
