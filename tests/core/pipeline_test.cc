// run_request: determinism across thread counts, and the exact indexer as a perfect selector.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "core/backend.h"
#include "core/parallel.h"
#include "core/pipeline.h"
#include "core/workload.h"
#include "tests/core/test_helpers.h"

namespace {

using ip::Precision;
using ip::Weighting;

ip::Workload small_workload(bool attention = true) {
  ip::WorkloadSpec s;
  s.tokens = 9000;  // > 4096 so scoring, pooling and attention run several parallel chunks
  s.dim = 16;
  s.index_heads = 4;
  s.attn_dim = attention ? 16 : 0;
  s.attn_heads = 2;
  s.value_dim = 8;
  s.steps = 4;
  s.topics = 16;
  s.seed = 77;
  return ip::generate_request(s, 0);
}

ip::PipelineParams pipeline(Weighting w, Precision p, int G = 4, ip::Index64 k = 256) {
  ip::PipelineParams pp;
  pp.pool.weights.scheme = w;
  pp.pool.group_size = G;
  pp.pool.precision = p;
  pp.topk_tokens = k;
  return pp;
}

// Bit equality of the measured (non-timing) fields; NaN == NaN here.
bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

void expect_same_result(const ip::RequestResult& a, const ip::RequestResult& b) {
  ASSERT_EQ(a.steps.size(), b.steps.size());
  for (size_t q = 0; q < a.steps.size(); ++q) {
    EXPECT_TRUE(same_bits(a.steps[q].token_recall, b.steps[q].token_recall)) << "step " << q;
    EXPECT_TRUE(same_bits(a.steps[q].block_recall, b.steps[q].block_recall)) << "step " << q;
    EXPECT_TRUE(same_bits(a.steps[q].mass_recall, b.steps[q].mass_recall)) << "step " << q;
    EXPECT_TRUE(same_bits(a.steps[q].output_error, b.steps[q].output_error)) << "step " << q;
    EXPECT_TRUE(same_bits(a.steps[q].layer_output_error, b.steps[q].layer_output_error)) << "step " << q;
    EXPECT_TRUE(same_bits(a.steps[q].layer_mass_recall, b.steps[q].layer_mass_recall)) << "step " << q;
  }
  EXPECT_EQ(a.selected, b.selected);
  EXPECT_EQ(a.selected_mass, b.selected_mass);
  EXPECT_EQ(a.selected_similarity, b.selected_similarity);
  EXPECT_EQ(a.index.rows.payload, b.index.rows.payload);
  EXPECT_EQ(a.index.rows.scales, b.index.rows.scales);
  EXPECT_EQ(a.rebuilds, b.rebuilds);
}

TEST(Pipeline, OneAndTwoThreadsGiveIdenticalResults) {
  const auto w = small_workload();
  // hybrid + query-referenced cosine: statistics, the query EMA and rebuilds every step all take part.
  auto p = pipeline(Weighting::hybrid, Precision::fp8);
  p.pool.weights.cosine_reference = ip::CosineReference::query;
  p.record_similarity = true;  // the cache model's cosine relevance too
  auto one = ip::make_cpu_backend(1);
  const auto a = ip::run_request(*one, w, p);
  auto two = ip::make_cpu_backend(2);
  const auto b = ip::run_request(*two, w, p);
  ip::set_num_threads(0);
  expect_same_result(a, b);
  EXPECT_EQ(a.rebuilds, 4);  // a learning scheme with rebuild_every = 1 rebuilds on every step
}

TEST(Pipeline, TfidfWithoutAttentionIsAlsoDeterministic) {
  const auto w = small_workload(false);
  const auto p = pipeline(Weighting::tfidf, Precision::int8, 8, 200);
  auto one = ip::make_cpu_backend(1);
  const auto a = ip::run_request(*one, w, p);
  auto two = ip::make_cpu_backend(2);
  const auto b = ip::run_request(*two, w, p);
  ip::set_num_threads(0);
  expect_same_result(a, b);
  EXPECT_TRUE(std::isnan(a.steps[0].mass_recall));  // no attention stage -> not measured
}

TEST(Pipeline, ExactFp32IndexerIsPerfect) {
  const auto w = small_workload();
  auto be = ip::make_cpu_backend(2);
  const auto r = ip::run_request(*be, w, pipeline(Weighting::exact, Precision::fp32, 4, 300));
  ip::set_num_threads(0);
  EXPECT_EQ(r.group_size, 1);
  EXPECT_EQ(r.groups, 9000);
  EXPECT_EQ(r.k_groups, 300);
  ASSERT_EQ(r.steps.size(), 4u);
  for (size_t q = 0; q < r.steps.size(); ++q) {
    EXPECT_EQ(r.steps[q].token_recall, 1.0) << "step " << q;
    EXPECT_EQ(r.steps[q].block_recall, 1.0) << "step " << q;
    EXPECT_GT(r.steps[q].mass_recall, 0.0) << "step " << q;
  }
  EXPECT_EQ(r.rebuilds, 1);  // exact does not learn: built once
  // Index = the keys in fp32: 9000 * 16 * 4 bytes, equal to the uncompressed size.
  EXPECT_EQ(r.index_bytes, 9000.0 * 16 * 4);
  EXPECT_EQ(r.exact_index_bytes, 9000.0 * 16 * 4);
  EXPECT_EQ(r.macs_per_query, 9000.0 * 4 * 16);  // rows * H * D
}

TEST(Pipeline, CompressedAccounting) {
  // G = 4 over 9000 tokens: 2250 groups; k = 256 -> 64 groups; fp8 rows of 16 + 4 bytes.
  const auto w = small_workload();
  auto be = ip::make_cpu_backend(2);
  auto p = pipeline(Weighting::uniform, Precision::fp8);
  p.fidelity = false;
  const auto r = ip::run_request(*be, w, p);
  ip::set_num_threads(0);
  EXPECT_EQ(r.groups, 2250);
  EXPECT_EQ(r.k_groups, 64);
  EXPECT_EQ(r.selected.size(), 4u * 64);
  EXPECT_EQ(r.index_bytes, 2250.0 * 20);
  EXPECT_EQ(r.exact_index_bytes, 9000.0 * 20);
  EXPECT_EQ(r.macs_per_query, 2250.0 * 4 * 16);
  EXPECT_TRUE(std::isnan(r.steps[0].token_recall));  // fidelity off -> not measured
  for (std::int32_t g : r.selected) {
    EXPECT_GE(g, 0);
    EXPECT_LT(g, 2250);
  }
}

// The parameter checks that need no workload (config validation runs them before any point): the keys
// checked only while points ran, and a group larger than the whole token budget.
TEST(Pipeline, ParametersAloneAreCheckedWithoutAWorkload) {
  EXPECT_NO_THROW(ip::validate_pipeline_params(pipeline(Weighting::uniform, Precision::fp32, 3, 512)));
  auto p = pipeline(Weighting::uniform, Precision::fp32, 4, 0);
  EXPECT_IP_ERROR(ip::validate_pipeline_params(p), "select.topk_tokens = 0");
  p = pipeline(Weighting::tfidf, Precision::fp32);
  p.stats_decay = 1.5f;
  EXPECT_IP_ERROR(ip::validate_pipeline_params(p), "pool.tfidf_decay = 1.5");
  p = pipeline(Weighting::cosine, Precision::fp32);
  p.query_ema = 1.0f;
  EXPECT_IP_ERROR(ip::validate_pipeline_params(p), "pool.query_ema = 1");
  p = pipeline(Weighting::tfidf, Precision::fp32);
  p.rebuild_every = 0;
  EXPECT_IP_ERROR(ip::validate_pipeline_params(p), "pool.rebuild_every = 0");
  p = pipeline(Weighting::positional, Precision::fp32, 8);
  p.pool.weights.positional_bias = {0, 0.1f, 0.2f, 0.3f};
  EXPECT_IP_ERROR(ip::validate_pipeline_params(p), "pool.positional_bias: positional bias has 4 entries for group size 8");
  p = pipeline(Weighting::uniform, Precision::fp32, 8192, 512);
  EXPECT_IP_ERROR(ip::validate_pipeline_params(p), "pool.group_size = 8192 exceeds select.topk_tokens = 512");
  p.pool.weights.scheme = Weighting::exact;  // effective G = 1
  EXPECT_NO_THROW(ip::validate_pipeline_params(p));
  p = pipeline(Weighting::uniform, Precision::fp32, 8192, 512);
  p.adaptive.enabled = true;  // its own group sizes
  EXPECT_NO_THROW(ip::validate_pipeline_params(p));
  p = pipeline(Weighting::uniform, Precision::fp32, 512, 512);  // one group is the whole budget
  EXPECT_NO_THROW(ip::validate_pipeline_params(p));
}

TEST(Pipeline, BadParametersThrowNamingTheSetting) {
  const auto w = small_workload(false);
  auto be = ip::make_cpu_backend(1);
  auto p = pipeline(Weighting::uniform, Precision::fp32, 4, 9001);
  EXPECT_IP_ERROR(ip::run_request(*be, w, p), "select.topk_tokens = 9001 exceeds the context of 9000 tokens");
  p = pipeline(Weighting::uniform, Precision::fp32, 0);
  EXPECT_IP_ERROR(ip::run_request(*be, w, p), "group_size = 0");
  p = pipeline(Weighting::uniform, Precision::fp32);
  p.topk_tokens = 0;
  EXPECT_IP_ERROR(ip::run_request(*be, w, p), "select.topk_tokens = 0");
  ip::set_num_threads(0);
}

TEST(Pipeline, SelectedMassIsTheStepsAttentionOverEachGroup) {
  // Sparse attention is a softmax over the selected tokens, so per step the masses of the selected
  // groups (mean over heads) sum to 1; without attention each of the k_g groups gets 1/k_g.
  auto be = ip::make_cpu_backend(1);
  for (bool attention : {true, false}) {
    const auto w = small_workload(attention);
    const auto r = ip::run_request(*be, w, pipeline(Weighting::uniform, Precision::fp32, 4, 256));
    ASSERT_EQ(r.selected_mass.size(), r.selected.size());
    ASSERT_EQ(r.k_groups, 64);  // ceil(256 / 4)
    for (size_t q = 0; q < r.steps.size(); ++q) {
      double sum = 0;
      for (ip::Index64 i = 0; i < r.k_groups; ++i) {
        const float m = r.selected_mass[q * r.k_groups + i];
        EXPECT_GE(m, 0.0f);
        if (!attention) {
          EXPECT_FLOAT_EQ(m, 1.0f / 64);
        }
        sum += m;
      }
      EXPECT_NEAR(sum, 1.0, 1e-5) << "step " << q << (attention ? " with" : " without") << " attention";
    }
  }
}

}  // namespace

