// Tests of the CPU emulator of CUDA kernels (emu/): barriers, shuffles, the mma fragment layout, launch
// checks, thread block clusters, and the diagnostics for deadlocks, divergent collectives and out-of-bounds
// accesses.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "core/numeric.h"
#include "kernels/cluster.cuh"
#include "kernels/launch.h"

namespace {

// Every thread writes its id into shared memory; after the barrier each reads its mirror's.
__global__ void mirror_kernel(int* out) {
  IP_DYNAMIC_SHARED(int, s);
  const int t = static_cast<int>(threadIdx.x), n = static_cast<int>(blockDim.x);
  s[t] = t + 1000 * static_cast<int>(blockIdx.x);
  __syncthreads();
  out[blockIdx.x * n + t] = s[n - 1 - t];
}

TEST(Cuemu, BarriersOrderSharedMemoryInEveryBlock) {
  int* d = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&d), 3 * 96 * sizeof(int)), cudaSuccess);
  IP_LAUNCH(3, 96, 96 * sizeof(int), nullptr, mirror_kernel)(d);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  std::vector<int> h(3 * 96);
  cudaMemcpy(h.data(), d, h.size() * sizeof(int), cudaMemcpyDeviceToHost);
  for (int b = 0; b < 3; ++b)
    for (int t = 0; t < 96; ++t) EXPECT_EQ(h[b * 96 + t], 95 - t + 1000 * b);
  cudaFree(d);
}

// The same without the barrier: a read of another warp's value comes before that warp has run.
__global__ void mirror_without_barrier_kernel(int* out) {
  IP_DYNAMIC_SHARED(int, s);
  const int t = static_cast<int>(threadIdx.x), n = static_cast<int>(blockDim.x);
  s[t] = t;
  out[t] = s[n - 1 - t];
}

// Built for the race check (ThreadSanitizer, make test-race): two threads' conflicting accesses with no
// barrier between them are reported as a data race (emu/cuemu.cc, CUEMU_TSAN).
#if defined(__SANITIZE_THREAD__)
constexpr bool kRaceCheck = true;
#else
constexpr bool kRaceCheck = false;
#endif

TEST(Cuemu, AMissingBarrierShowsAsWrongResults) {
  if (kRaceCheck)
    GTEST_SKIP() << "the race-check build reports this race instead (RacesWithoutABarrierAreReportedByTheRaceCheck)";
  // Warps run one after another up to a barrier (in any CUEMU_ORDER), so the first warp to run reads
  // the other's slots before they are written: they still hold the 0xFF fill (-1).
  int* d = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&d), 64 * sizeof(int)), cudaSuccess);
  IP_LAUNCH(1, 64, 64 * sizeof(int), nullptr, mirror_without_barrier_kernel)(d);
  std::vector<int> h(64);
  cudaMemcpy(h.data(), d, h.size() * sizeof(int), cudaMemcpyDeviceToHost);
  int wrong = 0;
  for (int t = 0; t < 64; ++t) wrong += h[t] != 63 - t;
  EXPECT_GE(wrong, 32);
  for (int t = 0; t < 64; ++t) EXPECT_TRUE(h[t] == 63 - t || h[t] == -1) << t;
  cudaFree(d);
}

// Only block 0 writes the static shared array; the others read it unwritten.
__global__ void stale_shared_kernel(int* out) {
  __shared__ int s[64];
  if (blockIdx.x == 0) s[threadIdx.x] = 7;
  __syncthreads();
  out[blockIdx.x * 64 + threadIdx.x] = s[threadIdx.x];
}

TEST(Cuemu, StaticSharedMemoryIsFilledAtEveryBlockStart) {
  int* d = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&d), 3 * 64 * sizeof(int)), cudaSuccess);
  IP_LAUNCH(3, 64, 0, nullptr, stale_shared_kernel)(d);
  std::vector<int> h(3 * 64);
  cudaMemcpy(h.data(), d, h.size() * sizeof(int), cudaMemcpyDeviceToHost);
  for (int i = 0; i < 3 * 64; ++i) EXPECT_EQ(h[i], i < 64 ? 7 : -1) << i;  // never block 0's values
  cudaFree(d);
}

}  // namespace

// The same in a template kernel, whose __shared__ array GCC 12 puts in .bss whatever its section attribute
// says; in namespace ip::cuda, where the emulator looks for such arrays (emu/cuemu.cc).
namespace ip::cuda::emu_test {
template <int N>
__global__ void stale_shared_template_kernel(int* out) {
  __shared__ int s[N];
  if (blockIdx.x == 0) s[threadIdx.x] = 7;
  __syncthreads();
  out[blockIdx.x * N + threadIdx.x] = s[threadIdx.x];
}
}  // namespace ip::cuda::emu_test

namespace {

TEST(Cuemu, StaticSharedArraysOfTemplateKernelsAreFilledAtEveryBlockStart) {
  int* d = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&d), 3 * 64 * sizeof(int)), cudaSuccess);
  IP_LAUNCH(3, 64, 0, nullptr, ip::cuda::emu_test::stale_shared_template_kernel<64>)(d);
  std::vector<int> h(3 * 64);
  cudaMemcpy(h.data(), d, h.size() * sizeof(int), cudaMemcpyDeviceToHost);
  for (int i = 0; i < 3 * 64; ++i) EXPECT_EQ(h[i], i < 64 ? 7 : -1) << i;
  cudaFree(d);
  // The emulator lists it (by symbol, with its size in bytes) after the section of the others.
  const std::vector<std::string> arrays = cuemu::static_shared_arrays();
  ASSERT_FALSE(arrays.empty());
  EXPECT_EQ(arrays[0].rfind("cuemu_shared ", 0), 0u) << arrays[0];
  EXPECT_NE(std::find(arrays.begin(), arrays.end(),
                      "_ZZN2ip4cuda8emu_test28stale_shared_template_kernelILi64EEEvPiE1s 256"),
            arrays.end());
}

// Each block takes a ticket: the order in which blocks ran.
__global__ void ticket_kernel(int* next, int* ticket) {
  if (threadIdx.x != 0) return;
  const unsigned b = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  ticket[b] = atomicAdd(next, 1);
}

TEST(Cuemu, EveryBlockRunsOnce) {
  const dim3 grid(7, 5, 3);
  const int n = 7 * 5 * 3;
  int *d_next, *d_ticket;
  cudaMalloc(reinterpret_cast<void**>(&d_next), sizeof(int));
  cudaMalloc(reinterpret_cast<void**>(&d_ticket), n * sizeof(int));
  cudaMemset(d_next, 0, sizeof(int));
  IP_LAUNCH(grid, 64, 0, nullptr, ticket_kernel)(d_next, d_ticket);
  std::vector<int> t(n);
  cudaMemcpy(t.data(), d_ticket, n * sizeof(int), cudaMemcpyDeviceToHost);
  std::vector<int> sorted = t;
  std::sort(sorted.begin(), sorted.end());
  for (int i = 0; i < n; ++i) EXPECT_EQ(sorted[i], i);  // a permutation: each block exactly once
  cudaFree(d_next);
  cudaFree(d_ticket);
}

// Warp sum by xor shuffles; lane 0 of each warp writes it. Also an inclusive scan by shfl_up.
__global__ void warp_ops_kernel(const float* x, float* sums, int* scans) {
  const unsigned t = threadIdx.x;
  float v = x[t];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xFFFFFFFFu, v, o);
  if ((t & 31) == 0) sums[t / 32] = v;
  int s = static_cast<int>(t & 31) + 1;
  for (int o = 1; o < 32; o <<= 1) {
    const int y = __shfl_up_sync(0xFFFFFFFFu, s, o);
    if (static_cast<int>(t & 31) >= o) s += y;
  }
  scans[t] = s;
  // broadcast from lane 7 of each warp
  const int b = __shfl_sync(0xFFFFFFFFu, static_cast<int>(t), 7);
  if (b != static_cast<int>((t & ~31u) + 7)) scans[t] = -1;
}

