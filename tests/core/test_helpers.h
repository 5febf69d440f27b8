// Small helpers shared by the core test suites (no logic of the code under test).
#pragma once

#include <cstdint>
#include <exception>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "core/error.h"
#include "core/pool.h"
#include "core/tensor.h"

namespace iptest {

// A read-only [rows, cols] view of a row-major vector.
inline ip::MatrixView<const float> view(const std::vector<float>& v, ip::Index64 rows, ip::Index64 cols) {
  return ip::MatrixView<const float>(v.data(), rows, cols);
}

// Pooling parameters of one scheme, group size and precision (other fields at their defaults).
inline ip::PoolParams params(ip::Weighting scheme, int G, ip::Precision prec = ip::Precision::fp32) {
  ip::PoolParams p;
  p.group_size = G;
  p.weights.scheme = scheme;
  p.precision = prec;
  return p;
}

// Success when fn() throws ip::Error whose what() contains `needle`.
template <class Fn>
::testing::AssertionResult throws_ip_error(Fn&& fn, std::string_view needle) {
  try {
    fn();
  } catch (const ip::Error& e) {
    if (std::string_view(e.what()).find(needle) != std::string_view::npos) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "ip::Error \"" << e.what() << "\" does not mention \"" << needle << "\"";
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "threw a non-ip::Error exception: " << e.what();
  }
  return ::testing::AssertionFailure() << "nothing thrown (expected an ip::Error mentioning \"" << needle << "\")";
}

}  // namespace iptest

// EXPECT_IP_ERROR(statement, "substring of the message")
#define EXPECT_IP_ERROR(stmt, needle) EXPECT_TRUE(::iptest::throws_ip_error([&] { stmt; }, needle))