// The similarity a cache model ranks by, worked by hand. Keys (1,0) (1,0) (0,1) (0,1), G = 2, uniform:
// composites c0 = (1,0), c1 = (0,1). One head of weight 1, budget 2 tokens = 1 group, query EMA 0.5.
//   step 0: q = (1,0) selects group 0; m = q = (1,0); cos(c0, m) = 1          -> (1 + 1) / 2 = 1
//   step 1: q = (0,2) selects group 1; m = 0.5 (1,0) + 0.5 (0,2) = (0.5, 1);
//           cos(c1, m) = 1 / sqrt(1.25) = 0.894427191                          -> 0.9472135955
TEST(Pipeline, SelectedSimilarityByHand) {
  ip::Workload w;
  w.index_keys.reshape({4, 2});
  const float keys[] = {1, 0, 1, 0, 0, 1, 0, 1};
  std::copy(keys, keys + 8, w.index_keys.data());
  w.index_queries.reshape({2, 1, 2});
  const float queries[] = {1, 0, 0, 2};
  std::copy(queries, queries + 4, w.index_queries.data());
  w.head_weights.reshape({2, 1});
  w.head_weights.data()[0] = w.head_weights.data()[1] = 1;
  auto p = pipeline(Weighting::uniform, Precision::fp32, 2, 2);
  p.query_ema = 0.5f;
  auto be = ip::make_cpu_backend(1);
  const auto off = ip::run_request(*be, w, p);
  EXPECT_TRUE(off.selected_similarity.empty());
  p.record_similarity = true;
  const auto r = ip::run_request(*be, w, p);
  EXPECT_EQ(r.selected, (std::vector<std::int32_t>{0, 1}));
  ASSERT_EQ(r.selected_similarity.size(), 2u);
  EXPECT_FLOAT_EQ(r.selected_similarity[0], 1.0f);
  EXPECT_NEAR(r.selected_similarity[1], 0.9472135955f, 1e-6);
  EXPECT_EQ(r.selected_mass, off.selected_mass);  // recording it changes nothing else

  // A negative cosine is stored as (1 + cos) / 2, not clamped at 0 first: keys (1,0) (1,0) (-1,0) (-1,0),
  // composites c0 = (1,0), c1 = (-1,0); query EMA 0.9.
  //   step 0: q = (1,0) selects group 0 (scores 1, 0); m = (1,0); cos(c0, m) = 1                -> 1
  //   step 1: q = (-1,0) selects group 1 (scores 0, 1); m = 0.9 (1,0) + 0.1 (-1,0) = (0.8, 0);
  //           cos(c1, m) = -1                                                                   -> 0 (not 0.5)
  const float neg_keys[] = {1, 0, 1, 0, -1, 0, -1, 0};
  std::copy(neg_keys, neg_keys + 8, w.index_keys.data());
  const float neg_queries[] = {1, 0, -1, 0};
  std::copy(neg_queries, neg_queries + 4, w.index_queries.data());
  p.query_ema = 0.9f;
  const auto n = ip::run_request(*be, w, p);
  EXPECT_EQ(n.selected, (std::vector<std::int32_t>{0, 1}));
  ASSERT_EQ(n.selected_similarity.size(), 2u);
  EXPECT_FLOAT_EQ(n.selected_similarity[0], 1.0f);
  EXPECT_NEAR(n.selected_similarity[1], 0.0f, 1e-6);
}

