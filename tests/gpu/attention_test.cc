// Decode attention kernels (kernels/attention.h) against core/attention.cc: odd sizes and dims, MQA
// heads, block lists in any order with a partial last block, batches of different lengths, dense up
// to 2M tokens, probabilities (in list order, zeros past the attended count, summing to 1 per head),
// poisoned outputs, determinism, device-side input checks. Every case runs both split kernels (tiles, and
// lanes where its dims allow it: D, Dv in {64, 128, 256}).
// Tolerance (fp32, inputs in [-1, 1]): |gpu - cpu| <= 1e-5 + 1e-4 |cpu| for outputs, 1e-7 + 2e-4 |cpu| for
// probabilities; 2M-token dense: 2e-5 + 1e-3 |cpu| (float running sums over 2M tokens against double).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/attention.h"
#include "core/attention_split.h"
#include "kernels/attention.h"
#include "tests/gpu/gpu_test.h"

namespace ip {
namespace {

struct Req {
  long long T = 1;
  std::vector<std::int32_t> blocks;  // empty in dense cases
};

struct Case {
  int D = 128, Dv = 128, H = 4, bs = 4;
  bool dense = false, probs = true;
  long long prob_slack = 0;  // extra zeros at the end of every probability row
  std::vector<Req> reqs;
  float atol = 1e-5f, rtol = 1e-4f;
  cuda::AttnKernel kernel = cuda::AttnKernel::tiles;
  bool inf_row0 = false;  // the batch's first key and value rows all +inf (a token no request attends)
  // Nonzero (an integer): dim 0 of every query is +dim0 and of every key -dim0, which lowers every logit
  // by about dim0^2 / sqrt(D) (exp of the raw logits underflows to 0; only after subtracting the max it
  // does not); keys and queries are rounded to multiples of 1/16 then (check_one).
  float dim0 = 0.0f;
};

bool lanes_dims(int D, int Dv) {
  auto ok = [](int d) { return d == 64 || d == 128 || d == 256; };
  return ok(D) && ok(Dv);
}

const char* kernel_name(cuda::AttnKernel k) {
  return k == cuda::AttnKernel::lanes ? "lanes" : k == cuda::AttnKernel::tiles ? "tiles" : "automatic";
}

// A random subset of a request's blocks in random order, always with its last (maybe partial) block.
std::vector<std::int32_t> random_blocks(long long T, int bs, long long want, std::mt19937& rng) {
  const long long nb = num_blocks(T, bs);
  std::vector<std::int32_t> all(nb);
  std::iota(all.begin(), all.end(), 0);
  std::shuffle(all.begin(), all.end(), rng);
  all.resize(std::min(nb, std::max(1LL, want)));
  if (std::find(all.begin(), all.end(), nb - 1) == all.end()) all[all.size() / 2] = static_cast<std::int32_t>(nb - 1);
  return all;
}

std::vector<long long> tokens_in_order(const Req& r, int bs) {
  std::vector<long long> t;
  for (std::int32_t b : r.blocks)
    for (long long x = static_cast<long long>(b) * bs; x < std::min(r.T, (b + 1LL) * bs); ++x) t.push_back(x);
  return t;
}

struct Result {
  std::vector<float> out, probs;
};

Result run_gpu(const Case& c, const std::vector<float>& k, const std::vector<float>& v, const std::vector<float>& q,
               const std::vector<long long>& tok_off, const std::vector<long long>& prob_off, long long max_att) {
  const int B = static_cast<int>(c.reqs.size());
  std::vector<std::int32_t> blocks;
  std::vector<long long> blk_off = {0};
  for (const Req& r : c.reqs) {
    blocks.insert(blocks.end(), r.blocks.begin(), r.blocks.end());
    blk_off.push_back(static_cast<long long>(blocks.size()));
  }
  if (blocks.empty()) blocks.push_back(0);  // a valid pointer for the dense cases
  auto dk = test::to_device(k), dv = test::to_device(v), dq = test::to_device(q);
  auto dto = test::to_device(tok_off), dbo = test::to_device(blk_off), dpo = test::to_device(prob_off);
  auto db = test::to_device(blocks);
  auto dout = test::poisoned<float>(static_cast<std::size_t>(B) * c.H * c.Dv);
  auto dprobs = test::poisoned<float>(std::max<std::size_t>(1, static_cast<std::size_t>(prob_off.back()) * c.H));
  cuda::AttentionArgs a;
  a.batch.requests = B;
  a.batch.token_offset = dto.data();
  a.batch.total_tokens = tok_off.back();
  a.keys = dk.data();
  a.values = dv.data();
  a.dim = c.D;
  a.vdim = c.Dv;
  a.queries = dq.data();
  a.heads = c.H;
  if (!c.dense) {
    a.blocks = db.data();
    a.block_offset = dbo.data();
    a.block_size = c.bs;
  }
  a.max_attended = max_att;
  a.kernel = c.kernel;
  a.out = dout.data();
  if (c.probs) {
    a.probs = dprobs.data();
    a.prob_offset = dpo.data();
  }
  cuda::DeviceBuffer<std::uint8_t> ws(cuda::attention_workspace_bytes(a, max_att));
  a.workspace = ws.data();
  a.workspace_bytes = ws.size();
  cuda::Stream s;
  cuda::attention(a, s);
  cuda::attention_check(a, s);
  Result r;
  r.out = dout.to_host();
  if (c.probs) r.probs = dprobs.to_host();
  return r;
}

// Runs the case on the GPU with c.kernel and compares every request with the CPU reference (the GPU
// result in *keep).
void check_one(const Case& c, std::uint64_t seed, Result* keep = nullptr) {
  SCOPED_TRACE(testing::Message() << "kernel " << kernel_name(c.kernel));
  std::mt19937 rng(static_cast<unsigned>(seed));
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  const int B = static_cast<int>(c.reqs.size());
  std::vector<long long> tok_off = {0}, prob_off = {0};
  long long max_att = 1;
  for (const Req& r : c.reqs) {
    tok_off.push_back(tok_off.back() + r.T);
    const long long n = c.dense ? r.T : static_cast<long long>(tokens_in_order(r, c.bs).size());
    prob_off.push_back(prob_off.back() + n + c.prob_slack);
    max_att = std::max(max_att, n);
  }
  const long long total = tok_off.back();
  std::vector<float> k(total * c.D), v(total * c.Dv), q(static_cast<std::size_t>(B) * c.H * c.D);
  for (auto* x : {&k, &v, &q})
    for (auto& e : *x) e = u(rng);
  if (c.dim0 != 0.0f) {
    // Keys and queries on a grid of 1/16 (dim0 an integer): every dot product is exact in float whatever
    // the order of its sum, so the CPU's and the kernels' logits agree although dim 0's term is large.
    for (auto* x : {&k, &q})
      for (auto& e : *x) e = std::round(e * 16.0f) / 16.0f;
    for (long long t = 0; t < total; ++t) k[t * c.D] = -c.dim0;
    for (std::size_t h = 0; h < q.size() / c.D; ++h) q[h * c.D] = c.dim0;
  }
  if (c.inf_row0) {
    std::fill(k.begin(), k.begin() + c.D, INFINITY);
    std::fill(v.begin(), v.begin() + c.Dv, INFINITY);
  }
  Result local;
  Result& g = keep ? *keep : local;
  g = run_gpu(c, k, v, q, tok_off, prob_off, max_att);
  for (float x : g.out) EXPECT_FALSE(test::is_poison(x)) << "output never written";
  for (int b = 0; b < B; ++b) {
    const Req& r = c.reqs[b];
    const MatrixView<const float> kb(k.data() + tok_off[b] * c.D, r.T, c.D), vb(v.data() + tok_off[b] * c.Dv, r.T, c.Dv),
        qb(q.data() + static_cast<std::size_t>(b) * c.H * c.D, c.H, c.D);
    const auto order = c.dense ? std::vector<long long>{} : tokens_in_order(r, c.bs);
    std::vector<Index64> sorted(order.begin(), order.end());
    std::sort(sorted.begin(), sorted.end());
    const auto ref = attention(kb, vb, qb, sorted, c.probs);
    for (int i = 0; i < c.H * c.Dv; ++i) {
      const float want = ref.out.data()[i], got = g.out[static_cast<std::size_t>(b) * c.H * c.Dv + i];
      ASSERT_NEAR(got, want, c.atol + c.rtol * std::fabs(want)) << "request " << b << " element " << i;
    }
    if (!c.probs) continue;
    const long long n = c.dense ? r.T : static_cast<long long>(order.size()), len = prob_off[b + 1] - prob_off[b];
    for (int h = 0; h < c.H; ++h) {
      const float* row = g.probs.data() + c.H * prob_off[b] + h * len;
      double sum = 0;
      for (long long i = 0; i < len; ++i) {
        ASSERT_FALSE(test::is_poison(row[i])) << "probability never written";
        if (i >= n) {
          ASSERT_EQ(row[i], 0.0f) << "past the attended count";
          continue;
        }
        sum += row[i];
        const long long cpu_i =
            c.dense ? i : std::lower_bound(sorted.begin(), sorted.end(), order[i]) - sorted.begin();
        const float want = ref.probs.data()[h * n + cpu_i];
        ASSERT_NEAR(row[i], want, 1e-7f + 2e-4f * want) << "request " << b << " head " << h << " position " << i;
      }
      EXPECT_NEAR(sum, 1.0, 1e-4) << "request " << b << " head " << h;
    }
  }
}

// The case with the tiles kernel, then with the lanes kernel where its dims allow it.
void check_case(Case c, std::uint64_t seed) {
  c.kernel = cuda::AttnKernel::tiles;
  check_one(c, seed);
  if (!lanes_dims(c.D, c.Dv)) return;
  c.kernel = cuda::AttnKernel::lanes;
  check_one(c, seed);
}

Case sparse_case(std::vector<long long> lengths, int bs, long long blocks_each, std::mt19937& rng) {
  Case c;
  c.bs = bs;
  for (long long T : lengths) c.reqs.push_back({T, random_blocks(T, bs, blocks_each, rng)});
  return c;
}

TEST(Attention, OddSizesSparse) {
  IP_REQUIRE_GPU();
  std::mt19937 rng(1);
  for (long long T : {1LL, 19LL, 111LL, 989LL, 5003LL})
    for (int bs : {1, 4, 16}) {
      SCOPED_TRACE(testing::Message() << "T " << T << " bs " << bs);
      check_case(sparse_case({T}, bs, 1 + T / (2 * bs), rng), T * 31 + bs);
    }
}

TEST(Attention, OddSizesDense) {
  IP_REQUIRE_GPU();
  for (long long T : {1LL, 19LL, 111LL, 989LL, 70001LL}) {
    Case c;
    c.dense = true;
    c.reqs = {{T, {}}};
    SCOPED_TRACE(testing::Message() << "T " << T);
    check_case(c, T);
  }
}

TEST(Attention, EveryDimAndHeadCount) {
  IP_REQUIRE_GPU();
  std::mt19937 rng(2);
  const int dims[][2] = {{64, 64}, {128, 128}, {256, 256}, {64, 256}, {256, 64}, {128, 64}, {19, 33}, {96, 128}, {1, 1}};
  for (const auto& d : dims)
    for (int H : {1, 3, 8, 13, 64}) {
      Case c = sparse_case({989}, 4, 60, rng);
      c.D = d[0];
      c.Dv = d[1];
      c.H = H;
      SCOPED_TRACE(testing::Message() << "D " << d[0] << " Dv " << d[1] << " H " << H);
      check_case(c, d[0] * 1000 + d[1] * 10 + H);
    }
}

TEST(Attention, BatchOfDifferentLengths) {
  IP_REQUIRE_GPU();
  std::mt19937 rng(3);
  Case c = sparse_case({1, 19, 4, 111, 989, 300, 2, 4099}, 16, 9, rng);
  c.H = 5;
  check_case(c, 3);
  Case d;
  d.dense = true;
  d.H = 3;
  for (long long T : {1LL, 19LL, 111LL, 989LL, 5000LL, 2LL}) d.reqs.push_back({T, {}});
  check_case(d, 4);
}

TEST(Attention, ProbabilityRowsLongerThanAttendedEndInZeros) {
  IP_REQUIRE_GPU();
  std::mt19937 rng(4);
  Case c = sparse_case({10, 989, 37}, 4, 7, rng);
  c.prob_slack = 3;
  check_case(c, 5);
}

// Positions past a split's end or a request's attended count read no token's row into the result: a
// first row of infinities that no request attends leaves every output finite (0 * inf would not).
TEST(Attention, UnattendedRowsNeverReachTheOutput) {
  IP_REQUIRE_GPU();
  std::mt19937 rng(7);
  Case c = sparse_case({989, 111, 37}, 4, 25, rng);
  auto& first = c.reqs[0].blocks;
  first.erase(std::remove(first.begin(), first.end(), 0), first.end());
  ASSERT_FALSE(first.empty());
  c.inf_row0 = true;
  c.H = 5;
  check_case(c, 9);
  Case d = c;  // dims of the generic tiles path too
  d.D = 19;
  d.Dv = 33;
  check_case(d, 10);
}

// Every logit near -200 (D = 128, dim0 = 48): exp(logit) underflows to 0 in float, so a running max that
// starts at 0 instead of -inf (the split kernels' softmax, the combine's max over the splits) gives zero
// sums and outputs. Sparse requests of several splits, and a dense one (many splits to combine).
TEST(Attention, VeryNegativeLogits) {
  IP_REQUIRE_GPU();
  std::mt19937 rng(11);
  Case c = sparse_case({989, 111, 37}, 4, 25, rng);
  c.dim0 = 48.0f;
  c.H = 5;
  check_case(c, 12);
  Case d;
  d.dense = true;
  d.dim0 = 48.0f;
  d.reqs = {{3001, {}}};
  check_case(d, 13);
}

TEST(Attention, WithoutProbabilities) {
  IP_REQUIRE_GPU();
  std::mt19937 rng(5);
  Case c = sparse_case({989, 111}, 4, 20, rng);
  c.probs = false;
  check_case(c, 6);
}

TEST(Attention, SameInputsSameBits) {
  IP_REQUIRE_GPU();
  std::mt19937 rng(6);
  Case c = sparse_case({5003, 989}, 4, 400, rng);
  c.H = 19;  // two groups of heads for either kernel, the last one partial
  for (auto k : {cuda::AttnKernel::tiles, cuda::AttnKernel::lanes}) {
    c.kernel = k;
    Result a, b;
    check_one(c, 7, &a);
    check_one(c, 7, &b);
    ASSERT_EQ(a.out.size(), b.out.size());
    ASSERT_EQ(a.probs.size(), b.probs.size());
    EXPECT_EQ(0, std::memcmp(a.out.data(), b.out.data(), a.out.size() * sizeof(float))) << kernel_name(k);
    EXPECT_EQ(0, std::memcmp(a.probs.data(), b.probs.data(), a.probs.size() * sizeof(float))) << kernel_name(k);
  }
}

TEST(Attention, DenseTwoMillionTokens) {
  IP_REQUIRE_GPU();
  Case c;
  c.dense = true;
  c.D = c.Dv = 64;
  c.H = 2;
  c.reqs = {{2LL << 20, {}}};
  c.atol = 2e-5f;
  c.rtol = 1e-3f;
  check_case(c, 8);
}

TEST(Attention, DeviceSideChecksFlagBadBlocks) {
  IP_REQUIRE_GPU();
  const long long T = 10;
  const int D = 64;
  std::vector<float> k(T * D, 0.5f), v(T * D, 0.25f), q(D, 1.0f);
  for (const std::vector<std::int32_t>& blocks : {std::vector<std::int32_t>{0, 3}, {2, 1, 2}})
    for (auto kernel : {cuda::AttnKernel::tiles, cuda::AttnKernel::lanes}) {
      Case c;
      c.D = c.Dv = D;
      c.H = 1;
      c.probs = false;
      c.reqs = {{T, blocks}};
      c.kernel = kernel;
      EXPECT_THROW(run_gpu(c, k, v, q, {0, T}, {0, 12}, 12), Error) << kernel_name(kernel);
    }
}

// Host-side validation needs no device.
TEST(Attention, ValidatesArgumentsOnTheHost) {
  cuda::AttentionArgs a;
  const long long off = 0;
  a.batch.requests = 1;
  a.batch.token_offset = &off;
  a.dim = a.vdim = 64;
  a.heads = 4;
  EXPECT_GT(cuda::attention_workspace_bytes(a, 1000), 0u);
  EXPECT_GE(cuda::attention_workspace_bytes(a, 1 << 20), cuda::attention_workspace_bytes(a, 1000));
  EXPECT_THROW(cuda::attention_workspace_bytes(a, 0), Error);
  cuda::AttentionArgs bad = a;
  bad.dim = 0;
  EXPECT_THROW(cuda::attention_workspace_bytes(bad, 10), Error);
  bad = a;
  bad.batch.requests = 0;
  EXPECT_THROW(cuda::attention_workspace_bytes(bad, 10), Error);
  bad = a;
  bad.blocks = reinterpret_cast<const std::int32_t*>(&off);  // blocks without block_offset
  EXPECT_THROW(cuda::attention_workspace_bytes(bad, 10), Error);
  // A workspace that is too small is refused before anything runs.
  float dummy = 0;
  a.keys = a.values = a.queries = &dummy;
  a.out = &dummy;
  a.max_attended = 10;
  a.workspace = &dummy;
  a.workspace_bytes = 1;
  EXPECT_THROW(cuda::attention(a, nullptr), Error);
  // Blocks over a batch of no tokens: the kernels would read row 0 for the invalid blocks' tokens.
  {
    cuda::AttentionArgs z = a;
    const long long block_off[2] = {0, 1};
    const std::int32_t block_ids[1] = {-1};
    z.blocks = block_ids;
    z.block_offset = block_off;
    z.block_size = 4;
    z.workspace_bytes = cuda::attention_workspace_bytes(z, 10);
    try {
      cuda::attention(z, nullptr);
      ADD_FAILURE() << "blocks over 0 tokens accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("blocks given over a batch of 0 tokens"), std::string::npos) << e.what();
    }
  }
  // The lanes kernel refuses dims it was not built for, and unaligned rows, before anything runs.
  a.workspace_bytes = cuda::attention_workspace_bytes(a, 10);
  a.kernel = cuda::AttnKernel::lanes;
  for (const auto& d : std::initializer_list<std::pair<int, int>>{{96, 128}, {128, 96}, {19, 33}, {512, 128}}) {
    a.dim = d.first;
    a.vdim = d.second;
    a.workspace_bytes = cuda::attention_workspace_bytes(a, 10);
    try {
      cuda::attention(a, nullptr);
      ADD_FAILURE() << "dim " << d.first << " vdim " << d.second << " accepted by the lanes kernel";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("kernel = lanes takes dim and vdim"), std::string::npos) << e.what();
    }
  }
  a.dim = a.vdim = 64;
  a.workspace_bytes = cuda::attention_workspace_bytes(a, 10);
  alignas(16) float row[4] = {};
  a.keys = row + 1;  // 4-byte aligned only
  try {
    cuda::attention(a, nullptr);
    ADD_FAILURE() << "unaligned keys accepted by the lanes kernel";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("16-byte aligned"), std::string::npos) << e.what();
  }
}

