// A hierarchy of levels (level 0 is closest to the consumer) and the accounting of every access.
//
// Modes:
//  nine       (default) an access goes to level i only if it missed every level above; every level
//             that missed is filled; no back-invalidation (non-inclusive, non-exclusive).
//  inclusive  as nine, and each level holds a subset of the level below: evicting from level j
//             invalidates the copies in levels above j; an object that bypasses a level (too large)
//             bypasses every level above it too.
//  exclusive  victim-cache style: an object lives in at most one level. A hit at level k > 0 moves it
//             to level 0; whatever level i evicts is stored in level i + 1 (the last level drops it);
//             a miss everywhere stores the object in level 0. An object too large for a level skips it.
//             A demoted entry enters the level below as if accessed then, with the score and next use
//             of its last access (so semantic and opt levels below rank it).
// Objects larger than a byte-capacity level bypass it (counted as a miss and a bypass).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <unordered_map>
#include <vector>

#include "cache_sim/capacity.h"
#include "cache_sim/level.h"
#include "cache_sim/prepared.h"
#include "cache_sim/trace.h"
#include "core/error.h"

namespace ip::cache {

enum class Mode { nine, inclusive, exclusive };
// How the levels that replay a prepared trace map dense ids to slots (prepared.h).
enum class IdMap { automatic, array, hash };
Mode parse_mode(const std::string& text);
const char* mode_name(Mode m);

struct LevelStats {
  std::uint64_t accesses = 0;       // accesses that reached this level (missed every level above)
  std::uint64_t hits = 0;
  std::uint64_t misses = 0;
  std::uint64_t evictions = 0;      // entries this level's policy pushed out (demoted in exclusive mode)
  std::uint64_t invalidations = 0;  // copies removed because a lower level evicted them (inclusive)
  std::uint64_t bypasses = 0;       // misses not stored: larger than the level (inclusive: or a level below)
  std::uint64_t bytes_from_below = 0;  // bytes of the objects this level missed (read from below)
  double hit_rate() const { return accesses ? static_cast<double>(hits) / static_cast<double>(accesses) : 0.0; }
  bool operator==(const LevelStats&) const = default;
};

// Statistics of one request id or one decode step id, per level.
struct GroupStats {
  std::uint32_t key;
  std::vector<LevelStats> levels;
};

struct HierarchyOptions {
  Mode mode = Mode::nine;
  bool per_request = false;  // keep statistics per request id
  bool per_step = false;     // keep statistics per step id
  // One-level replays (plain and prepared traces) and prepared multi-level replays: how many accesses
  // ahead the replay starts loading an access's metadata (speed only, never results; chosen by
  // measurement, see bench/RESULTS.md).
  std::size_t prefetch_ahead = 16;
  // Prepared traces: the id -> slot map of each level; automatic chooses per level (prepared.h).
  // Speed and memory only, never results.
  IdMap id_map = IdMap::automatic;
  // Progress of run(): called with (accesses done, accesses in all) every progress_every accesses and
  // once at the end, for progress lines on long traces. Never changes results.
  std::function<void(std::uint64_t, std::uint64_t)> progress = nullptr;
  std::uint64_t progress_every = std::uint64_t{1} << 24;
};

class Hierarchy {
 public:
  Hierarchy(const std::vector<LevelSpec>& levels, const HierarchyOptions& options = {});

  // True when some level's policy needs the next use of each access (opt).
  bool needs_future() const { return needs_future_; }

  // One access; `next` is the trace index of the object's next access (-1: none), read by opt only.
  // Returns the level that hit, or levels() when every level missed.
  std::size_t access(const Access& a, std::int64_t next = -1) {
    IP_REQUIRE(!dense_, "a hierarchy that replayed a prepared trace takes no other accesses");
    return access_hashed(a, Level::hash(a.id), next);
  }

  // Every access of the trace in order. Next uses (for opt) are computed from the trace when a level
  // needs them, unless given (next_uses(trace.accesses)).
  void run(const Trace& trace, const std::vector<std::int64_t>* next = nullptr);
  // The same on a prepared trace (dense ids; prepared.h), with the same results; only on a fresh
  // hierarchy, which then takes no other accesses. Level contents (for_each_id) are dense ids.
  void run(const PreparedTrace& trace, const std::vector<std::int64_t>* next = nullptr);

  std::size_t levels() const { return levels_.size(); }
  const Level& level(std::size_t i) const { return *levels_[i]; }
  LevelStats stats(std::size_t i) const { return stats_of(totals_.data(), i); }
  std::uint64_t accesses() const { return accesses_; }
  // Accesses that hit some level.
  std::uint64_t hits() const;
  // Per request / per step, sorted by id (empty unless enabled in the options).
  std::vector<GroupStats> per_request() const { return sorted(requests_); }
  std::vector<GroupStats> per_step() const { return sorted(steps_); }
  Mode mode() const { return options_.mode; }

 private:
  // What is counted per access: where it ended (the level that hit, or levels() for a miss
  // everywhere) and its bytes, per ending; the rest of LevelStats follows (stats_of). Evictions,
  // invalidations and bypasses are counted per level as they happen.
  struct Counters {
    std::uint64_t ended = 0, ended_bytes = 0;
    std::uint64_t evictions = 0, invalidations = 0, bypasses = 0;
  };
  LevelStats stats_of(const Counters* rows, std::size_t level) const;

  struct Groups {
    bool enabled = false;
    std::unordered_map<std::uint32_t, std::uint32_t> index;
    std::vector<std::uint32_t> keys;
    std::vector<Counters> rows;  // group-major, levels() + 1 rows per group
    std::uint32_t last_key = 0, last_row = UINT32_MAX;
    Counters* row(std::uint32_t key, std::size_t nrows);
  };
  std::vector<GroupStats> sorted(const Groups& g) const;

  template <class F>
  void count(std::size_t level, F&& f) {
    f(totals_[level]);
    if (req_row_) f(req_row_[level]);
    if (step_row_) f(step_row_[level]);
  }
  // h = Level::hash(a.id) (levels with dense ids look the id up in their array and ignore it).
  std::size_t access_hashed(const Access& a, std::uint64_t h, std::int64_t next);
  // The totals of a one-level replay of n accesses (Level::replay, replay_dense).
  void tally_replay(const Level::Replay& r, std::size_t n);
  // Replays report progress after every chunk of this many accesses: progress_every with a progress
  // callback, else more than any trace holds (one-level replays then run in one piece).
  std::size_t chunk() const;
  // A one-level replay of n accesses in chunks: replay(begin, count) replays that range.
  template <class Replay>
  void replay_in_chunks(std::size_t n, Replay&& replay);
  // Reports progress after access i (0-based), the last of a chunk.
  void report(std::size_t i, std::size_t n) const {
    if (options_.progress) options_.progress(i + 1, n);
  }
  void access_exclusive(const Access& a, std::int64_t next, std::size_t hit_level, Slot slot);

  HierarchyOptions options_;
  std::vector<std::unique_ptr<Level>> levels_;
  std::vector<Counters> totals_;  // levels() + 1 rows
  Groups requests_, steps_;
  Counters* req_row_ = nullptr;
  Counters* step_row_ = nullptr;
  std::uint64_t accesses_ = 0;
  bool needs_future_ = false;
  bool dense_ = false;  // replayed a prepared trace: levels hold dense ids
  std::vector<Victim> victims_;
  struct Pending {
    std::size_t level;
    Victim item;
  };
  std::vector<Pending> pending_;
};

}  // namespace ip::cache