TEST(Cuemu, ShufflesExchangeBetweenLanes) {
  std::vector<float> x(64);
  std::iota(x.begin(), x.end(), 1.0f);
  float *dx, *ds;
  int* dc;
  cudaMalloc(reinterpret_cast<void**>(&dx), 64 * sizeof(float));
  cudaMalloc(reinterpret_cast<void**>(&ds), 2 * sizeof(float));
  cudaMalloc(reinterpret_cast<void**>(&dc), 64 * sizeof(int));
  cudaMemcpy(dx, x.data(), 64 * sizeof(float), cudaMemcpyHostToDevice);
  IP_LAUNCH(1, 64, 0, nullptr, warp_ops_kernel)(dx, ds, dc);
  float s[2];
  int c[64];
  cudaMemcpy(s, ds, sizeof s, cudaMemcpyDeviceToHost);
  cudaMemcpy(c, dc, sizeof c, cudaMemcpyDeviceToHost);
  EXPECT_EQ(s[0], 528.0f);   // 1 + ... + 32
  EXPECT_EQ(s[1], 1552.0f);  // 33 + ... + 64
  for (int t = 0; t < 64; ++t) EXPECT_EQ(c[t], (t % 32 + 1) * (t % 32 + 2) / 2) << t;
  cudaFree(dx);
  cudaFree(ds);
  cudaFree(dc);
}

// __shfl_xor_sync with width 16: a lane whose partner lies in an earlier segment reads it (shfl.bfly
// clamps only at the top of the warp), one whose partner lies in a later segment keeps its own value.
__global__ void xor_width_kernel(int* out) {
  const int lane = static_cast<int>(threadIdx.x);
  out[lane] = __shfl_xor_sync(0xFFFFFFFFu, 100 + lane, 16, 16);
}

TEST(Cuemu, XorShufflesOfWidthBelow32ReadEarlierSegments) {
  int* d;
  cudaMalloc(reinterpret_cast<void**>(&d), 32 * sizeof(int));
  IP_LAUNCH(1, 32, 0, nullptr, xor_width_kernel)(d);
  int h[32];
  cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
  for (int l = 0; l < 32; ++l) EXPECT_EQ(h[l], l < 16 ? 100 + l : 100 + (l ^ 16)) << l;
  cudaFree(d);
}

// shfl.sync reads its lane offset modulo 32 (PTX ISA, shfl.sync: bval[4:0] = b[4:0]): a delta or lane mask
// of 33 is one of 1, a delta of 32 one of 0 (the caller's own value); past the warp's ends up and down
// keep the caller's own value.
__global__ void shfl_offsets_kernel(int* out) {
  const int lane = static_cast<int>(threadIdx.x), v = 100 + lane;
  out[lane] = __shfl_down_sync(0xFFFFFFFFu, v, 33u);
  out[32 + lane] = __shfl_up_sync(0xFFFFFFFFu, v, 33u);
  out[64 + lane] = __shfl_xor_sync(0xFFFFFFFFu, v, 33);
  out[96 + lane] = __shfl_down_sync(0xFFFFFFFFu, v, 32u);
}

TEST(Cuemu, ShuffleOffsetsCountModulo32) {
  int* d;
  cudaMalloc(reinterpret_cast<void**>(&d), 128 * sizeof(int));
  IP_LAUNCH(1, 32, 0, nullptr, shfl_offsets_kernel)(d);
  int h[128];
  cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
  for (int l = 0; l < 32; ++l) {
    EXPECT_EQ(h[l], l < 31 ? 101 + l : 131) << "down 33, lane " << l;
    EXPECT_EQ(h[32 + l], l > 0 ? 99 + l : 100) << "up 33, lane " << l;
    EXPECT_EQ(h[64 + l], 100 + (l ^ 1)) << "xor 33, lane " << l;
    EXPECT_EQ(h[96 + l], 100 + l) << "down 32, lane " << l;
  }
  cudaFree(d);
}

// CUDA's min and max of floats (and doubles) are fminf and fmaxf: a NaN argument gives the other one.
__global__ void float_minmax_kernel(const float* x, float* out) {
  const float nan = x[0], one = x[1];
  out[0] = min(nan, one);
  out[1] = min(one, nan);
  out[2] = max(nan, one);
  out[3] = max(one, nan);
  out[4] = static_cast<float>(max(static_cast<double>(nan), static_cast<double>(one)));
  out[5] = min(one, -one);
  out[6] = max(-one, one);
}

TEST(Cuemu, FloatMinAndMaxAreFminfAndFmaxf) {
  const float x[2] = {__int_as_float(0x7FC00000), 1.0f};
  float *dx, *d;
  cudaMalloc(reinterpret_cast<void**>(&dx), sizeof x);
  cudaMalloc(reinterpret_cast<void**>(&d), 7 * sizeof(float));
  cudaMemcpy(dx, x, sizeof x, cudaMemcpyHostToDevice);
  IP_LAUNCH(1, 1, 0, nullptr, float_minmax_kernel)(dx, d);
  float h[7];
  cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(h[i], 1.0f) << i;
  EXPECT_EQ(h[5], -1.0f);
  EXPECT_EQ(h[6], 1.0f);
  cudaFree(dx);
  cudaFree(d);
}

// __fmul_rn rounds its product: never contracted with the add after it into an fma (linear_attention's
// feature map relies on it to match the host's). (1 + 2^-12)^2 = 1 + 2^-11 + 2^-24 rounds to 1 + 2^-11.
__global__ void fmul_rn_kernel(const float* x, float* out) {
  out[0] = __fmul_rn(x[0], x[0]) + x[1];
  out[1] = fmaf(x[0], x[0], x[1]);
}

TEST(Cuemu, FmulRnRoundsTheProductBeforeAnAdd) {
  const float x[2] = {1.0f + 0x1.0p-12f, -(1.0f + 0x1.0p-11f)};
  float *dx, *d;
  cudaMalloc(reinterpret_cast<void**>(&dx), sizeof x);
  cudaMalloc(reinterpret_cast<void**>(&d), 2 * sizeof(float));
  cudaMemcpy(dx, x, sizeof x, cudaMemcpyHostToDevice);
  IP_LAUNCH(1, 1, 0, nullptr, fmul_rn_kernel)(dx, d);
  float h[2];
  cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
  EXPECT_EQ(h[0], 0.0f);
  EXPECT_EQ(h[1], 0x1.0p-24f);  // the fused result, to show the two differ here
  cudaFree(dx);
  cudaFree(d);
}

// atomicMin (unsigned long long) and atomicOr (int), as attn_prep_kernel uses them: each returns the value
// before its update, and the updates of a warp all land.
__global__ void atomic_min_or_kernel(unsigned long long* mn, int* bits, unsigned long long* old_mn, int* old_bits) {
  const unsigned t = threadIdx.x;
  old_mn[t] = atomicMin(mn, 1000ull + (t * 7) % 32);
  old_bits[t] = atomicOr(bits, 1 << t);
}

