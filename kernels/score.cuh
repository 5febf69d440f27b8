// Multi-head index scoring kernels (launcher: kernels/score.cu). s(e) = sum_j h_j max(0, q_j . x_e),
// x_e = decode(row_e) * scale_e (core/quant.h); maxmin: the Quest bound sum_d max(q_d hi_d, q_d lo_d)
// per head over rows 2e (max) and 2e+1 (min). Entry e belongs to request segment_of(entry_offset, e)
// and is scored against that request's query.
//
// Two paths:
//   score_cuda_core_kernel (compile-time D) and score_generic_kernel (any D): fp32 math on CUDA cores
//     (ScoreMath::fp32). The first scores 4-16 entries per warp step (about 2 KiB of rows in flight), lane
//     l owning D/32 consecutive elements of each, and sums the entries' dot products over the warp
//     together; the second scores one entry per warp, lane l owning elements l, l+32, ... Heads combined
//     in order j = 0..H-1 as on the CPU. score_cuda_core_pipelined_kernel (an experiment, D = 128): the
//     first's steps with the next step's rows loaded before the current step is scored.
//   score_mma_kernel: tensor cores, mma.sync m16n8k16 bf16 -> fp32. M = entries, N = heads (padded to
//     8 * NT), K = D. The dot product is a sum over d, so K may be permuted as long as rows and queries
//     use the same permutation: in a chunk of KC = 16*C elements, thread t of a quad loads the 4*C
//     consecutive elements [4Ct, 4Ct+4C) as one 16-byte load, and uses elements 4i..4i+3 of them as
//     its logical k = (2t, 2t+1, 2t+8, 2t+9) of k-step i. The query of the current request is staged in
//     shared memory already in fragment order (conflict-free 16-byte reads), hi and lo bf16 parts. bf16x3
//     (fp32/fp16 rows) adds a third mma per step: the rows' bf16 residuals times the query's hi part.
//   score_mma_f16_kernel: the same kernel body with mma.sync m16n8k16 f16 -> fp32 (ScoreMath f16x2, f16) for
//     rows exact in f16 (fp16, int8, fp8), which enter the mma as stored (fp8: one cvt.rn.f16x2.e4m3x2 a
//     pair on sm_89+). Each head's query is scaled by a power of two (core/score_math.h f16_query_factor)
//     before its f16 hi and lo parts are taken, and its dot products are scaled back in the epilogue. On
//     sm_90 an fp8 x fp8 mma.sync (m16n8k32 e4m3) is no faster: ptxas lowers it to these conversions and two
//     f16 HMMA.16816 (CUDA 13.0, read from the SASS on 2026-12-07); fp8 tensor-core rates need wgmma.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

#include "core/numeric.h"
#include "core/quant.h"
#include "core/score_math.h"
#include "core/segments.h"
#include "kernels/batch.h"
#include "kernels/half_decode.cuh"
#include "kernels/launch.h"
#include "kernels/warp_sums.cuh"

namespace ip::cuda::detail {

struct ScoreParams {
  int requests;
  const long long* entry_offset;
  long long entries;
  const unsigned char* rows;
  const float* scales;
  int dim;
  const float* queries;
  const float* head_weights;
  int heads;
  float* scores;
  bool split;       // mma path: hi + lo query parts (bf16x2, bf16x3) or hi only (bf16)
  bool split_rows;  // mma path, fp32/fp16 rows: hi + lo row parts too (bf16x3)
  // 0, from the launcher: a value the compiler cannot know, to make the first mma of a load stage depend
  // on every load of the stage (score_mma_kernel).
  std::uint32_t opaque_zero;
};

// ---- element decoding ----
template <Precision P>
struct Elem;
template <>
struct Elem<Precision::fp32> {
  static constexpr int bytes = 4;
  static __device__ __forceinline__ float decode(const unsigned char* p, int i) { return reinterpret_cast<const float*>(p)[i]; }
};
template <>
struct Elem<Precision::fp16> {  // kernels/half_decode.cuh: one conversion instruction on the device
  static constexpr int bytes = 2;
  static __device__ __forceinline__ float decode(const unsigned char* p, int i) {
    return fp16_bits_to_float(reinterpret_cast<const std::uint16_t*>(p)[i]);
  }
};
template <>
struct Elem<Precision::bf16> {
  static constexpr int bytes = 2;
  static __device__ __forceinline__ float decode(const unsigned char* p, int i) {
    return bf16_to_float(reinterpret_cast<const std::uint16_t*>(p)[i]);
  }
};
template <>
struct Elem<Precision::int8> {
  static constexpr int bytes = 1;
  static __device__ __forceinline__ float decode(const unsigned char* p, int i) {
    return static_cast<float>(reinterpret_cast<const std::int8_t*>(p)[i]);
  }
};
// Two e4m3 codes (element i in the low byte, i + 1 in the high byte) to two floats, exactly. On sm_89
// and newer one cvt.rn.f16x2.e4m3x2 (every e4m3 value is a half) and two half -> float conversions
// replace core/numeric.h's branchy decode (about 15 instructions per element): fp8 scoring took 1.6-2.7x
// the bf16 time on an H200 before (kernel_bench, 2026-12-04), and about the same time after. The two agree
// on every code but the NaNs 0x7F and 0xFF (a NaN either way), which the quantizer never writes (test
// gpu.Score.Fp8PairDecodeEqualsTheSoftwareDecode checks all 65536 pairs).
__device__ __forceinline__ float2 fp8x2_to_float2(std::uint16_t two) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890 && !defined(IP_CUEMU)
  std::uint32_t h2;
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(h2) : "h"(two));
  float lo, hi;
  asm("cvt.f32.f16 %0, %1;" : "=f"(lo) : "h"(static_cast<std::uint16_t>(h2 & 0xFFFFu)));
  asm("cvt.f32.f16 %0, %1;" : "=f"(hi) : "h"(static_cast<std::uint16_t>(h2 >> 16)));
  return make_float2(lo, hi);
