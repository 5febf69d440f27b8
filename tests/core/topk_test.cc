// Top-k: best first, ties to the lower id, chunked path for n > 65536, errors.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/parallel.h"
#include "core/topk.h"
#include "tests/core/test_helpers.h"

namespace {

using Ids = std::vector<std::int32_t>;

// Independent reference: sort all ids by (score desc, id asc) and keep k.
Ids reference_topk(const std::vector<float>& s, std::int64_t k) {
  Ids ids(s.size());
  std::iota(ids.begin(), ids.end(), 0);
  std::sort(ids.begin(), ids.end(), [&](std::int32_t a, std::int32_t b) {
    if (s[a] != s[b]) return s[a] > s[b];
    return a < b;
  });
  ids.resize(k);
  return ids;
}

TEST(TopK, TiesGoToTheLowerIdAndOrderIsBestFirst) {
  //            id: 0  1  2  3  4
  const std::vector<float> s = {1, 3, 3, 2, 3};
  // Three 3s at ids 1, 2, 4 (in that order), then the 2 at id 3, then the 1 at id 0.
  EXPECT_EQ(ip::topk(s.data(), 5, 1), (Ids{1}));
  EXPECT_EQ(ip::topk(s.data(), 5, 2), (Ids{1, 2}));
  EXPECT_EQ(ip::topk(s.data(), 5, 3), (Ids{1, 2, 4}));
  EXPECT_EQ(ip::topk(s.data(), 5, 4), (Ids{1, 2, 4, 3}));
  EXPECT_EQ(ip::topk(s.data(), 5, 5), (Ids{1, 2, 4, 3, 0}));
}

TEST(TopK, AllEqualScoresGiveTheFirstIds) {
  const std::vector<float> s(10, 0.5f);
  EXPECT_EQ(ip::topk(s.data(), 10, 3), (Ids{0, 1, 2}));
}

TEST(TopK, NegativeAndInfiniteScores) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> s = {-1, -inf, inf, -0.5f, 0};
  // Order: +inf (2), 0 (4), -0.5 (3), -1 (0), -inf (1).
  EXPECT_EQ(ip::topk(s.data(), 5, 5), (Ids{2, 4, 3, 0, 1}));
}

TEST(TopK, SingleCandidate) {
  const float s = 42.0f;
  EXPECT_EQ(ip::topk(&s, 1, 1), (Ids{0}));
}

TEST(TopK, ChunkedPathMatchesFullSortWithManyDuplicates) {
  // n = 200003 > 3 * 65536: four chunks, the last partial. Scores take only 50 distinct values, so ties
  // cross chunk boundaries everywhere.
  const std::int64_t n = 200003;
  std::mt19937 gen(7);
  std::uniform_int_distribution<int> v(0, 49);
  std::vector<float> s(n);
  for (auto& x : s) x = static_cast<float>(v(gen)) * 0.5f;
  const std::int64_t ks[] = {1, 2, 1000, 65536, 70000, n};
  for (std::int64_t k : ks)
    ASSERT_EQ(ip::topk(s.data(), n, k), reference_topk(s, k)) << "k = " << k;
}

TEST(TopK, ChunkedPathIsTheSameWithOneOrManyThreads) {
  const std::int64_t n = 150000;
  std::mt19937 gen(8);
  std::uniform_int_distribution<int> v(0, 9);
  std::vector<float> s(n);
  for (auto& x : s) x = static_cast<float>(v(gen));
  const auto ref = reference_topk(s, 5000);
  for (int threads : {1, 2, 8}) {
    ip::set_num_threads(threads);
    EXPECT_EQ(ip::topk(s.data(), n, 5000), ref) << threads << " threads";
  }
  ip::set_num_threads(0);
}

// Rows that take each path of the radix select (core/topk.cc): no histogram (n <= 16Ki), one histogram
// then candidates selected in memory, two or three histograms (a crowded top bin), all 32 bits known
// with ties at the threshold, and k = n; on several distributions, each checked against the full sort.
std::vector<float> scores_of(const std::string& kind, std::int64_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal;
  std::uniform_real_distribution<float> uniform;
  std::vector<float> s(n);
  for (std::int64_t i = 0; i < n; ++i) {
    if (kind == "normal") s[i] = normal(gen);
    if (kind == "uniform") s[i] = uniform(gen);                         // top bin: 1/8 of the row
    if (kind == "relu") s[i] = std::max(0.0f, normal(gen));             // half the row ties at 0
    if (kind == "few") s[i] = static_cast<float>(static_cast<int>(uniform(gen) * 7)) - 3;  // 7 values
    if (kind == "close") s[i] = 1.0f + static_cast<float>(gen() % 4096) * 0x1p-23f;  // equal top 22 bits
    if (kind == "signed_zeros") s[i] = (gen() & 1) ? 0.0f : -0.0f;     // equal under the comparison
    if (kind == "tiny") s[i] = static_cast<float>(static_cast<int>(gen() % 2001) - 1000) * 0x1p-140f;  // subnormals
  }
  if (kind == "signed_zeros") s[n / 3] = std::numeric_limits<float>::infinity();
  return s;
}