TEST(Cuemu, AtomicMinAndOrReturnTheOldValue) {
  unsigned long long *mn, *old_mn;
  int *bits, *old_bits;
  cudaMalloc(reinterpret_cast<void**>(&mn), sizeof(unsigned long long));
  cudaMalloc(reinterpret_cast<void**>(&bits), sizeof(int));
  cudaMalloc(reinterpret_cast<void**>(&old_mn), 31 * sizeof(unsigned long long));
  cudaMalloc(reinterpret_cast<void**>(&old_bits), 31 * sizeof(int));
  cudaMemset(mn, 0xFF, sizeof(unsigned long long));
  cudaMemset(bits, 0, sizeof(int));
  IP_LAUNCH(1, 31, 0, nullptr, atomic_min_or_kernel)(mn, bits, old_mn, old_bits);
  unsigned long long h_mn, h_old_mn[31];
  int h_bits, h_old_bits[31];
  cudaMemcpy(&h_mn, mn, sizeof h_mn, cudaMemcpyDeviceToHost);
  cudaMemcpy(&h_bits, bits, sizeof h_bits, cudaMemcpyDeviceToHost);
  cudaMemcpy(h_old_mn, old_mn, sizeof h_old_mn, cudaMemcpyDeviceToHost);
  cudaMemcpy(h_old_bits, old_bits, sizeof h_old_bits, cudaMemcpyDeviceToHost);
  EXPECT_EQ(h_mn, 1000ull);
  EXPECT_EQ(h_bits, 0x7FFFFFFF);
  int first_min = 0, first_or = 0;
  for (unsigned t = 0; t < 31; ++t) {
    first_min += h_old_mn[t] == ~0ull;  // the first update saw the initial value
    if (h_old_mn[t] != ~0ull) {
      EXPECT_GE(h_old_mn[t], 1000ull) << t;
    }
    EXPECT_EQ(h_old_bits[t] & (1 << t), 0) << t;  // no other thread sets bit t
    first_or += h_old_bits[t] == 0;
  }
  EXPECT_EQ(first_min, 1);
  EXPECT_EQ(first_or, 1);
  cudaFree(mn);
  cudaFree(bits);
  cudaFree(old_mn);
  cudaFree(old_bits);
}

// One m16n8k16 tile: A and B are loaded into fragments from row-major host matrices with the
// fragment layout written out element by element, independently of the emulator's.
__global__ void mma_kernel(const std::uint16_t* A, const std::uint16_t* B, float* D, bool f16) {
  const int lane = static_cast<int>(threadIdx.x), g = lane >> 2, t = lane & 3;
  auto pack = [](std::uint16_t lo, std::uint16_t hi) {
    return static_cast<std::uint32_t>(lo) | (static_cast<std::uint32_t>(hi) << 16);
  };
  const std::uint32_t a0 = pack(A[g * 16 + 2 * t], A[g * 16 + 2 * t + 1]);
  const std::uint32_t a1 = pack(A[(g + 8) * 16 + 2 * t], A[(g + 8) * 16 + 2 * t + 1]);
  const std::uint32_t a2 = pack(A[g * 16 + 2 * t + 8], A[g * 16 + 2 * t + 9]);
  const std::uint32_t a3 = pack(A[(g + 8) * 16 + 2 * t + 8], A[(g + 8) * 16 + 2 * t + 9]);
  // B is K x N (16 x 8) row-major in memory here
  const std::uint32_t b0 = pack(B[(2 * t) * 8 + g], B[(2 * t + 1) * 8 + g]);
  const std::uint32_t b1 = pack(B[(2 * t + 8) * 8 + g], B[(2 * t + 9) * 8 + g]);
  float c[4] = {0.5f, 0.25f, -1.0f, 2.0f};
  if (f16)
    ::cuemu::mma_m16n8k16_f16(c, a0, a1, a2, a3, b0, b1);
  else
    ::cuemu::mma_m16n8k16_bf16(c, a0, a1, a2, a3, b0, b1);
  D[g * 8 + 2 * t] = c[0];
  D[g * 8 + 2 * t + 1] = c[1];
  D[(g + 8) * 8 + 2 * t] = c[2];
  D[(g + 8) * 8 + 2 * t + 1] = c[3];
}

// One m16n8k16 tile through mma_kernel (bf16 or f16 halves, A 16 x 16 and B 16 x 8 row major, C = the
// kernel's {0.5, 0.25, -1, 2}): the 16 x 8 result, row major.
std::vector<float> mma_tile(const std::vector<std::uint16_t>& A, const std::vector<std::uint16_t>& B, bool f16) {
  std::uint16_t *dA, *dB;
  float* dD;
  cudaMalloc(reinterpret_cast<void**>(&dA), 512);
  cudaMalloc(reinterpret_cast<void**>(&dB), 256);
  cudaMalloc(reinterpret_cast<void**>(&dD), 128 * sizeof(float));
  cudaMemcpy(dA, A.data(), 512, cudaMemcpyHostToDevice);
  cudaMemcpy(dB, B.data(), 256, cudaMemcpyHostToDevice);
  IP_LAUNCH(1, 32, 0, nullptr, mma_kernel)(dA, dB, dD, f16);
  std::vector<float> D(128);
  cudaMemcpy(D.data(), dD, 512, cudaMemcpyDeviceToHost);
  cudaFree(dA);
  cudaFree(dB);
  cudaFree(dD);
  return D;
}

// bf16 and f16 (one value of each table is past bf16's 8 bits, so the f16 layout's values must be read
// as f16: 1.00390625 = 1 + 2^-8, exact in f16, 1 in bf16).
TEST(Cuemu, MmaFollowsThePtxFragmentLayout) {
  for (bool f16 : {false, true}) {
    SCOPED_TRACE(f16 ? "f16" : "bf16");
    std::vector<std::uint16_t> A(256), B(128);
    std::vector<float> Af(256), Bf(128);
    auto enc = [&](float v) { return f16 ? ip::fp16_from_float(v) : ip::bf16_from_float(v); };
    for (int i = 0; i < 256; ++i) {
      Af[i] = static_cast<float>((i * 7) % 13 - 6) * 0.25f;
      if (f16 && i == 37) Af[i] = 1.00390625f;
      A[i] = enc(Af[i]);
    }
    for (int i = 0; i < 128; ++i) {
      Bf[i] = static_cast<float>((i * 5) % 11 - 5) * 0.5f;
      if (f16 && i == 21) Bf[i] = -1.00390625f;
      B[i] = enc(Bf[i]);
    }
    const std::vector<float> D = mma_tile(A, B, f16);
    const float c[4] = {0.5f, 0.25f, -1.0f, 2.0f};
    for (int m = 0; m < 16; ++m)
      for (int n = 0; n < 8; ++n) {
        double s = c[(m >= 8 ? 2 : 0) + (n & 1)];
        for (int k = 0; k < 16; ++k) s += static_cast<double>(Af[m * 16 + k]) * Bf[k * 8 + n];
        EXPECT_EQ(D[m * 8 + n], static_cast<float>(s)) << m << "," << n;  // short sums of short values: exact
      }
  }
}

// The f16 mma reads every f16 code as IEEE half (core/numeric.h's decode): subnormals (m 2^-24, which the
// scoring kernel's lo parts reach), infinities of either sign (inf x -1, inf x 0 = NaN) and NaN, each in a
// row of its own; the other rows are C alone.
TEST(Cuemu, MmaF16ReadsSubnormalsInfinitiesAndNaN) {
  std::vector<std::uint16_t> A(256, 0), B(128, 0);
  A[0 * 16 + 0] = 0x0001;   // 2^-24, the smallest subnormal
  A[0 * 16 + 1] = 0x03FF;   // 1023 2^-24, the largest
  A[0 * 16 + 2] = 0x8005;   // -5 2^-24
  A[1 * 16 + 3] = 0x7C00;   // +inf
  A[2 * 16 + 3] = 0xFC00;   // -inf
  A[3 * 16 + 4] = 0x7E00;   // NaN
  A[12 * 16 + 5] = 0x7C00;  // +inf, times 0 in the even columns
  for (int n = 0; n < 8; ++n) {
    B[0 * 8 + n] = 0x6400;                                  // 2^10
    B[1 * 8 + n] = ip::fp16_from_float(std::ldexp(1.0f, n));  // 2^n
    B[2 * 8 + n] = 0x6C00;                                  // 2^12
    B[3 * 8 + n] = n % 2 ? 0xBC00 : 0x3C00;                 // -1, 1
    B[4 * 8 + n] = 0x3C00;
    B[5 * 8 + n] = n % 2 ? 0x3C00 : 0x0000;
  }
  const std::vector<float> D = mma_tile(A, B, true);
  const float c[4] = {0.5f, 0.25f, -1.0f, 2.0f};
  for (int m = 0; m < 16; ++m)
    for (int n = 0; n < 8; ++n) {
      double s = c[(m >= 8 ? 2 : 0) + (n & 1)];
      for (int k = 0; k < 16; ++k)
        if (A[m * 16 + k] != 0 && B[k * 8 + n] != 0)  // (inf x 0 only where the test puts it)
          s += static_cast<double>(ip::fp16_to_float(A[m * 16 + k])) * ip::fp16_to_float(B[k * 8 + n]);
      if (m == 12 && n % 2 == 0) s = std::numeric_limits<double>::quiet_NaN();  // inf x 0
      const float want = static_cast<float>(s);
      if (std::isnan(want))
        EXPECT_TRUE(std::isnan(D[m * 8 + n])) << m << "," << n << ": " << D[m * 8 + n];
      else
        EXPECT_EQ(D[m * 8 + n], want) << m << "," << n;
    }
  EXPECT_EQ(D[0 * 8 + 0], 0.5f + 0x1p-14f + 1023 * 0x1p-24f - 5 * 0x1p-12f);
  EXPECT_EQ(D[1 * 8 + 0], HUGE_VALF);
  EXPECT_EQ(D[1 * 8 + 1], -HUGE_VALF);
  EXPECT_EQ(D[2 * 8 + 0], -HUGE_VALF);
  EXPECT_TRUE(std::isnan(D[3 * 8 + 0]));
}