#else
  return make_float2(fp8e4m3_to_float(static_cast<std::uint8_t>(two & 0xFFu)),
                     fp8e4m3_to_float(static_cast<std::uint8_t>(two >> 8)));
#endif
}

template <>
struct Elem<Precision::fp8> {
  static constexpr int bytes = 1;
  static __device__ __forceinline__ float decode(const unsigned char* p, int i) { return fp8e4m3_to_float(p[i]); }
  // Elements i and i + 1 (i even: a 2-byte aligned read).
  static __device__ __forceinline__ float2 decode2(const unsigned char* p, int i) {
    return fp8x2_to_float2(reinterpret_cast<const std::uint16_t*>(p)[i / 2]);
  }
};

template <Precision P>
inline constexpr bool kHasScale = P == Precision::int8 || P == Precision::fp8;

// N bytes from an N-aligned address into `out` (N a power of two up to 32).
template <int N>
__device__ __forceinline__ void load_aligned(const unsigned char* p, unsigned char* out) {
  if constexpr (N >= 16) {
#pragma unroll
    for (int i = 0; i < N / 16; ++i) reinterpret_cast<uint4*>(out)[i] = __ldg(reinterpret_cast<const uint4*>(p) + i);
  } else if constexpr (N == 8) {
    *reinterpret_cast<uint2*>(out) = __ldg(reinterpret_cast<const uint2*>(p));
  } else if constexpr (N == 4) {
    *reinterpret_cast<unsigned*>(out) = __ldg(reinterpret_cast<const unsigned*>(p));
  } else if constexpr (N == 2) {
    *reinterpret_cast<unsigned short*>(out) = __ldg(reinterpret_cast<const unsigned short*>(p));
  } else {
    out[0] = __ldg(p);
  }
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xFFFFFFFFu, v, o);
  return v;
}

// ---- CUDA-core path ----

// Entries a warp scores per step at compile-time D: about 2 KiB of rows in flight per warp (4 entries of
// fp32 rows at D = 128, where an H200 reached 77-94% of its copy bandwidth on 2026-12-04; fp8 and bf16 rows
// at 4 entries a step took as long as fp32 ones, 19% and 39%), 4 to 16, and the lane's share of the rows
// at most 64 bytes (registers).
// maxmin (two rows an entry, the Quest baseline): 4 entries, as before; with more, ptxas spilled.
template <Precision P, int D, bool MAXMIN>
__host__ __device__ constexpr int core_entries_per_warp() {
  constexpr int row_bytes = D * Elem<P>::bytes;
  int n = 4;
  while (!MAXMIN && n < 16 && 2 * n * row_bytes <= 2048 && 2 * n * row_bytes / 32 <= 64) n *= 2;
  return n;
}

// Decoded element v (of V) of a lane's share of a row.
template <Precision P, int V>
__device__ __forceinline__ float core_elem(const unsigned char (&b)[V * Elem<P>::bytes], int v) {
  if constexpr (P == Precision::fp8) {
    const float2 f = Elem<P>::decode2(b, v & ~1);
    return (v & 1) ? f.y : f.x;
  } else {
    return Elem<P>::decode(b, v);
  }
}

// A lane's V consecutive query elements in as few loads as their alignment allows: q is aligned to
// 4 W bytes, W the widest of 4, 2 and 1 that divides V (the query is 16-byte aligned, score.cu checks,
// and a lane's share starts V floats after the previous lane's). One float4 a lane is one fully used
// 512-byte request a warp where V scalar loads each touch 4 V sectors for 128 bytes (the memory-access
// profile, make mem-profile, counted 16 sectors a request for them at D = 128).
template <int V>
__device__ __forceinline__ void load_query(const float* q, float (&out)[V]) {
  if constexpr (V % 4 == 0) {
#pragma unroll
    for (int i = 0; i < V / 4; ++i) {
      const float4 f = __ldg(reinterpret_cast<const float4*>(q) + i);
      out[4 * i] = f.x;
      out[4 * i + 1] = f.y;
      out[4 * i + 2] = f.z;
      out[4 * i + 3] = f.w;
    }
  } else if constexpr (V % 2 == 0) {
#pragma unroll
    for (int i = 0; i < V / 2; ++i) {
      const float2 f = __ldg(reinterpret_cast<const float2*>(q) + i);
      out[2 * i] = f.x;
      out[2 * i + 1] = f.y;
    }
  } else {
#pragma unroll
    for (int i = 0; i < V; ++i) out[i] = __ldg(q + i);
  }
}

