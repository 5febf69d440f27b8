// indexpool cache-sim: replay a trace through a cache hierarchy (cache_sim/), print per-level
// statistics, optionally the exact LRU miss-ratio curve and its SHARDS estimate.
#pragma once

#include <string>
#include <vector>

namespace ip::exp {

// `args` are the words after "cache-sim". Returns the exit status: 0 on success, 1 on bad input or
// a failed read (message on stderr naming the argument or FILE:LINE), 2 on a malformed command line.
int cmd_cache_sim(const std::vector<std::string>& args);

}  // namespace ip::exp
