// Access-statistics update (kernels/stats.cu) against AccessStats::update (core/stats.cc).
// Host C++: it only calls the launcher. Counts must be equal. Masses: the device computes
// fma(gamma, a, m) (core/stats_math.h), checked bitwise against std::fma; they equal the CPU's bits
// when the host compiler contracts the same expression (probed: host_fuses_decay), and are within
// 1 ulp per step of them otherwise.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include "core/stats.h"
#include "kernels/stats.h"
#include "tests/core/test_helpers.h"
#include "tests/gpu/gpu_test.h"

namespace ip {
namespace {

bool host_fuses_decay() {
  std::mt19937 gen(7);
  std::uniform_real_distribution<float> u(0.0f, 3.0f);
  for (int i = 0; i < 100000; ++i) {
    const float gamma = 0.9f, a = u(gen), m = u(gen);
    volatile float prod = gamma * a;
    const float separate = prod + m, fused = std::fma(gamma, a, m);
    if (separate == fused) continue;
    AccessStats s(1, gamma);
    s.mass = {a};
    const float step[1] = {m};
    s.update(step, {});
    return s.mass[0] == fused;
  }
  return false;
}

// Random non-overlapping ranges over [0, T), some empty, one possibly ending at T.
std::vector<std::pair<Index64, Index64>> random_ranges(Index64 T, std::mt19937& gen) {
  std::uniform_int_distribution<Index64> gap(0, 40), len(0, 70);
  std::vector<std::pair<Index64, Index64>> r;
  for (Index64 pos = gap(gen); pos < T; pos += gap(gen)) {
    const Index64 end = std::min(T, pos + len(gen));
    r.emplace_back(pos, end);
    pos = end;
  }
  std::shuffle(r.begin(), r.end(), gen);  // any order
  return r;
}

TEST(StatsArgs, BadArgumentsThrowBeforeAnyCudaCall) {
  static float mass[4], step[4];
  static std::uint32_t count[4];
  static long long ranges[2] = {0, 4};
  auto valid = [] {
    cuda::StatsArgs a;
    a.mass = mass;
    a.count = count;
    a.tokens = 4;
    a.step_mass = step;
    a.ranges = ranges;
    a.n_ranges = 1;
    return a;
  };
  EXPECT_NO_THROW(cuda::validate_stats_args(valid()));
  struct Bad {
    const char* needle;
    void (*edit)(cuda::StatsArgs&);
  };
  const Bad bad[] = {{"tokens = -1", [](cuda::StatsArgs& a) { a.tokens = -1; }},
                     {"n_ranges = -2", [](cuda::StatsArgs& a) { a.n_ranges = -2; }},
                     {"decay = 1.5", [](cuda::StatsArgs& a) { a.decay = 1.5f; }},
                     {"decay = nan", [](cuda::StatsArgs& a) { a.decay = NAN; }},
                     {"must not be null", [](cuda::StatsArgs& a) { a.step_mass = nullptr; }},
                     {"must not be null", [](cuda::StatsArgs& a) { a.count = nullptr; }},
                     {"must not be null", [](cuda::StatsArgs& a) { a.mass = nullptr; }},
                     {"n_ranges = -1", [](cuda::StatsArgs& a) { a.n_ranges = -1; }},
                     {"decay = -0.25", [](cuda::StatsArgs& a) { a.decay = -0.25f; }},
                     {"ranges is null", [](cuda::StatsArgs& a) { a.ranges = nullptr; }}};
  for (const Bad& b : bad) {
    cuda::StatsArgs a = valid();
    b.edit(a);
    EXPECT_IP_ERROR(cuda::validate_stats_args(a), b.needle);
    EXPECT_IP_ERROR(cuda::update_stats(a, nullptr), b.needle);
  }
}

// The edges of what is valid: decay 0 and 1, no tokens (then the arrays may be null), no ranges (then
// ranges may be null). update_stats makes no CUDA call with nothing to do.
TEST(StatsArgs, EdgesOfTheValidRangeAreAccepted) {
  static float mass[1], step[1];
  static std::uint32_t count[1];
  for (float decay : {0.0f, 1.0f}) {
    cuda::StatsArgs a;
    a.mass = mass;
    a.count = count;
    a.tokens = 1;
    a.step_mass = step;
    a.decay = decay;
    EXPECT_NO_THROW(cuda::validate_stats_args(a)) << decay;  // n_ranges = 0, ranges null
  }
  cuda::StatsArgs none;  // tokens = 0, every pointer null
  EXPECT_NO_THROW(cuda::validate_stats_args(none));
  EXPECT_NO_THROW(cuda::update_stats(none, nullptr));
}

TEST(StatsGpu, MatchesAccessStatsUpdateOverSteps) {
  IP_REQUIRE_GPU();
  const bool host_fma = host_fuses_decay();
  for (Index64 T : {1LL, 19LL, 111LL, 989LL, 70000LL}) {
    SCOPED_TRACE(T);
    std::mt19937 gen(static_cast<unsigned>(T));
    std::uniform_real_distribution<float> u(0.0f, 2.0f);
    AccessStats cpu(T, 0.93f);
    for (Index64 i = 0; i < T; ++i) {
      cpu.mass[i] = i % 5 == 0 ? 0.0f : u(gen);
      cpu.count[i] = static_cast<std::uint32_t>(i % 7);
    }
    std::vector<float> want = cpu.mass;  // the device's arithmetic: std::fma each step
    // One extra element past the end of each array: must stay as it was.
    std::vector<float> mass_h = cpu.mass;
    mass_h.push_back(-1.0f);
    std::vector<std::uint32_t> count_h = cpu.count;
    count_h.push_back(12345u);
    auto d_mass = test::to_device(mass_h);
    auto d_count = test::to_device(count_h);
    for (int step = 0; step < 3; ++step) {
      const auto ranges = random_ranges(T, gen);
      std::vector<float> step_mass(T, 0.0f);
      std::vector<long long> flat;
      for (const auto& [b, e] : ranges) {
        for (Index64 i = b; i < e; ++i) step_mass[i] = u(gen);
        flat.push_back(b);
        flat.push_back(e);
      }
      for (Index64 i = 0; i < T; ++i) want[i] = std::fma(cpu.decay, want[i], step_mass[i]);
      cpu.update(step_mass, ranges);
      auto d_step = test::to_device(step_mass);
      auto d_ranges = test::to_device(flat);
      cuda::StatsArgs a;
      a.mass = d_mass.data();
      a.count = d_count.data();
      a.tokens = T;
      a.decay = cpu.decay;
      a.step_mass = d_step.data();
      a.ranges = d_ranges.data();
      a.n_ranges = static_cast<int>(ranges.size());
      cuda::update_stats(a, nullptr);
      IP_CUDA_CHECK(cudaDeviceSynchronize());
    }
    const auto gm = d_mass.to_host();
    const auto gc = d_count.to_host();
    EXPECT_EQ(gm.back(), -1.0f) << "mass written past its end";
    EXPECT_EQ(gc.back(), 12345u) << "count written past its end";
    int bad = 0;
    for (Index64 i = 0; i < T && bad < 8; ++i) {
      bad += gc[i] != cpu.count[i];
      EXPECT_EQ(gc[i], cpu.count[i]) << "count of token " << i;
      bad += gm[i] != want[i];
      EXPECT_EQ(gm[i], want[i]) << "mass of token " << i << " (fma)";
      if (host_fma) {
        bad += gm[i] != cpu.mass[i];
        EXPECT_EQ(gm[i], cpu.mass[i]) << "mass of token " << i << " (CPU, bitwise)";
      } else {
        EXPECT_NEAR(gm[i], cpu.mass[i], 3 * 0x1p-23f * std::fabs(cpu.mass[i]) + 1e-30f) << "mass of token " << i;
      }
    }
  }
}

// update_stats over device arrays (count may point inside a larger allocation), then a device sync.
void update_on_device(float* mass, std::uint32_t* count, Index64 tokens, float decay, const float* step,
                      const long long* ranges, int n_ranges) {
  cuda::StatsArgs a;
  a.mass = mass;
  a.count = count;
  a.tokens = tokens;
  a.decay = decay;
  a.step_mass = step;
  a.ranges = ranges;
  a.n_ranges = n_ranges;
  cuda::update_stats(a, nullptr);
  IP_CUDA_CHECK(cudaDeviceSynchronize());
}

// Device-only behaviour: ranges are clipped to [0, tokens), overlapping ranges count twice.
TEST(StatsGpu, ClippedAndOverlappingRanges) {
  IP_REQUIRE_GPU();
  const Index64 T = 10;
  auto d_mass = test::to_device(std::vector<float>(T + 1, 1.0f));
  auto d_count = test::to_device(std::vector<std::uint32_t>(T + 1, 0u));
  auto d_step = test::to_device(std::vector<float>(T, 0.25f));
  auto d_ranges = test::to_device(std::vector<long long>{-5, 2, 8, 25, 1, 4, 6, 6});
  update_on_device(d_mass.data(), d_count.data(), T, 0.5f, d_step.data(), d_ranges.data(), 4);
  const std::vector<std::uint32_t> want = {1, 2, 1, 1, 0, 0, 0, 0, 1, 1, 0};  // last: past the end
  EXPECT_EQ(d_count.to_host(), want);
  const auto m = d_mass.to_host();
  for (Index64 i = 0; i < T; ++i) EXPECT_EQ(m[i], 0.75f) << i;  // 0.5 * 1 + 0.25 (not a fixed point)
  EXPECT_EQ(m[T], 1.0f);  // past the end: untouched
}

// More tokens than the decay kernel's largest grid (65536 blocks of 256 threads) and more ranges than
// the count kernel's (65536 blocks): the threads and blocks stride, each token decayed once and each
// range counted once.
TEST(StatsGpu, MoreTokensAndRangesThanOneGrid) {
  IP_REQUIRE_GPU();
  const Index64 T = 65536LL * 256 + 300;
  const int n_ranges = 65536 + 5;
  auto d_mass = test::to_device(std::vector<float>(T, 2.0f));
  auto d_count = test::to_device(std::vector<std::uint32_t>(T, 0u));
  auto d_step = test::to_device(std::vector<float>(T, 0.0f));
  std::vector<long long> flat;
  for (long long r = 0; r < n_ranges; ++r) {  // token 2r alone, the last range at the end
    const long long first = r + 1 < n_ranges ? 2 * r : T - 1;
    flat.push_back(first);
    flat.push_back(first + 1);
  }
  auto d_ranges = test::to_device(flat);
  update_on_device(d_mass.data(), d_count.data(), T, 0.5f, d_step.data(), d_ranges.data(), n_ranges);
  const auto m = d_mass.to_host();
  const auto c = d_count.to_host();
  int bad = 0;
  for (Index64 i = 0; i < T && bad < 8; ++i) {
    const std::uint32_t want = (i % 2 == 0 && i < 2LL * (n_ranges - 1)) || i == T - 1 ? 1u : 0u;
    bad += m[i] != 1.0f || c[i] != want;
    EXPECT_EQ(m[i], 1.0f) << "mass of token " << i;  // 0.5 * 2 + 0, once
    EXPECT_EQ(c[i], want) << "count of token " << i;
  }
}

// A range starting below 0 is clipped there: nothing is written before the arrays either (the counts
// sit inside a larger allocation whose first elements must stay as they were).
TEST(StatsGpu, RangeBelowZeroWritesNothingBeforeTheArray) {
  IP_REQUIRE_GPU();
  const Index64 T = 6, pad = 8;
  auto d_mass = test::to_device(std::vector<float>(T, 1.0f));
  auto d_count = test::to_device(std::vector<std::uint32_t>(pad + T, 7u));
  auto d_step = test::to_device(std::vector<float>(T, 0.0f));
  auto d_ranges = test::to_device(std::vector<long long>{-pad, 2, -3, 1});
  update_on_device(d_mass.data(), d_count.data() + pad, T, 1.0f, d_step.data(), d_ranges.data(), 2);
  std::vector<std::uint32_t> want(pad + T, 7u);
  want[pad] = 9;  // token 0: both ranges
  want[pad + 1] = 8;
  EXPECT_EQ(d_count.to_host(), want);
}

}  // namespace
}  // namespace ip