// One head of N entries for a lane: its share of each dot product (or of each Quest bound).
// query(u): head j of the query of entry u.
template <Precision P, int D, bool MAXMIN, int N, class Query>
__device__ __forceinline__ void core_parts(const unsigned char (&b)[N][MAXMIN ? 2 : 1][D / 32 * Elem<P>::bytes],
                                           const float (&scl)[N][2], Query&& query, int lane, float (&part)[N]) {
  constexpr int V = D / 32;
#pragma unroll
  for (int u = 0; u < N; ++u) {
    float acc = 0.0f;
    float qv[V];
    load_query<V>(query(u) + lane * V, qv);
#pragma unroll
    for (int v = 0; v < V; ++v) {
      const float qd = qv[v];
      if constexpr (MAXMIN) {
        float hi = core_elem<P, V>(b[u][0], v), lo = core_elem<P, V>(b[u][1], v);
        if constexpr (kHasScale<P>) {
          hi *= scl[u][0];
          lo *= scl[u][1];
        }
        acc += box_upper_bound(&qd, &hi, &lo, 1);
      } else {
        acc = fmaf(qd, core_elem<P, V>(b[u][0], v), acc);  // explicit: the host compiler (emulator) contracts case by case
      }
    }
    part[u] = acc;
  }
}

// Resident blocks of 256 threads asked of ptxas (__launch_bounds__): 3 (at most 85 registers, 24 warps
// an SM streaming rows); maxmin, and fp8 where e4m3 is decoded in software (before sm_89), 1 and 2: at 3
// these spilled 56-296 bytes.
template <Precision P, bool MAXMIN>
__host__ __device__ constexpr int core_min_blocks() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 890
  if (P == Precision::fp8) return MAXMIN ? 1 : 2;
#endif
  return MAXMIN ? 1 : 3;
}

// Compile-time D (a multiple of 32, rows 16-byte aligned): a warp scores N consecutive entries per step.
// Lane l holds bytes of elements [l V, l V + V) of each row, raw (decoded per head: the rows stay small
// in registers, so more of them are in flight). Per head, the N dot products are summed over the warp
// together (warp_sums); each lane then holds one entry's, scales it (not maxmin: the scale is a factor of
// the dot product) and adds its head term, heads in order j = 0..H-1 as on the CPU. When the N entries
// belong to one request (every step but those at request boundaries) the query is loaded once per head.
//
// What a warp loads for one step, entries e0 .. e0 + N - 1 (a tail repeats the last entry): the lane's
// share of their rows, raw, and their scales.
template <Precision P, int D, bool MAXMIN>
struct CoreStep {
  static constexpr int N = core_entries_per_warp<P, D, MAXMIN>();
  static constexpr int V = D / 32;
  static constexpr int R = MAXMIN ? 2 : 1;
  alignas(16) unsigned char b[N][R][V * Elem<P>::bytes];
  float scl[N][2];       // maxmin: every row's scale (the bound is not linear in it)
  float sc_mine = 1.0f;  // not maxmin: the scale of the lane's entry (warp_sums_entry)
};

template <Precision P, int D, bool MAXMIN>
__device__ __forceinline__ void load_core_step(const ScoreParams& p, long long e0, int lane, int mine,
                                               CoreStep<P, D, MAXMIN>& x) {
  using E = Elem<P>;
  using S = CoreStep<P, D, MAXMIN>;
  const long long e_last = min(e0 + S::N, p.entries) - 1;
#pragma unroll
  for (int u = 0; u < S::N; ++u)
#pragma unroll
    for (int k = 0; k < S::R; ++k) {
      const long long row = min(e0 + u, e_last) * S::R + k;
      load_aligned<S::V * E::bytes>(p.rows + (row * D + lane * S::V) * E::bytes, x.b[u][k]);
    }
#pragma unroll
  for (int u = 0; u < S::N; ++u)
#pragma unroll
    for (int k = 0; k < 2; ++k) x.scl[u][k] = 1.0f;
  x.sc_mine = 1.0f;
  if constexpr (kHasScale<P>) {
    if constexpr (MAXMIN) {
#pragma unroll
      for (int u = 0; u < S::N; ++u)
#pragma unroll
        for (int k = 0; k < S::R; ++k) x.scl[u][k] = __ldg(p.scales + min(e0 + u, e_last) * S::R + k);
    } else {
      x.sc_mine = __ldg(p.scales + min(e0 + mine, e_last));
    }
  }
}

// Scores a loaded step and writes its N scores.
template <Precision P, int D, bool MAXMIN>
__device__ __forceinline__ void score_core_step(const ScoreParams& p, long long e0, int lane, int mine,
                                                const CoreStep<P, D, MAXMIN>& x) {
  constexpr int N = CoreStep<P, D, MAXMIN>::N;
  const long long e_last = min(e0 + N, p.entries) - 1;
  const int H = p.heads;
  const int r0 = segment_of(p.entry_offset, p.requests, e0);
  const int r_end = segment_of(p.entry_offset, p.requests, e_last);
  const int r_mine = r0 == r_end ? r0 : segment_of(p.entry_offset, p.requests, min(e0 + mine, e_last));
  const float* hw = p.head_weights + static_cast<long long>(r_mine) * H;
  // The lane's score over the heads; query(u, j): head j of the query of entry u.
  auto heads = [&](auto&& query) {
    float s = 0.0f;
    for (int j = 0; j < H; ++j) {
      float part[N];
      core_parts<P, D, MAXMIN, N>(
          x.b, x.scl, [&](int u) { return query(u, j); }, lane, part);
      float dot = warp_sums<N>(part, lane);
      if constexpr (kHasScale<P> && !MAXMIN) dot *= x.sc_mine;
      const float h = __ldg(hw + j);
      s += head_weighted_relu(&dot, &h, 1);
    }
    return s;
  };
  float s;
  if (r0 == r_end) {  // one request: one query
    const float* q = p.queries + static_cast<long long>(r0) * H * D;
    s = heads([&](int, int j) { return q + static_cast<long long>(j) * D; });
  } else {
    int req[N];
#pragma unroll
    for (int u = 0; u < N; ++u) req[u] = segment_of(p.entry_offset, p.requests, min(e0 + u, e_last));
    s = heads([&](int u, int j) { return p.queries + (static_cast<long long>(req[u]) * H + j) * D; });
  }
  // 32 / N lanes hold each entry's score; the first of them writes it.
  if ((lane & (32 / N - 1)) == 0 && e0 + mine < p.entries) p.scores[e0 + mine] = s;
}

