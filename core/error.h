// The one exception type of IndexPool and the argument-checking macro.
#pragma once

#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace ip {

// Thrown for bad input (shapes, parameters, non-finite data) and for failed I/O.
// The message names the offending parameter or file; callers add context and rethrow.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

}  // namespace ip

// IP_REQUIRE(cond, "format {}", args...) throws ip::Error with the formatted message.
#define IP_REQUIRE(cond, ...)                                   \
  do {                                                          \
    if (!(cond)) throw ::ip::Error(::fmt::format(__VA_ARGS__)); \
  } while (0)
