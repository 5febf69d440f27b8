// Bad input throws ip::Error whose message names the problem.
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "core/pool.h"
#include "core/quant.h"
#include "core/score.h"
#include "core/weights.h"
#include "core/workload.h"
#include "tests/core/test_helpers.h"

namespace {

using iptest::params;
using iptest::view;
using ip::Weighting;

const float kNaN = std::numeric_limits<float>::quiet_NaN();

const std::vector<float> kKeys = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};  // T = 6, D = 2

TEST(Errors, EmptyContext) {
  const std::vector<float> none;
  EXPECT_IP_ERROR(ip::build_index(view(none, 0, 2), params(Weighting::uniform, 4), nullptr, nullptr),
                  "empty context");
  EXPECT_IP_ERROR(ip::compute_weights(view(none, 0, 2), params(Weighting::uniform, 4), nullptr, nullptr),
                  "empty context");
  ip::Workload w;
  w.index_keys.reshape({0, 4});
  EXPECT_IP_ERROR(ip::validate_workload(w), "empty context");
}

TEST(Errors, GroupSizeZero) {
  EXPECT_IP_ERROR(ip::build_index(view(kKeys, 6, 2), params(Weighting::uniform, 0), nullptr, nullptr),
                  "group size G = 0");
  EXPECT_IP_ERROR(ip::build_index(view(kKeys, 6, 2), params(Weighting::positional, -2), nullptr, nullptr),
                  "group size G = -2");
}

TEST(Errors, NanOrInfInKeysNamesTheToken) {
  for (Weighting w : {Weighting::uniform, Weighting::cosine, Weighting::maxmin, Weighting::exact}) {
    std::vector<float> k = kKeys;
    k[2 * 5 + 1] = kNaN;  // token 5, in the partial second group when G = 4
    EXPECT_IP_ERROR(ip::build_index(view(k, 6, 2), params(w, 4), nullptr, nullptr), "token 5")
        << ip::to_string(w);
  }
  std::vector<float> k = kKeys;
  k[2 * 2] = std::numeric_limits<float>::infinity();  // token 2
  EXPECT_IP_ERROR(ip::compute_weights(view(k, 6, 2), params(Weighting::uniform, 4), nullptr, nullptr),
                  "index key of token 2 contains NaN or infinity");
}

TEST(Errors, NanInQueries) {
  const std::vector<float> q = {1, 2, 3, kNaN};  // head 1 of 2
  const float h[2] = {1, 1};
  std::vector<float> out(6);
  EXPECT_IP_ERROR(ip::score_tokens(view(kKeys, 6, 2), ip::IndexQuery{view(q, 2, 2), h}, out.data()),
                  "query head 1 contains NaN");
  const auto idx = ip::build_index(view(kKeys, 6, 2), params(Weighting::uniform, 2), nullptr, nullptr);
  EXPECT_IP_ERROR(ip::score_index(idx, ip::IndexQuery{view(q, 2, 2), h}, out.data()), "query head 1");
}

TEST(Errors, NegativeOrNanHeadWeight) {
  const std::vector<float> q = {1, 2, 3, 4};
  const float neg[2] = {1, -1};
  const float nan[2] = {kNaN, 1};
  std::vector<float> out(6);
  EXPECT_IP_ERROR(ip::score_tokens(view(kKeys, 6, 2), ip::IndexQuery{view(q, 2, 2), neg}, out.data()),
                  "head weight 1 = -1");
  EXPECT_IP_ERROR(ip::score_tokens(view(kKeys, 6, 2), ip::IndexQuery{view(q, 2, 2), nan}, out.data()),
                  "head weight 0");
  EXPECT_IP_ERROR(ip::score_tokens(view(kKeys, 6, 2), ip::IndexQuery{view(q, 2, 2), nullptr}, out.data()),
                  "head weights missing");
  const std::vector<float> q3 = {1, 2, 3};
  EXPECT_IP_ERROR(ip::score_tokens(view(kKeys, 6, 2), ip::IndexQuery{view(q3, 1, 3), neg}, out.data()),
                  "query dimension 3 does not match key dimension 2");
}