template <Precision P, int D, bool MAXMIN>
__global__ void __launch_bounds__(256, (core_min_blocks<P, MAXMIN>())) score_cuda_core_kernel(ScoreParams p) {
  static_assert(D > 0 && D % 32 == 0, "compile-time dim");
  using S = CoreStep<P, D, MAXMIN>;
  const int lane = threadIdx.x & 31;
  const int mine = warp_sums_entry<S::N>(lane);
  const long long warps = static_cast<long long>(gridDim.x) * (blockDim.x >> 5);
  for (long long e0 = (static_cast<long long>(blockIdx.x) * (blockDim.x >> 5) + (threadIdx.x >> 5)) * S::N; e0 < p.entries;
       e0 += warps * S::N) {
    S x;
    load_core_step(p, e0, lane, mine, x);
    score_core_step(p, e0, lane, mine, x);
  }
}

// The pipelined form (ScoreArgs::pipelined, an experiment; D = 128, not maxmin): the same steps, but a
// warp issues the loads of its next step before it scores the current one, so its rows stay in flight
// while it computes. In the plain kernel a warp's loads are in flight only between its steps'
// arithmetic (its decode, dot products, warp sums and store), and other warps' loads cover that time
// only as far as the SM holds them. Two steps' rows in registers: 2 blocks an SM (at most 128 registers).
// Where fp8 is decoded in software (before sm_89) two steps spilled 292 B at 128 registers (sm_80): there
// the kernel runs the plain steps.
template <Precision P>
__host__ __device__ constexpr bool core_pipelines() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 890
  if (P == Precision::fp8) return false;
#endif
  return true;
}

template <Precision P, int D>
__global__ void __launch_bounds__(256, 2) score_cuda_core_pipelined_kernel(ScoreParams p) {
  static_assert(D > 0 && D % 32 == 0, "compile-time dim");
  using S = CoreStep<P, D, false>;
  const int lane = threadIdx.x & 31;
  const int mine = warp_sums_entry<S::N>(lane);
  const long long stride = static_cast<long long>(gridDim.x) * (blockDim.x >> 5) * S::N;
  long long e0 = (static_cast<long long>(blockIdx.x) * (blockDim.x >> 5) + (threadIdx.x >> 5)) * S::N;
  if (e0 >= p.entries) return;
  if constexpr (!core_pipelines<P>()) {
    for (; e0 < p.entries; e0 += stride) {
      S x;
      load_core_step(p, e0, lane, mine, x);
      score_core_step(p, e0, lane, mine, x);
    }
    return;
  }
  // Two sets of registers used in turn (a copy `cur = next` at the end of each step made ptxas wait for
  // the first step's loads before it issued the second's, to move them).
  S x0, x1;
  load_core_step(p, e0, lane, mine, x0);
  for (;;) {
    const long long e1 = e0 + stride;
    if (e1 < p.entries) load_core_step(p, e1, lane, mine, x1);  // warp-uniform
    score_core_step(p, e0, lane, mine, x0);
    if (e1 >= p.entries) return;
    const long long e2 = e1 + stride;
    if (e2 < p.entries) load_core_step(p, e2, lane, mine, x0);
    score_core_step(p, e1, lane, mine, x1);
    if (e2 >= p.entries) return;
    e0 = e2;
  }
}

// Any dim (rows need only element alignment): a warp per entry, lane l owns elements l, l + 32, ...
template <Precision P, bool MAXMIN>
__global__ void __launch_bounds__(256) score_generic_kernel(ScoreParams p) {
  using E = Elem<P>;
  constexpr int R = MAXMIN ? 2 : 1;
  const int lane = threadIdx.x & 31;
  const long long warps = static_cast<long long>(gridDim.x) * (blockDim.x >> 5);
  const int dim = p.dim;
  const int H = p.heads;
  for (long long e = static_cast<long long>(blockIdx.x) * (blockDim.x >> 5) + (threadIdx.x >> 5); e < p.entries;
       e += warps) {
    const int r = segment_of(p.entry_offset, p.requests, e);
    const float* q = p.queries + static_cast<long long>(r) * H * dim;
    const float* hw = p.head_weights + static_cast<long long>(r) * H;
    const long long row = e * R;
    const float sc_hi = kHasScale<P> ? __ldg(p.scales + row) : 1.0f;
    const float sc_lo = kHasScale<P> ? __ldg(p.scales + row + R - 1) : 1.0f;
    float s = 0.0f;
    for (int j = 0; j < H; ++j) {
      const float* qj = q + static_cast<long long>(j) * dim;
      float part = 0.0f;
      for (int d = lane; d < dim; d += 32) {
        const float qd = __ldg(qj + d);
        float hi = E::decode(p.rows + row * dim * E::bytes, d);
        if constexpr (kHasScale<P>) hi *= sc_hi;
        if constexpr (MAXMIN) {
          float lo = E::decode(p.rows + (row + 1) * dim * E::bytes, d);
          if constexpr (kHasScale<P>) lo *= sc_lo;
          part += box_upper_bound(&qd, &hi, &lo, 1);
        } else {
          part += qd * hi;
        }
      }
      const float dot = warp_sum(part);
      const float h = __ldg(hw + j);
      s += head_weighted_relu(&dot, &h, 1);
    }
    if (lane == 0) p.scores[e] = s;
  }
}

