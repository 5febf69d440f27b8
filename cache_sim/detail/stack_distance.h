// LRU stack distances in one pass (Mattson et al. 1970), O(log n) per access. Each id's latest access
// position is marked; the stack distance of a reuse is the number of marks at or after the id's
// previous position (itself included), so an LRU cache of C entries hits it iff distance <= C.
//
// The marks are a bitmap over positions, with a Fenwick tree over the per-64-position block counts:
// counting marks below p is a Fenwick prefix over blocks plus one popcount, and both structures are
// 1/8 and 1/16 byte per position, small enough to stay in cache (a Fenwick tree over positions was
// 32 MB at 3M distinct ids). Positions are renumbered (compacted) when they run out, so the space is
// O(distinct ids), not O(trace length).
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <vector>

#include "cache_sim/detail/flat_map.h"

namespace ip::cache::detail {

class StackDistance {
 public:
  // 0 for a first access, else the stack distance (>= 1).
  std::uint64_t access(std::uint64_t id) {
    bool cold = false;
    std::uint64_t& pos = last_.get(id, 0, cold);
    std::uint64_t distance = 0;
    if (cold) {
      ++live_;
    } else {
      distance = live_ - count_below(pos);
      flip(pos, -1);
    }
    // compact() renumbers marked positions only; `pos` is unmarked (or new), and the map does not
    // move, so the reference stays valid and is simply overwritten.
    if (now_ == positions()) compact();
    flip(now_, +1);
    pos = now_++;
    return distance;
  }

  std::uint64_t distinct() const { return live_; }

  // Start loading what access(id) will read, in two stages issued some accesses ahead: the id's map
  // bucket, then (once that is in cache) the bitmap word and Fenwick nodes of its last position.
  void prefetch(std::uint64_t id) const { last_.prefetch(id); }
  void prefetch_paths(std::uint64_t id) const {
    const std::uint64_t* pos = last_.find(id);
    if (!pos || *pos >= positions()) return;
    const std::uint64_t b = *pos >> 6;
    __builtin_prefetch(bits_.data() + b);
    for (std::uint64_t i = b; i > 0; i &= i - 1) __builtin_prefetch(tree_.data() + i);
  }

 private:
  std::uint64_t positions() const { return bits_.size() * 64; }

  // Marks at positions < p.
  std::uint64_t count_below(std::uint64_t p) const {
    const std::uint64_t b = p >> 6;
    std::uint64_t s = static_cast<std::uint64_t>(std::popcount(bits_[b] & ((1ULL << (p & 63)) - 1)));
    for (std::uint64_t i = b; i > 0; i &= i - 1) s += tree_[i];
    return s;
  }
  // Sets (+1) or clears (-1) the mark at p.
  void flip(std::uint64_t p, int delta) {
    const std::uint64_t b = p >> 6;
    bits_[b] ^= 1ULL << (p & 63);
    for (std::uint64_t i = b + 1; i < tree_.size(); i += i & (~i + 1)) tree_[i] += static_cast<std::uint32_t>(delta);
  }
  // Renumbers the marked positions 0..live-1 in order, in a space at least twice as large.
  void compact() {
    std::vector<std::uint64_t> block_rank(bits_.size());
    std::uint64_t r = 0;
    for (std::size_t b = 0; b < bits_.size(); ++b) {
      block_rank[b] = r;
      r += static_cast<std::uint64_t>(std::popcount(bits_[b]));
    }
    last_.for_each_value([&](std::uint64_t& v) {
      if (v < positions() && (bits_[v >> 6] >> (v & 63) & 1))
        v = block_rank[v >> 6] + static_cast<std::uint64_t>(std::popcount(bits_[v >> 6] & ((1ULL << (v & 63)) - 1)));
    });
    std::size_t words = std::max<std::size_t>(64, bits_.size());
    while (words * 64 < 2 * (r + 1)) words *= 2;
    bits_.assign(words, 0);
    for (std::uint64_t w = 0; w < r / 64; ++w) bits_[w] = ~0ULL;
    if (r % 64) bits_[r / 64] = (1ULL << (r % 64)) - 1;
    tree_.assign(words + 1, 0);  // 1-based Fenwick tree over the blocks' counts
    for (std::size_t i = 1; i <= words; ++i) {
      tree_[i] += static_cast<std::uint32_t>(std::popcount(bits_[i - 1]));
      const std::size_t j = i + (i & (~i + 1));
      if (j <= words) tree_[j] += tree_[i];
    }
    now_ = r;
  }

  FlatMap<std::uint64_t> last_{1024};
  std::vector<std::uint64_t> bits_;                                   // marks, 64 positions a word
  std::vector<std::uint32_t> tree_ = std::vector<std::uint32_t>(1);  // Fenwick tree over blocks
  std::uint64_t now_ = 0;
  std::uint64_t live_ = 0;
};

}  // namespace ip::cache::detail