TEST(Errors, PositionalBiasOfTheWrongLength) {
  auto p = params(Weighting::positional, 4);
  p.weights.positional_bias = {0, 1, 2};
  EXPECT_IP_ERROR(ip::build_index(view(kKeys, 6, 2), p, nullptr, nullptr),
                  "positional bias has 3 entries for group size 4");
}

TEST(Errors, PoolParametersAndMissingInputs) {
  auto p = params(Weighting::cosine, 4);
  p.weights.eps = 0;
  EXPECT_IP_ERROR(ip::build_index(view(kKeys, 6, 2), p, nullptr, nullptr), "eps = 0");
  p = params(Weighting::cosine, 4);
  p.weights.cosine_power = -1;
  EXPECT_IP_ERROR(ip::build_index(view(kKeys, 6, 2), p, nullptr, nullptr), "cosine power = -1");
  p = params(Weighting::cosine, 4);
  p.weights.cosine_reference = ip::CosineReference::query;
  EXPECT_IP_ERROR(ip::build_index(view(kKeys, 6, 2), p, nullptr, nullptr), "needs a query reference");
  EXPECT_IP_ERROR(ip::build_index(view(kKeys, 6, 2), params(Weighting::tfidf, 4), nullptr, nullptr),
                  "'tfidf' needs access statistics");
  ip::AccessStats wrong(5);
  EXPECT_IP_ERROR(ip::build_index(view(kKeys, 6, 2), params(Weighting::hybrid, 4), &wrong, nullptr),
                  "statistics cover 5 tokens, the context has 6");
  // Statistics longer than the context are refused too (they must cover exactly the context).
  ip::AccessStats longer(7);
  EXPECT_IP_ERROR(ip::build_index(view(kKeys, 6, 2), params(Weighting::tfidf, 4), &longer, nullptr),
                  "statistics cover 7 tokens, the context has 6");
}

TEST(Errors, WeightParametersThatWouldOverflowOrUnderflow) {
  // exp(89) overflows float: the composite would be inf/inf = NaN, so lambda and bias are bounded.
  ip::PoolParams p = params(Weighting::positional, 2);
  p.weights.positional_lambda = 89.0f;
  EXPECT_IP_ERROR(ip::build_index(view(kKeys, 6, 2), p, nullptr, nullptr), "positional lambda");
  p.weights.positional_lambda = 80.0f;  // exp(80) = 5.5e34 is finite
  EXPECT_NO_THROW(ip::build_index(view(kKeys, 6, 2), p, nullptr, nullptr));
  p.weights.positional_bias = {0.0f, -100.0f};
  EXPECT_IP_ERROR(ip::build_index(view(kKeys, 6, 2), p, nullptr, nullptr), "positional bias");
  // eps^p = (1e-3)^13 = 1e-39 is below the smallest normal float (1.18e-38): a floored group sums to 0.
  ip::PoolParams c = params(Weighting::cosine, 2);
  c.weights.cosine_power = 13.0f;
  EXPECT_IP_ERROR(ip::build_index(view(kKeys, 6, 2), c, nullptr, nullptr), "underflows");
  c.weights.cosine_power = 12.0f;  // 1e-36 is a normal float
  EXPECT_NO_THROW(ip::build_index(view(kKeys, 6, 2), c, nullptr, nullptr));
}