// ---- tensor-core path ----
constexpr int kMmaWarps = 4;        // warps per block
constexpr int kMmaMTiles = 2;       // 16-entry m-tiles per warp (share the query fragments)
constexpr int kMmaEntriesPerBlock = kMmaWarps * kMmaMTiles * 16;
constexpr int kMmaLoadChunks = 2;  // K-chunks (16 bytes per thread and row) loaded before any is used, NT <= 4

// x - bf16(x): what a bf16 hi part leaves (the lo part of the bf16x2 and bf16x3 splits).
__device__ __forceinline__ float bf16_residual(float x) { return x - bf16_to_float(bf16_from_float(x)); }

__device__ __forceinline__ std::uint32_t pack_bf16(float lo, float hi) {
  return static_cast<std::uint32_t>(bf16_from_float(lo)) | (static_cast<std::uint32_t>(bf16_from_float(hi)) << 16);
}

__device__ __forceinline__ void mma_bf16(float (&c)[4], std::uint32_t a0, std::uint32_t a1, std::uint32_t a2,
                                         std::uint32_t a3, std::uint32_t b0, std::uint32_t b1) {
#if defined(IP_CUEMU)
  ::cuemu::mma_m16n8k16_bf16(c, a0, a1, a2, a3, b0, b1);  // the CPU emulator (emu/)
#else
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
#endif
}

__device__ __forceinline__ void mma_f16(float (&c)[4], std::uint32_t a0, std::uint32_t a1, std::uint32_t a2,
                                        std::uint32_t a3, std::uint32_t b0, std::uint32_t b1) {
#if defined(IP_CUEMU)
  ::cuemu::mma_m16n8k16_f16(c, a0, a1, a2, a3, b0, b1);
#else
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
#endif
}

// float -> f16 bits, round to nearest even (subnormals kept): one cvt on the device, core/numeric.h's
// software rounding (the same function) on the emulator.
__device__ __forceinline__ std::uint16_t f16_rn(float x) {
#if defined(__CUDA_ARCH__) && !defined(IP_CUEMU)
  std::uint16_t h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(x));
  return h;
#else
  return fp16_from_float(x);
#endif
}

__device__ __forceinline__ std::uint32_t pack_f16(float lo, float hi) {
  return static_cast<std::uint32_t>(f16_rn(lo)) | (static_cast<std::uint32_t>(f16_rn(hi)) << 16);
}

// Rows whose every stored value is exact in f16 (fp16; int8 codes; fp8 e4m3, whose subnormals reach 2^-9,
// f16's 2^-24): the tensor-core kernel takes f16 parts for them (ScoreMath f16x2, f16).
template <Precision P>
inline constexpr bool kF16Exact = P == Precision::fp16 || P == Precision::int8 || P == Precision::fp8;

// Elements per thread per 16-byte load (4*C), so C k-steps per load.
template <Precision P>
inline constexpr int kMmaC = 16 / Elem<P>::bytes / 4;

// Shared memory of the mma kernel: query fragments (NT*8 heads x D) as uint4 {hi0, hi1, lo0, lo1}
// per (n-tile, k-step, lane), then NT*8 head weights; with f16 parts also NT*8 inverse query factors.
template <int D, int NT, bool F16 = false>
inline constexpr int kMmaSmemBytes = NT * (D / 16) * 32 * 16 + NT * 8 * 4 * (F16 ? 2 : 1);

// Stages the query and head weights of request r into shared memory (fragment order). With f16 parts
// (F16), each head's query is first scaled by core/score_math.h f16_query_factor (a power of two from the
// head's largest magnitude, found by one warp a head) and the inverse factors go to qinv; the caller's
// barrier after this publishes them with the fragments.
template <Precision P, int D, int NT, bool F16>
__device__ void stage_query(const ScoreParams& p, int r, uint4* qf, float* hws, float* qinv) {
  constexpr int C = kMmaC<P>;
  constexpr int KC = 16 * C;
  constexpr int KS = D / 16;
  const float* q = p.queries + static_cast<long long>(r) * p.heads * D;
  if constexpr (F16) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    for (int n = warp; n < NT * 8; n += blockDim.x >> 5) {
      float m = 0.0f;
      if (n < p.heads) {
        float v[D / 32];
        load_query<D / 32>(q + static_cast<long long>(n) * D + lane * (D / 32), v);
#pragma unroll
        for (int i = 0; i < D / 32; ++i) m = fmaxf(m, fabsf(v[i]));
      }
#pragma unroll
      for (int o = 16; o >= 1; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xFFFFFFFFu, m, o));
      float inv;
      const float f = f16_query_factor(m, &inv);
      if (lane == 0) {
        hws[n] = f;  // the factor, until the head weights replace it below
        qinv[n] = inv;
      }
    }
    __syncthreads();
  }
  for (int idx = threadIdx.x; idx < NT * KS * 32; idx += blockDim.x) {
    const int lane = idx & 31, s = (idx >> 5) % KS, nt = (idx >> 5) / KS;
    const int n = nt * 8 + (lane >> 2), t = lane & 3;
    const int d0 = (s / C) * KC + t * 4 * C + (s % C) * 4;
    float v[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    if (n < p.heads) load_query<4>(q + static_cast<long long>(n) * D + d0, v);  // (d0: a multiple of 4)
    if constexpr (F16) {
      const float f = hws[n];
      float hi[4], lo[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        hi[i] = v[i] * f;  // a power of two: exact
        lo[i] = p.split ? hi[i] - fp16_to_float(f16_rn(hi[i])) : 0.0f;
      }
      qf[idx] = make_uint4(pack_f16(hi[0], hi[1]), pack_f16(hi[2], hi[3]), pack_f16(lo[0], lo[1]), pack_f16(lo[2], lo[3]));
    } else {
      float lo[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) lo[i] = p.split ? bf16_residual(v[i]) : 0.0f;
      qf[idx] = make_uint4(pack_bf16(v[0], v[1]), pack_bf16(v[2], v[3]), pack_bf16(lo[0], lo[1]), pack_bf16(lo[2], lo[3]));
    }
  }
  if constexpr (F16) __syncthreads();  // every factor read before the weights overwrite hws
  for (int n = threadIdx.x; n < NT * 8; n += blockDim.x)
    hws[n] = n < p.heads ? __ldg(p.head_weights + static_cast<long long>(r) * p.heads + n) : 0.0f;
}