// The emulator's mma result is the exact sum of C and the 16 products, rounded to fp32 once (its model; a
// GPU's tensor cores may round or truncate otherwise, which the scoring tests' tolerances allow): 16
// products of 2^-25 add 2^-21 to C = 2 (and to -1), where adding them to an fp32 sum one by one would
// leave 2 (each 2^-25 below half of 2's ulp, 2^-22).
TEST(Cuemu, MmaF16SumsExactlyAndRoundsOnce) {
  std::vector<std::uint16_t> A(256, 0), B(128, 0x0C00);  // B: 2^-12 everywhere
  for (int k = 0; k < 16; ++k) A[9 * 16 + k] = 0x0800;    // row 9 (C: -1, 2): 2^-13
  const std::vector<float> D = mma_tile(A, B, true);
  for (int n = 0; n < 8; ++n) {
    EXPECT_EQ(D[9 * 8 + n], (n % 2 ? 2.0f : -1.0f) + 0x1p-21f) << n;
    EXPECT_EQ(D[8 * 8 + n], n % 2 ? 2.0f : -1.0f) << n;
  }
}

__global__ void empty_kernel() {}

TEST(Cuemu, BadLaunchConfigurationsSetTheLaunchError) {
  IP_LAUNCH(1, 1025, 0, nullptr, empty_kernel)();
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  IP_LAUNCH(0, 32, 0, nullptr, empty_kernel)();
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  // above 48 KiB of dynamic shared memory without cudaFuncSetAttribute
  IP_LAUNCH(1, 32, 64 * 1024, nullptr, empty_kernel)();
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
  ASSERT_EQ(cudaFuncSetAttribute(reinterpret_cast<const void*>(&empty_kernel),
                                 cudaFuncAttributeMaxDynamicSharedMemorySize, 64 * 1024),
            cudaSuccess);
  IP_LAUNCH(1, 32, 64 * 1024, nullptr, empty_kernel)();
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

// A kernel's cudaFuncAttributeMaxDynamicSharedMemorySize bounds its launches also below the 48 KiB a kernel
// gets unasked ("any launch must have a dynamic shared memory size smaller than this value", driver_types.h).
__global__ void small_smem_kernel() {}

TEST(Cuemu, DynamicSharedMemoryAboveTheKernelsAttributeFailsTheLaunch) {
  const void* f = reinterpret_cast<const void*>(&small_smem_kernel);
  ASSERT_EQ(cudaFuncSetAttribute(f, cudaFuncAttributeMaxDynamicSharedMemorySize, 1024), cudaSuccess);
  IP_LAUNCH(1, 32, 2048, nullptr, small_smem_kernel)();
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
  IP_LAUNCH(1, 32, 1024, nullptr, small_smem_kernel)();
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  ASSERT_EQ(cudaFuncSetAttribute(f, cudaFuncAttributeMaxDynamicSharedMemorySize, 48 * 1024), cudaSuccess);
  IP_LAUNCH(1, 32, 2048, nullptr, small_smem_kernel)();
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

__global__ void divergent_barrier_kernel() {
  if (threadIdx.x < 16)
    __syncthreads();
  else
    __syncwarp();
}

__global__ void outside_mask_kernel(int* out) {
  const int v = __shfl_sync(0x0000FFFFu, static_cast<int>(threadIdx.x), 20);
  out[threadIdx.x] = v;
}

// Clusters: each block writes its rank into its own shared memory; after the cluster barrier it reads the
// next block's through distributed shared memory, adds to a counter in rank 0's, and after a second
// barrier rank 0 reports the sum.
__global__ void cluster_ring_kernel(int* out) {
  IP_DYNAMIC_SHARED(int, s);
  const unsigned rank = ip::cuda::cluster_rank(), C = ip::cuda::cluster_blocks();
  const int t = static_cast<int>(threadIdx.x);
  s[1 + t] = static_cast<int>(100 * rank) + t;
  if (t == 0) s[0] = 0;
  ip::cuda::cluster_sync();
  const int next = *ip::cuda::cluster_map(s + 1 + t, (rank + 1) % C);
  out[blockIdx.x * blockDim.x + t] = next;
  atomicAdd(ip::cuda::cluster_map(s, 0), 1);
  ip::cuda::cluster_sync();
  if (rank == 0 && t == 0) out[gridDim.x * blockDim.x + blockIdx.x / C] = s[0];
  ip::cuda::cluster_sync();  // no block's shared memory is read after it exits
}

TEST(Cuemu, ClustersShareTheirBlocksSharedMemory) {
  for (unsigned C : {1u, 2u, 4u, 8u}) {
    const unsigned clusters = 3, threads = 64, grid = clusters * C;
    int* d = nullptr;
    ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&d), (grid * threads + clusters) * sizeof(int)), cudaSuccess);
    IP_LAUNCH_CLUSTER(grid, threads, (threads + 1) * sizeof(int), nullptr, C, cluster_ring_kernel)(d);
    ASSERT_EQ(cudaGetLastError(), cudaSuccess);
    std::vector<int> h(grid * threads + clusters);
    cudaMemcpy(h.data(), d, h.size() * sizeof(int), cudaMemcpyDeviceToHost);
    for (unsigned b = 0; b < grid; ++b)
      for (unsigned t = 0; t < threads; ++t)
        EXPECT_EQ(h[b * threads + t], static_cast<int>(100 * ((b % C + 1) % C) + t)) << "C " << C << " block " << b;
    for (unsigned c = 0; c < clusters; ++c) EXPECT_EQ(h[grid * threads + c], static_cast<int>(C * threads)) << c;
    cudaFree(d);
  }
}

TEST(Cuemu, BadClusterSizesSetTheLaunchError) {
  int* d = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&d), 64 * 32 * sizeof(int)), cudaSuccess);
  IP_LAUNCH_CLUSTER(6, 32, 33 * sizeof(int), nullptr, 4u, cluster_ring_kernel)(d);  // 4 does not divide 6
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidClusterSize);
  IP_LAUNCH_CLUSTER(16, 32, 33 * sizeof(int), nullptr, 16u, cluster_ring_kernel)(d);  // 16: non-portable
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidClusterSize);
  ASSERT_EQ(cudaFuncSetAttribute(cluster_ring_kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1), cudaSuccess);
  IP_LAUNCH_CLUSTER(16, 32, 33 * sizeof(int), nullptr, 16u, cluster_ring_kernel)(d);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  IP_LAUNCH_CLUSTER(32, 32, 33 * sizeof(int), nullptr, 32u, cluster_ring_kernel)(d);  // above 16
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidClusterSize);
  cudaFree(d);
}

