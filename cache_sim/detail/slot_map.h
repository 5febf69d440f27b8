// Map from object id to slot, as used by a Level: an open-addressing table in the style of Abseil's
// SwissTable and Folly's F14, laid out so that one probe touches one cache line. A group is 64 bytes,
// 64-aligned: 16 control bytes (12 buckets: empty or 7 bits of the id's hash; byte 15: the group's
// overflow count) and 12 slots (u32). The id itself is not stored: a candidate is confirmed by
// reading the level's id for that slot. A lookup of an absent id reads one group (almost always), and
// erasing a known slot reads no ids at all.
//
// Overflow counts (F14): an insert that finds a group full counts one overflow there and moves on;
// a lookup stops at the first group with no overflow; an erase walks back over the groups its entry
// overflowed and uncounts them. So erase always frees the bucket — no tombstones, no rehash under the
// steady churn of a cache — and only growth rehashes. (A count that reaches 255 sticks.)
//
// Memory: 64 bytes per 12 buckets, at most 7/8 full: 6.1 to 12.2 bytes per resident entry.
// Every operation takes h = table_hash(id), computed once per access by the caller.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "cache_sim/detail/hash.h"
#include "cache_sim/detail/prefetch.h"

namespace ip::cache::detail {

class SlotMap {
 public:
  static constexpr std::uint32_t kNone = UINT32_MAX;

  SlotMap() { init(1); }

  // Room for `n` entries without growing; rehashes with id_of(slot) for the present slots.
  template <class IdOf>
  void reserve(std::size_t n, IdOf&& id_of) {
    std::size_t groups = groups_;
    while (n > groups * kWidth * 7 / 8) groups *= 2;
    if (groups != groups_) rehash(groups, id_of);
  }

  void prefetch(std::uint64_t h) const { __builtin_prefetch(&group_[h & mask_]); }
  void prefetch_kept(std::uint64_t h) const { detail::prefetch_kept(&group_[h & mask_]); }

  // The slot of the first bucket in the home group whose tag matches (kNone if none), read without
  // confirming the id: a guess for prefetching.
  // When entries overflowed the home group, the lookup will read the next group of the probe too:
  // that is requested here, as the home group's bucket was earlier.
  std::uint32_t candidate(std::uint64_t h) const {
    const Group& g = group_[h & mask_];
    if (g.ctrl[kOverflow]) __builtin_prefetch(&group_[((h & mask_) + 1) & mask_]);
    const std::uint32_t m = match(g, tag_of(h));
    return m ? g.slot[__builtin_ctz(m)] : kNone;
  }

  template <class IdOf>
  std::uint32_t find(std::uint64_t id, std::uint64_t h, IdOf&& id_of) const {
    // Triangular probing visits every group within `groups_` steps.
    for (std::size_t i = h & mask_, step = 0; step < groups_; i = (i + ++step) & mask_) {
      const Group& g = group_[i];
      for (std::uint32_t m = match(g, tag_of(h)); m; m &= m - 1) {
        const std::uint32_t s = g.slot[__builtin_ctz(m)];
        if (id_of(s) == id) return s;
      }
      if (!g.ctrl[kOverflow]) return kNone;
    }
    return kNone;
  }

  // The id (hash h) must be absent. Grows (doubles) at 7/8 load.
  template <class IdOf>
  void insert(std::uint64_t h, std::uint32_t slot, IdOf&& id_of) {
    if (count_ >= limit()) rehash(groups_ * 2, id_of);
    place(h, slot);
  }

  // Removes the bucket holding `slot` (whose id hashes to h). The slot must be present: a caller that
  // breaks this (a level whose ids or hashes went wrong) gets an exception, not an endless probe.
  void erase(std::uint64_t h, std::uint32_t slot) {
    const std::size_t home = h & mask_;
    std::size_t i = home, step = 0;
    for (;; i = (i + ++step) & mask_) {
      if (step >= groups_) missing(slot);
      Group& g = group_[i];
      for (std::uint32_t m = match(g, tag_of(h)); m; m &= m - 1) {
        const int b = __builtin_ctz(m);
        if (g.slot[b] != slot) continue;
        g.ctrl[b] = kEmpty;
        --count_;
        // Uncount the overflows this entry made on its way here.
        for (std::size_t j = home, st = 0; j != i; j = (j + ++st) & mask_)
          if (group_[j].ctrl[kOverflow] != 255) --group_[j].ctrl[kOverflow];
        return;
      }
    }
  }

