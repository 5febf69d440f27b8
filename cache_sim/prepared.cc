#include "cache_sim/prepared.h"

#include <algorithm>

#include "core/error.h"
#include "cache_sim/detail/flat_map.h"

namespace ip::cache {

PreparedTrace prepare(const Trace& trace) {
  PreparedTrace p;
  p.trace = &trace;
  const auto& t = trace.accesses;
  p.ids.resize(t.size());
  detail::FlatMap<std::uint32_t> dense(1024);
  // Hash lookups a few accesses ahead are prefetched: the trace is known.
  constexpr std::size_t kAhead = 8;
  for (std::size_t i = 0; i < t.size(); ++i) {
    if (i + kAhead < t.size()) dense.prefetch(t[i + kAhead].id);
    bool inserted = false;
    std::uint32_t& d = dense.get(t[i].id, 0, inserted);
    if (inserted) {
      IP_REQUIRE(p.original.size() < UINT32_MAX, "trace {}: more than {} distinct ids", trace.source, UINT32_MAX - 1);
      d = static_cast<std::uint32_t>(p.original.size());
      p.original.push_back(t[i].id);
    }
    p.ids[i] = d;
    p.min_size = i == 0 ? t[i].size : std::min(p.min_size, t[i].size);
    p.max_size = std::max(p.max_size, t[i].size);
  }
  p.original.shrink_to_fit();
  return p;
}

}  // namespace ip::cache