TEST(TopK, RadixSelectEqualsTheFullSortOnEveryPath) {
  const char* kinds[] = {"normal", "uniform", "relu", "few", "close", "signed_zeros", "tiny"};
  const std::int64_t sizes[] = {5000, 16384, 16385, 40000, 300007};
  unsigned seed = 11;
  for (const char* kind : kinds)
    for (std::int64_t n : sizes) {
      const auto s = scores_of(kind, n, seed++);
      for (std::int64_t k : {std::int64_t{1}, std::int64_t{2048}, n / 2 + 1, n - 1, n})
        ASSERT_EQ(ip::topk(s.data(), n, k), reference_topk(s, k)) << kind << ", n = " << n << ", k = " << k;
    }
}

TEST(TopK, RadixSelectIsTheSameOnOneOrManyThreads) {
  for (const char* kind : {"normal", "few", "close"}) {
    const std::int64_t n = 1 << 20;
    const auto s = scores_of(kind, n, 5);
    const auto ref = reference_topk(s, 4096);
    for (int threads : {1, 2, 8}) {
      ip::set_num_threads(threads);
      EXPECT_EQ(ip::topk(s.data(), n, 4096), ref) << kind << ", " << threads << " threads";
    }
    ip::set_num_threads(0);
  }
}

TEST(TopK, SignedZerosTieAndGoToTheLowerId) {
  // -0.0 == +0.0 under the comparison, so neither ranks above the other: ties by id, in every path.
  for (std::int64_t n : {std::int64_t{10}, std::int64_t{100000}}) {
    std::vector<float> s(n, -1.0f);
    s[3] = -0.0f;
    s[5] = 0.0f;
    s[7] = -0.0f;
    EXPECT_EQ(ip::topk(s.data(), n, 3), (Ids{3, 5, 7})) << "n = " << n;
    s[3] = 0.0f;
    s[5] = -0.0f;
    EXPECT_EQ(ip::topk(s.data(), n, 2), (Ids{3, 5})) << "n = " << n;
  }
}

TEST(TopK, NanIsFoundWhateverKAndTheRowLength) {
  for (std::int64_t n : {std::int64_t{20000}, std::int64_t{100000}}) {
    std::vector<float> s(n, 1.0f);
    s[n - 1] = -std::numeric_limits<float>::quiet_NaN();  // a negative NaN, in the last chunk
    const std::int64_t b = n > 65536 ? 65536 : 0;
    if (n > 65536) {  // a second NaN in the first chunk: that one is named
      s[70] = std::numeric_limits<float>::quiet_NaN();
      for (std::int64_t k : {std::int64_t{1}, n})
        EXPECT_IP_ERROR(ip::topk(s.data(), n, k), "NaN score in ids [0, 65536)") << n << " " << k;
      s[70] = 1.0f;
    }
    for (std::int64_t k : {std::int64_t{1}, n})
      EXPECT_IP_ERROR(ip::topk(s.data(), n, k), fmt::format("NaN score in ids [{}, {})", b, n)) << n << " " << k;
  }
}

TEST(TopK, GroupsForBudgetIsCeil) {
  EXPECT_EQ(ip::groups_for_budget(2048, 4), 512);  // 2048 / 4
  EXPECT_EQ(ip::groups_for_budget(2049, 4), 513);  // ceil(512.25)
  EXPECT_EQ(ip::groups_for_budget(3, 4), 1);
  EXPECT_EQ(ip::groups_for_budget(7, 1), 7);
}

TEST(TopK, BadKThrows) {
  const std::vector<float> s = {1, 2, 3};
  EXPECT_IP_ERROR(ip::topk(s.data(), 3, 0), "k = 0");
  EXPECT_IP_ERROR(ip::topk(s.data(), 3, 4), "k = 4");
  EXPECT_IP_ERROR(ip::topk(s.data(), 3, -1), "k = -1");
  EXPECT_IP_ERROR(ip::topk(s.data(), 0, 1), "empty");
}

TEST(TopK, NanScoreThrowsInEitherPath) {
  std::vector<float> s = {1, std::numeric_limits<float>::quiet_NaN(), 3};
  EXPECT_IP_ERROR(ip::topk(s.data(), 3, 1), "NaN");
  std::vector<float> big(100000, 1.0f);
  big[70000] = std::numeric_limits<float>::quiet_NaN();  // in the second chunk [65536, 100000)
  EXPECT_IP_ERROR(ip::topk(big.data(), 100000, 10), "NaN score in ids [65536, 100000)");
}

}  // namespace
