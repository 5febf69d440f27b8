// semantic-cos: the variant of semantic that ranks an entry by the score of its most recent access
// alone — no decay, no sum — and evicts the lowest; ties evict the least recently used.
//
// The simulator does not know what the score means. The variant exists for IndexPool's cache model
// with `cache.relevance = cosine`, where each access's score is (1 + cos(k_g, m)) / 2: k_g the
// accessed group's composite key, m the running mean (EMA) of the decode queries up to that step.
// The rank is therefore the similarity at the entry's last access: an entry not accessed since keeps
// the similarity it had then (the simulator cannot recompute it as the query mean moves). 16 bytes
// per slot.
#pragma once

#include <cstdint>

#include "cache_sim/detail/slot_tournament.h"
#include "cache_sim/policy.h"

namespace ip::cache {

class SemanticCos {
 public:
  static SemanticCos make(PolicyArgs& args) {
    args.finish();
    return SemanticCos();
  }
  void resize(Slot slots) { rank_.resize(slots); }
  void on_fill(Slot s, const Touch& t) { rank_.push(s, key(t)); }
  void on_hit(Slot s, const Touch& t) { rank_.update(s, key(t)); }
  void on_remove(Slot s) { rank_.erase(s); }
  Slot victim() { return rank_.top(); }
  std::size_t bytes() const { return rank_.bytes(); }
  Slot peek_victim(int k) const { return rank_.empty() ? kNoSlot : k == 0 ? rank_.top() : rank_.second(); }
  void prefetch(Slot s) const { rank_.prefetch(s); }

  // The score slot s is ranked by (its latest access's).
  double score(Slot s) const { return detail::unordered(rank_.key(s).major); }

 private:
  // (score as an order-preserving u64, sequence number of the access): lowest score first, then oldest.
  detail::RankKey key(const Touch& t) {
    return detail::RankKey{detail::ordered(static_cast<double>(t.score)), rank_.next_minor()};
  }
  detail::SlotTournament rank_;
};

}  // namespace ip::cache
