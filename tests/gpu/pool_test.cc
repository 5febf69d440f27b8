// Fused weighting + pooling + quantization kernel (kernels/pool.cu) against the CPU reference
// (core/pool.cc build_index, compute_weights), request by request, over batches of requests of
// different lengths (including an empty request and partial last groups).
//
// Host C++ (no device code here: it calls the launcher), so it can include the C++20 core headers.
//
// What must be equal, and what within a tolerance:
//   * bitwise (payload bytes and scales): exact and maxmin always (no arithmetic but max/min and the
//     shared quantization of core/quant_math.h); uniform too when the host compiler fuses the CPU
//     reference's `out += w * k` into an fma as the kernel does (probed at run time, see
//     host_fuses_pooling; true for x86-64 -march=native with FMA and for aarch64).
//   * otherwise (weights from expf/logf/powf, cosine dot products summed in another order):
//     weights within kWeightTol (kCosineWeightTol where cosine weights enter: a D-term dot product
//     summed in another order, divided by norms, raised to powers) x the group's largest weight;
//     each decoded element within K (kCompositeTol + 2 sum_r |w_gpu,r - w_cpu,r| / sum_r w_cpu,r)
//     — K the group's largest |key|: what the observed weight differences can move a weighted mean —
//     plus the format error of both sides (core/quant.h bounds: fp16 2^-10 |y|, bf16 2^-7 |y|,
//     int8 scale / 2, fp8 |y| / 15 + scale 2^-10).
//   * every output byte written: each case runs twice, outputs poisoned with 0xFF and with 0x5A, the
//     second run without the weights output; both runs must give identical bytes.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "kernels/pool.h"
#include "kernels/pool_tuning.h"
#include "tests/core/test_helpers.h"
#include "tests/gpu/gpu_test.h"
#include "tests/gpu/pool_ref.h"

