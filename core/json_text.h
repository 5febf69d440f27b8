// JSON string literals for the tool's JSON outputs (cache-sim --json, kernel_bench --json, the emulator's
// memory-access profile). Header-only, no dependencies.
//
// JSON text is UTF-8, and what goes into these strings (a trace's path, a command line, a kernel's name) is
// bytes: every byte that is not part of a well-formed UTF-8 sequence becomes U+FFFD, so the output always
// parses (Python's json.load, jq). '"' and '\' are escaped, control characters written as \u00XX.
#pragma once

#include <cstddef>
#include <cstdio>
#include <string>

namespace ip {

// The length of the well-formed UTF-8 sequence starting at s[i] (RFC 3629: no overlong forms, no surrogates,
// nothing above U+10FFFF), or 0 when the byte there does not start one.
inline std::size_t utf8_sequence(const std::string& s, std::size_t i) {
  const auto at = [&](std::size_t k) { return k < s.size() ? static_cast<unsigned char>(s[k]) : 0u; };
  const auto cont = [&](std::size_t k, unsigned lo = 0x80, unsigned hi = 0xbf) { return at(k) >= lo && at(k) <= hi; };
  const unsigned b = at(i);
  if (b < 0x80) return i < s.size() ? 1 : 0;
  if (b >= 0xc2 && b <= 0xdf) return cont(i + 1) ? 2 : 0;
  if (b >= 0xe0 && b <= 0xef) {
    const unsigned lo = b == 0xe0 ? 0xa0 : 0x80, hi = b == 0xed ? 0x9f : 0xbf;
    return cont(i + 1, lo, hi) && cont(i + 2) ? 3 : 0;
  }
  if (b >= 0xf0 && b <= 0xf4) {
    const unsigned lo = b == 0xf0 ? 0x90 : 0x80, hi = b == 0xf4 ? 0x8f : 0xbf;
    return cont(i + 1, lo, hi) && cont(i + 2) && cont(i + 3) ? 4 : 0;
  }
  return 0;
}

// `s` as a JSON string literal, quotes included.
inline std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t n = utf8_sequence(s, i);
    if (n == 0) {
      out += "\\ufffd";
      ++i;
      continue;
    }
    const char c = s[i];
    if (n > 1) {
      out.append(s, i, n);
    } else if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char esc[8];
      std::snprintf(esc, sizeof esc, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
      out += esc;
    } else {
      out += c;
    }
    i += n;
  }
  return out + "\"";
}

}  // namespace ip
