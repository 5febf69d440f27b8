// The split-K attention math the CUDA kernels run (core/attention_split.h): position -> token of a
// block list in any order with a partial last block, attended counts, split plans, and a host replay
// of split + online softmax + combine checked against core/attention.cc.
#include "core/attention_split.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "core/attention.h"

namespace ip {
namespace {

// Tokens of the listed blocks in list order, ascending within a block.
std::vector<long long> expand(const std::vector<std::int32_t>& blocks, int bs, long long T) {
  std::vector<long long> out;
  for (std::int32_t b : blocks)
    for (long long t = static_cast<long long>(b) * bs; t < std::min(T, (b + 1LL) * bs); ++t) out.push_back(t);
  return out;
}

long long partial_position(const std::vector<std::int32_t>& blocks, int bs, long long T) {
  if (last_block_len(T, bs) == bs) return -1;
  for (std::size_t i = 0; i < blocks.size(); ++i)
    if (blocks[i] == num_blocks(T, bs) - 1) return static_cast<long long>(i);
  return -1;
}

TEST(AttentionSplit, BlocksAndLastBlock) {
  EXPECT_EQ(num_blocks(10, 4), 3);
  EXPECT_EQ(last_block_len(10, 4), 2);
  EXPECT_EQ(last_block_len(8, 4), 4);
  EXPECT_EQ(last_block_len(1, 16), 1);
  EXPECT_EQ(sparse_attended(3, 4, true, 2), 10);
  EXPECT_EQ(sparse_attended(3, 4, false, 2), 12);
}

TEST(AttentionSplit, PositionToTokenAnyOrderPartialLast) {
  std::mt19937 rng(7);
  for (int bs : {1, 3, 4, 16})
    for (long long T : {1LL, 5LL, 19LL, 111LL, 989LL}) {
      const long long nb = num_blocks(T, bs);
      std::vector<std::int32_t> all(nb);
      std::iota(all.begin(), all.end(), 0);
      for (int rep = 0; rep < 4; ++rep) {
        std::shuffle(all.begin(), all.end(), rng);
        const long long take = 1 + static_cast<long long>(rng() % nb);
        std::vector<std::int32_t> blocks(all.begin(), all.begin() + take);
        if (rep == 0) {  // the last (maybe partial) block in the middle of the list
          auto it = std::find(blocks.begin(), blocks.end(), static_cast<std::int32_t>(nb - 1));
          if (it == blocks.end()) blocks[take / 2] = static_cast<std::int32_t>(nb - 1);
          else std::iter_swap(it, blocks.begin() + take / 2);
        }
        const auto ref = expand(blocks, bs, T);
        const long long pp = partial_position(blocks, bs, T);
        const long long n = sparse_attended(take, bs, pp >= 0, last_block_len(T, bs));
        ASSERT_EQ(n, static_cast<long long>(ref.size())) << "bs " << bs << " T " << T;
        for (long long i = 0; i < n; ++i)
          ASSERT_EQ(sparse_token(blocks.data(), bs, i, pp, last_block_len(T, bs)), ref[i]) << "position " << i;
      }
    }
}

TEST(AttentionSplit, PartialBlockFirstMiddleLast) {
  const int bs = 4;
  const long long T = 10;  // blocks 0, 1 (full), 2 (tokens 8, 9)
  for (const std::vector<std::int32_t>& blocks : {std::vector<std::int32_t>{2, 0, 1}, {0, 2, 1}, {1, 0, 2}, {2}}) {
    const auto ref = expand(blocks, bs, T);
    const long long pp = partial_position(blocks, bs, T);
    for (long long i = 0; i < static_cast<long long>(ref.size()); ++i)
      EXPECT_EQ(sparse_token(blocks.data(), bs, i, pp, last_block_len(T, bs)), ref[i]);
  }
}

TEST(AttentionSplit, SoftmaxRescaleEdges) {
  EXPECT_EQ(softmax_rescale(-INFINITY, 3.0f), 0.0f);
  EXPECT_EQ(softmax_rescale(-INFINITY, -INFINITY), 1.0f);
  EXPECT_EQ(softmax_rescale(2.0f, 2.0f), 1.0f);
  EXPECT_FLOAT_EQ(softmax_rescale(1.0f, 2.0f), std::exp(-1.0f));
}

TEST(AttentionSplit, PlanBoundsEverySplitCount) {
  std::mt19937 rng(3);
  for (long long B : {1LL, 7LL, 1024LL})
    for (long long max_att : {1LL, 19LL, 2048LL, 2000000LL}) {
      const SplitPlan sp = plan_splits(B, max_att, -1, 2048, 64, 32);
      EXPECT_EQ(sp.split_tokens % 32, 0);
      EXPECT_GE(sp.split_tokens, 64);
      long long need = 0;
      for (long long b = 0; b < B; ++b) {
        const long long n = 1 + static_cast<long long>(rng() % max_att);
        need += (n + sp.split_tokens - 1) / sp.split_tokens;
      }
      EXPECT_LE(need, sp.max_splits);
      // Dense: lengths summing to the total.
      std::vector<long long> len(B);
      long long total = 0;
      for (auto& l : len) total += (l = 1 + static_cast<long long>(rng() % max_att));
      const long long mx = *std::max_element(len.begin(), len.end());
      const SplitPlan dp = plan_splits(B, mx, total, 2048, 64, 32);
      long long dneed = 0;
      for (long long l : len) dneed += (l + dp.split_tokens - 1) / dp.split_tokens;
      EXPECT_LE(dneed, dp.max_splits);
      EXPECT_LE(dp.max_splits, total / dp.split_tokens + B);
    }
  // 2M dense tokens of one request: about 2048 splits of 1024 tokens.
  const SplitPlan big = plan_splits(1, 1 << 21, 1 << 21, 2048, 64, 32);
  EXPECT_EQ(big.split_tokens, 1024);
  EXPECT_EQ(big.max_splits, 2048);
}

// The kernels' algorithm on the host: splits of c positions, tiles of 32 with online softmax, then a
// combine in split order; compared with the reference over a block list with a partial last block.
TEST(AttentionSplit, HostReplayMatchesReference) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  const long long T = 989;
  const int D = 19, Dv = 7, H = 3, bs = 4, tile = 32;
  std::vector<float> k(T * D), v(T * Dv), q(H * D);
  for (auto* x : {&k, &v, &q})
    for (auto& e : *x) e = u(rng);
  std::vector<std::int32_t> blocks = {247, 3, 100, 0, 55, 200, 12};  // 247 = partial last block (1 token)
  const auto toks = expand(blocks, bs, T);
  const long long pp = partial_position(blocks, bs, T), n = static_cast<long long>(toks.size());
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  const long long c = 64;
  std::vector<float> out(H * Dv, 0.0f);
  for (int h = 0; h < H; ++h) {
    std::vector<float> ms, ls, os;
    for (long long p0 = 0; p0 < n; p0 += c) {
      float m = -INFINITY, l = 0.0f;
      std::vector<float> o(Dv, 0.0f);
      for (long long t0 = p0; t0 < std::min(n, p0 + c); t0 += tile) {
        std::vector<float> x(tile, -INFINITY);
        for (int t = 0; t < tile && t0 + t < std::min(n, p0 + c); ++t) {
          const long long tok = sparse_token(blocks.data(), bs, t0 + t, pp, last_block_len(T, bs));
          float acc = 0.0f;
          for (int d = 0; d < D; ++d) acc += q[h * D + d] * k[tok * D + d];
          x[t] = acc * scale;
        }
        const float mn = std::max(m, *std::max_element(x.begin(), x.end()));
        const float a = softmax_rescale(m, mn);
        float sum = 0.0f;
        for (int d = 0; d < Dv; ++d) o[d] *= a;
        for (int t = 0; t < tile; ++t) {
          const float e = std::exp(x[t] - mn);
          sum += e;
          if (x[t] == -INFINITY) continue;
          const long long tok = sparse_token(blocks.data(), bs, t0 + t, pp, last_block_len(T, bs));
          for (int d = 0; d < Dv; ++d) o[d] += e * v[tok * Dv + d];
        }
        l = l * a + sum;
        m = mn;
      }
      ms.push_back(m);
      ls.push_back(l);
      os.insert(os.end(), o.begin(), o.end());
    }
    const float M = *std::max_element(ms.begin(), ms.end());
    float L = 0.0f;
    for (std::size_t s = 0; s < ms.size(); ++s) L += ls[s] * softmax_rescale(ms[s], M);
    for (int d = 0; d < Dv; ++d) {
      float acc = 0.0f;
      for (std::size_t s = 0; s < ms.size(); ++s) acc += os[s * Dv + d] * softmax_rescale(ms[s], M);
      out[h * Dv + d] = acc / L;
    }
  }
  std::vector<Index64> sorted(toks.begin(), toks.end());
  std::sort(sorted.begin(), sorted.end());
  const auto ref = attention(MatrixView<const float>(k.data(), T, D), MatrixView<const float>(v.data(), T, Dv),
                             MatrixView<const float>(q.data(), H, D), sorted, false);
  for (int i = 0; i < H * Dv; ++i) EXPECT_NEAR(out[i], ref.out.data()[i], 1e-5f + 1e-4f * std::fabs(ref.out.data()[i]));
}

}  // namespace
}  // namespace ip
