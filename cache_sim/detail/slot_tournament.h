// The slot of smallest key among the present slots, with O(log n) insertion, key change and removal
// of any slot (for the policies that rank entries: lfu, semantic, semantic-cos, opt).
//
// A winner tree whose leaves are buckets of kBucket = 4 consecutive slots (48 bytes of keys): node i
// (1 <= i < leaves) holds the slot with the smaller key of its children 2i and 2i + 1, and leaf
// `leaves + b` is bucket b, whose winner is kept as its index in the bucket (one byte), so the tree
// stores 1.25 bytes a slot (a leaf per slot took 4). Every leaf descends from node 1, which therefore
// holds the overall minimum, whatever the number of leaves (not only powers of two).
// Changing a slot's key recomputes its bucket's winner (three comparisons of keys in one or two
// cache lines: the two lowest levels of a tree with a leaf per slot, its largest and least cached),
// then the bucket-to-root path. The path is fixed by the slot's index, so the sibling loads along it
// do not wait on comparisons (a binary heap's sift chases them one level at a time), and the walk
// stops early once a winner (the bucket's, then a node's) is unchanged and is not the slot itself.
//
// A key is (u64 major, u32 minor), 12 bytes packed, compared as one 128-bit number (no branches to
// mispredict): 13.25 bytes a slot in all. The minor is the policies' recency (a sequence number from
// next_minor()); when it would run out, the present keys' minors are renumbered densely in their
// order (O(n log n) once every ~4 billion operations), which changes no comparison, so the tree and
// every eviction stay exactly as with unbounded sequence numbers.
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/error.h"

namespace ip::cache::detail {

// Ranking key: `major` first, then `minor` (both unsigned); smaller is evicted first.
struct __attribute__((packed)) RankKey {
  std::uint64_t major;
  std::uint32_t minor;
  friend bool operator<(const RankKey& a, const RankKey& b) {
    using u128 = unsigned __int128;
    return ((u128{a.major} << 64) | a.minor) < ((u128{b.major} << 64) | b.minor);
  }
};
static_assert(sizeof(RankKey) == 12);

// An order-preserving map from doubles (not NaN) to u64: a < b iff ordered(a) < ordered(b).
inline std::uint64_t ordered(double d) {
  const auto bits = std::bit_cast<std::uint64_t>(d);
  return bits >> 63 ? ~bits : bits | (1ULL << 63);
}
inline double unordered(std::uint64_t u) { return std::bit_cast<double>(u >> 63 ? u & ~(1ULL << 63) : ~u); }

class SlotTournament {
 public:
  using Slot = std::uint32_t;

  static constexpr std::size_t kBucket = 4;  // slots per leaf

  void resize(Slot slots) {
    const std::size_t leaves = std::max<std::size_t>((std::size_t{slots} + kBucket - 1) / kBucket, 1);
    key_.reserve(leaves * kBucket);  // whole buckets; the slots past `slots` stay absent
    key_.resize(leaves * kBucket, kAbsent);
    if (leaves == leaves_) return;
    leaves_ = leaves;
    best_.assign(leaves, 0);
    best_.shrink_to_fit();
    for (std::size_t b = 0; b < leaves; ++b) best_[b] = static_cast<std::uint8_t>(bucket_best(b) - b * kBucket);
    win_.clear();
    win_.shrink_to_fit();
    win_.reserve(std::max<std::size_t>(leaves, 2));
    win_.resize(std::max<std::size_t>(leaves, 2));
    win_[1] = bucket_best(0);  // one leaf: the root is the bucket's winner
    for (std::size_t i = leaves - 1; i >= 1; --i) win_[i] = better(child(2 * i), child(2 * i + 1));
  }

  bool empty() const { return count_ == 0; }
  Slot top() const { return win_[1]; }
  // A likely runner-up (for prefetch hints): the winner of the root's other subtree.
  Slot second() const {
    if (count_ < 2 || leaves_ < 2) return UINT32_MAX;
    const Slot t = win_[1];
    return child(2) == t ? child(3) : child(2);
  }
  const RankKey& key(Slot s) const { return key_[s]; }

