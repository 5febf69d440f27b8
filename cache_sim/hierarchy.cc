#include "cache_sim/hierarchy.h"

#include <algorithm>
#include <limits>

#include "core/error.h"

namespace ip::cache {

Mode parse_mode(const std::string& text) {
  if (text == "nine") return Mode::nine;
  if (text == "inclusive") return Mode::inclusive;
  if (text == "exclusive") return Mode::exclusive;
  throw Error(fmt::format("--mode '{}': expected nine, inclusive or exclusive", text));
}

const char* mode_name(Mode m) {
  switch (m) {
    case Mode::nine: return "nine";
    case Mode::inclusive: return "inclusive";
    case Mode::exclusive: return "exclusive";
  }
  return "?";
}

Hierarchy::Hierarchy(const std::vector<LevelSpec>& levels, const HierarchyOptions& options) : options_(options) {
  IP_REQUIRE(!levels.empty(), "a hierarchy needs at least one level");
  IP_REQUIRE(options.progress_every > 0, "a hierarchy's progress interval must be at least one access");
  levels_.reserve(levels.size());
  // Exclusive mode moves entries between levels: victims then carry their next use and score.
  for (const auto& spec : levels) levels_.push_back(make_level(spec, options.mode == Mode::exclusive));
  totals_.assign(levels.size() + 1, Counters{});
  requests_.enabled = options.per_request;
  steps_.enabled = options.per_step;
  for (const auto& l : levels_) needs_future_ = needs_future_ || l->needs_future();
}

Hierarchy::Counters* Hierarchy::Groups::row(std::uint32_t key, std::size_t nrows) {
  if (key != last_key || last_row == UINT32_MAX) {
    const auto [it, inserted] = index.emplace(key, static_cast<std::uint32_t>(keys.size()));
    if (inserted) {
      keys.push_back(key);
      rows.resize(rows.size() + nrows);
    }
    last_key = key;
    last_row = it->second;
  }
  return &rows[std::size_t{last_row} * nrows];
}

LevelStats Hierarchy::stats_of(const Counters* rows, std::size_t level) const {
  LevelStats s;
  for (std::size_t k = level; k <= levels_.size(); ++k) {
    s.accesses += rows[k].ended;
    if (k > level) s.bytes_from_below += rows[k].ended_bytes;
  }
  s.hits = level < levels_.size() ? rows[level].ended : 0;
  s.misses = s.accesses - s.hits;
  s.evictions = rows[level].evictions;
  s.invalidations = rows[level].invalidations;
  s.bypasses = rows[level].bypasses;
  return s;
}

std::vector<GroupStats> Hierarchy::sorted(const Groups& g) const {
  std::vector<GroupStats> out;
  const std::size_t nrows = levels_.size() + 1;
  for (std::size_t i = 0; i < g.keys.size(); ++i) {
    GroupStats gs{g.keys[i], {}};
    for (std::size_t l = 0; l < levels_.size(); ++l) gs.levels.push_back(stats_of(&g.rows[i * nrows], l));
    out.push_back(std::move(gs));
  }
  std::sort(out.begin(), out.end(), [](const GroupStats& a, const GroupStats& b) { return a.key < b.key; });
  return out;
}

std::uint64_t Hierarchy::hits() const {
  return accesses_ - totals_[levels_.size()].ended;
}

std::size_t Hierarchy::access_hashed(const Access& a, std::uint64_t h, std::int64_t next) {
  const std::size_t n = levels_.size();
  ++accesses_;
  req_row_ = requests_.enabled ? requests_.row(a.request, n + 1) : nullptr;
  step_row_ = steps_.enabled ? steps_.row(a.step, n + 1) : nullptr;

  std::size_t k = 0;
  Slot s = kNoSlot;
  for (; k < n; ++k) {
    levels_[k]->arrive();
    s = levels_[k]->find(a.id, h);
    if (s != kNoSlot) break;
  }
  count(k, [&](Counters& c) { ++c.ended, c.ended_bytes += a.size; });
  if (options_.mode == Mode::exclusive) {
    access_exclusive(a, next, k, s);
    return k;
  }
  if (k < n) levels_[k]->hit(s, next, a.score);
  // Fill every level that missed, from the bottom up (inclusive mode needs that order: a level's
  // victims invalidate the levels above it before those are filled).
  bool bypass_above = false;
  for (std::size_t j = k; j-- > 0;) {
    Level& level = *levels_[j];
    if (bypass_above || !level.fits(a.size)) {
      count(j, [](Counters& st) { ++st.bypasses; });
      bypass_above = options_.mode == Mode::inclusive;
      continue;
    }
    const bool inclusive = options_.mode == Mode::inclusive;
    if (inclusive) victims_.clear();
    const std::size_t evicted = level.insert(a.id, h, a.size, next, a.score, inclusive ? &victims_ : nullptr);
    if (!evicted) continue;
    count(j, [&](Counters& st) { st.evictions += evicted; });
    if (!inclusive) continue;
    for (const Victim& v : victims_)
      for (std::size_t i = 0; i < j; ++i)
        if (levels_[i]->erase(v.id)) count(i, [](Counters& st) { ++st.invalidations; });
  }
  return k;
}

void Hierarchy::access_exclusive(const Access& a, std::int64_t next, std::size_t k, Slot s) {
  const std::size_t n = levels_.size();
  if (k == 0) {
    levels_[0]->hit(s, next, a.score);
    return;
  }
  if (k < n) levels_[k]->erase(a.id);  // promoted to the top: it leaves level k
  // Place the object at the first level that can hold it; each level's victims go one level down
  // (skipping levels too small for them); the last level's victims leave the hierarchy.
  pending_.clear();
  pending_.push_back(Pending{0, Victim{a.id, a.size, a.score, next}});
  for (std::size_t w = 0; w < pending_.size(); ++w) {
    auto [j, item] = pending_[w];
    while (j < n && !levels_[j]->fits(item.size)) {
      if (w == 0) count(j, [](Counters& st) { ++st.bypasses; });
      ++j;
    }
    if (j == n) continue;
    victims_.clear();
    const std::size_t evicted = levels_[j]->insert(item.id, item.size, item.next, item.score, &victims_);
    if (!evicted) continue;
    count(j, [&](Counters& st) { st.evictions += evicted; });
    for (const Victim& v : victims_) pending_.push_back(Pending{j + 1, v});
  }
}

std::size_t Hierarchy::chunk() const {
  return options_.progress ? static_cast<std::size_t>(options_.progress_every) : SIZE_MAX / 2;
}

template <class Replay>
void Hierarchy::replay_in_chunks(std::size_t n, Replay&& replay) {
  for (std::size_t b = 0; b < n; b += chunk()) {
    const std::size_t m = std::min(chunk(), n - b);
    tally_replay(replay(b, m), m);
    report(b + m - 1, n);
  }
}

void Hierarchy::tally_replay(const Level::Replay& r, std::size_t n) {
  accesses_ += n;
  totals_[0].ended += r.hits, totals_[0].ended_bytes += r.hit_bytes;
  totals_[1].ended += r.misses, totals_[1].ended_bytes += r.miss_bytes;
  totals_[0].evictions += r.evictions, totals_[0].bypasses += r.bypasses;
}

void Hierarchy::run(const Trace& trace, const std::vector<std::int64_t>* given_next) {
  IP_REQUIRE(!dense_, "a hierarchy that replayed a prepared trace takes no other accesses");
  // The trace is known ahead: start loading what an access reads a few accesses early, so that the
  // memory loads of consecutive accesses overlap instead of waiting one by one. Two stages: the map
  // buckets kAhead accesses early, the entry and policy metadata kAhead / 2 early. Each id is hashed
  // once (a ring of the hashes in flight).
  constexpr std::size_t kAhead = 16, kRing = 32;
  const std::vector<Access>& t = trace.accesses;
  const std::size_t n = t.size();
  std::vector<std::int64_t> computed;
  if (needs_future_ && !given_next) computed = next_uses(t);
  IP_REQUIRE(!given_next || given_next->size() == n, "run: {} next uses for {} accesses", given_next ? given_next->size() : 0, n);
  const std::vector<std::int64_t>& next = given_next ? *given_next : computed;
  if (levels_.size() == 1 && options_.mode != Mode::exclusive && !requests_.enabled && !steps_.enabled) {
    // One level (nine and inclusive are the same then) and totals only: the level's own loop, with
    // the policy inlined. The same hits, misses and evictions as access() per access (prepared_test.cc).
    replay_in_chunks(n, [&](std::size_t b, std::size_t m) {
      return levels_[0]->replay(t.data() + b, next.empty() ? nullptr : next.data() + b, m,
                                std::max<std::size_t>(2, options_.prefetch_ahead));
    });
    return;
  }
  std::uint64_t ring[kRing];
  const auto stage1 = [&](std::size_t i) {
    ring[i % kRing] = Level::hash(t[i].id);
    for (const auto& l : levels_)
      if (l->prefetching()) l->prefetch(ring[i % kRing]);
  };
  for (std::size_t i = 0; i < std::min(kAhead, n); ++i) stage1(i);
  for (std::size_t i = 0, report_at = std::min(n, chunk()) - 1; i < n; ++i) {
    if (i + kAhead < n) stage1(i + kAhead);
    if (i + kAhead / 2 < n)
      for (const auto& l : levels_)
        if (l->prefetching()) l->prefetch_entry(ring[(i + kAhead / 2) % kRing]);
    access_hashed(t[i], ring[i % kRing], next.empty() ? -1 : next[i]);
    if (i == report_at) report(i, n), report_at = std::min(n, i + 1 + chunk()) - 1;
  }
}

}  // namespace ip::cache