  template <class F>
  void for_each_slot(F&& f) const {
    for (std::size_t i = 0; i < groups_; ++i)
      for (std::size_t b = 0; b < kWidth; ++b)
        if (!(group_[i].ctrl[b] & 0x80)) f(group_[i].slot[b]);
  }

  std::size_t bytes() const { return groups_ * sizeof(Group); }

 private:
  static constexpr std::size_t kWidth = 12;  // buckets per group
  static constexpr std::size_t kOverflow = 15;  // control byte holding the overflow count
  static constexpr std::uint32_t kLanes = (1u << kWidth) - 1;
  static constexpr std::uint8_t kEmpty = 0x80, kPad = 0xFF;  // full buckets: 0x00..0x7F

  struct alignas(64) Group {
    std::uint8_t ctrl[16];  // 0..11 buckets, 12..14 kPad, 15 overflow count
    std::uint32_t slot[kWidth];
  };
  static_assert(sizeof(Group) == 64);
  struct FreeDeleter {
    void operator()(Group* p) const { ::operator delete[](p, std::align_val_t{64}); }
  };

  [[noreturn]] __attribute__((noinline, cold)) static void missing(std::uint32_t slot) {
    throw std::logic_error("cache simulator: id -> slot map has no bucket for slot " + std::to_string(slot) +
                           " (an internal error)");
  }
  static std::uint8_t tag_of(std::uint64_t h) { return static_cast<std::uint8_t>(h >> 57); }
  std::size_t limit() const { return groups_ * kWidth * 7 / 8; }

  // Bit i set when control byte i (of the 12 used) equals `b`.
  static std::uint32_t match(const Group& g, std::uint8_t b) {
#if defined(__SSE2__)
    const __m128i c = _mm_load_si128(reinterpret_cast<const __m128i*>(g.ctrl));
    return static_cast<std::uint32_t>(_mm_movemask_epi8(_mm_cmpeq_epi8(c, _mm_set1_epi8(static_cast<char>(b))))) &
           kLanes;
#else
    std::uint32_t m = 0;
    for (std::size_t i = 0; i < kWidth; ++i) m |= static_cast<std::uint32_t>(g.ctrl[i] == b) << i;
    return m;
#endif
  }
  // Bit i set when bucket i is empty (high bit set).
  static std::uint32_t free_mask(const Group& g) {
#if defined(__SSE2__)
    return static_cast<std::uint32_t>(_mm_movemask_epi8(_mm_load_si128(reinterpret_cast<const __m128i*>(g.ctrl)))) &
           kLanes;
#else
    std::uint32_t m = 0;
    for (std::size_t i = 0; i < kWidth; ++i) m |= static_cast<std::uint32_t>(g.ctrl[i] >> 7) << i;
    return m;
#endif
  }

  void init(std::size_t groups) {
    group_.reset(new (std::align_val_t{64}) Group[groups]);
    for (std::size_t i = 0; i < groups; ++i) {
      for (std::size_t b = 0; b < 16; ++b) group_[i].ctrl[b] = b < kWidth ? kEmpty : kPad;
      group_[i].ctrl[kOverflow] = 0;
      for (std::size_t b = 0; b < kWidth; ++b) group_[i].slot[b] = 0;
    }
    groups_ = groups;
    mask_ = groups - 1;
    count_ = 0;
  }

  void place(std::uint64_t h, std::uint32_t slot) {
    for (std::size_t i = h & mask_, step = 0;; i = (i + ++step) & mask_) {
      Group& g = group_[i];
      const std::uint32_t m = free_mask(g);
      if (!m) {
        if (g.ctrl[kOverflow] != 255) ++g.ctrl[kOverflow];
        continue;
      }
      const int b = __builtin_ctz(m);
      g.ctrl[b] = tag_of(h);
      g.slot[b] = slot;
      ++count_;
      return;
    }
  }

  template <class IdOf>
  void rehash(std::size_t groups, IdOf&& id_of) {
    std::vector<std::uint32_t> present;
    present.reserve(count_);
    for_each_slot([&](std::uint32_t s) { present.push_back(s); });
    init(groups);
    for (const std::uint32_t s : present) place(table_hash(id_of(s)), s);
  }

  std::unique_ptr<Group[], FreeDeleter> group_;
  std::size_t groups_ = 0, mask_ = 0;
  std::size_t count_ = 0;
};

}  // namespace ip::cache::detail