// Rank 1 leaves before the cluster barrier that the others wait at.
__global__ void cluster_exit_kernel() {
  IP_DYNAMIC_SHARED(int, s);
  s[threadIdx.x] = 0;
  if (ip::cuda::cluster_rank() == 1) return;
  ip::cuda::cluster_sync();
}

// Rank 1 maps rank 0's shared memory before any cluster barrier (rank 0 may not have started on a GPU).
__global__ void cluster_early_map_kernel(int* out) {
  IP_DYNAMIC_SHARED(int, s);
  s[threadIdx.x] = 1;
  if (ip::cuda::cluster_rank() == 1) out[threadIdx.x] = *ip::cuda::cluster_map(s + threadIdx.x, 0u);
  ip::cuda::cluster_sync();
}

// Rank 0 leaves after the second cluster barrier, setting a flag; rank 1 waits for the flag and then maps
// rank 0's shared memory (`late`), or reads it through the address it mapped between the barriers (`!late`).
// The flag is set and read with atomics (plain volatile accesses would be a data race to the race check).
__global__ void cluster_late_map_kernel(int* flag, int* out, bool late) {
  IP_DYNAMIC_SHARED(int, s);
  s[0] = 7;
  ip::cuda::cluster_sync();
  int* const early = ip::cuda::cluster_map(s, 0u);
  ip::cuda::cluster_sync();
  if (ip::cuda::cluster_rank() == 0) {
    atomicExch(flag, 1);
    return;
  }
  while (atomicAdd(flag, 0) == 0) __nanosleep(100);
  out[0] = late ? *ip::cuda::cluster_map(s, 0u) : *early;
}

// A cluster kernel that writes a static __shared__ array (one copy for all blocks on the emulator).
__global__ void cluster_static_kernel(int* out) {
  __shared__ int s[32];
  s[threadIdx.x] = static_cast<int>(ip::cuda::cluster_rank());
  ip::cuda::cluster_sync();
  out[blockIdx.x * 32 + threadIdx.x] = s[(threadIdx.x + 1) % 32];
}

// Each block takes the next item from a counter; item 2i spins until item 2i + 1 has set its flag, so
// the two must be resident at once. Every block also keeps values in a static __shared__ array across the
// wait, while the other resident blocks write theirs.
__global__ void pair_wait_kernel(unsigned* next, unsigned* flag, int* out) {
  __shared__ unsigned item;
  __shared__ int mine[64];
  if (threadIdx.x == 0) item = atomicAdd(next, 1u);
  __syncthreads();
  const unsigned it = item;
  mine[threadIdx.x] = static_cast<int>(it * 100 + threadIdx.x);
  if (threadIdx.x == 0) {
    if (it % 2 == 1) {
      atomicExch(&flag[it], 1u);
    } else {
      while (cuemu::load_relaxed(&flag[it + 1]) == 0) __nanosleep(64);
      __threadfence();
    }
  }
  __syncthreads();
  out[it * 64 + threadIdx.x] = mine[(threadIdx.x + 1) % 64];
}

// Every block waits for a flag nothing sets.
__global__ void wait_forever_kernel(const unsigned* flag) {
  if (threadIdx.x == 0)
    while (cuemu::load_relaxed(flag) == 0) __nanosleep(64);
  __syncthreads();
}

// Runs pair_wait_kernel over `blocks` blocks (even) and checks every item's output.
void run_pairs(int blocks) {
  unsigned *next, *flag;
  int* out;
  cudaMalloc(reinterpret_cast<void**>(&next), sizeof(unsigned));
  cudaMalloc(reinterpret_cast<void**>(&flag), blocks * sizeof(unsigned));
  cudaMalloc(reinterpret_cast<void**>(&out), blocks * 64 * sizeof(int));
  cudaMemset(next, 0, sizeof(unsigned));
  cudaMemset(flag, 0, blocks * sizeof(unsigned));
  IP_LAUNCH(blocks, 64, 0, nullptr, pair_wait_kernel)(next, flag, out);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  std::vector<int> h(static_cast<std::size_t>(blocks) * 64);
  cudaMemcpy(h.data(), out, h.size() * sizeof(int), cudaMemcpyDeviceToHost);
  for (int it = 0; it < blocks; ++it)
    for (int t = 0; t < 64; ++t) ASSERT_EQ(h[it * 64 + t], it * 100 + (t + 1) % 64) << "item " << it << " thread " << t;
  cudaFree(next);
  cudaFree(flag);
  cudaFree(out);
}

__global__ void overrun_kernel(float* x, int n) {
  x[n + threadIdx.x] = 1.0f;
}

// Reads at x[at] (thread 0), into *out.
__global__ void read_at_kernel(const float* x, long long at, float* out) {
  if (threadIdx.x == 0) *out = x[at];
}

// Thread 0 reads the byte `at` of the block's dynamic shared memory.
__global__ void dynamic_shared_read_kernel(int at, unsigned char* out) {
  IP_DYNAMIC_SHARED(unsigned char, sh);
  if (threadIdx.x == 0) *out = sh[at];
}

// Every thread writes one int of a static __shared__ array of 8, through a pointer (UBSan checks only
// indexes into the array type): threads 8 and up write past its end.
__global__ void static_shared_overrun_kernel(int* out) {
  __shared__ int a[8];
  int* const p = a;
  p[threadIdx.x] = static_cast<int>(threadIdx.x);
  __syncthreads();
  out[threadIdx.x] = a[threadIdx.x % 8];
}

// Built with AddressSanitizer, an access is reported where it happens (use-after-poison for the bytes the
// emulator poisons, global-buffer-overflow for a static __shared__ array's redzone), often before the
// guard page or the slack check would see it.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAsan = true;
#else
constexpr bool kAsan = false;
#endif

using CuemuDeathTest = ::testing::Test;

TEST(CuemuDeathTest, DivergentBarriersAreReportedAsDeadlocks) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(IP_LAUNCH(1, 32, 0, nullptr, divergent_barrier_kernel)(), "deadlock.*divergent_barrier_kernel");
}

TEST(CuemuDeathTest, AThreadThatExitsBeforeAClusterBarrierIsReported) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(IP_LAUNCH_CLUSTER(2, 32, 32 * sizeof(int), nullptr, 2u, cluster_exit_kernel)(),
               "deadlock \\(threads wait at the cluster barrier.*cluster_exit_kernel.*32 at the cluster barrier.*32 "
               "exited");
}

TEST(CuemuDeathTest, AnotherBlocksSharedMemoryMappedBeforeTheFirstClusterBarrierIsReported) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  int* d;
  cudaMalloc(reinterpret_cast<void**>(&d), 32 * sizeof(int));
  EXPECT_DEATH(IP_LAUNCH_CLUSTER(2, 32, 32 * sizeof(int), nullptr, 2u, cluster_early_map_kernel)(d),
               "block rank 0's shared memory mapped before the calling thread's first cluster barrier.*"
               "cluster_early_map_kernel");
  cudaFree(d);
}

TEST(CuemuDeathTest, SharedMemoryOfABlockThatExitedIsTakenAway) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  int *flag, *out;
  cudaMalloc(reinterpret_cast<void**>(&flag), sizeof(int));
  cudaMalloc(reinterpret_cast<void**>(&out), sizeof(int));
  EXPECT_DEATH(
      {
        cudaMemset(flag, 0, sizeof(int));
        IP_LAUNCH_CLUSTER(2, 1, sizeof(int), nullptr, 2u, cluster_late_map_kernel)(flag, out, true);
      },
      "block rank 0's shared memory mapped after every thread of that block exited.*cluster_late_map_kernel");
  // Through an address mapped while rank 0 ran: its bytes are gone (0xFF here; the sanitizer build stops).
  cudaMemset(flag, 0, sizeof(int));
