// Indexed binary min-heap of slots under a per-slot key, with O(log n) update and removal of any
// slot (for the policies that rank entries: lfu, semantic, opt). Key must have operator<.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace ip::cache::detail {

template <class Key>
class SlotHeap {
 public:
  using Slot = std::uint32_t;
  static constexpr std::uint32_t kAbsent = UINT32_MAX;

  void resize(Slot slots) {
    pos_.reserve(slots);
    pos_.resize(slots, kAbsent);
    key_.reserve(slots);
    key_.resize(slots);
    heap_.reserve(slots);
  }

  bool empty() const { return heap_.empty(); }
  Slot top() const { return heap_.front(); }
  const Key& key(Slot s) const { return key_[s]; }

  void push(Slot s, const Key& k) {
    key_[s] = k;
    pos_[s] = static_cast<std::uint32_t>(heap_.size());
    heap_.push_back(s);
    up(pos_[s]);
  }

  // New key for a slot in the heap.
  void update(Slot s, const Key& k) {
    const bool larger = key_[s] < k;
    key_[s] = k;
    if (larger) down(pos_[s]);
    else up(pos_[s]);
  }

  void erase(Slot s) {
    const std::uint32_t i = pos_[s];
    pos_[s] = kAbsent;
    const Slot last = heap_.back();
    heap_.pop_back();
    if (i == heap_.size()) return;
    heap_[i] = last;
    pos_[last] = i;
    down(i);
    up(pos_[last]);
  }

  void prefetch(Slot s) const {
    __builtin_prefetch(pos_.data() + s);
    __builtin_prefetch(key_.data() + s);
  }

  std::size_t bytes() const {
    return pos_.capacity() * sizeof(std::uint32_t) + heap_.capacity() * sizeof(Slot) + key_.capacity() * sizeof(Key);
  }

 private:
  void place(std::uint32_t i, Slot s) {
    heap_[i] = s;
    pos_[s] = i;
  }
  void up(std::uint32_t i) {
    const Slot s = heap_[i];
    while (i > 0) {
      const std::uint32_t p = (i - 1) / 2;
      if (!(key_[s] < key_[heap_[p]])) break;
      place(i, heap_[p]);
      i = p;
    }
    place(i, s);
  }
  void down(std::uint32_t i) {
    const Slot s = heap_[i];
    const std::size_t n = heap_.size();
    for (;;) {
      std::size_t c = 2 * std::size_t{i} + 1;
      if (c >= n) break;
      if (c + 1 < n && key_[heap_[c + 1]] < key_[heap_[c]]) ++c;
      if (!(key_[heap_[c]] < key_[s])) break;
      place(i, heap_[c]);
      i = static_cast<std::uint32_t>(c);
    }
    place(i, s);
  }

  std::vector<Slot> heap_;
  std::vector<std::uint32_t> pos_;
  std::vector<Key> key_;
};

}  // namespace ip::cache::detail
