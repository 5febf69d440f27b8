// How a results file or a benchmark's JSON was made: the command line and the time.
#pragma once

#include <ctime>
#include <fstream>
#include <string>
#include <thread>

namespace ip {

// A time in UTC as ISO 8601 ("2026-12-05T20:01:28Z").
inline std::string format_utc(std::time_t t) {
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// The current time, as format_utc writes it.
inline std::string utc_now() { return format_utc(std::time(nullptr)); }

// The time utc_now wrote ("2026-12-05T20:01:28Z"), in seconds since the epoch; -1 when `text` is not one.
inline std::time_t parse_utc(const std::string& text) {
  std::tm tm{};
  const char* end = strptime(text.c_str(), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return end && *end == '\0' ? timegm(&tm) : std::time_t{-1};
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

// "<model name from /proc/cpuinfo>, <n> hardware threads" (the machine a result was measured on).
inline std::string cpu_description() {
  std::ifstream in("/proc/cpuinfo");
  std::string line, model = "unknown CPU";
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      model = line.substr(line.find(':') + 2);
      break;
    }
  return model + ", " + std::to_string(std::thread::hardware_concurrency()) + " hardware threads";
}

}  // namespace ip