namespace ip::cache {

void Hierarchy::run(const PreparedTrace& p, const std::vector<std::int64_t>* given_next) {
  IP_REQUIRE(p.trace && p.ids.size() == p.trace->accesses.size(), "run: a prepared trace without its trace");
  IP_REQUIRE(accesses_ == 0, "run: a prepared trace replays on a fresh hierarchy only");
  dense_ = true;
  for (const auto& l : levels_) {
    // The array when it costs at most the 12 bytes per entry the hash map can cost (slot_map.h).
    const Capacity& c = l->capacity();
    // (Objects of 0 bytes: a byte capacity holds any number of them.)
    const double most_entries = !c.bytes        ? static_cast<double>(c.value)
                                : p.min_size > 0 ? static_cast<double>(c.value) / p.min_size
                                                 : std::numeric_limits<double>::infinity();
    const bool cheaper = 4.0 * static_cast<double>(p.universe()) <= 12.0 * most_entries;
    const bool array = options_.id_map == IdMap::array || (options_.id_map == IdMap::automatic && cheaper);
    l->use_dense_ids(p.universe(), array, p.uniform_size());
  }
  // As run(Trace), on the dense ids: each level's map (array or hash map, prepared.h) kAhead
  // accesses early, the entry and policy metadata of the slot found there kAhead / 2 early.
  const std::size_t kAhead = std::max<std::size_t>(2, options_.prefetch_ahead);
  const std::vector<Access>& t = p.trace->accesses;
  const std::uint32_t* ids = p.ids.data();
  const std::size_t n = t.size();
  std::vector<std::int64_t> computed;
  if (needs_future_ && !given_next) computed = next_uses(t);
  IP_REQUIRE(!given_next || given_next->size() == n, "run: {} next uses for {} accesses", given_next ? given_next->size() : 0, n);
  const std::vector<std::int64_t>& next = given_next ? *given_next : computed;
  if (levels_.size() == 1 && options_.mode != Mode::exclusive && !requests_.enabled && !steps_.enabled) {
    // One level (nine and inclusive are the same then) and totals only: the level's own loop, with
    // the policy inlined. The same hits, misses and evictions as access() per access (prepared_test.cc).
    replay_in_chunks(n, [&](std::size_t b, std::size_t m) {
      return levels_[0]->replay_dense(ids + b, t.data() + b, next.empty() ? nullptr : next.data() + b, m, kAhead);
    });
    return;
  }
  for (std::size_t i = 0; i < std::min(kAhead, n); ++i)
    for (const auto& l : levels_)
      if (l->prefetching()) l->prefetch(l->key(ids[i]));
  for (std::size_t i = 0, report_at = std::min(n, chunk()) - 1; i < n; ++i) {
    if (i + kAhead < n)
      for (const auto& l : levels_)
        if (l->prefetching()) l->prefetch(l->key(ids[i + kAhead]));
    if (i + kAhead / 2 < n)
      for (const auto& l : levels_)
        if (l->prefetching()) l->prefetch_entry(l->key(ids[i + kAhead / 2]));
    Access a = t[i];
    a.id = ids[i];
    access_hashed(a, Level::hash(a.id), next.empty() ? -1 : next[i]);
    if (i == report_at) report(i, n), report_at = std::min(n, i + 1 + chunk()) - 1;
  }
}

}  // namespace ip::cache