// Converts 4 consecutive stored elements (starting at element i of buf) to two bf16x2 registers.
template <Precision P>
__device__ __forceinline__ void to_bf16x2(const unsigned char* buf, int i, std::uint32_t& r01, std::uint32_t& r23) {
  using E = Elem<P>;
  if constexpr (P == Precision::bf16) {
    const std::uint16_t* h = reinterpret_cast<const std::uint16_t*>(buf) + i;
    r01 = h[0] | (static_cast<std::uint32_t>(h[1]) << 16);
    r23 = h[2] | (static_cast<std::uint32_t>(h[3]) << 16);
  } else if constexpr (P == Precision::fp8) {
    // fp8 decodes exactly into bf16 (4 significant bits), so the bf16 of the decoded float is its upper
    // half: the same bits as pack_bf16's rounding, without it.
    const float2 a = E::decode2(buf, i), b = E::decode2(buf, i + 2);
    r01 = (f32_bits(a.x) >> 16) | (f32_bits(a.y) & 0xFFFF0000u);
    r23 = (f32_bits(b.x) >> 16) | (f32_bits(b.y) & 0xFFFF0000u);
  } else {
    // int8 decodes exactly into bf16 too (8 significant bits); fp16/fp32 round (bf16 math).
    r01 = pack_bf16(E::decode(buf, i), E::decode(buf, i + 1));
    r23 = pack_bf16(E::decode(buf, i + 2), E::decode(buf, i + 3));
  }
}

// bf16x3 (fp32/fp16 rows): the same 4 elements decoded once into hi parts (as to_bf16x2) and their
// residuals (lo parts), each as two bf16x2 registers.
template <Precision P>
__device__ __forceinline__ void split_bf16x2(const unsigned char* buf, int i, std::uint32_t& h01, std::uint32_t& h23,
                                             std::uint32_t& l01, std::uint32_t& l23) {
  using E = Elem<P>;
  float x[4];
#pragma unroll
  for (int k = 0; k < 4; ++k) x[k] = E::decode(buf, i + k);
  h01 = pack_bf16(x[0], x[1]);
  h23 = pack_bf16(x[2], x[3]);
  l01 = pack_bf16(bf16_residual(x[0]), bf16_residual(x[1]));
  l23 = pack_bf16(bf16_residual(x[2]), bf16_residual(x[3]));
}

// f16 parts (kF16Exact rows): 4 consecutive stored elements (starting at element i of buf) as two f16x2
// registers, exactly. fp8 on sm_89 and newer: one cvt.rn.f16x2.e4m3x2 a pair (element i in the low half,
// as fp8x2_to_float2 reads it; that order passed gpu.Score.Fp8PairDecodeEqualsTheSoftwareDecode on an H200),
// where the bf16 parts took that cvt, two half -> float conversions and a repack.
template <Precision P>
__device__ __forceinline__ void to_f16x2(const unsigned char* buf, int i, std::uint32_t& r01, std::uint32_t& r23) {
  static_assert(kF16Exact<P>, "rows exact in f16 only");
  if constexpr (P == Precision::fp16) {
    const std::uint16_t* h = reinterpret_cast<const std::uint16_t*>(buf) + i;
    r01 = h[0] | (static_cast<std::uint32_t>(h[1]) << 16);
    r23 = h[2] | (static_cast<std::uint32_t>(h[3]) << 16);
  } else if constexpr (P == Precision::fp8) {
    const std::uint16_t* two = reinterpret_cast<const std::uint16_t*>(buf) + i / 2;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890 && !defined(IP_CUEMU)
    asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(r01) : "h"(two[0]));
    asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(r23) : "h"(two[1]));
#else
    r01 = pack_f16(fp8e4m3_to_float(static_cast<std::uint8_t>(two[0] & 0xFFu)),
                   fp8e4m3_to_float(static_cast<std::uint8_t>(two[0] >> 8)));
    r23 = pack_f16(fp8e4m3_to_float(static_cast<std::uint8_t>(two[1] & 0xFFu)),
                   fp8e4m3_to_float(static_cast<std::uint8_t>(two[1] >> 8)));
