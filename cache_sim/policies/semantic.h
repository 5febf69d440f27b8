// semantic: evict the entry of lowest relevance, as InfLLM's score-decayed block cache and H2O's heavy
// hitters do. An entry's relevance is the exponentially decayed sum of the scores (attention mass) its
// accesses carried:  r(t) = sum_i score_i * decay^(t - t_i),  t counting the accesses that reached
// this level (hits and misses alike; decay applies once per such access). Parameter: decay in (0, 1],
// default 0.99 — "semantic(decay=0.95)"; decay = 1 ranks by the plain sum of scores.
//
// All entries share the factor decay^t, so the heap ranks by L = log(sum_i score_i * decay^(-t_i)),
// kept in log space so that it never overflows; a new access adds log(score) - t*log(decay) by
// log-add-exp. A score of 0 adds nothing. Ties evict the least recently used. 24 bytes per slot.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

#include "core/error.h"
#include "cache_sim/detail/slot_heap.h"
#include "cache_sim/policy.h"

namespace ip::cache {

class Semantic {
 public:
  static Semantic make(PolicyArgs& args) {
    const double decay = args.get("decay", 0.99);
    IP_REQUIRE(decay > 0 && decay <= 1, "policy '{}': decay must be in (0, 1], got {}", args.policy(), decay);
    args.finish();
    return Semantic(decay);
  }
  explicit Semantic(double decay) : log_decay_(std::log(decay)) {}
  void resize(Slot slots) { heap_.resize(slots); }
  void on_fill(Slot s, const Touch& t) { heap_.push(s, Key{contribution(t), ++seq_}); }
  void on_hit(Slot s, const Touch& t) { heap_.update(s, Key{log_add(heap_.key(s).log_rel, contribution(t)), ++seq_}); }
  void on_remove(Slot s) { heap_.erase(s); }
  Slot victim() { return heap_.top(); }
  std::size_t bytes() const { return heap_.bytes(); }
  Slot peek_victim(int k) const { return k == 0 && !heap_.empty() ? heap_.top() : kNoSlot; }
  void prefetch(Slot s) const { heap_.prefetch(s); }

  // Relevance of slot s at level tick t (for tests and reports).
  double relevance(Slot s, std::uint64_t t) const {
    return std::exp(heap_.key(s).log_rel + static_cast<double>(t) * log_decay_);
  }

 private:
  double contribution(const Touch& t) const {
    if (!(t.score > 0)) return -std::numeric_limits<double>::infinity();
    return std::log(static_cast<double>(t.score)) - static_cast<double>(t.tick) * log_decay_;
  }
  static double log_add(double a, double b) {
    if (a < b) std::swap(a, b);
    if (b == -std::numeric_limits<double>::infinity()) return a;
    return a + std::log1p(std::exp(b - a));
  }
  struct Key {
    double log_rel;
    std::uint64_t seq;
    bool operator<(const Key& o) const { return log_rel != o.log_rel ? log_rel < o.log_rel : seq < o.seq; }
  };
  double log_decay_;
  detail::SlotHeap<Key> heap_;
  std::uint64_t seq_ = 0;
};

}  // namespace ip::cache
