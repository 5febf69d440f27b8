// Top-k: best first, ties to the lower id, chunked path for n > 65536, errors.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
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
