// LRU stack distances in one pass (Mattson et al. 1970), O(log n) per access: a Fenwick tree over
// access positions marks the position of each id's latest access; the stack distance of a reuse is
// the number of marks at or after the id's previous position (itself included), so an LRU cache of
// C entries hits it iff distance <= C. Positions are renumbered (compacted) when they run out, so the
// tree stays O(distinct ids) long, not O(trace length).
#pragma once

#include <algorithm>
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
      add(pos, -1);
      mark_[pos] = 0;
    }
    // compact() renumbers marked positions only; `pos` is unmarked (or new), and the map does not
    // move, so the reference stays valid and is simply overwritten.
    if (now_ == mark_.size()) compact();
    add(now_, +1);
    mark_[now_] = 1;
    pos = now_++;
    return distance;
  }

  std::uint64_t distinct() const { return live_; }

 private:
  // Marks at positions < p.
  std::uint64_t count_below(std::uint64_t p) const {
    std::uint64_t s = 0;
    for (std::uint64_t i = p; i > 0; i &= i - 1) s += tree_[i];
    return s;
  }
  void add(std::uint64_t p, int delta) {
    for (std::uint64_t i = p + 1; i <= mark_.size(); i += i & (~i + 1)) tree_[i] += static_cast<std::uint32_t>(delta);
  }
  // Renumbers the marked positions 0..live-1 in order, in a space at least twice as large.
  void compact() {
    std::vector<std::uint32_t> rank(mark_.size());
    std::uint64_t r = 0;
    for (std::size_t p = 0; p < mark_.size(); ++p) {
      rank[p] = static_cast<std::uint32_t>(r);
      r += mark_[p];
    }
    last_.for_each_value([&](std::uint64_t& v) {
      if (v < rank.size() && mark_[v]) v = rank[v];
    });
    std::size_t size = std::max<std::size_t>(1024, mark_.size());
    while (size < 2 * (r + 1)) size *= 2;
    mark_.assign(size, 0);
    std::fill(mark_.begin(), mark_.begin() + static_cast<std::ptrdiff_t>(r), 1);
    tree_.assign(size + 1, 0);
    for (std::size_t i = 1; i <= size; ++i) {
      tree_[i] += mark_[i - 1];
      const std::size_t j = i + (i & (~i + 1));
      if (j <= size) tree_[j] += tree_[i];
    }
    now_ = r;
  }

  FlatMap<std::uint64_t> last_{1024};
  std::vector<std::uint32_t> tree_ = std::vector<std::uint32_t>(1);  // 1-based Fenwick tree
  std::vector<std::uint8_t> mark_;                                    // latest position of some id
  std::uint64_t now_ = 0;
  std::uint64_t live_ = 0;
};

}  // namespace ip::cache::detail
