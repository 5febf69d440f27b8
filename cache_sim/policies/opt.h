// opt: Belady's MIN — evict the entry whose next use is farthest in the future (never used again:
// farthest of all). The bound: with one level, unit sizes and forced fills no policy misses less.
// It reads Touch::next, the trace index of the object's next access, which the simulator precomputes
// from the whole trace. In a hierarchy each level uses the global next use (the usual approximation).
// Ties (e.g. several entries never used again) evict the least recently used.
// 13.25 bytes per slot (detail/slot_tournament.h).
#pragma once

#include <cstdint>
#include <limits>

#include "cache_sim/detail/slot_tournament.h"
#include "cache_sim/policy.h"

namespace ip::cache {

class Opt {
 public:
  static Opt make(PolicyArgs& args) {
    args.finish();
    return Opt();
  }
  void resize(Slot slots) { rank_.resize(slots); }
  void on_fill(Slot s, const Touch& t) { rank_.push(s, key(t)); }
  void on_hit(Slot s, const Touch& t) { rank_.update(s, key(t)); }
  void on_remove(Slot s) { rank_.erase(s); }
  Slot victim() { return rank_.top(); }
  std::size_t bytes() const { return rank_.bytes(); }
  Slot peek_victim(int k) const { return rank_.empty() ? kNoSlot : k == 0 ? rank_.top() : rank_.second(); }
  void prefetch(Slot s) const { rank_.prefetch(s); }
  static constexpr bool kNeedsFuture = true;

 private:
  // Ranked by (UINT64_MAX - next use, with "never" as 0; sequence number): the top is the entry
  // used farthest in the future, then the least recently used.
  detail::RankKey key(const Touch& t) {
    const std::uint64_t next = t.next < 0 ? std::numeric_limits<std::uint64_t>::max() : static_cast<std::uint64_t>(t.next);
    return detail::RankKey{std::numeric_limits<std::uint64_t>::max() - next, rank_.next_minor()};
  }
  detail::SlotTournament rank_;
};

}  // namespace ip::cache
