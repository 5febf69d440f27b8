// lru: evict the least recently used entry. Two representations of the same order, chosen by the
// number of slots:
//
// - up to kLogAbove slots, an intrusive doubly linked list over slots (8 bytes a slot), most recent
//   at the front: a fill or a hit moves the slot to the front, the victim is the back;
// - above, a log of accesses: every fill or hit appends the slot to a queue, and a slot's stamp is
//   the position of its latest record. A record is live when its position equals its slot's stamp;
//   the live records, in queue order, are the resident slots from least to most recently used, so
//   the victim is the first live record from the head (the stale ones before it are dropped). When
//   the buffer is full, the live records move to its start, in order, with their stamps renumbered.
//   12 bytes a slot (a stamp and two records).
//
// Why two: a list hit rewrites three nodes at random places (the slot's and both neighbours'), which
// costs nothing while the list stays in the core's L2 and three cache misses once it does not. A log
// hit writes one stamp and appends in order, and since victims leave in queue order, the level can
// request what evictions will read well ahead (upcoming()). Where everything is in cache the log's
// extra work (skipping stale records, compaction, the look-ahead) makes it slower, and it takes more
// bytes. Measured in bench/RESULTS.md ("LRU as a log of accesses above 2^18 slots").
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/error.h"
#include "cache_sim/detail/prefetch.h"
#include "cache_sim/detail/slot_list.h"
#include "cache_sim/policy.h"

namespace ip::cache {

class Lru {
 public:
  // Above this many slots the order is kept as a log (2 MiB of list nodes: more than a core's L2 here).
  static constexpr Slot kLogAbove = Slot{1} << 18;

  static Lru make(PolicyArgs& args) {
    args.finish();
    return Lru();
  }
  // Tests: the log from more than `log_above` slots on.
  static Lru with_log_above(Slot log_above) {
    Lru p;
    p.log_above_ = log_above;
    return p;
  }

  void resize(Slot slots) {
    if (!log_ && slots > log_above_) {
      to_log(slots);
    } else if (log_) {
      grow_log(slots);
    } else {
      list_.resize(slots);
    }
  }
  void on_fill(Slot s, const Touch&) {
    if (log_) push(s);
    else list_.push_front(s);
  }
  void on_hit(Slot s, const Touch&) {
    if (!log_) list_.move_to_front(s);
    else if (stamp_[s] + 1 != tail_) push(s);  // already the most recent: nothing changes
  }
  void on_remove(Slot s) {
    if (log_) stamp_[s] = kDead;
    else list_.remove(s);
  }

  Slot victim() {
    if (!log_) return list_.back();
    for (;; ++head_) {
      if (head_ + kScanAhead < tail_) detail::prefetch_kept(stamp_.data() + queue_[head_ + kScanAhead]);
      const Slot s = queue_[head_];
      if (stamp_[s] == head_) return s;
    }
  }
  // The next victim (k = 0) and the one after (k = 1); in the log, looking at no more than kPeek
  // records (kNoSlot past them). A hint.
  Slot peek_victim(int k) const {
    if (!log_) {
      const Slot v = list_.back();
      return k == 0 || v == kNoSlot ? v : list_.newer(v);
    }
    for (std::uint32_t i = head_; i < tail_ && i < head_ + kPeek; ++i) {
      const Slot s = queue_[i];
      if (stamp_[s] == i && k-- == 0) return s;
    }
    return kNoSlot;
  }
  void prefetch(Slot s) const {
    if (log_) __builtin_prefetch(stamp_.data() + s, 1);
    else list_.prefetch(s);
  }

  // With the log (returns false without it, doing nothing): victims leave in queue order, so what
  // evictions will read is known ahead. Passes `far` the records up to kFar past the head (the level
  // requests their entries, whose ids it will need) and `near` those up to kNear past it (the level
  // requests their id -> slot map buckets, the entry now in cache). Each record is passed once to
  // each; stale records too (a wasted request, never a different result).
  static constexpr std::uint32_t kFar = 24, kNear = 10;
  template <class Far, class Near>
  bool upcoming(Far&& far, Near&& near) {
    if (!log_) return false;
    const std::uint32_t far_end = std::min(tail_, head_ + kFar), near_end = std::min(tail_, head_ + kNear);
    for (far_ = std::max(far_, head_); far_ < far_end; ++far_) {
      detail::prefetch_kept(stamp_.data() + queue_[far_]);
      far(queue_[far_]);
    }
    for (near_ = std::max(near_, head_); near_ < near_end; ++near_) near(queue_[near_]);
    return true;
  }

  std::size_t bytes() const {
    return list_.bytes() + stamp_.capacity() * sizeof(std::uint32_t) + queue_.capacity() * sizeof(Slot);
  }

  // Tests: whether the log is in use, and the resident slots from least to most recently used.
  bool uses_log() const { return log_; }
  std::vector<Slot> order() const {
    std::vector<Slot> out;
    if (log_) {
      for (std::uint32_t i = head_; i < tail_; ++i)
        if (stamp_[queue_[i]] == i) out.push_back(queue_[i]);
    } else {
      for (Slot s = list_.back(); s != kNoSlot; s = list_.newer(s)) out.push_back(s);
    }
    return out;
  }

 private:
  static constexpr std::uint32_t kDead = UINT32_MAX;
  static constexpr std::size_t kSlack = 16;
  static constexpr std::uint32_t kScanAhead = 8, kPeek = 8;

  void grow_log(Slot slots) {
    stamp_.resize(slots, kDead);
    const std::size_t want = 2 * std::size_t{slots} + kSlack;
    IP_REQUIRE(want < kDead, "lru: {} slots is more than this policy can number", slots);
    if (queue_.size() < want) queue_.resize(want);
  }

  // From the list to the log, keeping the order; the list's memory is given back.
  void to_log(Slot slots) {
    grow_log(slots);
    for (Slot s = list_.back(); s != kNoSlot; s = list_.newer(s)) push(s);
    list_ = detail::SlotList();
    log_ = true;
  }

  void push(Slot s) {
    if (tail_ == queue_.size()) compact();
    stamp_[s] = tail_;
    queue_[tail_++] = s;
  }

  // Moves the live records to the start of the buffer, in order. At most one record per slot is
  // live, so at least half the buffer is free afterwards.
  void compact() {
    std::uint32_t j = 0;
    for (std::uint32_t i = head_; i < tail_; ++i) {
      if (i + kScanAhead < tail_) detail::prefetch_kept(stamp_.data() + queue_[i + kScanAhead]);
      const Slot s = queue_[i];
      if (stamp_[s] != i) continue;
      stamp_[s] = j;
      queue_[j++] = s;
    }
    head_ = 0;
    tail_ = j;
    far_ = near_ = 0;
  }

  Slot log_above_ = kLogAbove;
  bool log_ = false;
  detail::SlotList list_;             // the list (until the log takes over)
  std::vector<std::uint32_t> stamp_;  // the log: per slot, position of its live record (kDead: none)
  std::vector<Slot> queue_;           // the log's records [head_, tail_)
  std::uint32_t head_ = 0, tail_ = 0;
  std::uint32_t far_ = 0, near_ = 0;  // upcoming(): the records passed so far end here
};

}  // namespace ip::cache