namespace ip {
namespace {

constexpr float kWeightTol = 1e-5f;        // expf / logf / powf: a few ulps
constexpr float kCosineWeightTol = 1e-3f;  // catches any formula error (those move weights by O(1))
constexpr float kCompositeTol = 1e-5f;     // accumulation of <= 16 rounded terms

using test::PoolCase;
using test::PoolInputs;

const Precision kPrecisions[] = {Precision::fp32, Precision::fp16, Precision::bf16, Precision::int8, Precision::fp8};
const cuda::KeyType kKeyTypes[] = {cuda::KeyType::fp32, cuda::KeyType::fp16, cuda::KeyType::bf16};
const int kGroups[] = {1, 3, 4, 8, 16};

struct SchemeVariant {
  Weighting scheme;
  bool bias, query;
};
const SchemeVariant kSchemes[] = {
    {Weighting::uniform, false, false}, {Weighting::positional, false, false}, {Weighting::positional, true, false},
    {Weighting::cosine, false, false},  {Weighting::cosine, false, true},      {Weighting::tfidf, false, false},
    {Weighting::hybrid, false, false},  {Weighting::hybrid, true, true},       {Weighting::maxmin, false, false},
    {Weighting::exact, false, false}};

// True when the CPU reference computes `out += w * k` as one fma (see the file comment): keys
// chosen so that fma and a rounded product + sum differ, pooled by core/pool.cc.
bool host_fuses_pooling() {
  const float inv = 1.0f / 3.0f;
  for (int k0 = 1; k0 < 300; ++k0)
    for (int k1 = 1; k1 < 300; ++k1) {
      volatile float base = inv * static_cast<float>(k0);
      volatile float prod = inv * static_cast<float>(k1);  // volatile: not contracted here
      const float separate = prod + base;
      const float fused = std::fma(inv, static_cast<float>(k1), base);
      if (fused == separate) continue;
      const std::vector<float> keys = {static_cast<float>(k0), static_cast<float>(k1), 0.0f};
      const auto c = pool_fp32(MatrixView<const float>(keys.data(), 3, 1), iptest::params(Weighting::uniform, 3),
                               nullptr, nullptr);
      return c.data()[0] == fused;
    }
  return false;
}

struct GpuOut {
  std::vector<std::uint8_t> payload;
  std::vector<float> scales, weights;
};

// Uploads the case, runs the kernel with outputs poisoned with `poison`, downloads the outputs.
GpuOut run_gpu(const PoolCase& c, const PoolInputs& in, int poison, bool with_weights) {
  const int G = c.group_size(), eb = element_bytes(c.precision);
  std::vector<long long> tok{0}, ent{0};
  for (long long t : c.lengths) {
    tok.push_back(tok.back() + t);
    ent.push_back(ent.back() + (t + G - 1) / G);
  }
  const long long T = tok.back(), E = ent.back(), rows = E * c.rows_per_group();
  std::vector<float> mass;
  std::vector<std::uint32_t> count;
  std::vector<long long> steps;
  for (const auto& s : in.stats) {
    mass.insert(mass.end(), s.mass.begin(), s.mass.end());
    count.insert(count.end(), s.count.begin(), s.count.end());
    steps.push_back(s.steps);
  }
  auto d_tok = test::to_device(tok), d_ent = test::to_device(ent);
  auto d_keys = test::to_device(in.key_bytes);
  auto d_mass = test::to_device(mass);
  auto d_count = test::to_device(count);
  auto d_steps = test::to_device(steps);
  auto d_query = test::to_device(in.query);
  auto d_bias = test::to_device(in.bias);
  auto d_payload = test::poisoned<std::uint8_t>(static_cast<std::size_t>((rows * c.D + c.payload_offset) * eb + 1));
  auto d_scales = test::poisoned<float>(static_cast<std::size_t>(rows + 1));
  auto d_weights = test::poisoned<float>(static_cast<std::size_t>(T + 1));
  d_payload.fill_bytes(poison);
  d_scales.fill_bytes(poison);
  IP_CUDA_CHECK(cudaDeviceSynchronize());

  cuda::PoolArgs a;
  a.batch = {static_cast<int>(c.lengths.size()), d_tok.data(), d_ent.data(), T, E};
  a.keys = d_keys.data() + static_cast<std::size_t>(c.key_offset) * cuda::key_bytes(c.key_type);
  a.key_type = c.key_type;
  a.dim = c.D;
  a.group_size = G;
  const PoolParams p = test::pool_params(c);
  a.scheme = c.scheme;
  a.lambda = p.weights.positional_lambda;
  a.bias = c.bias ? d_bias.data() : nullptr;
  a.eps = p.weights.eps;
  a.power = p.weights.cosine_power;
  a.query_ref = c.query ? d_query.data() : nullptr;
  a.alpha_positional = p.weights.alpha_positional;
  a.alpha_cosine = p.weights.alpha_cosine;
  a.alpha_tfidf = p.weights.alpha_tfidf;
  a.stats_mass = d_mass.data();
  a.stats_count = d_count.data();
  a.stats_steps = d_steps.data();
  a.precision = c.precision;
  a.payload = d_payload.data() + static_cast<std::size_t>(c.payload_offset) * eb;
  a.scales = scale_bytes(c.precision) ? d_scales.data() : nullptr;
  a.weights = with_weights ? d_weights.data() : nullptr;
  a.pipelined = c.pipelined;
  cuda::Stream stream;
  cuda::pool(a, stream);
  stream.sync();

  GpuOut out;
  const auto payload = d_payload.to_host();
  const std::size_t first = static_cast<std::size_t>(c.payload_offset) * eb;
  out.payload.assign(payload.begin() + first, payload.begin() + first + rows * c.D * eb);
  EXPECT_EQ(payload.back(), static_cast<std::uint8_t>(poison)) << "payload written past its end";
  if (scale_bytes(c.precision)) {
    out.scales = d_scales.to_host();
    std::uint8_t canary[4];
    std::memcpy(canary, &out.scales.back(), 4);
    EXPECT_TRUE(canary[0] == poison && canary[3] == poison) << "scales written past their end";
    out.scales.pop_back();
  }
  if (with_weights) {
    out.weights = d_weights.to_host();
    EXPECT_TRUE(test::is_poison(out.weights.back())) << "weights written past their end";
    out.weights.pop_back();
  }
  return out;
}

// Mismatches of a device output against the CPU reference under the rules of the file comment
// (each reported as a test failure when `report`).
int compare(const PoolCase& c, const test::PoolReference& ref, const GpuOut& a, bool host_fma, bool report) {
  int bad = 0;
  auto fail = [&](const std::string& what) {
    if (report && ++bad <= 8) ADD_FAILURE() << what;
    if (!report) ++bad;
  };
  if (a.payload.size() != ref.payload.size() || a.scales.size() != ref.scales.size() ||
      a.weights.size() != ref.weights.size()) {
    fail("output sizes differ");
    return bad;
  }
  const bool cosine = c.scheme == Weighting::cosine || c.scheme == Weighting::hybrid;
  for (std::size_t i = 0; i < ref.weights.size(); ++i) {
    const float g = a.weights[i], w = ref.weights[i];
    if (!(std::fabs(g - w) <= (cosine ? kCosineWeightTol : kWeightTol) * ref.token_wmax[i]))
      fail(fmt::format("weight of token {}: gpu {} cpu {}", i, g, w));
  }
  const bool bitwise = c.scheme == Weighting::exact || c.scheme == Weighting::maxmin ||
                       (c.scheme == Weighting::uniform && host_fma);
  if (bitwise) {
    for (std::size_t i = 0; i < ref.payload.size(); ++i)
      if (a.payload[i] != ref.payload[i])
        fail(fmt::format("payload byte {} (row {}): gpu {:#04x} cpu {:#04x} (bitwise expected)", i,
                         i / (c.D * element_bytes(c.precision)), a.payload[i], ref.payload[i]));
    for (std::size_t r = 0; r < ref.scales.size(); ++r)
      if (std::memcmp(&a.scales[r], &ref.scales[r], 4) != 0)
        fail(fmt::format("scale of row {}: gpu {} cpu {} (bitwise expected)", r, a.scales[r], ref.scales[r]));
  }
  const std::size_t row_bytes = static_cast<std::size_t>(c.D) * element_bytes(c.precision);
  const float q = c.precision == Precision::int8 ? 127.0f : kFp8E4M3Max;
  for (std::size_t r = 0; r < ref.row_key_max.size(); ++r) {
    double dw = 0.0, wsum = 0.0;
    for (int i = 0; i < ref.row_tokens[r]; ++i) {
      const std::size_t t = static_cast<std::size_t>(ref.row_first_token[r] + i);
      dw += std::fabs(static_cast<double>(a.weights[t]) - ref.weights[t]);
      wsum += ref.weights[t];
    }
    const float atol = ref.row_key_max[r] * (kCompositeTol + static_cast<float>(2.0 * dw / wsum));
    float sg = 1.0f, sc = 1.0f;
    if (!ref.scales.empty()) {
      sg = a.scales[r];
      sc = ref.scales[r];
      if (!(std::fabs(sg - sc) * q <= atol + 1e-6f * sc * q)) fail(fmt::format("scale of row {}: gpu {} cpu {}", r, sg, sc));
    }
    for (int d = 0; d < c.D; ++d) {
      const float yg = test::decode(c.precision, a.payload.data() + r * row_bytes, d, sg);
      const float yc = test::decode(c.precision, ref.payload.data() + r * row_bytes, d, sc);
      const float tol = atol + test::format_error(c.precision, yg, sg) + test::format_error(c.precision, yc, sc);
      if (!(std::fabs(yg - yc) <= tol)) fail(fmt::format("row {} dim {}: gpu {} cpu {} (tolerance {})", r, d, yg, yc, tol));
    }
  }
  return bad;
}

// Runs one case twice (see the file comment) and compares it with the CPU; reports up to 8 mismatches.
void check_case(const PoolCase& c, bool host_fma) {
  SCOPED_TRACE(c.name());
  const PoolInputs in(c);
  const test::PoolReference ref = test::pool_reference(c, in);
  const GpuOut a = run_gpu(c, in, 0xFF, true);
  const GpuOut b = run_gpu(c, in, 0x5A, false);
  EXPECT_TRUE(a.payload == b.payload) << "payload differs between runs poisoned 0xFF and 0x5A: a byte was not written";
  EXPECT_TRUE(a.scales == b.scales) << "scales differ between runs poisoned 0xFF and 0x5A";
  const int bad = compare(c, ref, a, host_fma, true);
  EXPECT_EQ(bad, 0) << bad << " mismatches";
}

// The comparison itself (no GPU): the reference passes against itself, and a wrong weight, a wrong
// element or a missing byte in any scheme and precision fails it.
TEST(PoolCompare, AcceptsTheReferenceAndRejectsErrors) {
  std::printf("host compiler fuses the CPU pooling update into an fma: %s\n", host_fuses_pooling() ? "yes" : "no");
  unsigned seed = 1;
  for (const SchemeVariant& s : kSchemes)
    for (Precision p : kPrecisions) {
      PoolCase c{s.scheme, s.bias, s.query, p, kKeyTypes[seed % 3], 4, 32, {1, 19, 0, 6}};
      c.seed = seed++;
      SCOPED_TRACE(c.name());
      const PoolInputs in(c);
      const test::PoolReference ref = test::pool_reference(c, in);
      const GpuOut same{ref.payload, ref.scales, ref.weights};
      EXPECT_EQ(compare(c, ref, same, true, false), 0);
      GpuOut wrong_weight = same;
      wrong_weight.weights[20] += 0.01f * ref.token_wmax[20];  // the last request's first token
      EXPECT_GT(compare(c, ref, wrong_weight, true, false), 0);
      GpuOut wrong_value = same;
      const std::size_t at = 3 * static_cast<std::size_t>(c.D) * element_bytes(p) + 5 * element_bytes(p);
      wrong_value.payload[at + element_bytes(p) - 1] ^= 0x40;  // row 3, dim 5: a high bit
      EXPECT_GT(compare(c, ref, wrong_value, true, false), 0);
      GpuOut unwritten = same;
      std::fill(unwritten.payload.end() - element_bytes(p), unwritten.payload.end(), 0xFF);
      if (unwritten.payload != same.payload) {
        EXPECT_GT(compare(c, ref, unwritten, true, false), 0);
      }
    }
}

// ---- arguments: validated on the host before any CUDA call (runs without a GPU) ------------------

alignas(16) float g_host_floats[64];
alignas(16) long long g_host_offsets[4] = {0, 10, 10, 10};
std::uint32_t g_host_counts[16];

cuda::PoolArgs valid_args() {
  cuda::PoolArgs a;
  a.batch = {1, g_host_offsets, g_host_offsets + 1, 10, 3};  // 10 tokens, G = 4: 3 entries
  a.keys = g_host_floats;
  a.dim = 8;
  a.group_size = 4;
  a.payload = g_host_floats;
  a.scales = g_host_floats;
  a.stats_mass = g_host_floats;
  a.stats_count = g_host_counts;
  a.stats_steps = g_host_offsets;
  return a;
}

TEST(PoolArgs, ValidArgumentsPass) {
  EXPECT_NO_THROW(cuda::validate_pool_args(valid_args()));
  cuda::PoolArgs a = valid_args();
  a.scheme = Weighting::exact;
  a.group_size = 1;
  a.batch.total_entries = 10;
  EXPECT_NO_THROW(cuda::validate_pool_args(a));
}

TEST(PoolArgs, BadArgumentsThrowBeforeAnyCudaCall) {
  struct Bad {
    const char* needle;
    void (*edit)(cuda::PoolArgs&);
  };
  const Bad bad[] = {
      {"batch.requests", [](cuda::PoolArgs& a) { a.batch.requests = 0; }},
      {"entry_offset", [](cuda::PoolArgs& a) { a.batch.entry_offset = nullptr; }},
      {"dim", [](cuda::PoolArgs& a) { a.dim = 0; }},
      {"group_size G = 0", [](cuda::PoolArgs& a) { a.group_size = 0; }},
      {"with scheme 'exact'", [](cuda::PoolArgs& a) { a.scheme = Weighting::exact; }},
      {"total_entries", [](cuda::PoolArgs& a) { a.batch.total_entries = 2; }},
      {"total_entries", [](cuda::PoolArgs& a) { a.batch.total_entries = 5; }},
      {"keys is null", [](cuda::PoolArgs& a) { a.keys = nullptr; }},
      {"keys not aligned", [](cuda::PoolArgs& a) { a.keys = reinterpret_cast<const char*>(g_host_floats) + 2; }},
      {"payload is null", [](cuda::PoolArgs& a) { a.payload = nullptr; }},
      {"needs scales", [](cuda::PoolArgs& a) { a.precision = Precision::int8; a.scales = nullptr; }},
      {"needs stats_mass", [](cuda::PoolArgs& a) { a.scheme = Weighting::tfidf; a.stats_steps = nullptr; }},
      {"needs stats_mass", [](cuda::PoolArgs& a) { a.scheme = Weighting::tfidf; a.stats_count = nullptr; }},
      {"needs stats_mass", [](cuda::PoolArgs& a) { a.scheme = Weighting::hybrid; a.stats_mass = nullptr; }},
      {"lambda", [](cuda::PoolArgs& a) { a.lambda = INFINITY; }},
      {"lambda", [](cuda::PoolArgs& a) { a.lambda = 81.0f; }},
      {"eps = 0 (must be > 0)", [](cuda::PoolArgs& a) { a.eps = 0.0f; }},
      {"power", [](cuda::PoolArgs& a) { a.power = -1.0f; }},
      {"underflows", [](cuda::PoolArgs& a) { a.eps = 1e-3f; a.power = 40.0f; }},
      {"unsupported dim", [](cuda::PoolArgs& a) { a.dim = 6000; a.group_size = 200; a.batch.total_entries = 1; }},
      {"unsupported precision", [](cuda::PoolArgs& a) { a.precision = static_cast<Precision>(9); }},
      {"unsupported key_type", [](cuda::PoolArgs& a) { a.key_type = static_cast<cuda::KeyType>(7); }},
      {"unsupported scheme", [](cuda::PoolArgs& a) { a.scheme = static_cast<Weighting>(12); }},
      {"token_offset", [](cuda::PoolArgs& a) { a.batch.token_offset = nullptr; }},
      {"total_tokens = -1", [](cuda::PoolArgs& a) { a.batch.total_tokens = -1; }},
      // G = 1: 11 entries for 10 tokens is within T / G + B but more than one entry a token.
      {"total_entries = 11", [](cuda::PoolArgs& a) { a.group_size = 1; a.batch.total_entries = 11; }},
      {"payload not aligned", [](cuda::PoolArgs& a) { a.payload = reinterpret_cast<char*>(g_host_floats) + 2; }},
      {"needs scales", [](cuda::PoolArgs& a) {
         a.precision = Precision::fp8;
         a.scales = reinterpret_cast<float*>(reinterpret_cast<char*>(g_host_floats) + 2);
       }},
      {"weights not aligned", [](cuda::PoolArgs& a) {
         a.weights = reinterpret_cast<float*>(reinterpret_cast<char*>(g_host_floats) + 2);
       }},
      {"bias not aligned", [](cuda::PoolArgs& a) {
         a.bias = reinterpret_cast<const float*>(reinterpret_cast<const char*>(g_host_floats) + 2);
       }},
      {"query_ref not aligned", [](cuda::PoolArgs& a) {
         a.query_ref = reinterpret_cast<const float*>(reinterpret_cast<const char*>(g_host_floats) + 2);
       }},
      {"misaligned", [](cuda::PoolArgs& a) {
         a.scheme = Weighting::hybrid;
         a.stats_steps = reinterpret_cast<const long long*>(reinterpret_cast<const char*>(g_host_offsets) + 4);
       }},
      {"update mode", [](cuda::PoolArgs& a) {  // fresh_from 4-byte aligned (needs 8)
         a.prev_weights = g_host_floats;
         a.fresh_from = reinterpret_cast<const long long*>(reinterpret_cast<const char*>(g_host_offsets) + 4);
         a.repooled = reinterpret_cast<unsigned long long*>(g_host_offsets);
       }},
      {"update mode", [](cuda::PoolArgs& a) {  // repooled 4-byte aligned (needs 8)
         a.prev_weights = g_host_floats;
         a.fresh_from = g_host_offsets;
         a.repooled = reinterpret_cast<unsigned long long*>(reinterpret_cast<char*>(g_host_offsets) + 4);
       }},
      {"eps = inf", [](cuda::PoolArgs& a) { a.eps = INFINITY; }},
      {"eps = nan", [](cuda::PoolArgs& a) { a.eps = NAN; }},
      {"power = inf", [](cuda::PoolArgs& a) { a.power = INFINITY; }},
      {"power = 0 ", [](cuda::PoolArgs& a) { a.power = 0.0f; }},
      {"lambda = -81", [](cuda::PoolArgs& a) { a.lambda = -81.0f; }},
      {"lambda = nan", [](cuda::PoolArgs& a) { a.lambda = NAN; }},
      // The generic kernel's shared memory: 8 (G + D) bytes must fit kGenericMaxSmemBytes (one past it here).
      {"unsupported dim", [](cuda::PoolArgs& a) {
         a.group_size = 1;
         a.dim = cuda::pool_tuning::kGenericMaxSmemBytes / 8;
         a.batch.total_entries = 10;
       }},
  };
  for (const Bad& b : bad) {
    cuda::PoolArgs a = valid_args();
    b.edit(a);
    EXPECT_IP_ERROR(cuda::validate_pool_args(a), b.needle);
    // pool() validates first: the same error, on machines without a GPU too (any CUDA call there fails).
    EXPECT_IP_ERROR(cuda::pool(a, nullptr), b.needle);
  }
}

// What the checks must let through: each argument at the edge of what is allowed, and the pointers a
// case does not need left null.
TEST(PoolArgs, ArgumentsAtTheEdgesPass) {
  struct Good {
    const char* what;
    void (*edit)(cuda::PoolArgs&);
  };
  const Good good[] = {
      {"no tokens: keys and payload null", [](cuda::PoolArgs& a) {
         a.batch.total_tokens = 0;
         a.batch.total_entries = 0;
         a.keys = nullptr;
         a.payload = nullptr;
         a.scales = nullptr;
       }},
      {"G = 1: one entry a token", [](cuda::PoolArgs& a) { a.group_size = 1; a.batch.total_entries = 10; }},
      {"fp32 without scales", [](cuda::PoolArgs& a) { a.scales = nullptr; }},
      {"fp16 without scales", [](cuda::PoolArgs& a) { a.precision = Precision::fp16; a.scales = nullptr; }},
      {"bf16 without scales", [](cuda::PoolArgs& a) { a.precision = Precision::bf16; a.scales = nullptr; }},
      {"int8", [](cuda::PoolArgs& a) { a.precision = Precision::int8; }},
      {"fp8", [](cuda::PoolArgs& a) { a.precision = Precision::fp8; }},
      {"fp16 keys", [](cuda::PoolArgs& a) { a.key_type = cuda::KeyType::fp16; }},
      {"bf16 keys", [](cuda::PoolArgs& a) { a.key_type = cuda::KeyType::bf16; }},
      {"uniform without statistics", [](cuda::PoolArgs& a) {
         a.stats_mass = nullptr;
         a.stats_count = nullptr;
         a.stats_steps = nullptr;
       }},
      {"positional", [](cuda::PoolArgs& a) { a.scheme = Weighting::positional; }},
      {"cosine", [](cuda::PoolArgs& a) { a.scheme = Weighting::cosine; }},
      {"maxmin", [](cuda::PoolArgs& a) { a.scheme = Weighting::maxmin; }},
      {"tfidf", [](cuda::PoolArgs& a) { a.scheme = Weighting::tfidf; }},
      {"hybrid", [](cuda::PoolArgs& a) { a.scheme = Weighting::hybrid; }},
      // An explicit bias replaces lambda, which is then not looked at.
      {"bias with lambda inf", [](cuda::PoolArgs& a) { a.bias = g_host_floats; a.lambda = INFINITY; }},
      {"lambda = -80", [](cuda::PoolArgs& a) { a.lambda = -80.0f; }},
      {"weights, bias, query_ref aligned", [](cuda::PoolArgs& a) {
         a.weights = g_host_floats + 1;
         a.bias = g_host_floats + 1;
         a.query_ref = g_host_floats + 1;
       }},
      {"update mode", [](cuda::PoolArgs& a) {
         a.prev_weights = g_host_floats + 1;
         a.fresh_from = g_host_offsets + 1;
         a.repooled = reinterpret_cast<unsigned long long*>(g_host_offsets + 2);
       }},
      {"8 (G + D) = kGenericMaxSmemBytes", [](cuda::PoolArgs& a) {
         a.group_size = 1;
         a.dim = cuda::pool_tuning::kGenericMaxSmemBytes / 8 - 1;
         a.batch.total_entries = 10;
       }},
  };
  for (const Good& g : good) {
    cuda::PoolArgs a = valid_args();
    g.edit(a);
    EXPECT_NO_THROW(cuda::validate_pool_args(a)) << g.what;
  }
}

// ---- kernel vs CPU ------------------------------------------------------------------------------------

class PoolScheme : public ::testing::TestWithParam<SchemeVariant> {};
// The schemes that pool (all but exact, which keeps every key at G = 1): for the cases of G > 1 only. A
// case that skipped exact instead would count as a failure in gpu-check.sh (a test skipped on a device).
class PooledScheme : public PoolScheme {};

// Every precision x key type x G on a batch {1, 19, 0, 111, 989} and on each size as a batch of one.
TEST_P(PoolScheme, EveryPrecisionKeyTypeAndGroupSize) {
  IP_REQUIRE_GPU();
  const bool host_fma = host_fuses_pooling();
  const SchemeVariant s = GetParam();
  unsigned seed = 1;
  for (Precision p : kPrecisions)
    for (cuda::KeyType kt : kKeyTypes)
      for (int G : kGroups) {
        if (s.scheme == Weighting::exact && G != 1) continue;
        PoolCase c{s.scheme, s.bias, s.query, p, kt, G, 128, {1, 19, 0, 111, 989}};
        c.integer_keys = seed % 2 == 0;
        c.seed = seed++;
        check_case(c, host_fma);
        for (long long t : {1LL, 19LL, 111LL, 989LL}) {
          c.lengths = {t};
          c.seed = seed++;
          check_case(c, host_fma);
        }
      }
}

// A 70000-token request beside shorter ones, every precision and G (key type rotating).
TEST_P(PoolScheme, LargeRequestInABatch) {
  IP_REQUIRE_GPU();
  const bool host_fma = host_fuses_pooling();
  const SchemeVariant s = GetParam();
  unsigned seed = 100;
  for (Precision p : kPrecisions)
    for (int G : kGroups) {
      if (s.scheme == Weighting::exact && G != 1) continue;
      PoolCase c{s.scheme, s.bias, s.query, p, kKeyTypes[seed % 3], G, 128, {19, 70000, 0, 989}};
      c.seed = seed++;
      check_case(c, host_fma);
    }
}

// Head dims of the other fast instantiations (64, 256) and of the generic path (96, 5, 1).
TEST_P(PoolScheme, OtherHeadDims) {
  IP_REQUIRE_GPU();
  const bool host_fma = host_fuses_pooling();
  const SchemeVariant s = GetParam();
  unsigned seed = 200;
  for (int D : {64, 256, 96, 5, 1})
    for (Precision p : kPrecisions)
      for (int G : {3, 4, 16}) {
        if (s.scheme == Weighting::exact && G != 3) continue;
        PoolCase c{s.scheme, s.bias, s.query, p, kKeyTypes[seed % 3], G, D, {1, 19, 0, 111, 989}};
        c.seed = seed++;
        check_case(c, host_fma);
      }
}

// The pipelined form (PoolArgs::pipelined: 2-byte keys at D = 128, G = 4; warps stride over the groups,
// many steps each on the emulator, whose occupancy query allows the fewest blocks): against the CPU, and
// byte for byte the plain form's output (the same per-group code).
TEST_P(PooledScheme, PipelinedFormEqualsThePlainOne) {
  IP_REQUIRE_GPU();
  const bool host_fma = host_fuses_pooling();
  const SchemeVariant s = GetParam();
  unsigned seed = 400;
  for (Precision p : kPrecisions)
    for (cuda::KeyType kt : {cuda::KeyType::fp16, cuda::KeyType::bf16})
      for (const std::vector<long long>& lengths : {std::vector<long long>{1, 19, 0, 111, 989},
                                                    std::vector<long long>{19, 70000, 0, 989}}) {
        PoolCase c{s.scheme, s.bias, s.query, p, kt, 4, 128, lengths};
        c.seed = seed++;
        c.pipelined = true;
        check_case(c, host_fma);
        const PoolInputs in(c);
        const GpuOut piped = run_gpu(c, in, 0x5A, true);
        c.pipelined = false;
        const GpuOut plain = run_gpu(c, in, 0x5A, true);
        EXPECT_TRUE(piped.payload == plain.payload) << c.name() << ": payload differs from the plain form";
        EXPECT_TRUE(piped.scales == plain.scales) << c.name() << ": scales differ from the plain form";
        EXPECT_TRUE(piped.weights == plain.weights) << c.name() << ": weights differ from the plain form";
      }
}

// G = 2 (configs quickstart, adaptive, ablation_weighting), which kGroups leaves out: the fast kernel's
// instantiation for it (two groups a warp with 2-byte keys; tfidf's max over lanes 0-1 is a single xor
// step) and the generic kernel's (D = 96).
TEST_P(PooledScheme, GroupSizeTwo) {
  IP_REQUIRE_GPU();
  const bool host_fma = host_fuses_pooling();
  const SchemeVariant s = GetParam();
  unsigned seed = 500;
  for (int D : {128, 96})
    for (Precision p : kPrecisions)
      for (cuda::KeyType kt : kKeyTypes) {
        PoolCase c{s.scheme, s.bias, s.query, p, kt, 2, D, {1, 19, 0, 111, 989}};
        c.integer_keys = seed % 2 == 0;
        c.seed = seed++;
        check_case(c, host_fma);
      }
}

// Keys and payload off 16-byte alignment: the generic kernel at D = 128, same results.
TEST_P(PoolScheme, MisalignedPointersTakeTheGenericPath) {
  IP_REQUIRE_GPU();
  const bool host_fma = host_fuses_pooling();
  const SchemeVariant s = GetParam();
  unsigned seed = 300;
  for (Precision p : kPrecisions)
    for (cuda::KeyType kt : kKeyTypes) {
      PoolCase c{s.scheme, s.bias, s.query, p, kt, 4, 128, {19, 0, 111, 5}};
      c.key_offset = 1;
      c.payload_offset = 3;
      c.seed = seed++;
      check_case(c, host_fma);
    }
}

std::string scheme_name(const ::testing::TestParamInfo<SchemeVariant>& i) {
  return std::string(to_string(i.param.scheme)) + (i.param.bias ? "_bias" : "") + (i.param.query ? "_query" : "");
}
INSTANTIATE_TEST_SUITE_P(Schemes, PoolScheme, ::testing::ValuesIn(kSchemes), scheme_name);
std::vector<SchemeVariant> pooled_schemes() {
  std::vector<SchemeVariant> v;
  for (const SchemeVariant& s : kSchemes)
    if (s.scheme != Weighting::exact) v.push_back(s);
  return v;
}
INSTANTIATE_TEST_SUITE_P(Schemes, PooledScheme, ::testing::ValuesIn(pooled_schemes()), scheme_name);

// A call that throws launches nothing: the poisoned output stays poisoned.
TEST(PoolGpu, RejectedCallWritesNothing) {
  IP_REQUIRE_GPU();
  PoolCase c{Weighting::uniform, false, false, Precision::int8, cuda::KeyType::fp32, 4, 128, {19}};
  const PoolInputs in(c);
  auto d_keys = test::to_device(in.key_bytes);
  auto d_tok = test::to_device(std::vector<long long>{0, 19});
  auto d_ent = test::to_device(std::vector<long long>{0, 5});
  auto d_payload = test::poisoned<std::uint8_t>(5 * 128);
  cuda::PoolArgs a;
  a.batch = {1, d_tok.data(), d_ent.data(), 19, 5};
  a.keys = d_keys.data();
  a.dim = 128;
  a.precision = Precision::int8;
  a.payload = d_payload.data();  // scales missing
  EXPECT_IP_ERROR(cuda::pool(a, nullptr), "needs scales");
  IP_CUDA_CHECK(cudaDeviceSynchronize());
  for (std::uint8_t v : d_payload.to_host()) ASSERT_EQ(v, 0xFF);
}

}  // namespace
}  // namespace ip
