// Multi-head index scoring kernels (launcher: kernels/score.cu). s(e) = sum_j h_j max(0, q_j . x_e),
// x_e = decode(row_e) * scale_e (core/quant.h); maxmin: the Quest bound sum_d max(q_d hi_d, q_d lo_d)
// per head over rows 2e (max) and 2e+1 (min). Entry e belongs to request segment_of(entry_offset, e)
// and is scored against that request's query.
//
// Two paths:
//   score_cuda_core_kernel: a warp per 4 entries (compile-time D; 1 for generic D), fp32 math on CUDA
//     cores (ScoreMath::fp32). Lane l owns D/32 consecutive elements (compile-time D) or the elements
//     l, l+32, ... (generic D). Per head a warp reduction, heads combined in order j = 0..H-1 as on the
//     CPU.
//   score_mma_kernel: tensor cores, mma.sync m16n8k16 bf16 -> fp32. M = entries, N = heads (padded to
//     8 * NT), K = D. The dot product is a sum over d, so K may be permuted as long as rows and queries
//     use the same permutation: in a chunk of KC = 16*C elements, thread t of a quad loads the 4*C
//     consecutive elements [4Ct, 4Ct+4C) as one 16-byte load, and uses elements 4i..4i+3 of them as
//     its logical k = (2t, 2t+1, 2t+8, 2t+9) of k-step i. The query of the current request is staged in
//     shared memory already in fragment order (conflict-free 16-byte reads), hi and lo bf16 parts. bf16x3
//     (fp32/fp16 rows) adds a third mma per step: the rows' bf16 residuals times the query's hi part.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

