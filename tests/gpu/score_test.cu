// ip::cuda::score against the CPU backend (core/score.h score_index, via tests/gpu/score_reference.cc): every precision,
// maxmin, heads {1, 3, 8, 64}, dims {64, 96, 128, 256}, batches of requests of different lengths
// (empty ones included), every math mode, poisoned outputs; argument checks run without a GPU.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/numeric.h"
#include "core/quant.h"
#include "core/score_math.h"
#include "kernels/forms.h"
#include "kernels/launch.h"
#include "kernels/score.h"
#include "kernels/score.cuh"
#include "tests/gpu/gpu_test.h"
#include "tests/gpu/score_reference.h"

namespace ip {
namespace {

using cuda::ScoreMath;

struct Case {
  Precision precision = Precision::fp32;
  int dim = 128, heads = 8;
  bool maxmin = false;
  bool integers = true;  // small-integer rows and queries (exact fp32 sums)
  std::vector<long long> lengths = {19};
  unsigned seed = 1;
  float row_scale = 1.0f;  // multiplies every row value before quantization
};

std::string name(const Case& c) {
  return fmt::format("{} D={} H={} maxmin={} int={} requests={} first={}", to_string(c.precision), c.dim, c.heads,
                     c.maxmin, c.integers, c.lengths.size(), c.lengths.front());
}

struct Prepared {
  std::vector<QuantizedMatrix> index;     // per request (CPU reference)
  std::vector<std::vector<float>> q, hw;  // per request [H*D], [H]
  std::vector<std::uint8_t> payload;      // whole batch
  std::vector<float> scales;
  std::vector<long long> entry_offset;
};

Prepared prepare(const Case& c) {
  std::mt19937 rng(c.seed);
  std::uniform_int_distribution<int> small(-3, 3), weight(0, 4);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  auto value = [&] { return c.integers ? static_cast<float>(small(rng)) : normal(rng); };
  Prepared p;
  p.entry_offset = {0};
  const int per = c.maxmin ? 2 : 1;
  for (long long len : c.lengths) {
    std::vector<float> x(static_cast<std::size_t>(len * per * c.dim));
    for (float& v : x) v = value() * c.row_scale;
    if (c.maxmin)  // row 2g = max, row 2g+1 = min, as pooling stores them
      for (long long g = 0; g < len; ++g)
        for (int d = 0; d < c.dim; ++d) {
          float& hi = x[(2 * g) * c.dim + d];
          float& lo = x[(2 * g + 1) * c.dim + d];
          if (hi < lo) std::swap(hi, lo);
        }
    QuantizedMatrix idx = quantize(MatrixView<const float>(x.data(), len * per, c.dim), c.precision);
    p.payload.insert(p.payload.end(), idx.payload.begin(), idx.payload.end());
    p.scales.insert(p.scales.end(), idx.scales.begin(), idx.scales.end());
    p.index.push_back(std::move(idx));
    std::vector<float> q(static_cast<std::size_t>(c.heads * c.dim)), hw(c.heads);
    for (float& v : q) v = c.integers ? static_cast<float>(small(rng)) : normal(rng);
    for (float& v : hw) v = c.integers ? static_cast<float>(weight(rng)) : std::fabs(normal(rng));
    p.q.push_back(std::move(q));
    p.hw.push_back(std::move(hw));
    p.entry_offset.push_back(p.entry_offset.back() + len);
  }
  return p;
}

// CPU reference and, per entry, sum_j h_j sum_d |q_jd x_d| (the scale of rounding errors).
void reference(const Case& c, const Prepared& p, std::vector<float>& ref, std::vector<double>& mag) {
  for (std::size_t b = 0; b < p.index.size(); ++b) {
    const QuantizedMatrix& idx = p.index[b];
    const std::vector<float> out = test::cpu_score_index(idx, c.maxmin, p.q[b].data(), p.hw[b].data(), c.heads);
    ref.insert(ref.end(), out.begin(), out.end());
    const Tensor<float> x = dequantize(idx);
    const int per = c.maxmin ? 2 : 1;
    for (Index64 g = 0; g < static_cast<Index64>(out.size()); ++g) {
      double m = 0;
      for (int j = 0; j < c.heads; ++j)
        for (int r = 0; r < per; ++r)
          for (int d = 0; d < c.dim; ++d)
            m += p.hw[b][j] * std::fabs(static_cast<double>(p.q[b][j * c.dim + d]) * x.data()[(g * per + r) * c.dim + d]);
      mag.push_back(m);
    }
  }
}

// The one-product maths' own result, in double (kernels/score.h). bf16: per head the dot product of the
// query rounded to bf16 and the stored element rounded to bf16 (bf16, int8 codes and fp8 are exact in it;
// fp16 and fp32 round), times the row's scale, then the weighted ReLU sum. f16 (rows exact in f16): the
// query times the head's power of two (core/score_math.h f16_query_factor) rounded to f16, times the
// stored element, times the inverse power and the row's scale. mag16: sum_j h_j sum_d |q16 x16 scale|. Only
// fp32 summation errors separate the device from it, so a lost head or a wrong element shows (the bound
// of the one-product math against the exact scores, 2^-7 of mag for bf16, would hide both). Not for maxmin.
void reference_one_product(const Case& c, const Prepared& p, bool f16, std::vector<double>& ref16,
                           std::vector<double>& mag16) {
  auto r16 = [](float v) { return static_cast<double>(bf16_to_float(bf16_from_float(v))); };
  for (std::size_t b = 0; b < p.index.size(); ++b) {
    const QuantizedMatrix& idx = p.index[b];
    // Each head's query as the kernel multiplies it: rounded, and (f16) scaled back.
    std::vector<double> q(p.q[b].size());
    for (int j = 0; j < c.heads; ++j) {
      float amax = 0.0f;
      for (int d = 0; d < c.dim; ++d) amax = std::max(amax, std::fabs(p.q[b][j * c.dim + d]));
      float inv = 1.0f;
      const float f = f16_query_factor(amax, &inv);
      for (int d = 0; d < c.dim; ++d) {
        const float v = p.q[b][j * c.dim + d];
        q[j * c.dim + d] = f16 ? static_cast<double>(fp16_to_float(fp16_from_float(v * f))) * inv : r16(v);
      }
    }
    for (Index64 g = 0; g < (c.maxmin ? 0 : idx.rows); ++g) {
      const std::uint8_t* row = idx.row_bytes(g);
      std::vector<double> x(static_cast<std::size_t>(c.dim));
      for (int d = 0; d < c.dim; ++d) {
        float v = 0;
        switch (idx.precision) {
          case Precision::fp32: std::memcpy(&v, row + 4 * d, 4); break;
          case Precision::fp16: v = fp16_to_float(static_cast<std::uint16_t>(row[2 * d] | (row[2 * d + 1] << 8))); break;
          case Precision::bf16: v = bf16_to_float(static_cast<std::uint16_t>(row[2 * d] | (row[2 * d + 1] << 8))); break;
          case Precision::int8: v = static_cast<float>(static_cast<std::int8_t>(row[d])); break;
          case Precision::fp8: v = fp8e4m3_to_float(row[d]); break;
        }
        x[d] = f16 ? static_cast<double>(v) : r16(v);  // f16: only rows exact in f16 get here
      }
      const double scale = idx.scale(g);
      double s = 0, m = 0;
      for (int j = 0; j < c.heads; ++j) {
        double dot = 0, abs = 0;
        for (int d = 0; d < c.dim; ++d) {
          const double t = q[j * c.dim + d] * x[d] * scale;
          dot += t;
          abs += std::fabs(t);
        }
        s += p.hw[b][j] * std::max(0.0, dot);
        m += p.hw[b][j] * abs;
      }
      ref16.push_back(s);
      mag16.push_back(m);
    }
  }
}

// Relative error bound (of mag) of each math, beyond which a result is wrong; bf16: of mag16, against its
// own reference (fp32 summation only).
// f16x2 (2^-22 and fp32 sums) is held to fp32's bound: without its lo parts (2^-11) it fails it.
double tolerance(ScoreMath m) {
  switch (m) {
    case ScoreMath::bf16: return 2e-5;
    case ScoreMath::f16: return 2e-5;
    case ScoreMath::bf16x2: return 1e-4;
    case ScoreMath::bf16x3: return 1e-4;
    default: return 1e-5;
  }
}

bool one_product(ScoreMath m) { return m == ScoreMath::bf16 || m == ScoreMath::f16; }

// The device's scores of a prepared case (poisoned output first); `used`: the math it resolved to.
std::vector<float> device_scores(const Case& c, const Prepared& p, ScoreMath math, bool pipelined, ScoreMath& used) {
  std::vector<float> q_all, hw_all;
  for (std::size_t b = 0; b < p.q.size(); ++b) {
    q_all.insert(q_all.end(), p.q[b].begin(), p.q[b].end());
    hw_all.insert(hw_all.end(), p.hw[b].begin(), p.hw[b].end());
  }
  auto d_rows = test::to_device(p.payload.empty() ? std::vector<std::uint8_t>(1) : p.payload);
  auto d_scales = test::to_device(p.scales.empty() ? std::vector<float>(1) : p.scales);
  auto d_off = test::to_device(p.entry_offset);
  auto d_q = test::to_device(q_all);
  auto d_hw = test::to_device(hw_all);
  const long long total = p.entry_offset.back();
  auto d_out = test::poisoned<float>(static_cast<std::size_t>(total) + 1);  // one guard element past the end
  cuda::ScoreArgs a;
  a.batch.requests = static_cast<int>(c.lengths.size());
  a.batch.entry_offset = d_off.data();
  a.batch.total_entries = total;
  a.rows = d_rows.data();
  a.scales = p.scales.empty() ? nullptr : d_scales.data();
  a.precision = c.precision;
  a.dim = c.dim;
  a.maxmin = c.maxmin;
  a.queries = d_q.data();
  a.head_weights = d_hw.data();
  a.heads = c.heads;
  a.scores = d_out.data();
  a.math = math;
  a.pipelined = pipelined;
  used = cuda::resolve_score_math(a);
  cuda::score(a, nullptr);
  IP_CUDA_CHECK(cudaDeviceSynchronize());
  return d_out.to_host();
}

// abs_tol: an absolute allowance beside the relative one (of mag).
void check_prepared(const Case& c, const Prepared& p, ScoreMath math, bool pipelined = false, double abs_tol = 1e-6) {
  SCOPED_TRACE(name(c) + fmt::format(" math={} pipelined={}", static_cast<int>(math), pipelined));
  std::vector<float> ref;
  std::vector<double> mag;
  reference(c, p, ref, mag);
  ScoreMath used{};
  const std::vector<float> got = device_scores(c, p, math, pipelined, used);
  const long long total = p.entry_offset.back();
  ASSERT_EQ(static_cast<long long>(got.size()), total + 1);
  EXPECT_TRUE(test::is_poison(got[static_cast<std::size_t>(total)])) << "written past the last entry";
  std::vector<double> ref16, mag16;
  if (one_product(used)) {
    reference_one_product(c, p, used == ScoreMath::f16, ref16, mag16);
    ASSERT_EQ(static_cast<long long>(ref16.size()), total);
  }
  // Small integers in fp32/fp16/bf16 rows: every product and partial sum is an exact integer (and exact in
  // bf16), so every path (integer queries have lo = 0) must agree with the CPU bit for bit.
  const bool exact = c.integers && (c.precision == Precision::fp32 || c.precision == Precision::fp16 ||
                                    c.precision == Precision::bf16);
  int bad = 0;
  for (long long e = 0; e < total && bad < 10; ++e) {
    const float g = got[e];
    const double r = one_product(used) ? ref16[e] : ref[e], m = one_product(used) ? mag16[e] : mag[e];
    if (test::is_poison(g)) {
      ADD_FAILURE() << "entry " << e << " never written";
      ++bad;
    } else if (exact ? g != ref[e] : !(std::fabs(g - r) <= abs_tol + tolerance(used) * m)) {
      ADD_FAILURE() << "entry " << e << ": gpu " << g << (one_product(used) ? " one-product reference " : " cpu ")
                    << r << " (mag " << m << ")";
      ++bad;
    }
  }
}

void check(const Case& c, ScoreMath math, bool pipelined = false) { check_prepared(c, prepare(c), math, pipelined); }

const Precision kPrecisions[] = {Precision::fp32, Precision::fp16, Precision::bf16, Precision::int8, Precision::fp8};
const ScoreMath kMaths[] = {ScoreMath::automatic, ScoreMath::fp32, ScoreMath::bf16x2, ScoreMath::bf16,
                            ScoreMath::bf16x3,    ScoreMath::f16x2, ScoreMath::f16,    ScoreMath::split};

bool f16_rows(Precision p) { return p == Precision::fp16 || p == Precision::int8 || p == Precision::fp8; }

bool supported(const Case& c, ScoreMath m) {
  if (m == ScoreMath::automatic || m == ScoreMath::fp32) return true;
  if (c.maxmin || (c.dim != 64 && c.dim != 128 && c.dim != 256)) return false;
  if (m == ScoreMath::f16x2 || m == ScoreMath::f16) return f16_rows(c.precision);
  return m == ScoreMath::bf16 || m == ScoreMath::bf16x3 || m == ScoreMath::split || c.precision == Precision::bf16 ||
         c.precision == Precision::int8 || c.precision == Precision::fp8;
}

TEST(Score, AllPrecisionsHeadsDimsAndBatches) {
  IP_REQUIRE_GPU();
  const std::vector<std::vector<long long>> batches = {{1}, {19}, {111}, {989}, {0, 19, 1, 111, 0, 989, 7}};
  for (Precision prec : kPrecisions)
    for (int dim : {64, 96, 128, 256})
      for (int heads : {1, 3, 8, 64})
        for (bool maxmin : {false, true})
          for (bool integers : {true, false})
            for (const auto& lengths : batches) {
              if (heads == 64 && lengths.size() == 1 && lengths[0] != 989) continue;  // keep the CPU reference quick
              const Case c{prec, dim, heads, maxmin, integers, lengths, static_cast<unsigned>(dim + heads)};
              for (ScoreMath m : kMaths)
                if (supported(c, m)) check(c, m);
            }
}

TEST(Score, LargeRequests) {
  IP_REQUIRE_GPU();
  for (Precision prec : {Precision::fp8, Precision::bf16, Precision::int8})
    for (int heads : {1, 64}) {
      const Case c{prec, 128, heads, false, false, {100000}, 5};
      for (ScoreMath m : kMaths)
        if (supported(c, m)) check(c, m);
    }
  check(Case{Precision::fp32, 128, 8, true, false, {100000}, 6}, ScoreMath::automatic);
  // Many tiny requests: tensor-core tiles span many queries.
  std::vector<long long> tiny(1000);
  for (std::size_t i = 0; i < tiny.size(); ++i) tiny[i] = static_cast<long long>(i % 5);
  check(Case{Precision::bf16, 64, 16, false, true, tiny, 7}, ScoreMath::bf16x2);
  check(Case{Precision::fp8, 64, 16, false, false, tiny, 8}, ScoreMath::automatic);
  // Tensor cores, blocks with several tiles each (one wave of resident blocks; on the emulator, which
  // counts 2 blocks an SM, all 7 boundaries below fall inside a block's range): requests ending one entry
  // before a tile's end, so that the tile's last entry is the next request's first (the bound of the
  // staged-request shortcut).
  std::vector<long long> edges(8, 128 * 40);
  edges[0] -= 1;
  check(Case{Precision::fp8, 128, 8, false, false, edges, 12}, ScoreMath::automatic);
  // The same on CUDA cores: a warp's 8 or 16 entries span several requests (each its own query).
  check(Case{Precision::fp8, 128, 1, false, false, tiny, 9}, ScoreMath::automatic);
  check(Case{Precision::int8, 64, 3, false, true, tiny, 10}, ScoreMath::fp32);
  check(Case{Precision::bf16, 256, 2, false, false, tiny, 11}, ScoreMath::fp32);
}

// Every kernel and math once, in small batches (the emu_long cases above cover them at length; without
// these the short emulator run checks only the pipelined CUDA-core kernel at D = 128 and the f16 parts):
// the generic kernel (D = 96), maxmin (its row pairs and their two scales), the CUDA-core kernel at D = 64
// and 256, every tensor-core math at D = 64 and 256, over requests with empty ones and short tails. Then
// LargeRequests' tensor-core tiles that end one entry into the next request (the staged-request bound).
TEST(Score, EveryPathSmall) {
  IP_REQUIRE_GPU();
  for (Precision prec : kPrecisions)
    for (int dim : {64, 96, 256})
      for (int heads : {3, 8})
        for (bool maxmin : {false, true}) {
          const Case c{prec, dim, heads, maxmin, heads == 3, {0, 19, 1, 37, 0, 5},
                       static_cast<unsigned>(7 * dim + heads)};
          for (ScoreMath m : kMaths)
            if (supported(c, m)) check(c, m);
        }
  std::vector<long long> edges(8, 128 * 40);
  edges[0] -= 1;
  check(Case{Precision::fp8, 128, 8, false, false, edges, 12}, ScoreMath::automatic);
}

// f16 parts scale each head's query by a power of two (core/score_math.h f16_query_factor) before its f16
// parts are taken: requests whose queries lie far outside f16's range (1e30 overflows it, 1e-30 is below
// its smallest subnormal), one of zeros, one mixing 1e4 and 1e-4 within each head, one ordinary, over fp16
// rows up to some 4e4 (f16's largest is 65504) and int8 and fp8 rows. Each request is judged relative to its
// own magnitude (no absolute allowance, which would pass anything at 1e-30), and the zero request must
// score exactly 0. Without the scaling the first request's f16 parts overflow and the third's are all zeros
// (a NaN dot product, as from inf - inf, scores 0 after the ReLU, as on the CPU: the check compares values
// and does not look for NaN).
TEST(Score, F16PartsScaleEachHeadsQuery) {
  IP_REQUIRE_GPU();
  const float mult[] = {1e30f, 1.0f, 1e-30f, 0.0f, -1.0f /* mixed */, 1.0f};
  for (Precision prec : {Precision::fp16, Precision::int8, Precision::fp8})
    for (int heads : {8, 24}) {
      Case c{prec, 128, heads, false, false, {333, 0, 71, 50, 50, 40}, static_cast<unsigned>(90 + heads)};
      c.row_scale = prec == Precision::fp16 ? 1e4f : 1.0f;
      Prepared p = prepare(c);
      for (std::size_t b = 0; b < p.q.size(); ++b)
        for (int i = 0; i < heads * c.dim; ++i)
          p.q[b][i] *= mult[b] >= 0.0f ? mult[b] : (i % 2 ? 1e4f : 1e-4f);
      for (ScoreMath m : {ScoreMath::f16x2, ScoreMath::f16}) check_prepared(c, p, m, false, 0.0);
    }
}

// f16 parts take each head's factor from that head's own largest magnitude (one warp a head, the lanes'
// maxima reduced over the whole warp) and multiply its dot products back by that head's own inverse: the
// heads of a request lie 2^4 apart (head j times 2^(4j - 40)), their weights the inverse, so that every
// head weighs alike; each head's largest magnitude is one element 2^10 above the rest, negative in odd
// heads, in a lane that moves from head to head (odd lanes, upper half-warp), with the significand
// 2 - 2^-13, which a factor one binade too high takes to 65532, past f16's largest finite (65504). H = 24
// has three n-tiles. A factor or inverse of another head, or of a partial maximum, is wrong by 2^4 or
// more, or overflows f16.
TEST(Score, F16PartsTakeEachHeadsOwnFactor) {
  IP_REQUIRE_GPU();
  for (Precision prec : {Precision::fp16, Precision::int8, Precision::fp8})
    for (int dim : {64, 256})
      for (int heads : {8, 24}) {
        Case c{prec, dim, heads, false, false, {45, 0, 20}, static_cast<unsigned>(300 + dim + heads)};
        Prepared p = prepare(c);
        const int per_lane = dim / 32;
        for (std::size_t b = 0; b < p.q.size(); ++b)
          for (int j = 0; j < heads; ++j) {
            const int e = 4 * j - 40;
            float* q = p.q[b].data() + j * dim;
            for (int d = 0; d < dim; ++d) q[d] = std::ldexp(std::tanh(q[d]), e);  // |q| < 2^e
            const int lane = (7 * j + 5 * static_cast<int>(b) + 1) % 32;
            q[lane * per_lane + j % per_lane] = std::ldexp(j % 2 ? -(2.0f - 0x1p-13f) : 2.0f - 0x1p-13f, e + 10);
            p.hw[b][j] = std::ldexp(0.5f + p.hw[b][j], -e);
          }
        for (ScoreMath m : {ScoreMath::f16x2, ScoreMath::f16}) check_prepared(c, p, m, false, 0.0);
      }
}

// ScoreArgs::pipelined (the CUDA-core kernel that loads a warp's next step before scoring the current
// one; D = 128, math fp32): against the CPU, and bit for bit equal to the plain kernel, over batches whose
// warps take one, two or many steps (odd and even: the kernel alternates two sets of registers), with
// steps spanning several requests, and a tail step.
TEST(Score, PipelinedFormEqualsThePlainOne) {
  IP_REQUIRE_GPU();
  std::vector<long long> tiny(1000);
  for (std::size_t i = 0; i < tiny.size(); ++i) tiny[i] = static_cast<long long>(i % 5);
  const std::vector<std::vector<long long>> batches = {{1}, {989}, {0, 19, 1, 111, 0, 989, 7}, tiny, {70001}};
  for (Precision prec : kPrecisions)
    for (int heads : {1, 3, 8})
      for (const auto& lengths : batches) {
        if (heads > 1 && lengths.size() == 1 && lengths[0] > 1000) continue;  // keep the CPU reference quick
        const Case c{prec, 128, heads, false, false, lengths, static_cast<unsigned>(40 + heads)};
        check(c, ScoreMath::fp32, true);
        SCOPED_TRACE(name(c));
        const Prepared p = prepare(c);
        ScoreMath u1{}, u2{};
        const std::vector<float> plain = device_scores(c, p, ScoreMath::fp32, false, u1);
        const std::vector<float> piped = device_scores(c, p, ScoreMath::fp32, true, u2);
        ASSERT_EQ(plain.size(), piped.size());
        int bad = 0;
        for (std::size_t e = 0; e < plain.size() && bad < 10; ++e)
          if (f32_bits(plain[e]) != f32_bits(piped[e])) {
            ADD_FAILURE() << "entry " << e << ": pipelined " << piped[e] << ", plain " << plain[e];
            ++bad;
          }
      }
}

TEST(Score, AutomaticMathChoice) {
  // Host-only: no launch.
  cuda::ScoreArgs a;
  long long off = 0;
  a.batch.entry_offset = &off;
  a.batch.total_entries = 0;
  a.dim = 128;
  a.heads = 64;
  a.precision = Precision::fp8;
  a.rows = reinterpret_cast<const void*>(std::uintptr_t{256});
  EXPECT_EQ(cuda::resolve_score_math(a), cuda::ScoreMath::f16x2);  // fp8 rows are exact in f16
  a.heads = 4;
  EXPECT_EQ(cuda::resolve_score_math(a), cuda::ScoreMath::fp32);
  a.heads = 64;
  a.precision = Precision::fp32;  // not exact in bf16 or f16: rows split too
  EXPECT_EQ(cuda::resolve_score_math(a), cuda::ScoreMath::bf16x3);
  a.precision = Precision::fp16;  // exact in f16: two mma a step where bf16x3 takes three
  EXPECT_EQ(cuda::resolve_score_math(a), cuda::ScoreMath::f16x2);
  a.precision = Precision::int8;
  EXPECT_EQ(cuda::resolve_score_math(a), cuda::ScoreMath::f16x2);
  a.precision = Precision::bf16;  // not exact in f16 (its range)
  EXPECT_EQ(cuda::resolve_score_math(a), cuda::ScoreMath::bf16x2);
  a.precision = Precision::fp16;
  a.heads = 4;
  EXPECT_EQ(cuda::resolve_score_math(a), cuda::ScoreMath::fp32);
  a.heads = 64;
  // split: what automatic runs on tensor cores, also where automatic would not use them.
  a.math = cuda::ScoreMath::split;
  for (auto [prec, want] : {std::pair{Precision::fp8, cuda::ScoreMath::f16x2}, {Precision::fp16, cuda::ScoreMath::f16x2},
                            {Precision::int8, cuda::ScoreMath::f16x2}, {Precision::bf16, cuda::ScoreMath::bf16x2},
                            {Precision::fp32, cuda::ScoreMath::bf16x3}})
    for (int heads : {1, 64}) {
      a.precision = prec;
      a.heads = heads;
      EXPECT_EQ(cuda::resolve_score_math(a), want) << to_string(prec) << " H=" << heads;
    }
  a.heads = 64;
  a.math = cuda::ScoreMath::bf16x3;  // on rows exact in bf16 it is bf16x2
  a.precision = Precision::int8;
  EXPECT_EQ(cuda::resolve_score_math(a), cuda::ScoreMath::bf16x2);
  a.precision = Precision::fp16;
  a.math = cuda::ScoreMath::bf16x2;  // needs rows exact in bf16
  EXPECT_THROW(cuda::resolve_score_math(a), Error);
  for (auto m : {cuda::ScoreMath::f16x2, cuda::ScoreMath::f16}) {  // need rows exact in f16
    a.math = m;
    for (Precision prec : {Precision::fp16, Precision::int8, Precision::fp8}) {
      a.precision = prec;
      EXPECT_EQ(cuda::resolve_score_math(a), m);
    }
    for (Precision prec : {Precision::bf16, Precision::fp32}) {
      a.precision = prec;
      EXPECT_THROW(cuda::resolve_score_math(a), Error) << to_string(prec);
    }
  }
  a.math = cuda::ScoreMath::automatic;
  a.precision = Precision::bf16;
  a.maxmin = true;
  EXPECT_EQ(cuda::resolve_score_math(a), cuda::ScoreMath::fp32);
  a.maxmin = false;
  a.dim = 96;
  EXPECT_EQ(cuda::resolve_score_math(a), cuda::ScoreMath::fp32);
  // The edges of automatic: tensor cores from 8 heads on, at D = 64, 128 and 256 only, on 16-byte aligned rows.
  a.precision = Precision::fp16;
  for (int dim : {32, 64, 128, 192, 256, 512})
    for (int heads : {7, 8}) {
      a.dim = dim;
      a.heads = heads;
      const bool mma = heads >= 8 && (dim == 64 || dim == 128 || dim == 256);
      EXPECT_EQ(cuda::resolve_score_math(a), mma ? cuda::ScoreMath::f16x2 : cuda::ScoreMath::fp32)
          << "D=" << dim << " H=" << heads;
    }
  a.dim = 128;
  a.heads = 8;
  a.rows = reinterpret_cast<const void*>(std::uintptr_t{264});  // 8-byte aligned: the fp32 kernels take it
  EXPECT_EQ(cuda::resolve_score_math(a), cuda::ScoreMath::fp32);
  a.rows = reinterpret_cast<const void*>(std::uintptr_t{256});
  // fp8 rows are exact in bf16 too: bf16x3 becomes bf16x2 and bf16x2 is let through.
  a.precision = Precision::fp8;
  for (auto m : {cuda::ScoreMath::bf16x3, cuda::ScoreMath::bf16x2}) {
    a.math = m;
    EXPECT_EQ(cuda::resolve_score_math(a), cuda::ScoreMath::bf16x2) << cuda::to_string(m);
  }
}

// kernels/forms.h: ScoreForm split is ScoreMath split (resolved by the rows: f16x2, bf16x2 or bf16x3), and
// every math has its own name (what a point's results say it ran).
TEST(Score, FormsNameEveryMath) {
  EXPECT_EQ(cuda::score_math(ScoreForm::split), ScoreMath::split);
  EXPECT_EQ(cuda::score_math(ScoreForm::fp32), ScoreMath::fp32);
  EXPECT_EQ(cuda::score_math(ScoreForm::bf16), ScoreMath::bf16);
  EXPECT_EQ(cuda::score_math(ScoreForm::automatic), ScoreMath::automatic);
  const std::pair<ScoreMath, const char*> names[] = {
      {ScoreMath::automatic, "automatic"}, {ScoreMath::fp32, "fp32"}, {ScoreMath::bf16x2, "bf16x2"},
      {ScoreMath::bf16, "bf16"},           {ScoreMath::bf16x3, "bf16x3"}, {ScoreMath::f16x2, "f16x2"},
      {ScoreMath::f16, "f16"},             {ScoreMath::split, "split"}};
  for (const auto& [m, want] : names) EXPECT_EQ(cuda::to_string(m), want) << static_cast<int>(m);
}

TEST(Score, BadArgumentsAreRejectedOnTheHost) {
  // Runs without a GPU: validation throws before any CUDA call.
  long long off[2] = {0, 4};
  alignas(16) float f[4] = {0, 0, 0, 0};
  auto good = [&] {
    cuda::ScoreArgs a;
    a.batch.entry_offset = off;
    a.batch.total_entries = 4;
    a.rows = reinterpret_cast<const void*>(std::uintptr_t{4096});
    a.dim = 128;
    a.queries = f;
    a.head_weights = f;
    a.heads = 8;
    a.scores = f;
    return a;
  };
  auto expect_error = [](const cuda::ScoreArgs& a, const std::string& needle) {
    try {
      cuda::score(a, nullptr);
      ADD_FAILURE() << "no error for " << needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  auto a = good();
  a.heads = 0;
  expect_error(a, "heads");
  a = good();
  a.heads = 65;
  expect_error(a, "heads");
  a = good();
  a.dim = 0;
  expect_error(a, "dim");
  a = good();
  a.batch.requests = 0;
  expect_error(a, "requests");
  a = good();
  a.batch.entry_offset = nullptr;
  expect_error(a, "entry_offset");
  a = good();
  a.rows = nullptr;
  expect_error(a, "rows");
  a = good();
  a.queries = nullptr;
  expect_error(a, "queries");
  a = good();
  a.queries = f + 1;
  expect_error(a, "queries is not 16-byte aligned");
  a = good();
  a.head_weights = nullptr;
  expect_error(a, "head_weights");
  a = good();
  a.scores = nullptr;
  expect_error(a, "scores");
  a = good();
  a.batch.total_entries = -1;
  expect_error(a, "total_entries = -1");
  for (Precision p : {Precision::int8, Precision::fp8}) {
    a = good();
    a.precision = p;
    expect_error(a, "scales is null (precision " + std::string(to_string(p)));
  }
  a = good();
  a.precision = Precision::fp16;
  a.rows = reinterpret_cast<const void*>(std::uintptr_t{4097});
  expect_error(a, "rows is not aligned to its 2-byte elements");
  a = good();
  a.rows = reinterpret_cast<const void*>(std::uintptr_t{4098});  // fp32 rows
  expect_error(a, "rows is not aligned to its 4-byte elements");
  a = good();
  a.math = cuda::ScoreMath::bf16x2;
  a.precision = Precision::fp16;
  expect_error(a, "bf16x2");
  a = good();
  a.math = cuda::ScoreMath::bf16;
  a.dim = 96;
  expect_error(a, "dim 96");
  a = good();
  a.math = cuda::ScoreMath::bf16;
  a.maxmin = true;
  expect_error(a, "maxmin");
  a = good();
  a.math = cuda::ScoreMath::bf16;
  a.rows = reinterpret_cast<const void*>(std::uintptr_t{4100});
  expect_error(a, "aligned");
}

// A device decode agrees with core/numeric.h's: the same bits, or NaN for NaN.
bool same_decode(float got, float want) { return std::isnan(want) ? std::isnan(got) : f32_bits(got) == f32_bits(want); }

// Element i of out: the pair decode of the code pair i (low byte first), as the scoring kernels use it.
__global__ void fp8_pairs_kernel(float2* out) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < 65536) out[i] = cuda::detail::fp8x2_to_float2(static_cast<std::uint16_t>(i));
}

// Every pair of e4m3 codes: the pair decode (on sm_89+ the hardware conversion) gives the bits of
// core/numeric.h's decode, NaN for NaN.
TEST(Score, Fp8PairDecodeEqualsTheSoftwareDecode) {
  IP_REQUIRE_GPU();
  auto d = test::poisoned<float2>(65536);
  IP_LAUNCH(256, 256, 0, nullptr, fp8_pairs_kernel)(d.data());
  IP_CUDA_CHECK(cudaGetLastError());
  const std::vector<float2> h = d.to_host();
  int wrong = 0;
  for (int i = 0; i < 65536 && wrong < 10; ++i) {
    const float want[2] = {fp8e4m3_to_float(static_cast<std::uint8_t>(i & 0xFF)),
                           fp8e4m3_to_float(static_cast<std::uint8_t>(i >> 8))};
    const float got[2] = {h[i].x, h[i].y};
    for (int j = 0; j < 2; ++j) {
      if (!same_decode(got[j], want[j])) {
        ++wrong;
        ADD_FAILURE() << "pair 0x" << std::hex << i << " element " << j << ": " << got[j] << ", want " << want[j];
      }
    }
  }
}

// One warp: value u of lane l is 1000 (l + 1) + u (small integers: every sum exact); out[l] is the sum lane
// l ends with.
template <int N>
__global__ void warp_sums_kernel(float* out) {
  const int lane = static_cast<int>(threadIdx.x);
  float v[N];
#pragma unroll
  for (int u = 0; u < N; ++u) v[u] = 1000.0f * static_cast<float>(lane + 1) + static_cast<float>(u);
  out[lane] = cuda::detail::warp_sums<N>(v, lane);
}

template <int N>
void check_warp_sums() {
  SCOPED_TRACE(N);
  auto d = test::poisoned<float>(32);
  IP_LAUNCH(1, 32, 0, nullptr, warp_sums_kernel<N>)(d.data());
  IP_CUDA_CHECK(cudaGetLastError());
  const std::vector<float> h = d.to_host();
  std::vector<int> holders(N, 0);
  for (int lane = 0; lane < 32; ++lane) {
    const int u = cuda::detail::warp_sums_entry<N>(lane);
    ASSERT_GE(u, 0);
    ASSERT_LT(u, N);
    ++holders[u];
    EXPECT_EQ(h[lane], 1000.0f * 528.0f + 32.0f * static_cast<float>(u)) << "lane " << lane;
  }
  for (int u = 0; u < N; ++u) {
    EXPECT_EQ(holders[u], 32 / N) << "value " << u;
    EXPECT_EQ(cuda::detail::warp_sums_entry<N>(cuda::detail::warp_sums_lane<N>(u)), u);
  }
}

// kernels/warp_sums.cuh: each lane ends with the full sum of the value it is said to hold, and every value
// is held by 32 / N lanes.
TEST(Score, WarpSumsSumEveryValueIntoItsLanes) {
  IP_REQUIRE_GPU();
  check_warp_sums<1>();
  check_warp_sums<2>();
  check_warp_sums<4>();
  check_warp_sums<8>();
  check_warp_sums<16>();
  check_warp_sums<32>();
}

// Element i of out: the fp16 decode of code i as the scoring and pooling kernels use it.
__global__ void fp16_codes_kernel(float* out) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < 65536) out[i] = cuda::detail::fp16_bits_to_float(static_cast<std::uint16_t>(i));
}

// Every fp16 code (subnormals, infinities): the device decode (one cvt.f32.f16 on a GPU) gives the bits
// of core/numeric.h's decode, NaN for NaN.
TEST(Score, Fp16DecodeEqualsTheSoftwareDecode) {
  IP_REQUIRE_GPU();
  auto d = test::poisoned<float>(65536);
  IP_LAUNCH(256, 256, 0, nullptr, fp16_codes_kernel)(d.data());
  IP_CUDA_CHECK(cudaGetLastError());
  const std::vector<float> h = d.to_host();
  int wrong = 0;
  for (int i = 0; i < 65536 && wrong < 10; ++i) {
    const float want = fp16_to_float(static_cast<std::uint16_t>(i));
    if (!same_decode(h[i], want)) {
      ++wrong;
      ADD_FAILURE() << "code 0x" << std::hex << i << ": " << h[i] << ", want " << want;
    }
  }
}

}  // namespace
}  // namespace ip
