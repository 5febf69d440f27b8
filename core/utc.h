// The current time in UTC as ISO 8601 ("2026-12-05T20:01:28Z"): when a results file or a benchmark's JSON
// was made.
#pragma once

#include <ctime>
#include <string>

namespace ip {

inline std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace ip
