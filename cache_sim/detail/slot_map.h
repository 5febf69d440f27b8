// Map from object id to slot, as used by a Level: an open-addressing table in the style of Abseil's
// SwissTable. Buckets come in groups of 16; per bucket a control byte (empty, deleted, or 7 bits of
// the id's hash) and the slot (u32). The id itself is not stored: a candidate is confirmed by reading
// the level's id for that slot. So a lookup of an absent id reads one 16-byte control group (almost
// always), and erasing a known slot reads no ids at all.
//
// Memory: 5 bytes per bucket, at most 7/8 full: 5.7 to 11.4 bytes per resident entry.
// Erase marks a bucket empty when its group still has an empty bucket (no probe ever passed the
// group), else deleted; deleted buckets are reused by inserts and cleared by a rehash.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "cache_sim/detail/hash.h"

namespace ip::cache::detail {

class SlotMap {
 public:
  static constexpr std::uint32_t kNone = UINT32_MAX;

  SlotMap() { init(1); }

  // Room for `n` entries without growing; rehashes with id_of(slot) for the present slots.
  template <class IdOf>
  void reserve(std::size_t n, IdOf&& id_of) {
    std::size_t groups = ctrl_.size() / kGroup;
    while (n > groups * kGroup * 7 / 8) groups *= 2;
    if (groups * kGroup != ctrl_.size()) rehash(groups, id_of);
  }

  // Every operation takes h = mix64(id), computed once per access by the caller.
  void prefetch(std::uint64_t h) const {
    const std::size_t b = group_of(h) * kGroup;
    __builtin_prefetch(ctrl_.data() + b);
    __builtin_prefetch(slot_.data() + b);
  }

  // The slot of the first bucket in the id's home group whose tag matches (kNone if none), read
  // without confirming the id: a guess for prefetching.
  std::uint32_t candidate(std::uint64_t h) const {
    const std::size_t g = group_of(h);
    const std::uint32_t m = match(ctrl_.data() + g * kGroup, tag_of(h));
    return m ? slot_[g * kGroup + static_cast<std::size_t>(__builtin_ctz(m))] : kNone;
  }

  template <class IdOf>
  std::uint32_t find(std::uint64_t id, std::uint64_t h, IdOf&& id_of) const {
    for (std::size_t g = group_of(h), step = 0;; g = (g + ++step) & group_mask_) {
      const std::uint8_t* c = ctrl_.data() + g * kGroup;
      for (std::uint32_t m = match(c, tag_of(h)); m; m &= m - 1) {
        const std::uint32_t s = slot_[g * kGroup + static_cast<std::size_t>(__builtin_ctz(m))];
        if (id_of(s) == id) return s;
      }
      if (match(c, kEmpty)) return kNone;
    }
  }

  // The id (hash h) must be absent. Rehashes (same size) when tombstones leave no room.
  template <class IdOf>
  void insert(std::uint64_t h, std::uint32_t slot, IdOf&& id_of) {
    if (count_ + deleted_ >= limit()) rehash(ctrl_.size() / kGroup * (count_ >= limit() * 3 / 4 ? 2 : 1), id_of);
    place(h, slot);
  }

  // Removes the bucket holding `slot` (whose id hashes to h).
  void erase(std::uint64_t h, std::uint32_t slot) {
    for (std::size_t g = group_of(h), step = 0;; g = (g + ++step) & group_mask_) {
      const std::uint8_t* c = ctrl_.data() + g * kGroup;
      for (std::uint32_t m = match(c, tag_of(h)); m; m &= m - 1) {
        const std::size_t b = g * kGroup + static_cast<std::size_t>(__builtin_ctz(m));
        if (slot_[b] != slot) continue;
        if (match(c, kEmpty)) {
          ctrl_[b] = kEmpty;
        } else {
          ctrl_[b] = kDeleted;
          ++deleted_;
        }
        --count_;
        return;
      }
    }
  }

  template <class F>
  void for_each_slot(F&& f) const {
    for (std::size_t b = 0; b < ctrl_.size(); ++b)
      if (!(ctrl_[b] & 0x80)) f(slot_[b]);
  }

  std::size_t bytes() const { return ctrl_.capacity() + slot_.capacity() * sizeof(std::uint32_t); }

 private:
  static constexpr std::size_t kGroup = 16;
  static constexpr std::uint8_t kEmpty = 0x80, kDeleted = 0xFE;  // full buckets: 0x00..0x7F

  static std::uint8_t tag_of(std::uint64_t h) { return static_cast<std::uint8_t>(h >> 57); }
  std::size_t group_of(std::uint64_t h) const { return h & group_mask_; }
  std::size_t limit() const { return ctrl_.size() * 7 / 8; }

  // Bit i set when control byte i of the group equals `b`.
  static std::uint32_t match(const std::uint8_t* c, std::uint8_t b) {
#if defined(__SSE2__)
    const __m128i g = _mm_loadu_si128(reinterpret_cast<const __m128i*>(c));
    return static_cast<std::uint32_t>(_mm_movemask_epi8(_mm_cmpeq_epi8(g, _mm_set1_epi8(static_cast<char>(b)))));
#else
    std::uint32_t m = 0;
    for (std::size_t i = 0; i < kGroup; ++i) m |= static_cast<std::uint32_t>(c[i] == b) << i;
    return m;
#endif
  }
  // Bit i set when bucket i is empty or deleted (high bit set).
  static std::uint32_t free_mask(const std::uint8_t* c) {
#if defined(__SSE2__)
    return static_cast<std::uint32_t>(_mm_movemask_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(c))));
#else
    std::uint32_t m = 0;
    for (std::size_t i = 0; i < kGroup; ++i) m |= static_cast<std::uint32_t>(c[i] >> 7) << i;
    return m;
#endif
  }

  void init(std::size_t groups) {
    ctrl_.clear();
    ctrl_.shrink_to_fit();
    slot_.clear();
    slot_.shrink_to_fit();
    ctrl_.reserve(groups * kGroup);  // exactly: the bytes reported are the bytes held
    ctrl_.assign(groups * kGroup, kEmpty);
    slot_.reserve(groups * kGroup);
    slot_.assign(groups * kGroup, 0);
    group_mask_ = groups - 1;
    count_ = deleted_ = 0;
  }

  void place(std::uint64_t h, std::uint32_t slot) {
    for (std::size_t g = group_of(h), step = 0;; g = (g + ++step) & group_mask_) {
      const std::uint32_t m = free_mask(ctrl_.data() + g * kGroup);
      if (!m) continue;
      const std::size_t b = g * kGroup + static_cast<std::size_t>(__builtin_ctz(m));
      if (ctrl_[b] == kDeleted) --deleted_;
      ctrl_[b] = tag_of(h);
      slot_[b] = slot;
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
    for (const std::uint32_t s : present) place(mix64(id_of(s)), s);
  }

  std::vector<std::uint8_t> ctrl_;
  std::vector<std::uint32_t> slot_;
  std::size_t group_mask_ = 0;
  std::size_t count_ = 0, deleted_ = 0;
};

}  // namespace ip::cache::detail