#include "core/numeric.h"
#include "core/quant.h"
#include "core/score_math.h"
#include "core/segments.h"
#include "kernels/batch.h"
#include "kernels/launch.h"

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
struct Elem<Precision::fp16> {
  static constexpr int bytes = 2;
  static __device__ __forceinline__ float decode(const unsigned char* p, int i) {
    return fp16_to_float(reinterpret_cast<const std::uint16_t*>(p)[i]);
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

// ---- CUDA-core path: a warp scores EPW entries at a time ----
constexpr int kCoreEntriesPerWarp = 4;  // rows loaded before any is used (memory-level parallelism)

// D > 0: compile-time dim (multiple of 32, rows 16-byte aligned), EPW entries per warp step;
// D == 0: any dim, scalar loads, one entry per warp step.
template <Precision P, int D, bool MAXMIN>
__global__ void __launch_bounds__(256) score_cuda_core_kernel(ScoreParams p) {
  using E = Elem<P>;
  constexpr int EPW = D > 0 ? kCoreEntriesPerWarp : 1;
  constexpr int V = D > 0 ? D / 32 : 1;  // elements per lane (compile-time dim)
  constexpr int R = MAXMIN ? 2 : 1;      // rows per entry
  const int lane = threadIdx.x & 31;
  const long long warps = static_cast<long long>(gridDim.x) * (blockDim.x >> 5);
  const int dim = D > 0 ? D : p.dim;
  const int H = p.heads;
  for (long long e0 = (static_cast<long long>(blockIdx.x) * (blockDim.x >> 5) + (threadIdx.x >> 5)) * EPW;
       e0 < p.entries; e0 += warps * EPW) {
    const float* q[EPW];
    const float* hw[EPW];
    float x[EPW][R][V];  // compile-time dim: the lane's dequantized elements; generic: x[u][k][0] = scale
    for (int u = 0; u < EPW; ++u) {
      const long long e = e0 + u < p.entries ? e0 + u : p.entries - 1;  // a tail repeats the last entry
      const int r = segment_of(p.entry_offset, p.requests, e);
      q[u] = p.queries + static_cast<long long>(r) * H * dim;
      hw[u] = p.head_weights + static_cast<long long>(r) * H;
#pragma unroll
      for (int k = 0; k < R; ++k) {
        const long long row = e * R + k;
        const float sc = kHasScale<P> ? __ldg(p.scales + row) : 1.0f;
        if constexpr (D > 0) {
          alignas(16) unsigned char buf[V * E::bytes];
          load_aligned<V * E::bytes>(p.rows + (row * D + lane * V) * E::bytes, buf);
          if constexpr (P == Precision::fp8 && V % 2 == 0) {  // two codes per conversion
#pragma unroll
            for (int v = 0; v < V; v += 2) {
              const float2 f = E::decode2(buf, v);
              x[u][k][v] = f.x * sc;
              x[u][k][v + 1] = f.y * sc;
            }
          } else {
#pragma unroll
            for (int v = 0; v < V; ++v) x[u][k][v] = kHasScale<P> ? E::decode(buf, v) * sc : E::decode(buf, v);
          }
        } else {
          x[u][k][0] = sc;
        }
      }
    }
    float s[EPW];
#pragma unroll
    for (int u = 0; u < EPW; ++u) s[u] = 0.0f;
    for (int j = 0; j < H; ++j) {
#pragma unroll
      for (int u = 0; u < EPW; ++u) {
        const float* qj = q[u] + static_cast<long long>(j) * dim;
        float part = 0.0f;
        if constexpr (D > 0) {
#pragma unroll
          for (int v = 0; v < V; ++v) {
            const float qd = __ldg(qj + lane * V + v);
            if constexpr (MAXMIN)
              part += box_upper_bound(&qd, &x[u][0][v], &x[u][1][v], 1);
            else
              part += qd * x[u][0][v];
          }
        } else {
          const long long row = e0 * R;  // EPW == 1
          for (int d = lane; d < dim; d += 32) {
            const float qd = __ldg(qj + d);
            float hi = E::decode(p.rows + row * dim * E::bytes, d);
            if constexpr (kHasScale<P>) hi *= x[u][0][0];
            if constexpr (MAXMIN) {
              float lo = E::decode(p.rows + (row + 1) * dim * E::bytes, d);
              if constexpr (kHasScale<P>) lo *= x[u][R - 1][0];
              part += box_upper_bound(&qd, &hi, &lo, 1);
            } else {
              part += qd * hi;
            }
          }
        }
        const float dot = warp_sum(part);
        const float h = __ldg(hw[u] + j);
        s[u] += head_weighted_relu(&dot, &h, 1);
      }
    }
#pragma unroll
    for (int u = 0; u < EPW; ++u)
      if (lane == u && e0 + u < p.entries) p.scores[e0 + u] = s[u];
  }
}

// ---- tensor-core path ----
constexpr int kMmaWarps = 4;        // warps per block
constexpr int kMmaMTiles = 2;       // 16-entry m-tiles per warp (share the query fragments)
constexpr int kMmaEntriesPerBlock = kMmaWarps * kMmaMTiles * 16;

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

// Elements per thread per 16-byte load (4*C), so C k-steps per load.
template <Precision P>
inline constexpr int kMmaC = 16 / Elem<P>::bytes / 4;

// Shared memory of the mma kernel: query fragments (NT*8 heads x D) as uint4 {hi0, hi1, lo0, lo1}
// per (n-tile, k-step, lane), then NT*8 head weights.
template <int D, int NT>
inline constexpr int kMmaSmemBytes = NT * (D / 16) * 32 * 16 + NT * 8 * 4;

// Stages the query and head weights of request r into shared memory (fragment order).
template <Precision P, int D, int NT>
__device__ void stage_query(const ScoreParams& p, int r, uint4* qf, float* hws) {
  constexpr int C = kMmaC<P>;
  constexpr int KC = 16 * C;
  constexpr int KS = D / 16;
  const float* q = p.queries + static_cast<long long>(r) * p.heads * D;
  for (int idx = threadIdx.x; idx < NT * KS * 32; idx += blockDim.x) {
    const int lane = idx & 31, s = (idx >> 5) % KS, nt = (idx >> 5) / KS;
    const int n = nt * 8 + (lane >> 2), t = lane & 3;
    const int d0 = (s / C) * KC + t * 4 * C + (s % C) * 4;
    float v[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    if (n < p.heads) {
#pragma unroll
      for (int i = 0; i < 4; ++i) v[i] = __ldg(q + static_cast<long long>(n) * D + d0 + i);
    }
    float lo[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) lo[i] = p.split ? bf16_residual(v[i]) : 0.0f;
    qf[idx] = make_uint4(pack_bf16(v[0], v[1]), pack_bf16(v[2], v[3]), pack_bf16(lo[0], lo[1]), pack_bf16(lo[2], lo[3]));
  }
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

// Block: kMmaWarps warps; each warp scores kMmaMTiles * 16 consecutive entries against all heads.
// Blocks take contiguous ranges of tiles and restage the query only when the request changes.
template <Precision P, int D, int NT>
__global__ void __launch_bounds__(kMmaWarps * 32) score_mma_kernel(ScoreParams p) {
  using E = Elem<P>;
  constexpr int C = kMmaC<P>;
  constexpr int KC = 16 * C;
  constexpr int KS = D / 16;
  IP_DYNAMIC_SHARED(uint4, smem);
  uint4* qf = smem;
  float* hws = reinterpret_cast<float*>(smem + NT * KS * 32);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;

  const long long tiles = (p.entries + kMmaEntriesPerBlock - 1) / kMmaEntriesPerBlock;
  const long long tile_begin = tiles * blockIdx.x / gridDim.x, tile_end = tiles * (blockIdx.x + 1) / gridDim.x;
  int staged = -1;
  for (long long tile = tile_begin; tile < tile_end; ++tile) {
    const long long e0 = tile * kMmaEntriesPerBlock;
    const long long e_last = min(e0 + kMmaEntriesPerBlock, p.entries) - 1;
    const int r_first = segment_of(p.entry_offset, p.requests, e0);
    const int r_last = segment_of(p.entry_offset, p.requests, e_last);
    for (int r = r_first; r <= r_last; ++r) {
      const long long lo_e = max(__ldg(p.entry_offset + r), e0), hi_e = min(__ldg(p.entry_offset + r + 1), e_last + 1);
      if (lo_e >= hi_e) continue;  // empty request (uniform across the block)
      if (r != staged) {
        __syncthreads();  // every warp is done with the previous query
        stage_query<P, D, NT>(p, r, qf, hws);
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

      // Rows g and g + 8 of each m-tile; out-of-range rows load zeros.
      long long row[kMmaMTiles][2];
      bool valid[kMmaMTiles][2];
#pragma unroll
      for (int m = 0; m < kMmaMTiles; ++m)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          row[m][h] = w0 + m * 16 + h * 8 + g;
          valid[m][h] = row[m][h] < p.entries;
        }

#pragma unroll 1
      for (int c = 0; c < D / KC; ++c) {
        alignas(16) unsigned char buf[kMmaMTiles][2][16];
#pragma unroll
        for (int m = 0; m < kMmaMTiles; ++m)
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            if (valid[m][h])
              load_aligned<16>(p.rows + (row[m][h] * D + c * KC + t * 4 * C) * E::bytes, buf[m][h]);
            else
              *reinterpret_cast<uint4*>(buf[m][h]) = make_uint4(0, 0, 0, 0);
          }
#pragma unroll
        for (int i = 0; i < C; ++i) {
          constexpr bool kSplittable = P == Precision::fp32 || P == Precision::fp16;
          const bool split_rows = kSplittable && p.split_rows;  // bf16x3: + row lo * query hi
          std::uint32_t a[kMmaMTiles][4], l[kMmaMTiles][4];
#pragma unroll
          for (int m = 0; m < kMmaMTiles; ++m) {
            if (split_rows) {  // kSplittable
              split_bf16x2<P>(buf[m][0], 4 * i, a[m][0], a[m][2], l[m][0], l[m][2]);
              split_bf16x2<P>(buf[m][1], 4 * i, a[m][1], a[m][3], l[m][1], l[m][3]);
            } else {
              to_bf16x2<P>(buf[m][0], 4 * i, a[m][0], a[m][2]);
              to_bf16x2<P>(buf[m][1], 4 * i, a[m][1], a[m][3]);
            }
          }
          const int s = c * C + i;
#pragma unroll
          for (int nt = 0; nt < NT; ++nt) {
            const uint4 b = qf[(nt * KS + s) * 32 + lane];
#pragma unroll
            for (int m = 0; m < kMmaMTiles; ++m) {
              mma_bf16(acc[m][nt], a[m][0], a[m][1], a[m][2], a[m][3], b.x, b.y);
              if (p.split) mma_bf16(acc[m][nt], a[m][0], a[m][1], a[m][2], a[m][3], b.z, b.w);
              if (split_rows) mma_bf16(acc[m][nt], l[m][0], l[m][1], l[m][2], l[m][3], b.x, b.y);
            }
          }
        }
      }

      // Epilogue: c0, c1 = row g, heads 8nt + 2t, +1; c2, c3 = row g + 8. Quad sum over t.
#pragma unroll
      for (int m = 0; m < kMmaMTiles; ++m)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const float sc = (kHasScale<P> && valid[m][h]) ? __ldg(p.scales + row[m][h]) : 1.0f;
          float s = 0.0f;
#pragma unroll
          for (int nt = 0; nt < NT; ++nt)
#pragma unroll
            for (int i = 0; i < 2; ++i) {
              const float dot = kHasScale<P> ? acc[m][nt][2 * h + i] * sc : acc[m][nt][2 * h + i];
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

}  // namespace ip::cuda::detail