  void push(Slot s, const RankKey& k) {
    ++count_;
    set(s, k);
  }
  void update(Slot s, const RankKey& k) { set(s, k); }
  void erase(Slot s) {
    --count_;
    set(s, kAbsent);
  }

  // A minor larger than every present key's (the next sequence number). When none is left below the
  // limit, the present minors are first renumbered 1, 2, ... in their order (equal ones stay equal).
  std::uint32_t next_minor() {
    if (minor_ >= minor_limit_) renumber_minors();
    return ++minor_;
  }
  // For tests: renumber once the minors reach `limit` (default: the largest a present key can take).
  void set_minor_limit(std::uint32_t limit) { minor_limit_ = std::min(limit, kMinorLimit); }

  void prefetch(Slot s) const {
    __builtin_prefetch(key_.data() + s);
    __builtin_prefetch(win_.data() + (leaves_ + s / kBucket) / 2);
  }

  std::size_t bytes() const {
    return key_.capacity() * sizeof(RankKey) + win_.capacity() * sizeof(Slot) + best_.capacity();
  }

 private:
  static constexpr RankKey kAbsent{UINT64_MAX, UINT32_MAX};
  static constexpr std::uint32_t kMinorLimit = UINT32_MAX - 1;  // present minors stay below kAbsent's

  // The slot at node i: an internal node's winner, or the winner of the leaf's bucket.
  Slot child(std::size_t i) const {
    if (i < leaves_) return win_[i];
    const std::size_t b = i - leaves_;
    return static_cast<Slot>(b * kBucket + best_[b]);
  }

  Slot better(Slot a, Slot b) const { return key_[b] < key_[a] ? b : a; }
  // The slot of smallest key in bucket b (the first of equal ones), from the keys.
  Slot bucket_best(std::size_t b) const {
    const auto s = static_cast<Slot>(b * kBucket);
    return better(better(s, s + 1), better(s + 2, s + 3));
  }

  void set(Slot s, const RankKey& k) {
    key_[s] = k;
    const std::size_t b = s / kBucket;
    const Slot first = static_cast<Slot>(b * kBucket), old_best = first + best_[b], best = bucket_best(b);
    best_[b] = static_cast<std::uint8_t>(best - first);
    if (best == old_best && best != s) return;  // as at a node: nothing above changes
    if (leaves_ == 1) win_[1] = best;
    for (std::size_t i = (leaves_ + b) / 2; i >= 1; i /= 2) {
      const Slot old = win_[i];
      const Slot w = better(child(2 * i), child(2 * i + 1));
      win_[i] = w;
      // Ancestors compare only winners' keys: unchanged winner other than s -> nothing above changes.
      if (w == old && w != s) break;
    }
  }

  // Dense ranks of the present minors: every comparison between present keys keeps its result, so
  // the winners stand as they are.
  void renumber_minors() {
    std::vector<Slot> present;
    for (Slot s = 0; s < key_.size(); ++s)
      if (key_[s].major != kAbsent.major || key_[s].minor != kAbsent.minor) present.push_back(s);
    std::sort(present.begin(), present.end(), [this](Slot a, Slot b) { return key_[a].minor < key_[b].minor; });
    std::uint32_t rank = 0, last = 0;
    for (std::size_t i = 0; i < present.size(); ++i) {
      RankKey& k = key_[present[i]];
      if (i == 0 || k.minor != last) ++rank;
      last = k.minor;
      k.minor = rank;
    }
    minor_ = rank;
    IP_REQUIRE(minor_ < minor_limit_, "winner tree: {} present keys leave no sequence numbers", present.size());
  }

  std::vector<RankKey> key_;
  std::vector<Slot> win_;  // [1, leaves): the internal nodes (win_[0] unused)
  std::vector<std::uint8_t> best_;  // per bucket: its winner's index in it
  std::size_t leaves_ = 0;
  std::size_t count_ = 0;
  std::uint32_t minor_ = 0;  // the last minor handed out
  std::uint32_t minor_limit_ = kMinorLimit;
};

}  // namespace ip::cache::detail