// The same checks with no keys at all (config validation runs them before any point), naming the keys.
TEST(Errors, PoolParametersAloneAreCheckedNamingTheConfigKeys) {
  EXPECT_NO_THROW(ip::validate_pool_params(params(Weighting::cosine, 4)));
  auto p = params(Weighting::positional, 8);
  p.weights.positional_bias = {0, 0.1f, 0.2f, 0.3f};
  EXPECT_IP_ERROR(ip::validate_pool_params(p), "pool.positional_bias: positional bias has 4 entries for group size 8");
  p.weights.scheme = Weighting::exact;  // effective G = 1
  EXPECT_IP_ERROR(ip::validate_pool_params(p), "4 entries for group size 1");
  p = params(Weighting::cosine, 4);
  p.weights.eps = 0;
  EXPECT_IP_ERROR(ip::validate_pool_params(p), "pool.eps = 0");
  p = params(Weighting::cosine, 4);
  p.weights.cosine_power = kNaN;
  EXPECT_IP_ERROR(ip::validate_pool_params(p), "pool.cosine_power");
  p = params(Weighting::positional, 4);
  p.weights.positional_lambda = 100;
  EXPECT_IP_ERROR(ip::validate_pool_params(p), "pool.positional_lambda");
  EXPECT_IP_ERROR(ip::validate_pool_params(params(Weighting::uniform, 0)), "pool.group_size: group size G = 0");
}

TEST(Errors, UnknownNames) {
  EXPECT_IP_ERROR(ip::parse_weighting("idf"), "unknown weighting 'idf'");
  EXPECT_IP_ERROR(ip::parse_weighting("Uniform"), "unknown weighting 'Uniform'");
  EXPECT_IP_ERROR(ip::parse_precision("fp4"), "unknown precision 'fp4'");
  EXPECT_IP_ERROR(ip::parse_precision("int8 "), "unknown precision");
  EXPECT_IP_ERROR(ip::parse_cosine_reference("key"), "unknown cosine reference 'key'");
}

// A valid 3-token, D = 2, Q = 1, H = 2 workload without attention, to break one field at a time.
ip::Workload tiny() {
  ip::Workload w;
  w.index_keys.reshape({3, 2});
  w.index_keys.fill(1.0f);
  w.index_queries.reshape({1, 2, 2});
  w.index_queries.fill(0.5f);
  w.head_weights.reshape({1, 2});
  w.head_weights.fill(1.0f);
  return w;
}

TEST(Errors, ValidateWorkloadShapeMismatches) {
  EXPECT_NO_THROW(ip::validate_workload(tiny()));
  auto w = tiny();
  w.index_queries.reshape({1, 2, 3});
  EXPECT_IP_ERROR(ip::validate_workload(w, "run.h5"), "run.h5: index_queries has D = 3, index_keys has D = 2");
  w = tiny();
  w.head_weights.reshape({1, 3});
  EXPECT_IP_ERROR(ip::validate_workload(w), "head_weights must have shape [1, 2]");
  w = tiny();
  w.head_weights.data()[1] = -0.5f;
  EXPECT_IP_ERROR(ip::validate_workload(w), "head_weights has a negative entry");
  w = tiny();
  w.index_keys.data()[3] = kNaN;
  EXPECT_IP_ERROR(ip::validate_workload(w), "index_keys contains NaN or infinity (flat element 3)");
  w = tiny();
  w.attn_keys.reshape({2, 4});  // 2 rows for 3 tokens
  w.values.reshape({3, 4});
  w.attn_queries.reshape({1, 1, 4});
  EXPECT_IP_ERROR(ip::validate_workload(w), "attn_keys must have shape [3, Da]");
  w.attn_keys.reshape({3, 4});
  w.attn_queries.reshape({1, 1, 5});
  w.attn_keys.fill(0);
  w.values.fill(0);
  w.attn_queries.fill(0);
  EXPECT_IP_ERROR(ip::validate_workload(w), "attn_queries must have shape [1, Ha, 4]");
  w = tiny();
  w.kind.assign(2, ip::TokenKind::text);
  EXPECT_IP_ERROR(ip::validate_workload(w), "token kinds cover 2 of 3 tokens");
  w = tiny();
  w.index_queries.reshape({2, 2});  // rank 2 instead of 3
  EXPECT_IP_ERROR(ip::validate_workload(w), "index_queries must have rank 3");
}

}  // namespace