#if defined(__SANITIZE_ADDRESS__)
  EXPECT_DEATH(IP_LAUNCH_CLUSTER(2, 1, sizeof(int), nullptr, 2u, cluster_late_map_kernel)(flag, out, false),
               "use-after-poison.*cluster_late_map_kernel");
#else
  IP_LAUNCH_CLUSTER(2, 1, sizeof(int), nullptr, 2u, cluster_late_map_kernel)(flag, out, false);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  int h = 0;
  cudaMemcpy(&h, out, sizeof(int), cudaMemcpyDeviceToHost);
  EXPECT_EQ(h, -1);  // not the 7 rank 0 wrote
#endif
  cudaFree(flag);
  cudaFree(out);
}

// A chained kernel (programmatic dependent launch) that reads its input with or without waiting first.
__global__ void chained_copy_kernel(const int* in, int* out, bool wait) {
  if (wait) ip::cuda::wait_for_prior_grids();
  out[threadIdx.x] = in[threadIdx.x];
}

TEST(CuemuDeathTest, AChainedKernelThatDoesNotWaitIsReported) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  int *in, *out;
  cudaMalloc(reinterpret_cast<void**>(&in), 32 * sizeof(int));
  cudaMalloc(reinterpret_cast<void**>(&out), 32 * sizeof(int));
  cudaMemset(in, 0, 32 * sizeof(int));
  IP_LAUNCH_CHAINED(1, 32, 0, nullptr, true, chained_copy_kernel)(in, out, true);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  IP_LAUNCH_CHAINED(1, 32, 0, nullptr, false, chained_copy_kernel)(in, out, false);  // not chained: no wait needed
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_DEATH(IP_LAUNCH_CHAINED(1, 32, 0, nullptr, true, chained_copy_kernel)(in, out, false),
               "thread \\([0-9]+,0,0\\) of kernel chained_copy_kernel.*exited without wait_for_prior_grids");
  cudaFree(in);
  cudaFree(out);
}

// Loads with cache hints at addresses their type's alignment does not allow.
__global__ void misaligned_load_kernel(const float* p, float* out) {
  out[threadIdx.x] = __ldg(reinterpret_cast<const float4*>(p + 1)).x;
}

TEST(CuemuDeathTest, MisalignedVectorLoadsAreReported) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  float *p, *out;
  cudaMalloc(reinterpret_cast<void**>(&p), 64 * sizeof(float));
  cudaMalloc(reinterpret_cast<void**>(&out), 32 * sizeof(float));
  EXPECT_DEATH(IP_LAUNCH(1, 32, 0, nullptr, misaligned_load_kernel)(p, out),
               "__ldg at 0x[0-9a-f]+, not aligned to the 16 bytes of its type.*misaligned_load_kernel");
  cudaFree(p);
  cudaFree(out);
}

TEST(CuemuDeathTest, StaticSharedMemoryInAClusterKernelIsReported) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  int* d;
  cudaMalloc(reinterpret_cast<void**>(&d), 64 * sizeof(int));
  EXPECT_DEATH(IP_LAUNCH_CLUSTER(2, 32, 0, nullptr, 2u, cluster_static_kernel)(d),
               "cluster_static_kernel .*wrote static __shared__ memory");
  cudaFree(d);
}

TEST(CuemuDeathTest, ShuffleFromALaneOutsideTheMaskIsReported) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  int* d;
  cudaMalloc(reinterpret_cast<void**>(&d), 32 * sizeof(int));
  EXPECT_DEATH(IP_LAUNCH(1, 16, 0, nullptr, outside_mask_kernel)(d), "reads lane 20 in a shuffle with mask 0000ffff");
  cudaFree(d);
}

TEST(CuemuDeathTest, AccessesPastAnAllocationNameTheKernelAndThread) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  float* d;
  cudaMalloc(reinterpret_cast<void**>(&d), 1000 * sizeof(float));
  // 1000 floats end 96 bytes short of a 256-byte boundary: threads 24 to 63 write past the guard page.
  // (With AddressSanitizer, a thread writing into the rounding may be the first to be reported.)
  const std::string guard =
      "invalid memory access .* bytes past the end of a 4000-byte device allocation.* by thread "
      "\\((2[4-9]|[3-5][0-9]|6[0-3]),0,0\\) of kernel overrun_kernel";
  EXPECT_DEATH(IP_LAUNCH(1, 64, 0, nullptr, overrun_kernel)(d, 1000),
               kAsan ? "(" + guard + "|AddressSanitizer: use-after-poison.*overrun_kernel)" : guard);
  cudaFree(d);
}

TEST(CuemuDeathTest, WritesIntoTheRoundingBeforeTheGuardPageAreReportedAfterTheLaunch) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  float* d;
  cudaMalloc(reinterpret_cast<void**>(&d), 1000 * sizeof(float));
  // Threads 0..7 write floats 1000..1007: inside the 256-byte rounding, short of the guard page.
  EXPECT_DEATH(IP_LAUNCH(1, 8, 0, nullptr, overrun_kernel)(d, 1000),
               kAsan ? "AddressSanitizer: use-after-poison.*overrun_kernel"
                     : "kernel overrun_kernel .* wrote .* bytes past the end of a 4000-byte device allocation");
  cudaFree(d);
}

// What only the sanitizer build sees (make test-sanitize): reads past either end of an allocation (no
// guard page there, the slack check sees writes only), a block's dynamic shared memory read past its
// size, a static __shared__ array indexed past its end. Each is first shown to pass in bounds.
TEST(CuemuDeathTest, OutOfBoundsReadsAreReportedWithTheSanitizer) {
  if (!kAsan) GTEST_SKIP() << "needs the AddressSanitizer build (make test-sanitize)";
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  float* d;
  float* out;
  unsigned char* byte;
  int* ints;
  cudaMalloc(reinterpret_cast<void**>(&d), 1000 * sizeof(float));
  cudaMalloc(reinterpret_cast<void**>(&out), sizeof(float));
  cudaMalloc(reinterpret_cast<void**>(&byte), 1);
  cudaMalloc(reinterpret_cast<void**>(&ints), 64 * sizeof(int));
  cudaMemset(d, 0, 1000 * sizeof(float));
  IP_LAUNCH(1, 32, 0, nullptr, read_at_kernel)(d, 999, out);
  IP_LAUNCH(1, 32, 0, nullptr, read_at_kernel)(d, 0, out);
  IP_LAUNCH(1, 32, 100, nullptr, dynamic_shared_read_kernel)(99, byte);
  IP_LAUNCH(1, 8, 0, nullptr, static_shared_overrun_kernel)(ints);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_DEATH(IP_LAUNCH(1, 32, 0, nullptr, read_at_kernel)(d, 1000, out), "use-after-poison.*read_at_kernel");
  // An allocation shorter than a page starts inside the mapping, a page-aligned one after the guard page.
  float* small;
  cudaMalloc(reinterpret_cast<void**>(&small), 100 * sizeof(float));
  EXPECT_DEATH(IP_LAUNCH(1, 32, 0, nullptr, read_at_kernel)(small, -1, out), "use-after-poison.*read_at_kernel");
  cudaFree(small);
  EXPECT_DEATH(IP_LAUNCH(1, 32, 100, nullptr, dynamic_shared_read_kernel)(100, byte),
               "use-after-poison.*dynamic_shared_read_kernel");
  // With 4 blocks resident, a block's bytes end where the next one's rounding starts.
  const unsigned before = cuemu::set_resident_blocks(4);
  EXPECT_DEATH(IP_LAUNCH(8, 32, 100, nullptr, dynamic_shared_read_kernel)(100, byte),
               "use-after-poison.*dynamic_shared_read_kernel");
  cuemu::set_resident_blocks(before);
  EXPECT_DEATH(IP_LAUNCH(1, 9, 0, nullptr, static_shared_overrun_kernel)(ints),
               // UBSan's object-size check, when built with it, comes first (its message names no function)
               "(global-buffer-overflow.*static_shared_overrun_kernel|insufficient space for an object of type 'int')");
  cudaFree(d);
  cudaFree(out);
  cudaFree(byte);
  cudaFree(ints);
}