#endif
  } else {  // int8 codes: small integers
    const std::int8_t* c = reinterpret_cast<const std::int8_t*>(buf) + i;
    r01 = pack_f16(static_cast<float>(c[0]), static_cast<float>(c[1]));
    r23 = pack_f16(static_cast<float>(c[2]), static_cast<float>(c[3]));
  }
}

// Block: kMmaWarps warps; each warp scores kMmaMTiles * 16 consecutive entries against all heads.
// Blocks take contiguous ranges of tiles and restage the query only when the request changes.
// F16: f16 parts (kF16Exact rows; the query scaled per head, qinv), else bf16 parts.
template <Precision P, int D, int NT, bool F16>
__device__ __forceinline__ void score_mma_body(const ScoreParams& p) {
  static_assert(!F16 || kF16Exact<P>, "f16 parts need rows exact in f16");
  using E = Elem<P>;
  constexpr int C = kMmaC<P>;
  constexpr int KC = 16 * C;
  constexpr int KS = D / 16;
  IP_DYNAMIC_SHARED(uint4, smem);
  uint4* qf = smem;
  float* hws = reinterpret_cast<float*>(smem + NT * KS * 32);
  float* qinv = hws + NT * 8;  // F16 only
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;

  const long long tiles = (p.entries + kMmaEntriesPerBlock - 1) / kMmaEntriesPerBlock;
  const long long tile_begin = tiles * blockIdx.x / gridDim.x, tile_end = tiles * (blockIdx.x + 1) / gridDim.x;
  int staged = -1;
  // Entries of the staged request: in shared memory, not in registers kept across the whole loop (ptxas
  // spilled at H = 64 with them). Written between the staging barriers, read only before the first one.
  __shared__ long long staged_lo, staged_hi;
  for (long long tile = tile_begin; tile < tile_end; ++tile) {
    const long long e0 = tile * kMmaEntriesPerBlock;
    const long long e_last = min(e0 + kMmaEntriesPerBlock, p.entries) - 1;
    // A tile inside the staged request needs no search and no load of the offsets (one request, or long
    // ones: every tile after a block's first).
    const bool inside = staged >= 0 && e0 >= staged_lo && e_last < staged_hi;
    const int r_first = inside ? staged : segment_of(p.entry_offset, p.requests, e0);
    const int r_last = inside ? staged : segment_of(p.entry_offset, p.requests, e_last);
    for (int r = r_first; r <= r_last; ++r) {
      const long long r_lo = r == staged ? staged_lo : __ldg(p.entry_offset + r);
      const long long r_hi = r == staged ? staged_hi : __ldg(p.entry_offset + r + 1);
      const long long lo_e = max(r_lo, e0), hi_e = min(r_hi, e_last + 1);
      if (lo_e >= hi_e) continue;  // empty request (uniform across the block)
      if (r != staged) {
        __syncthreads();  // every warp is done with the previous query
        stage_query<P, D, NT, F16>(p, r, qf, hws, qinv);
        if (threadIdx.x == 0) {
          staged_lo = r_lo;
          staged_hi = r_hi;
        }
        __syncthreads();
        staged = r;
      }
      const long long w0 = e0 + static_cast<long long>(warp) * kMmaMTiles * 16;
      if (w0 >= hi_e || w0 + kMmaMTiles * 16 <= lo_e) continue;  // warp-uniform: no shared sync below

      float acc[kMmaMTiles][NT][4];
#pragma unroll
      for (int m = 0; m < kMmaMTiles; ++m)
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
#pragma unroll
          for (int i = 0; i < 4; ++i) acc[m][nt][i] = 0.0f;

      // Rows g and g + 8 of each m-tile; out-of-range rows load zeros. Their scales are loaded here, with
      // the first rows, not after the mma loop (a memory round trip of its own).
      long long row[kMmaMTiles][2];
      bool valid[kMmaMTiles][2];
      float sc[kMmaMTiles][2];
#pragma unroll
      for (int m = 0; m < kMmaMTiles; ++m)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          row[m][h] = w0 + m * 16 + h * 8 + g;
          valid[m][h] = row[m][h] < p.entries;
          sc[m][h] = (kHasScale<P> && valid[m][h]) ? __ldg(p.scales + row[m][h]) : 1.0f;
        }

      // CL chunks are loaded before any is used: 16 * CL * 2 * kMmaMTiles bytes per thread in flight
      // (4 KiB per warp at CL = 2; a whole tile of fp8 or int8 rows at D = 128). At NT = 8 (H > 32) one:
      // the accumulators already hold 64 registers, and the second buffer would cost a resident block.
      constexpr int CL = NT >= 8 ? 1 : (D / KC < kMmaLoadChunks ? D / KC : kMmaLoadChunks);
      static_assert((D / KC) % CL == 0, "whole load stages");
#pragma unroll 1
      for (int c0 = 0; c0 < D / KC; c0 += CL) {
        alignas(16) unsigned char buf[CL][kMmaMTiles][2][16];
#pragma unroll
        for (int cl = 0; cl < CL; ++cl)
#pragma unroll
          for (int m = 0; m < kMmaMTiles; ++m)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
              if (valid[m][h])
                load_aligned<16>(p.rows + (row[m][h] * D + (c0 + cl) * KC + t * 4 * C) * E::bytes, buf[cl][m][h]);
              else
                *reinterpret_cast<uint4*>(buf[cl][m][h]) = make_uint4(0, 0, 0, 0);
            }
        // bf16 and fp8 rows at NT <= 2 (H <= 16, where the rows' latency rather than
        // the mma sets the time): every loaded word, masked by a zero the compiler cannot see through, goes
        // into the stage's first fragments, so the first mma depends on all the stage's loads. Without it
        // ptxas (CUDA 13.0, sm_90) issued the second chunk's loads after the first chunk's mma, i.e. after
        // waiting for the first chunk's data: two memory round trips a stage instead of one (SASS of
        // <bf16|fp8, 128, 1>). It costs registers: <bf16, 128, 1> 68 -> 84, <fp8, 128, 1> 80 -> 96 (5
        // blocks an SM instead of 7 and 6), with every stage's 4 KiB a warp in flight at once. Where
        // it made ptxas spill (fp16 rows, int8 rows, NT = 4 at D = 256) it is left out; fp32 rows' loads of
        // a stage were issued together without it.
        constexpr bool kLoadsTogether = (P == Precision::bf16 || P == Precision::fp8) && NT <= 2;
        std::uint32_t all_loaded = 0;
        if constexpr (kLoadsTogether) {
#pragma unroll
          for (int cl = 0; cl < CL; ++cl)
#pragma unroll
            for (int m = 0; m < kMmaMTiles; ++m)
#pragma unroll
              for (int h = 0; h < 2; ++h)  // one word of each 16-byte load: the load writes all four at once
                all_loaded |= reinterpret_cast<const std::uint32_t*>(buf[cl][m][h])[0];
          all_loaded &= p.opaque_zero;
        }
#pragma unroll
        for (int cl = 0; cl < CL; ++cl)
#pragma unroll
          for (int i = 0; i < C; ++i) {
            constexpr bool kSplittable = !F16 && (P == Precision::fp32 || P == Precision::fp16);
            const bool split_rows = kSplittable && p.split_rows;  // bf16x3: + row lo * query hi
            std::uint32_t a[kMmaMTiles][4], l[kMmaMTiles][4];
#pragma unroll
            for (int m = 0; m < kMmaMTiles; ++m) {
              if constexpr (F16) {
                to_f16x2<P>(buf[cl][m][0], 4 * i, a[m][0], a[m][2]);
                to_f16x2<P>(buf[cl][m][1], 4 * i, a[m][1], a[m][3]);
              } else if (split_rows) {  // kSplittable
                split_bf16x2<P>(buf[cl][m][0], 4 * i, a[m][0], a[m][2], l[m][0], l[m][2]);
                split_bf16x2<P>(buf[cl][m][1], 4 * i, a[m][1], a[m][3], l[m][1], l[m][3]);
              } else {
                to_bf16x2<P>(buf[cl][m][0], 4 * i, a[m][0], a[m][2]);
                to_bf16x2<P>(buf[cl][m][1], 4 * i, a[m][1], a[m][3]);
              }
              if (kLoadsTogether && cl == 0 && i == 0) a[m][0] |= all_loaded;  // 0: the dependency only
            }
            const int s = (c0 + cl) * C + i;
#pragma unroll
            for (int nt = 0; nt < NT; ++nt) {
              const uint4 b = qf[(nt * KS + s) * 32 + lane];
#pragma unroll
              for (int m = 0; m < kMmaMTiles; ++m) {
                if constexpr (F16) {
                  mma_f16(acc[m][nt], a[m][0], a[m][1], a[m][2], a[m][3], b.x, b.y);
                  if (p.split) mma_f16(acc[m][nt], a[m][0], a[m][1], a[m][2], a[m][3], b.z, b.w);
                } else {
                  mma_bf16(acc[m][nt], a[m][0], a[m][1], a[m][2], a[m][3], b.x, b.y);
                  if (p.split) mma_bf16(acc[m][nt], a[m][0], a[m][1], a[m][2], a[m][3], b.z, b.w);
                  if (split_rows) mma_bf16(acc[m][nt], l[m][0], l[m][1], l[m][2], l[m][3], b.x, b.y);
                }
              }
            }
          }
      }

      // Epilogue: c0, c1 = row g, heads 8nt + 2t, +1; c2, c3 = row g + 8. Quad sum over t.
#pragma unroll
      for (int m = 0; m < kMmaMTiles; ++m)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          float s = 0.0f;
#pragma unroll
          for (int nt = 0; nt < NT; ++nt)
#pragma unroll
            for (int i = 0; i < 2; ++i) {
              // f16 parts: the head's inverse query factor first (a power of two: exact).
              const float raw = F16 ? acc[m][nt][2 * h + i] * qinv[nt * 8 + 2 * t + i] : acc[m][nt][2 * h + i];
              const float dot = kHasScale<P> ? raw * sc[m][h] : raw;
              s += head_weighted_relu(&dot, &hws[nt * 8 + 2 * t + i], 1);
            }
          s += __shfl_xor_sync(0xFFFFFFFFu, s, 1);
          s += __shfl_xor_sync(0xFFFFFFFFu, s, 2);
          const long long e = row[m][h];
          if (t == 0 && e >= lo_e && e < hi_e) p.scores[e] = s;
        }
    }
  }
}

// bf16 parts (ScoreMath bf16x2, bf16x3, bf16).
template <Precision P, int D, int NT>
__global__ void __launch_bounds__(kMmaWarps * 32) score_mma_kernel(ScoreParams p) {
  score_mma_body<P, D, NT, false>(p);
}

// f16 parts (ScoreMath f16x2, f16), rows exact in f16.
template <Precision P, int D, int NT>
__global__ void __launch_bounds__(kMmaWarps * 32) score_mma_f16_kernel(ScoreParams p) {
  score_mma_body<P, D, NT, true>(p);
}

}  // namespace ip::cuda::detail
