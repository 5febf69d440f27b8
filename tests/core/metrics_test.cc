// Selection and fidelity metrics on cases with known answers.
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "core/metrics.h"
#include "tests/core/test_helpers.h"

namespace {

using iptest::view;
using Ids = std::vector<std::int32_t>;

TEST(Metrics, TokenRecallCountsExactTokensInsideSelectedGroups) {
  // G = 4, selected groups {2, 0} cover tokens 0..3 and 8..11. Exact top-4 {1, 5, 9, 10}:
  // 1 (group 0) yes, 5 (group 1) no, 9 and 10 (group 2) yes -> 3/4.
  EXPECT_DOUBLE_EQ(ip::token_recall(Ids{2, 0}, 4, Ids{1, 5, 9, 10}), 0.75);
  // Nothing in common -> 0; everything -> 1.
  EXPECT_DOUBLE_EQ(ip::token_recall(Ids{1}, 4, Ids{0, 8}), 0.0);
  EXPECT_DOUBLE_EQ(ip::token_recall(Ids{0, 2}, 4, Ids{3, 8}), 1.0);
  // G = 1: plain set intersection, {3, 7, 9} vs {9, 4, 3} -> 2/3.
  EXPECT_DOUBLE_EQ(ip::token_recall(Ids{3, 7, 9}, 1, Ids{9, 4, 3}), 2.0 / 3.0);
}

TEST(Metrics, BlockRecallIsTheOverlapFraction) {
  EXPECT_DOUBLE_EQ(ip::block_recall(Ids{3, 1}, Ids{1, 2}), 0.5);       // {1} in common
  EXPECT_DOUBLE_EQ(ip::block_recall(Ids{5, 4, 3}, Ids{3, 4, 5}), 1.0);  // order does not matter
  EXPECT_DOUBLE_EQ(ip::block_recall(Ids{0, 1, 2, 3}, Ids{4, 5, 6, 3}), 0.25);
  EXPECT_IP_ERROR(ip::block_recall(Ids{1}, Ids{1, 2}), "1 selected groups vs 2 oracle groups");
}

TEST(Metrics, AttentionMassRecallAveragesOverHeads) {
  // Head 0 p = {.1, .2, .3, .4}, head 1 p = {.25, .25, .25, .25}; tokens {2, 3}:
  // head 0 .3 + .4 = .7, head 1 .5 -> mean .6.
  const std::vector<float> p = {0.1f, 0.2f, 0.3f, 0.4f, 0.25f, 0.25f, 0.25f, 0.25f};
  const std::vector<ip::Index64> sel = {2, 3};
  EXPECT_NEAR(ip::attention_mass_recall(view(p, 2, 4), sel), 0.6, 1e-7);
  const std::vector<ip::Index64> all = {0, 1, 2, 3};
  EXPECT_NEAR(ip::attention_mass_recall(view(p, 2, 4), all), 1.0, 1e-7);
  const std::vector<ip::Index64> out_of_range = {4};
  EXPECT_IP_ERROR(ip::attention_mass_recall(view(p, 2, 4), out_of_range), "token 4");
}

TEST(Metrics, OutputErrorIsRelativeFrobenius) {
  // dense [[3, 0], [0, 4]] (norm 5), sparse [[0, 0], [0, 4]]: difference norm 3 -> 3/5 = 0.6.
  const std::vector<float> dense = {3, 0, 0, 4}, sparse = {0, 0, 0, 4};
  EXPECT_DOUBLE_EQ(ip::output_error(view(sparse, 2, 2), view(dense, 2, 2)), 0.6);
  EXPECT_DOUBLE_EQ(ip::output_error(view(dense, 2, 2), view(dense, 2, 2)), 0.0);
  // sparse = 2 * dense -> ||dense|| / ||dense|| = 1.
  const std::vector<float> twice = {6, 0, 0, 8};
  EXPECT_DOUBLE_EQ(ip::output_error(view(twice, 2, 2), view(dense, 2, 2)), 1.0);
  EXPECT_IP_ERROR(ip::output_error(view(dense, 1, 4), view(dense, 2, 2)), "differ");
  // An all-zero dense output: the absolute error sqrt(num) (there is no norm to divide by).
  const std::vector<float> zero = {0, 0}, one = {1, 0}, three_four = {3, 4};
  EXPECT_DOUBLE_EQ(ip::output_error(view(one, 1, 2), view(zero, 1, 2)), 1.0);
  EXPECT_DOUBLE_EQ(ip::output_error(view(three_four, 1, 2), view(zero, 1, 2)), 5.0);  // sqrt(25), not 25
  EXPECT_DOUBLE_EQ(ip::output_error(view(zero, 1, 2), view(zero, 1, 2)), 0.0);
}

TEST(Metrics, GroupMaxScoresWithPartialLastGroup) {
  // T = 8, G = 3: {1, 5, 2} -> 5, {3, 7, 0} -> 7, partial {-1, 4} -> 4 (its maximum is its last token).
  const std::vector<float> s = {1, 5, 2, 3, 7, 0, -1, 4};
  std::vector<float> out(3, 99.0f);
  ip::group_max_scores(s.data(), 8, 3, out.data());
  EXPECT_EQ(out, (std::vector<float>{5, 7, 4}));
  // T = 7: the last group is the single token {-1} -> -1.
  ip::group_max_scores(s.data(), 7, 3, out.data());
  EXPECT_EQ(out, (std::vector<float>{5, 7, -1}));
  // G = 1: the scores themselves.
  std::vector<float> same(8);
  ip::group_max_scores(s.data(), 8, 1, same.data());
  EXPECT_EQ(same, s);
}

TEST(Metrics, EmptyInputsThrow) {
  EXPECT_IP_ERROR(ip::token_recall(Ids{1}, 4, Ids{}), "empty exact top-k");
  EXPECT_IP_ERROR(ip::block_recall(Ids{}, Ids{}), "empty oracle");
}

}  // namespace