// With several blocks resident, blocks that wait for each other run to the end, each with its own static
// shared memory, at every number of resident blocks and block order (CUEMU_SEED varies the order).
TEST(Cuemu, ResidentBlocksWaitForEachOther) {
  for (unsigned k : {2u, 3u, 5u, 16u}) {
    SCOPED_TRACE(::testing::Message() << k << " blocks resident");
    const unsigned before = cuemu::set_resident_blocks(k);
    run_pairs(22);
    cuemu::set_resident_blocks(before);
  }
}

TEST(CuemuDeathTest, AWaitOnAnotherBlockWithOneBlockResidentIsReported) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const unsigned before = cuemu::set_resident_blocks(1);
  EXPECT_DEATH(run_pairs(4), "a spin-wait that never ends \\(__nanosleep with one block resident.*pair_wait_kernel.*"
                             "1 in a spin-wait \\(__nanosleep\\)");
  cuemu::set_resident_blocks(before);
}

TEST(CuemuDeathTest, AWaitForWhatNoBlockDoesIsReported) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const unsigned before = cuemu::set_resident_blocks(4);
  unsigned* flag;
  cudaMalloc(reinterpret_cast<void**>(&flag), sizeof(unsigned));
  cudaMemset(flag, 0, sizeof(unsigned));
  EXPECT_DEATH(IP_LAUNCH(6, 32, 0, nullptr, wait_forever_kernel)(flag),
               "a spin-wait that never ends \\(__nanosleep: for many turns.*wait_forever_kernel.*\\(4 blocks "
               "resident\\): 124 threads at __syncthreads, 0 at warp collectives, 4 in a spin-wait");
  cudaFree(flag);
  cuemu::set_resident_blocks(before);
}

// Each block adds its threads' values into one device-memory sum (reps additions a thread, block 1 doing
// `slow` times as many), takes a ticket, and the block that takes the last ticket copies the sum out.
// In order (signal_first false): additions, fence, barrier, ticket; the last block's thread 0 fences and
// reads the sum. Out of order (true): the ticket first (then a barrier, so that every block's additions
// wait for its ticket), so the last block may copy the sum while another block is still adding to it.
__global__ void ticket_sum_kernel(unsigned long long* sum, unsigned* ticket, unsigned long long* out, int reps,
                                  int slow, bool signal_first) {
  __shared__ bool last;
  const int n = blockIdx.x == 1 ? reps * slow : reps;
  if (signal_first) {
    if (threadIdx.x == 0) last = atomicAdd(ticket, 1u) == gridDim.x - 1;
    __syncthreads();
  }
  for (int r = 0; r < n; ++r) atomicAdd(sum, static_cast<unsigned long long>(threadIdx.x + 1));
  if (!signal_first) {
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) last = atomicAdd(ticket, 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (last && threadIdx.x == 0) {
    __threadfence();
    *out = *sum;
  }
}

// Each thread writes its value into the block's row of `data` (plain stores), the block takes a ticket,
// and every thread of the block with the last ticket sums its column over the rows into out. In order:
// the writes, a fence (writer_fence), a barrier, the ticket; in the last block a fence (reader_fence,
// every thread) after the barrier that tells it it is last. Out of order (signal_first): the ticket
// before the writes. The race check reports a missing fence on either side, or the early ticket, whatever
// order the blocks ran in: each element is written once, by another block than the one that reads it.
__global__ void ticket_gather_kernel(int* data, unsigned* ticket, int* out, bool signal_first, bool writer_fence,
                                     bool reader_fence) {
  __shared__ bool last;
  const unsigned t = threadIdx.x, n = blockDim.x;
  if (signal_first) {
    if (t == 0) last = atomicAdd(ticket, 1u) == gridDim.x - 1;
    __syncthreads();
  }
  data[blockIdx.x * n + t] = static_cast<int>(blockIdx.x * 1000 + t);
  if (!signal_first) {
    if (writer_fence) __threadfence();
    __syncthreads();
    if (t == 0) last = atomicAdd(ticket, 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (!last) return;
  if (reader_fence) __threadfence();
  int total = 0;
  for (unsigned b = 0; b < gridDim.x; ++b) total += data[b * n + t];
  out[t] = total;
}

// One launch of ticket_gather_kernel, 4 blocks of 64 threads, all resident; the sums it wrote.
std::vector<int> ticket_gather(bool signal_first, bool writer_fence, bool reader_fence) {
  int *data, *out;
  unsigned* ticket;
  cudaMalloc(reinterpret_cast<void**>(&data), 4 * 64 * sizeof(int));
  cudaMalloc(reinterpret_cast<void**>(&out), 64 * sizeof(int));
  cudaMalloc(reinterpret_cast<void**>(&ticket), sizeof *ticket);
  cudaMemset(ticket, 0, sizeof *ticket);
  const unsigned before = cuemu::set_resident_blocks(4);
  IP_LAUNCH(4, 64, 0, nullptr, ticket_gather_kernel)(data, ticket, out, signal_first, writer_fence, reader_fence);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  cuemu::set_resident_blocks(before);
  std::vector<int> got(64);
  cudaMemcpy(got.data(), out, got.size() * sizeof(int), cudaMemcpyDeviceToHost);
  cudaFree(data);
  cudaFree(out);
  cudaFree(ticket);
  return got;
}

// The copied sum of each of `launches` launches of 4 blocks of 64 threads, all 4 resident.
std::vector<unsigned long long> ticket_sums(bool signal_first, int launches) {
  unsigned long long *sum, *out;
  unsigned* ticket;
  cudaMalloc(reinterpret_cast<void**>(&sum), sizeof *sum);
  cudaMalloc(reinterpret_cast<void**>(&out), sizeof *out);
  cudaMalloc(reinterpret_cast<void**>(&ticket), sizeof *ticket);
  const unsigned before = cuemu::set_resident_blocks(4);
  std::vector<unsigned long long> got;
  for (int i = 0; i < launches; ++i) {
    cudaMemset(sum, 0, sizeof *sum);
    cudaMemset(ticket, 0, sizeof *ticket);
    cudaMemset(out, 0, sizeof *out);
    IP_LAUNCH(4, 64, 0, nullptr, ticket_sum_kernel)(sum, ticket, out, 2, 8, signal_first);
    EXPECT_EQ(cudaGetLastError(), cudaSuccess);
    got.emplace_back();
    cudaMemcpy(&got.back(), out, sizeof *out, cudaMemcpyDeviceToHost);
  }
  cuemu::set_resident_blocks(before);
  cudaFree(sum);
  cudaFree(out);
  cudaFree(ticket);
  return got;
}

// (2 additions of 1..64 a thread in 3 blocks, 16 in block 1)
constexpr unsigned long long kTicketSum = 2080ull * (3 * 2 + 16);

// Resident blocks take turns only at barriers and sleeps: every block's additions happen in one turn, the
// turn before the last block's copy, so a ticket taken too early goes unseen there. With CUEMU_PREEMPT a device
// atomic may end the block's turn, and the last block copies the sum before block 1 has added all of it.
TEST(Cuemu, PreemptionAtAtomicsShowsATicketTakenTooEarly) {
  if (kRaceCheck)
    GTEST_SKIP() << "the race-check build reports the early ticket as a race instead "
                    "(RacesBetweenResidentBlocksAreReportedByTheRaceCheck)";
  const double before = cuemu::set_preempt(0);
  const std::uint64_t preemptions0 = cuemu::counts().preemptions;
  for (unsigned long long v : ticket_sums(true, 8)) EXPECT_EQ(v, kTicketSum);  // unseen without preemption
  EXPECT_EQ(cuemu::counts().preemptions, preemptions0);
  cuemu::set_preempt(0.5);
  int wrong = 0;
  for (unsigned long long v : ticket_sums(true, 8)) {
    EXPECT_LE(v, kTicketSum);
    wrong += v != kTicketSum;
  }
  EXPECT_GE(wrong, 1) << "a ticket taken before the additions was never seen in 8 launches";
  // In order, the sum is whole whatever the preemptions.
  for (double p : {0.05, 0.5, 1.0}) {
    cuemu::set_preempt(p);
    for (unsigned long long v : ticket_sums(false, 4)) EXPECT_EQ(v, kTicketSum) << "preempt " << p;
  }
  EXPECT_GT(cuemu::counts().preemptions, preemptions0);
  // One block at a time there is nothing to run in between: no preemption.
  const std::uint64_t preemptions1 = cuemu::counts().preemptions;
  unsigned long long *sum, *out;
  unsigned* ticket;
  cudaMalloc(reinterpret_cast<void**>(&sum), sizeof *sum);
  cudaMalloc(reinterpret_cast<void**>(&out), sizeof *out);
  cudaMalloc(reinterpret_cast<void**>(&ticket), sizeof *ticket);
  cudaMemset(sum, 0, sizeof *sum);
  cudaMemset(ticket, 0, sizeof *ticket);
  const unsigned resident = cuemu::set_resident_blocks(1);
  IP_LAUNCH(4, 64, 0, nullptr, ticket_sum_kernel)(sum, ticket, out, 2, 8, true);
  cuemu::set_resident_blocks(resident);
  unsigned long long v = 0;
  cudaMemcpy(&v, out, sizeof v, cudaMemcpyDeviceToHost);
  EXPECT_EQ(v, kTicketSum);
  EXPECT_EQ(cuemu::counts().preemptions, preemptions1);
  cudaFree(sum);
  cudaFree(out);
  cudaFree(ticket);
  cuemu::set_preempt(before);
}

// Lanes of one warp exchange values through shared memory, with or without __syncwarp between the
// writes and the reads (without it, a race on a GPU with independent thread scheduling).
__global__ void warp_exchange_kernel(int* out, bool sync) {
  __shared__ int s[32];
  const int lane = static_cast<int>(threadIdx.x);
  s[lane] = lane * 3;
  if (sync) __syncwarp();
  out[lane] = s[31 - lane];
}

// Every thread adds into one of four shared counters (atomics: no race among themselves); after the
// barrier thread 0 reads them.
__global__ void shared_histogram_kernel(int* out) {
  __shared__ int bins[4];
  if (threadIdx.x < 4) bins[threadIdx.x] = 0;
  __syncthreads();
  atomicAdd(&bins[threadIdx.x % 4], 1);
  __syncthreads();
  if (threadIdx.x == 0)
    for (int b = 0; b < 4; ++b) out[blockIdx.x * 4 + b] = bins[b];
}

// A shuffle orders no memory: a lane that writes shared memory, shuffles, and reads another lane's slot
// races with that lane's write.
__global__ void shuffle_is_no_barrier_kernel(int* out) {
  __shared__ int s[32];
  const int lane = static_cast<int>(threadIdx.x);
  s[lane] = lane;
  const int v = __shfl_sync(0xFFFFFFFFu, lane, (lane + 1) % 32);
  out[lane] = s[v];
}

// What the race check accepts: barriers, __syncwarp and atomics, in every build (the values are checked
// here, mirror_kernel's in BarriersOrderSharedMemoryInEveryBlock; in the race-check build, any report
// fails the program).
TEST(Cuemu, BarriersSyncwarpAndAtomicsOrderEveryAccess) {
  int* d = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&d), 3 * 96 * sizeof(int)), cudaSuccess);
  IP_LAUNCH(3, 96, 96 * sizeof(int), nullptr, mirror_kernel)(d);
  IP_LAUNCH(1, 32, 0, nullptr, warp_exchange_kernel)(d, true);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  std::vector<int> h(32);
  cudaMemcpy(h.data(), d, h.size() * sizeof(int), cudaMemcpyDeviceToHost);
  for (int l = 0; l < 32; ++l) EXPECT_EQ(h[l], (31 - l) * 3);
  IP_LAUNCH(5, 100, 0, nullptr, shared_histogram_kernel)(d);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  h.resize(20);
  cudaMemcpy(h.data(), d, h.size() * sizeof(int), cudaMemcpyDeviceToHost);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(h[i], 25);
  cudaFree(d);
}