// The cosine query reference (an EMA of past queries) in this loop and the extended one: decode_test.cc,
// Decode.CosineQueryReferenceIsTheEmaOfPastQueries.

// Recalls at G = 2 worked by hand, where the block oracle (each group's largest token score) differs from
// the group's mean token score and from the composite's score, and a tie in group maxima goes to the lower
// id. One head of weight 1, D = 2 (second coordinate 0), budget k = 4 tokens = 2 groups, uniform weights.
// Keys' first coordinates, by group: g0 (5, -5), g1 (2, 2), g2 (3, -3), g3 (3, 1); composites 0, 2, 0, 2.
//   step 0, q = (1, 0): token scores 5 0 2 2 3 0 3 1; exact top-4 tokens {0, 4, 6, 2} (the tie at 2 to
//     token 2); composite scores 0 2 0 2 select [1, 3]; oracle maxima 5 2 3 3 -> {0, 2} (the tie at 3 to
//     group 2). Block recall |{1, 3} & {0, 2}| / 2 = 0; token recall |{2, 3, 6, 7} & exact| / 4 = 0.5.
//     (A mean oracle, 2.5 2 1.5 2 -> {0, 1}, would give 0.5; the tie to group 3, {0, 3}, 0.5; the composite
//     scores, 1; token recall counting group ids as tokens, 0.)
//   step 1, q = (-1, 0): token scores 0 5 0 0 0 3 0 0; exact {1, 5, 0, 2}; composite scores all 0 select
//     [0, 1]; oracle maxima 5 0 3 0 -> {0, 2}. Block recall 0.5; token recall |{0, 1, 2, 3} & exact| / 4 = 0.75.
TEST(Pipeline, RecallsAtGroupSizeTwoByHand) {
  ip::Workload w;
  w.index_keys.reshape({8, 2});
  const float x[] = {5, -5, 2, 2, 3, -3, 3, 1};
  for (int t = 0; t < 8; ++t) {
    w.index_keys.data()[2 * t] = x[t];
    w.index_keys.data()[2 * t + 1] = 0;
  }
  w.index_queries.reshape({2, 1, 2});
  const float queries[] = {1, 0, -1, 0};
  std::copy(queries, queries + 4, w.index_queries.data());
  w.head_weights.reshape({2, 1});
  w.head_weights.data()[0] = w.head_weights.data()[1] = 1;
  auto be = ip::make_cpu_backend(1);
  const auto r = ip::run_request(*be, w, pipeline(Weighting::uniform, Precision::fp32, 2, 4));
  ASSERT_EQ(r.k_groups, 2);
  EXPECT_EQ(r.selected, (std::vector<std::int32_t>{1, 3, 0, 1}));
  ASSERT_EQ(r.steps.size(), 2u);
  EXPECT_EQ(r.steps[0].block_recall, 0.0);
  EXPECT_EQ(r.steps[0].token_recall, 0.5);
  EXPECT_EQ(r.steps[1].block_recall, 0.5);
  EXPECT_EQ(r.steps[1].token_recall, 0.75);
}

// DESIGN.md's default definitions, as the structs the config table starts from hold them (the config
// test checks that table against these structs; this pins the values themselves).
TEST(Pipeline, DefaultsAreDesignMds) {
  const ip::PipelineParams p;
  EXPECT_EQ(p.pool.group_size, 4);
  EXPECT_EQ(p.stats_decay, 0.99f);  // gamma
  const ip::WeightParams& w = p.pool.weights;
  EXPECT_EQ(w.positional_lambda, 1.0f);
  EXPECT_TRUE(w.positional_bias.empty());
  EXPECT_EQ(w.eps, 1e-3f);
  EXPECT_EQ(w.cosine_power, 1.0f);
  EXPECT_EQ(w.cosine_reference, ip::CosineReference::group_mean);
  EXPECT_EQ(w.alpha_positional, 1.0f);
  EXPECT_EQ(w.alpha_cosine, 1.0f);
  EXPECT_EQ(w.alpha_tfidf, 1.0f);
}
