// semantic: evict the entry of lowest relevance, as InfLLM's score-decayed block cache and H2O's heavy
// hitters do. An entry's relevance is the exponentially decayed sum of the scores (attention mass) its
// accesses carried:  r(t) = sum_i score_i * decay^(t - t_i),  t counting the accesses that reached
// this level (hits and misses alike; decay applies once per such access). Parameter: decay in (0, 1],
// default 0.99 — "semantic(decay=0.95)"; decay = 1 ranks by the plain sum of scores.
//
// All entries share the factor decay^t, so the ranking uses L = log(sum_i score_i * decay^(-t_i)),
// kept in log space so that it never overflows; a new access adds log(score) - t*log(decay) by
// log-add-exp. A score of 0 adds nothing. Ties evict the least recently used.
// 13.25 bytes per slot (detail/slot_tournament.h).
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

#include "core/error.h"
#include "cache_sim/detail/slot_tournament.h"
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
  void resize(Slot slots) { rank_.resize(slots); }
  void on_fill(Slot s, const Touch& t) { rank_.push(s, key(contribution(t))); }
  void on_hit(Slot s, const Touch& t) { rank_.update(s, key(log_add(log_rel(s), contribution(t)))); }
  void on_remove(Slot s) { rank_.erase(s); }
  Slot victim() { return rank_.top(); }
  std::size_t bytes() const { return rank_.bytes(); }
  Slot peek_victim(int k) const { return rank_.empty() ? kNoSlot : k == 0 ? rank_.top() : rank_.second(); }
  void prefetch(Slot s) const { rank_.prefetch(s); }

  // Relevance of slot s at level tick t (for tests and reports).
  double relevance(Slot s, std::uint64_t t) const {
    return std::exp(log_rel(s) + static_cast<double>(t) * log_decay_);
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
  // Ranking key: (L as an order-preserving u64, sequence number of the last access).
  detail::RankKey key(double log_rel) { return detail::RankKey{detail::ordered(log_rel), rank_.next_minor()}; }
  double log_rel(Slot s) const { return detail::unordered(rank_.key(s).major); }

  double log_decay_;
  detail::SlotTournament rank_;
};

}  // namespace ip::cache