// In the race-check build a missing barrier is reported where it is, whatever order the threads ran in
// (the plain build shows only what the order exposes: AMissingBarrierShowsAsWrongResults).
TEST(CuemuDeathTest, RacesWithoutABarrierAreReportedByTheRaceCheck) {
  if (!kRaceCheck) GTEST_SKIP() << "needs the race-check build (make test-race)";
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  int* d = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&d), 64 * sizeof(int)), cudaSuccess);
  // The child stops at its first report (the parent's own options are kept for the rest).
  const char* old = std::getenv("TSAN_OPTIONS");
  const std::string saved = old ? old : "";
  setenv("TSAN_OPTIONS", (saved + " halt_on_error=1").c_str(), 1);
  EXPECT_DEATH(IP_LAUNCH(1, 64, 64 * sizeof(int), nullptr, mirror_without_barrier_kernel)(d),
               "ThreadSanitizer: data race.*mirror_without_barrier_kernel");
  EXPECT_DEATH(IP_LAUNCH(1, 32, 0, nullptr, warp_exchange_kernel)(d, false),
               "ThreadSanitizer: data race.*warp_exchange_kernel");
  EXPECT_DEATH(IP_LAUNCH(1, 32, 0, nullptr, shuffle_is_no_barrier_kernel)(d),
               "ThreadSanitizer: data race.*shuffle_is_no_barrier_kernel");
  if (old)
    setenv("TSAN_OPTIONS", saved.c_str(), 1);
  else
    unsetenv("TSAN_OPTIONS");
  cudaFree(d);
}

// Blocks resident at once are unordered in the race-check build but for device-memory atomics and fences:
// a ticket taken before the writes, or a missing fence on the writers' or the reader's side, is reported
// whatever order the blocks ran in and without preemption (the plain build shows an early ticket only when
// a turn ends at the right atomic, PreemptionAtAtomicsShowsATicketTakenTooEarly, and a missing fence
// never). With both fences in place nothing is reported and the sums are whole.
TEST(CuemuDeathTest, RacesBetweenResidentBlocksAreReportedByTheRaceCheck) {
  const std::vector<int> got = ticket_gather(false, true, true);
  for (int t = 0; t < 64; ++t) EXPECT_EQ(got[t], 6000 + 4 * t) << t;
  for (unsigned long long v : ticket_sums(false, 4)) EXPECT_EQ(v, kTicketSum);
  if (!kRaceCheck) GTEST_SKIP() << "needs the race-check build (make test-race)";
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const double preempt = cuemu::set_preempt(0);
  const char* old = std::getenv("TSAN_OPTIONS");
  const std::string saved = old ? old : "";
  setenv("TSAN_OPTIONS", (saved + " halt_on_error=1").c_str(), 1);
  EXPECT_DEATH(ticket_gather(true, true, true), "ThreadSanitizer: data race.*ticket_gather_kernel");
  EXPECT_DEATH(ticket_gather(false, /*writer_fence=*/false, true), "ThreadSanitizer: data race.*ticket_gather_kernel");
  EXPECT_DEATH(ticket_gather(false, true, /*reader_fence=*/false), "ThreadSanitizer: data race.*ticket_gather_kernel");
  if (old)
    setenv("TSAN_OPTIONS", saved.c_str(), 1);
  else
    unsetenv("TSAN_OPTIONS");
  cuemu::set_preempt(preempt);
}

// The memory-access profile needs kernels built for it (make mem-profile); this program's are not.
TEST(CuemuDeathTest, TheMemoryProfileRefusesKernelsNotInstrumented) {
  EXPECT_FALSE(cuemu::memprof_instrumented());
  EXPECT_DEATH(cuemu::memprof_enable(true), "not instrumented");
}

}  // namespace
