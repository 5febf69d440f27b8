// The integer order of the GPU top-k (core/topk_order.h) against the CPU's float comparison.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "core/topk.h"
#include "core/topk_order.h"

namespace {

using ip::topk_key;

TEST(TopkOrder, KeyIsMonotoneAndZerosAreEqual) {
  const float inf = std::numeric_limits<float>::infinity();
  const float big = std::numeric_limits<float>::max(), tiny = std::numeric_limits<float>::denorm_min();
  const std::vector<float> ascending = {-inf, -big, -1.5f, -1.0f, -1e-30f, -tiny, 0.0f, tiny, 1e-30f, 1.0f, 1.5f, big, inf};
  for (std::size_t i = 1; i < ascending.size(); ++i)
    EXPECT_LT(topk_key(ascending[i - 1]), topk_key(ascending[i])) << ascending[i - 1] << " vs " << ascending[i];
  EXPECT_EQ(topk_key(-0.0f), topk_key(0.0f));
  EXPECT_LT(topk_key(-tiny), topk_key(-0.0f));
  EXPECT_LT(topk_key(-0.0f), topk_key(tiny));
}

TEST(TopkOrder, NanRanksBelowMinusInfinity) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(topk_key(nan), 0u);
  EXPECT_EQ(topk_key(-nan), 0u);
  EXPECT_EQ(topk_key(ip::f32_from_bits(0x7F800001u)), 0u);  // signalling NaN
  EXPECT_LT(topk_key(nan), topk_key(-std::numeric_limits<float>::infinity()));
}

TEST(TopkOrder, NumberKeyIsTheKeyOfEveryNumber) {
  // Every 97th bit pattern of the 2^32 and both ends of each sign's range: the same key, NaNs apart.
  auto check = [](std::uint32_t u) {
    const float f = ip::f32_from_bits(u);
    if (std::isnan(f)) return true;
    return ip::topk_number_key(u) == topk_key(f);
  };
  std::uint64_t wrong = 0, checked = 0;
  for (std::uint64_t u = 0; u <= 0xFFFFFFFFull; u += 97, ++checked) wrong += !check(static_cast<std::uint32_t>(u));
  for (std::uint32_t u :
       {0x00000000u, 0x00000001u, 0x7F7FFFFFu, 0x7F800000u, 0x80000000u, 0x80000001u, 0xFF7FFFFFu, 0xFF800000u})
    wrong += !check(u);
  EXPECT_EQ(wrong, 0u) << "of " << checked;
}

TEST(TopkOrder, KeyComparisonMatchesFloatComparison) {
  std::mt19937 rng(7);
  std::vector<float> v;
  for (int i = 0; i < 2000; ++i) v.push_back(ip::f32_from_bits(rng()));  // every bit pattern
  for (int i = 0; i < 200; ++i) v.push_back(static_cast<float>(static_cast<int>(rng() % 7) - 3));
  v.push_back(-0.0f);
  v.push_back(0.0f);
  v.erase(std::remove_if(v.begin(), v.end(), [](float f) { return std::isnan(f); }), v.end());
  for (std::size_t i = 0; i < v.size(); i += 3)
    for (std::size_t j = 0; j < v.size(); j += 5) {
      ASSERT_EQ(v[i] > v[j], topk_key(v[i]) > topk_key(v[j])) << v[i] << " " << v[j];
      ASSERT_EQ(v[i] == v[j], topk_key(v[i]) == topk_key(v[j])) << v[i] << " " << v[j];
    }
}

TEST(TopkOrder, CompositeOrderIsTheCpuOrder) {
  // Heavy ties, both zeros, negatives: sorting composites descending equals ip::topk's full order.
  std::mt19937 rng(11);
  const std::vector<float> pool = {-2.0f, -0.0f, 0.0f, 0.5f, 3.0f, -1e-38f};
  std::vector<float> s(997);
  for (float& x : s) x = pool[rng() % pool.size()];
  std::vector<std::uint64_t> c(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) c[i] = ip::topk_composite(topk_key(s[i]), static_cast<std::uint32_t>(i));
  std::sort(c.begin(), c.end(), std::greater<>());
  const std::vector<std::int32_t> cpu = ip::topk(s.data(), static_cast<ip::Index64>(s.size()), static_cast<ip::Index64>(s.size()));
  for (std::size_t i = 0; i < s.size(); ++i) {
    ASSERT_EQ(ip::topk_composite_id(c[i]), cpu[i]) << "rank " << i;
    if (i) {
      const std::int32_t a = cpu[i - 1], b = cpu[i];
      EXPECT_TRUE(ip::topk_before(s[a], a, s[b], b));
      EXPECT_FALSE(ip::topk_before(s[b], b, s[a], a));
    }
  }
}

TEST(TopkOrder, CompositeRoundTripAndNeverZero) {
  for (std::uint32_t id : {0u, 1u, 12345u, 0x7FFFFFFEu, 0x7FFFFFFFu})
    for (std::uint32_t key : {0u, 1u, 0x80000000u, 0xFFFFFFFFu}) {
      const std::uint64_t c = ip::topk_composite(key, id);
      EXPECT_NE(c, 0u);
      EXPECT_EQ(ip::topk_composite_id(c), static_cast<std::int32_t>(id));
      EXPECT_EQ(static_cast<std::uint32_t>(c >> 32), key);
    }
  EXPECT_EQ(ip::topk_composite_id(0), -1);  // the sort's padding reads back as "no id"
}

}  // namespace