// Each host-side check names what it refuses, and refuses it before any CUDA call; the edges are let
// through (attention_workspace_bytes validates the shape as attention() does). Host buffers stand in
// for device memory: nothing is launched unless a check is missing.
TEST(Attention, EachBadArgumentIsNamed) {
  constexpr int kTokens = 8, kDim = 64, kHeads = 4;
  const long long off[2] = {0, kTokens};
  alignas(16) static float keys[kTokens * kDim], values[kTokens * kDim], queries[kHeads * kDim], out[kHeads * kDim];
  alignas(16) static unsigned char ws[1 << 16];
  auto good = [&] {
    cuda::AttentionArgs a;
    a.batch.requests = 1;
    a.batch.token_offset = off;
    a.batch.total_tokens = kTokens;
    a.keys = keys;
    a.values = values;
    a.dim = a.vdim = kDim;
    a.queries = queries;
    a.heads = kHeads;
    a.max_attended = kTokens;
    a.out = out;
    a.workspace = ws;
    a.workspace_bytes = cuda::attention_workspace_bytes(a, kTokens);
    EXPECT_LE(a.workspace_bytes, sizeof ws);
    return a;
  };
  static const long long block_off[2] = {0, 1};
  static const std::int32_t block_ids[1] = {0};
  constexpr int kHeadsPerBlock = 8;  // kernels/attention.cuh, kAttnHeads: a grid dimension counts blocks of 8 heads
  struct Bad {
    const char* needle;
    void (*edit)(cuda::AttentionArgs&);
  };
  const Bad bad[] = {
      {"batch.requests = 0", [](cuda::AttentionArgs& a) { a.batch.requests = 0; }},
      {"batch.requests = 65536", [](cuda::AttentionArgs& a) { a.batch.requests = 65536; }},
      {"token_offset is null", [](cuda::AttentionArgs& a) { a.batch.token_offset = nullptr; }},
      {"total_tokens = -1", [](cuda::AttentionArgs& a) { a.batch.total_tokens = -1; }},
      {"dim = 0", [](cuda::AttentionArgs& a) { a.dim = 0; }},
      {"vdim = 0", [](cuda::AttentionArgs& a) { a.vdim = 0; }},
      {"heads = 0", [](cuda::AttentionArgs& a) { a.heads = 0; }},
      {"(too many)", [](cuda::AttentionArgs& a) { a.heads = kHeadsPerBlock * 65535 + 1; }},
      {"max_attended = 0", [](cuda::AttentionArgs& a) { a.max_attended = 0; }},
      {"blocks given without block_offset", [](cuda::AttentionArgs& a) { a.blocks = block_ids; }},
      {"block_size = 0", [](cuda::AttentionArgs& a) {
         a.blocks = block_ids;
         a.block_offset = block_off;
         a.block_size = 0;
       }},
      {"probs given without prob_offset", [](cuda::AttentionArgs& a) { a.probs = a.out; }},
      {"keys or values is null", [](cuda::AttentionArgs& a) { a.keys = nullptr; }},
      {"keys or values is null", [](cuda::AttentionArgs& a) { a.values = nullptr; }},
      {"queries is null", [](cuda::AttentionArgs& a) { a.queries = nullptr; }},
      {"out is null", [](cuda::AttentionArgs& a) { a.out = nullptr; }},
      {"workspace is null", [](cuda::AttentionArgs& a) { a.workspace = nullptr; }},
      {"bytes needed", [](cuda::AttentionArgs& a) { a.workspace_bytes -= 1; }},
      {"16-byte aligned", [](cuda::AttentionArgs& a) {  // values 4-byte aligned, keys aligned
         a.kernel = cuda::AttnKernel::lanes;
         a.values += 1;
       }},
      {"16-byte aligned", [](cuda::AttentionArgs& a) {  // keys 4-byte aligned, values aligned
         a.kernel = cuda::AttnKernel::lanes;
         a.keys += 1;
       }},
      {"fewer than 2^31 tokens", [](cuda::AttentionArgs& a) {
         a.kernel = cuda::AttnKernel::lanes;
         a.batch.total_tokens = 1LL << 31;
       }},
  };
  for (const Bad& b : bad) {
    cuda::AttentionArgs a = good();
    b.edit(a);
    try {
      cuda::attention(a, nullptr);
      ADD_FAILURE() << "accepted: " << b.needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(b.needle), std::string::npos) << b.needle << ": " << e.what();
    }
  }
  // Blocks with their offsets and the default block size (1) are let through.
  cuda::AttentionArgs a = good();
  a.blocks = block_ids;
  a.block_offset = block_off;
  EXPECT_NO_THROW(cuda::attention_workspace_bytes(a, kTokens));
  // The largest batch and head counts one launch takes.
  a = good();
  a.batch.requests = 65535;
  EXPECT_NO_THROW(cuda::attention_workspace_bytes(a, 1));
  a = good();
  a.heads = kHeadsPerBlock * 65535;
  EXPECT_NO_THROW(cuda::attention_workspace_bytes(a, 1));
}

}  // namespace
}  // namespace ip
