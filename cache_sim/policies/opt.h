// opt: Belady's MIN — evict the entry whose next use is farthest in the future (never used again:
// farthest of all). The bound: with one level, unit sizes and forced fills no policy misses less.
// It reads Touch::next, the trace index of the object's next access, which the simulator precomputes
// from the whole trace. In a hierarchy each level uses the global next use (the usual approximation).
// Ties (e.g. several entries never used again) evict the least recently used. 24 bytes per slot.
#pragma once

#include <cstdint>
#include <limits>

#include "cache_sim/detail/slot_heap.h"
#include "cache_sim/policy.h"

namespace ip::cache {

class Opt {
 public:
  static Opt make(PolicyArgs& args) {
    args.finish();
    return Opt();
  }
  void resize(Slot slots) { heap_.resize(slots); }
  void on_fill(Slot s, const Touch& t) { heap_.push(s, key(t)); }
  void on_hit(Slot s, const Touch& t) { heap_.update(s, key(t)); }
  void on_remove(Slot s) { heap_.erase(s); }
  Slot victim() { return heap_.top(); }
  std::size_t bytes() const { return heap_.bytes(); }
  Slot peek_victim(int k) const { return k == 0 && !heap_.empty() ? heap_.top() : kNoSlot; }
  void prefetch(Slot s) const { heap_.prefetch(s); }
  static constexpr bool kNeedsFuture = true;

 private:
  // Min-heap: the top is the largest next use, then the oldest.
  struct Key {
    std::uint64_t neg_next;  // UINT64_MAX - next; 0 for "never"
    std::uint64_t seq;
    bool operator<(const Key& o) const { return neg_next != o.neg_next ? neg_next < o.neg_next : seq < o.seq; }
  };
  Key key(const Touch& t) {
    const std::uint64_t next = t.next < 0 ? std::numeric_limits<std::uint64_t>::max() : static_cast<std::uint64_t>(t.next);
    return Key{std::numeric_limits<std::uint64_t>::max() - next, ++seq_};
  }
  detail::SlotHeap<Key> heap_;
  std::uint64_t seq_ = 0;
};

}  // namespace ip::cache
