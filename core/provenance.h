// How a results file or a benchmark's JSON was made: the command line and the time.
#pragma once

#include <ctime>
#include <string>

namespace ip {

// The current time in UTC as ISO 8601 ("2026-12-05T20:01:28Z").
inline std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// argv as one shell line: an argument empty or holding characters a shell would read is single-quoted
// (the characters Python's shlex.quote leaves bare are left bare), so shlex.split gives argv back.
inline std::string command_line(int argc, const char* const* argv) {
  std::string out;
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    const bool plain = !a.empty() && a.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                                         "0123456789-_./=,:+@%") == std::string::npos;
    if (i) out += ' ';
    if (plain) {
      out += a;
      continue;
    }
    out += '\'';
    for (char c : a) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    out += '\'';
  }
  return out;
}

}  // namespace ip
