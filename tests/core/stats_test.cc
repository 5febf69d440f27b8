// Access statistics: a <- gamma a + step mass, n_i += 1 inside selected ranges, N += 1.
#include <vector>

#include <gtest/gtest.h>

#include "core/parallel.h"
#include "core/stats.h"
#include "tests/core/test_helpers.h"

namespace {

using Ranges = std::vector<std::pair<ip::Index64, ip::Index64>>;

TEST(Stats, StartsEmpty) {
  ip::AccessStats s(5);
  EXPECT_EQ(s.tokens(), 5);
  EXPECT_EQ(s.steps, 0);
  EXPECT_FLOAT_EQ(s.decay, 0.99f);  // DESIGN.md default gamma
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(s.mass[i], 0.0f);
    EXPECT_EQ(s.count[i], 0u);
  }
}

TEST(Stats, ThreeStepsWithHalfDecay) {
  // gamma = 0.5, T = 4 (all values are exact binary fractions).
  ip::AccessStats s(4, 0.5f);
  // Step 1: mass {0, 1, 0, .5}, ranges [1,2) [3,4)  -> a = {0, 1, 0, .5}, n = {0,1,0,1}, N = 1
  s.update(std::vector<float>{0, 1, 0, 0.5f}, Ranges{{1, 2}, {3, 4}});
  EXPECT_EQ(s.mass, (std::vector<float>{0, 1, 0, 0.5f}));
  EXPECT_EQ(s.count, (std::vector<std::uint32_t>{0, 1, 0, 1}));
  EXPECT_EQ(s.steps, 1);
  // Step 2: mass {.25, 0, 0, 1}, ranges [0,1) [3,4) -> a = {.25, .5, 0, .25 + 1 = 1.25}, n = {1,1,0,2}, N = 2
  s.update(std::vector<float>{0.25f, 0, 0, 1}, Ranges{{0, 1}, {3, 4}});
  EXPECT_EQ(s.mass, (std::vector<float>{0.25f, 0.5f, 0, 1.25f}));
  EXPECT_EQ(s.count, (std::vector<std::uint32_t>{1, 1, 0, 2}));
  EXPECT_EQ(s.steps, 2);
  // Step 3: no mass, range [0,2)                    -> a = {.125, .25, 0, .625}, n = {2,2,0,2}, N = 3
  s.update(std::vector<float>{0, 0, 0, 0}, Ranges{{0, 2}});
  EXPECT_EQ(s.mass, (std::vector<float>{0.125f, 0.25f, 0, 0.625f}));
  EXPECT_EQ(s.count, (std::vector<std::uint32_t>{2, 2, 0, 2}));
  EXPECT_EQ(s.steps, 3);
}

TEST(Stats, DefaultDecayOverTwoSteps) {
  // gamma = 0.99: a = 0.99 * 1 + 0.5 = 1.49 after two steps for token 0; token 1 got mass only in step 1.
  ip::AccessStats s(2);
  s.update(std::vector<float>{1, 2}, Ranges{{0, 2}});
  s.update(std::vector<float>{0.5f, 0}, Ranges{{0, 1}});
  EXPECT_NEAR(s.mass[0], 1.49f, 1e-6);
  EXPECT_NEAR(s.mass[1], 1.98f, 1e-6);  // 0.99 * 2
  EXPECT_EQ(s.count, (std::vector<std::uint32_t>{2, 1}));
  EXPECT_EQ(s.steps, 2);
}

TEST(Stats, GammaOneAccumulatesAndZeroForgets) {
  ip::AccessStats keep(1, 1.0f), forget(1, 0.0f);
  for (float m : {1.0f, 2.0f, 4.0f}) {
    keep.update(std::vector<float>{m}, Ranges{});
    forget.update(std::vector<float>{m}, Ranges{});
  }
  EXPECT_EQ(keep.mass[0], 7.0f);    // 1 + 2 + 4
  EXPECT_EQ(forget.mass[0], 4.0f);  // only the last step
  EXPECT_EQ(keep.count[0], 0u);     // never selected
  EXPECT_EQ(keep.steps, 3);
}

TEST(Stats, LargeContextIsThreadIndependent) {
  // T > 65536 spans several update chunks; 1 and 2 threads give the same bits.
  const ip::Index64 T = 140000;
  std::vector<float> m(T);
  for (ip::Index64 i = 0; i < T; ++i) m[i] = static_cast<float>(i % 13) * 0.125f;
  ip::AccessStats a(T, 0.75f), b(T, 0.75f);
  ip::set_num_threads(1);
  a.update(m, Ranges{{0, 10}, {70000, 70010}});
  a.update(m, Ranges{{5, 6}});
  ip::set_num_threads(2);
  b.update(m, Ranges{{0, 10}, {70000, 70010}});
  b.update(m, Ranges{{5, 6}});
  ip::set_num_threads(0);
  EXPECT_EQ(a.mass, b.mass);
  EXPECT_EQ(a.count, b.count);
  // Token 12: m = 1.5 each step -> 0.75 * 1.5 + 1.5 = 2.625; counts: token 5 in both steps.
  EXPECT_EQ(a.mass[12], 2.625f);
  EXPECT_EQ(a.count[5], 2u);
  EXPECT_EQ(a.count[70005], 1u);
  EXPECT_EQ(a.count[10], 0u);
}

TEST(Stats, BadInputsThrow) {
  EXPECT_IP_ERROR(ip::AccessStats(3, 1.5f), "decay 1.5");
  ip::AccessStats s(3);
  EXPECT_IP_ERROR(s.update(std::vector<float>{1, 2}, Ranges{}), "step mass has 2 entries for 3 tokens");
  EXPECT_IP_ERROR(s.update(std::vector<float>{1, 2, 3}, Ranges{{2, 4}}), "range [2, 4)");
}

TEST(Stats, BadRangeChangesNothing) {
  ip::AccessStats st(4, 0.5f);
  const std::vector<float> m1 = {1, 0, 0, 0};
  const std::vector<std::pair<ip::Index64, ip::Index64>> r1 = {{0, 1}};
  st.update(m1, r1);
  const std::vector<float> m2 = {0, 1, 0, 0};
  const std::vector<std::pair<ip::Index64, ip::Index64>> bad = {{1, 2}, {3, 9}};
  EXPECT_THROW(st.update(m2, bad), ip::Error);
  // Still the state after step 1: a = {1, 0, 0, 0}, n = {1, 0, 0, 0}, N = 1.
  EXPECT_EQ(st.mass, (std::vector<float>{1, 0, 0, 0}));
  EXPECT_EQ(st.count, (std::vector<std::uint32_t>{1, 0, 0, 0}));
  EXPECT_EQ(st.steps, 1);
}

}  // namespace
