// Decode attention kernels (launcher: kernels/attention.cu): per-request preparation, a CSR scan of
// the splits, the split kernel (online softmax over one split of one request for a group of heads),
// the combine kernel (merges the splits in order), and the probability kernel.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

#include "core/attention_split.h"
#include "core/segments.h"
#include "kernels/launch.h"

namespace ip::cuda::detail {

// ---- tuning ---------------------------------------------------------------------------------------
constexpr int kAttnThreads = 128;       // split kernel: 4 warps
constexpr int kAttnTile = 32;           // tokens per shared-memory tile; one lane per token in the softmax
constexpr int kAttnHeads = 8;           // query heads per thread block (they share every K/V tile)
constexpr int kAttnWarps = kAttnThreads / 32;
constexpr long long kAttnTargetSplits = 2048;  // splits per batch the plan aims at (fills an H100/H200)
constexpr long long kAttnMinSplit = 64;        // attended tokens per split, at least
constexpr int kPrepThreads = 256;
constexpr int kScanThreads = 1024;
constexpr int kCombineThreads = 128;
constexpr int kProbThreads = 256;
constexpr int kProbBlocksMax = 4096;  // blocks per request of the probability kernel, at most

// Bits of the status word (workspace offset 0), read by attention_check.
enum AttnStatus : int {
  kStatusBadBlock = 1,       // block id outside the request, or block_offset decreasing
  kStatusPartialTwice = 2,   // partial last block listed more than once
  kStatusTooLong = 4,        // a request attends more than max_attended tokens
  kStatusProbRowShort = 8,   // a probability row is shorter than the attended count
  kStatusTooManySplits = 16  // more splits than the workspace holds (cannot happen after clamping)
};

struct AttnParams {
  int requests = 0;
  const long long* token_offset = nullptr;
  const float* keys = nullptr;
  const float* values = nullptr;
  int dim = 0, vdim = 0;
  const float* queries = nullptr;
  int heads = 0;
  const std::int32_t* blocks = nullptr;
  const long long* block_offset = nullptr;
  int block_size = 1;
  long long max_attended = 0;
  float* out = nullptr;
  float* probs = nullptr;
  const long long* prob_offset = nullptr;
  float scale = 1.0f;
  long long split_tokens = 0;
  long long max_splits = 0;
  // Workspace.
  int* status = nullptr;
  long long* attended = nullptr;      // [requests] n_b (clamped to max_attended)
  long long* partial_pos = nullptr;   // [requests] list index of the partial last block, or -1
  long long* split_offset = nullptr;  // [requests + 1]
  float* part_ml = nullptr;           // [max_splits, heads, 2] running max and sum of each split
  float* part_o = nullptr;            // [max_splits, heads, vdim] unnormalized output of each split
  float* final_ml = nullptr;          // [requests, heads, 2] final max and sum
  // 0: a value the compiler cannot know (attn_load_tile), set by no one.
  unsigned opaque_zero = 0;
};

// Dynamic shared memory of the split kernel: token rows, then q, K (rows padded by one float against
// bank conflicts), V, tile probabilities, output accumulators, and m, l, alpha per head.
__host__ __device__ constexpr std::size_t attn_smem_bytes(int D, int Dv) {
  return sizeof(long long) * kAttnTile +
         sizeof(float) * (static_cast<std::size_t>(kAttnHeads) * D + static_cast<std::size_t>(kAttnTile) * (D + 1) +
                          static_cast<std::size_t>(kAttnTile) * Dv + kAttnHeads * kAttnTile +
                          static_cast<std::size_t>(kAttnHeads) * Dv + 3 * kAttnHeads);
}

__device__ __forceinline__ float warp_max(float x) {
  for (int o = 16; o > 0; o >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
  return x;
}
__device__ __forceinline__ float warp_sum(float x) {
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

// One block per request: attended count and where the partial last block sits in the list.
__global__ void __launch_bounds__(kPrepThreads) attn_prep_kernel(AttnParams p) {
  const int b = blockIdx.x;
  const long long T = p.token_offset[b + 1] - p.token_offset[b];
  __shared__ int s_bad, s_count;
  __shared__ unsigned long long s_first;
  if (threadIdx.x == 0) {
    s_bad = 0;
    s_count = 0;
    s_first = ~0ull;
  }
  __syncthreads();
  long long n = T;
  long long pp = -1;
  if (p.blocks) {
    const int bs = p.block_size;
    const long long e0 = p.block_offset[b], e1 = p.block_offset[b + 1];
    const long long nblk = num_blocks(T, bs), last = last_block_len(T, bs);
    const bool has_partial = T > 0 && last < bs;
    int bad = e1 < e0 ? 1 : 0, cnt = 0;
    unsigned long long first = ~0ull;
    for (long long e = e0 + threadIdx.x; e < e1; e += blockDim.x) {
      const long long id = p.blocks[e];
      if (id < 0 || id >= nblk) {
        bad = 1;
      } else if (has_partial && id == nblk - 1) {
        ++cnt;
        first = min(first, static_cast<unsigned long long>(e - e0));
      }
    }
    if (bad) atomicOr(&s_bad, 1);
    if (cnt) {
      atomicAdd(&s_count, cnt);
      atomicMin(&s_first, first);
    }
    __syncthreads();
    const long long entries = e1 > e0 ? e1 - e0 : 0;
    n = sparse_attended(entries, bs, s_count > 0, last);
    pp = s_count > 0 ? static_cast<long long>(s_first) : -1;
  }
  if (threadIdx.x != 0) return;
  int st = 0;
  if (p.blocks && s_bad) st |= kStatusBadBlock;
  if (p.blocks && s_count > 1) st |= kStatusPartialTwice;
  if (n > p.max_attended) {
    st |= kStatusTooLong;
    n = p.max_attended;
  }
  if (p.probs && p.prob_offset[b + 1] - p.prob_offset[b] < n) st |= kStatusProbRowShort;
  if (st) atomicOr(p.status, st);
  p.attended[b] = n;
  p.partial_pos[b] = pp;
}

// One block: split_offset = exclusive scan of ceil(n_b / split_tokens).
__global__ void __launch_bounds__(kScanThreads) attn_scan_kernel(AttnParams p) {
  __shared__ long long s[kScanThreads];
  const int per = (p.requests + kScanThreads - 1) / kScanThreads;
  const int b0 = min(p.requests, static_cast<int>(threadIdx.x) * per), b1 = min(p.requests, b0 + per);
  long long local = 0;
  for (int b = b0; b < b1; ++b) local += (p.attended[b] + p.split_tokens - 1) / p.split_tokens;
  s[threadIdx.x] = local;
  __syncthreads();
  for (int o = 1; o < kScanThreads; o <<= 1) {  // inclusive Hillis-Steele scan
    const long long add = threadIdx.x >= o ? s[threadIdx.x - o] : 0;
    __syncthreads();
    s[threadIdx.x] += add;
    __syncthreads();
  }
  long long run = s[threadIdx.x] - local;
  for (int b = b0; b < b1; ++b) {
    p.split_offset[b] = run;
    run += (p.attended[b] + p.split_tokens - 1) / p.split_tokens;
  }
  if (threadIdx.x == kScanThreads - 1) {
    p.split_offset[p.requests] = s[threadIdx.x];
    if (s[threadIdx.x] > p.max_splits) atomicOr(p.status, kStatusTooManySplits);
  }
}

// A tile's K and V rows into shared memory for compile-time D and Dv (multiples of 4, rows 16-byte
// aligned): each thread's 16-byte loads, all issued before any is stored, then the stores. As strided
// loops (load, store, next) each load waited for the one before: (D + Dv) * kAttnTile / kAttnThreads
// dependent memory round trips a tile, 64 at D = Dv = 128 (SASS, sm_90, 2026-12-04); now one. Rows of
// invalid tokens (row -1) load row 0 and store zeros. Every store also depends on every load (their bits
// ANDed with p.opaque_zero, 0), or ptxas puts stores between the loads.
template <int kD, int kDv>
__device__ __forceinline__ void attn_load_tile(const AttnParams& p, const long long* rows_s, float* k_s, float* v_s) {
  constexpr int KQ = kD / 4, VQ = kDv / 4;
  constexpr int KN = kAttnTile * KQ / kAttnThreads, VN = kAttnTile * VQ / kAttnThreads;
  static_assert(KN * kAttnThreads == kAttnTile * KQ && VN * kAttnThreads == kAttnTile * VQ, "whole rows a pass");
  const int tid = threadIdx.x;
  float4 kv[KN], vv[VN];
#pragma unroll
  for (int j = 0; j < KN; ++j) {
    const int i = tid + j * kAttnThreads, t = i / KQ, q = i % KQ;
    kv[j] = __ldg(reinterpret_cast<const float4*>(p.keys + max(rows_s[t], 0LL) * kD) + q);
  }
#pragma unroll
  for (int j = 0; j < VN; ++j) {
    const int i = tid + j * kAttnThreads, t = i / VQ, q = i % VQ;
    vv[j] = __ldg(reinterpret_cast<const float4*>(p.values + max(rows_s[t], 0LL) * kDv) + q);
  }
  unsigned all = 0;
#pragma unroll
  for (int j = 0; j < KN; ++j) all |= __float_as_uint(kv[j].x);
#pragma unroll
  for (int j = 0; j < VN; ++j) all |= __float_as_uint(vv[j].x);
  all &= p.opaque_zero;
  auto put = [&](float* dst, const float4& x, bool valid) {
    dst[0] = valid ? __uint_as_float(__float_as_uint(x.x) | all) : 0.0f;
    dst[1] = valid ? x.y : 0.0f;
    dst[2] = valid ? x.z : 0.0f;
    dst[3] = valid ? x.w : 0.0f;
  };
#pragma unroll
  for (int j = 0; j < KN; ++j) {
    const int i = tid + j * kAttnThreads, t = i / KQ, q = i % KQ;
    put(k_s + t * (kD + 1) + q * 4, kv[j], rows_s[t] >= 0);
  }
#pragma unroll
  for (int j = 0; j < VN; ++j) {
    const int i = tid + j * kAttnThreads, t = i / VQ, q = i % VQ;
    put(v_s + t * kDv + q * 4, vv[j], rows_s[t] >= 0);
  }
}

// What split w of the batch works on (both split kernels): its request b (CSR over requests), the
// request's first row and length, the split's attended positions [p0, p1), the request's block list and
// probability rows.
struct AttnSplit {
  int b = 0;
  long long tok0 = 0, T = 0, p0 = 0, p1 = 0;
  int bs = 1;
  const std::int32_t* blocks = nullptr;  // null: dense
  long long pp = -1, last = 0;           // list index of the partial last block; its length
  float* probs = nullptr;                // [heads, prow] of the request, or null
  long long prow = 0;
  // The row (of keys and values) of attended position pos: -1 past the split's end or for an invalid
  // token (invalid ids were flagged by the prep kernel; never read outside the request).
  __device__ __forceinline__ long long row(long long pos) const {
    if (pos >= p1) return -1;
    const long long tok = blocks ? sparse_token(blocks, bs, pos, pp, last) : pos;
    return tok >= 0 && tok < T ? tok0 + tok : -1;
  }
};

__device__ __forceinline__ AttnSplit attn_split(const AttnParams& p, long long w) {
  AttnSplit sp;
  sp.b = segment_of(p.split_offset, p.requests, w);
  const int b = sp.b;
  sp.tok0 = p.token_offset[b];
  sp.T = p.token_offset[b + 1] - sp.tok0;
  sp.p0 = (w - p.split_offset[b]) * p.split_tokens;
  sp.p1 = min(p.attended[b], sp.p0 + p.split_tokens);
  sp.bs = p.block_size;
  sp.blocks = p.blocks ? p.blocks + p.block_offset[b] : nullptr;
  sp.pp = p.partial_pos[b];
  sp.last = last_block_len(sp.T, sp.bs);
  if (p.probs) {
    sp.prow = p.prob_offset[b + 1] - p.prob_offset[b];
    sp.probs = p.probs + p.heads * p.prob_offset[b];
  }
  return sp;
}

// Block (w, g): split w of the batch (CSR over requests), heads [g*kAttnHeads, ...) of its request.
template <int kD, int kDv>
__global__ void __launch_bounds__(kAttnThreads) attn_split_kernel(AttnParams p) {
  const int D = kD ? kD : p.dim, Dv = kDv ? kDv : p.vdim;
  const long long w = blockIdx.x;
  if (w >= p.split_offset[p.requests] || w >= p.max_splits) return;
  const AttnSplit sp = attn_split(p, w);
  const int b = sp.b;
  const long long p0 = sp.p0, p1 = sp.p1;
  float* const probs = sp.probs;
  const long long prow = sp.prow;
  const int h0 = blockIdx.y * kAttnHeads, hh = min(kAttnHeads, p.heads - h0);

  IP_DYNAMIC_SHARED(unsigned char, smem);
  long long* rows_s = reinterpret_cast<long long*>(smem);
  float* q_s = reinterpret_cast<float*>(rows_s + kAttnTile);
  float* k_s = q_s + kAttnHeads * D;
  float* v_s = k_s + kAttnTile * (D + 1);
  float* s_s = v_s + kAttnTile * Dv;
  float* o_s = s_s + kAttnHeads * kAttnTile;
  float* m_s = o_s + kAttnHeads * Dv;
  float* l_s = m_s + kAttnHeads;
  float* a_s = l_s + kAttnHeads;

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  [[maybe_unused]] const bool vec_rows = ((reinterpret_cast<std::uintptr_t>(p.keys) | reinterpret_cast<std::uintptr_t>(p.values)) & 15u) == 0;
  bool q_staged = false;
  if constexpr (kD > 0 && kD % 4 == 0) {
    // 16-byte loads, all issued before any store (as a strided loop each waited for the one before:
    // kAttnHeads * D / kAttnThreads round trips, 8 at D = 128); heads past hh load the last one, store 0.
    if ((reinterpret_cast<std::uintptr_t>(p.queries) & 15u) == 0) {
      constexpr int QN = kAttnHeads * kD / 4 / kAttnThreads;
      static_assert(QN * kAttnThreads * 4 == kAttnHeads * kD, "whole heads a pass");
      float4 qv[QN];
#pragma unroll
      for (int j = 0; j < QN; ++j) {
        const int i = tid + j * kAttnThreads, h = i / (kD / 4);
        qv[j] = __ldg(reinterpret_cast<const float4*>(p.queries + (static_cast<long long>(b) * p.heads + h0 + min(h, hh - 1)) * kD) +
                      i % (kD / 4));
      }
#pragma unroll
      for (int j = 0; j < QN; ++j) {
        const int i = tid + j * kAttnThreads;
        const bool valid = i / (kD / 4) < hh;
        reinterpret_cast<float4*>(q_s)[i] = valid ? qv[j] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      }
      q_staged = true;
    }
  }
  if (!q_staged) {
    for (int i = tid; i < kAttnHeads * D; i += kAttnThreads) {
      const int h = i / D;
      q_s[i] = h < hh ? p.queries[(static_cast<long long>(b) * p.heads + h0 + h) * D + i % D] : 0.0f;
    }
  }
  for (int i = tid; i < kAttnHeads * Dv; i += kAttnThreads) o_s[i] = 0.0f;
  if (tid < kAttnHeads) {
    m_s[tid] = -INFINITY;
    l_s[tid] = 0.0f;
    a_s[tid] = 1.0f;
  }

  for (long long t0 = p0; t0 < p1; t0 += kAttnTile) {
    if (tid < kAttnTile) rows_s[tid] = sp.row(t0 + tid);
    __syncthreads();  // rows ready; also orders the previous tile's O update before these loads
    bool loaded = false;
    if constexpr (kD > 0 && kDv > 0 && kD % 4 == 0 && kDv % 4 == 0) {
      if (vec_rows) {
        attn_load_tile<kD, kDv>(p, rows_s, k_s, v_s);
        loaded = true;
      }
    }
    if (!loaded) {  // any dim, or rows not 16-byte aligned
      for (int i = tid; i < kAttnTile * D; i += kAttnThreads) {
        const int t = i / D, d = i % D;
        const long long r = rows_s[t];
        k_s[t * (D + 1) + d] = r >= 0 ? p.keys[r * D + d] : 0.0f;
      }
      for (int i = tid; i < kAttnTile * Dv; i += kAttnThreads) {
        const int t = i / Dv, d = i % Dv;
        const long long r = rows_s[t];
        v_s[i] = r >= 0 ? p.values[r * Dv + d] : 0.0f;
      }
    }
    __syncthreads();
    // Logits (stored raw in the probability rows; the probability kernel normalizes them).
    for (int i = tid; i < kAttnHeads * kAttnTile; i += kAttnThreads) {
      const int h = i / kAttnTile, t = i % kAttnTile;
      float x = -INFINITY;
      if (h < hh) {
        if (rows_s[t] >= 0) {
          const float* q = q_s + h * D;
          const float* k = k_s + t * (D + 1);
          float acc = 0.0f;
#pragma unroll 8
          for (int d = 0; d < D; ++d) acc += q[d] * k[d];
          x = acc * p.scale;
        }
        const long long pos = t0 + t;
        if (probs && pos < p1 && pos < prow) probs[(h0 + h) * prow + pos] = x;
      }
      s_s[i] = x;
    }
    __syncthreads();
    // Online softmax: one warp per head, one lane per token of the tile.
    for (int h = warp; h < hh; h += kAttnWarps) {
      const float x = s_s[h * kAttnTile + lane];
      const float m_old = m_s[h];
      const float m_new = fmaxf(m_old, warp_max(x));
      const float e = m_new == -INFINITY ? 0.0f : expf(x - m_new);
      s_s[h * kAttnTile + lane] = e;
      const float sum = warp_sum(e);
      __syncwarp();  // every lane has read m_s[h] before lane 0 replaces it
      if (lane == 0) {
        const float alpha = softmax_rescale(m_old, m_new);
        a_s[h] = alpha;
        l_s[h] = l_s[h] * alpha + sum;
        m_s[h] = m_new;
      }
    }
    __syncthreads();
    for (int e = tid; e < hh * Dv; e += kAttnThreads) {
      const int h = e / Dv, d = e % Dv;
      float o = o_s[e] * a_s[h];
      const float* ph = s_s + h * kAttnTile;
#pragma unroll 8
      for (int t = 0; t < kAttnTile; ++t) o += ph[t] * v_s[t * Dv + d];
      o_s[e] = o;
    }
    // The next iteration's first __syncthreads orders these writes before rows_s/k_s/v_s/s_s change.
  }
  __syncthreads();
  const long long base = w * p.heads + h0;
  for (int e = tid; e < hh * Dv; e += kAttnThreads) p.part_o[base * Dv + e] = o_s[e];
  if (tid < hh) {
    p.part_ml[(base + tid) * 2] = m_s[tid];
    p.part_ml[(base + tid) * 2 + 1] = l_s[tid];
  }
}

// ---- the lane-per-token split kernel (AttnKernel::lanes) ----------------------------------------------
// The tiles kernel reads two shared-memory operands per multiply-add (a query and a key element, then a
// probability and a value element): about 1024 shared loads a thread a tile of 32 tokens and 8 heads,
// which bounds it well below the memory (the block-sparse attention was 7.08 ms of the 8.05 ms batched
// decode step on the H200, 7% of the copy bandwidth). Here a block serves 16 heads, a tile is 32 tokens
// (lane t of every warp holds token t), and each operand that varies along a loop sits in registers:
//   logits: warp w holds dims [w D/4, (w+1) D/4) of its lane's key row (16-byte loads straight from
//     global memory) and multiplies them with the 16 queries' same dims, read as float4 broadcasts from
//     shared memory (every lane the same address); the four warps' partial sums meet in shared memory
//     and add in warp order;
//   softmax: warp w owns heads 4w..4w+3, one lane per token (as the tiles kernel, the same operations);
//   output: thread j holds value dim j (and j + 128 at Dv = 256; at Dv = 64 threads 64..127 take heads
//     8..15) of all 32 tokens, loaded with the keys, and multiplies them with the probabilities, read as
//     float4 broadcasts along the tokens.
// Per thread and tile at D = Dv = 128: 1024 multiply-adds, 256 shared float4 broadcasts, 8 + 32 global
// loads; every K/V row read once for 16 heads. The logits add their four quarter sums where the tiles
// kernel adds dims in order (outputs differ in the last bits between the two kernels; each is
// deterministic). Outputs, logits and the running (max, sum) go to the same workspace as the tiles
// kernel's, so the combine and probability kernels are shared.
constexpr int kAttnLaneHeads = 16;  // query heads a block serves
constexpr int kAttnLaneWarps = kAttnThreads / 32;
static_assert(kAttnLaneHeads % kAttnLaneWarps == 0 && kAttnTile == 32, "a lane per token, whole heads a warp");

__host__ __device__ constexpr bool attn_lanes_dims(int D, int Dv) {
  return (D == 64 || D == 128 || D == 256) && (Dv == 64 || Dv == 128 || Dv == 256);
}

template <int kD, int kDv>
struct AttnLaneShape {
  static constexpr int kSlice = kD / kAttnLaneWarps;                            // key dims a lane holds
  static constexpr int kDimThreads = kDv < kAttnThreads ? kDv : kAttnThreads;  // threads along the value dims
  static constexpr int kDims = kDv / kDimThreads;                               // value dims a thread holds
  static constexpr int kHeads = kAttnLaneHeads * kDimThreads / kAttnThreads;   // heads a thread accumulates
  static constexpr int kWarpHeads = kAttnLaneHeads / kAttnLaneWarps;           // heads a warp's softmax owns
  static_assert(kSlice % 4 == 0 && kDims >= 1 && kHeads >= 1 && kHeads % 4 == 0, "shape");
};

// Block (w, g): split w of the batch (CSR over requests), heads [g*16, g*16 + 16) of its request.
template <int kD, int kDv>
__global__ void __launch_bounds__(kAttnThreads, 2) attn_lanes_kernel(AttnParams p) {
  using S = AttnLaneShape<kD, kDv>;
  constexpr int H = kAttnLaneHeads;
  const long long w = blockIdx.x;
  if (w >= p.split_offset[p.requests] || w >= p.max_splits) return;
  const AttnSplit sp = attn_split(p, w);
  const int h0 = blockIdx.y * H, hh = min(H, p.heads - h0);

  __shared__ __align__(16) float q_s[H * kD];                     // the queries (heads past hh: zeros)
  __shared__ float part_s[kAttnLaneWarps][H][kAttnTile];          // each warp's partial logits
  __shared__ __align__(16) float p_s[H][kAttnTile];               // the tile's probabilities (unnormalized)
  __shared__ float alpha_s[H];                                    // the tile's rescale factor per head

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  for (int i = tid; i < H * kD; i += kAttnThreads) {
    const int h = i / kD;
    q_s[i] = h < hh ? p.queries[(static_cast<long long>(sp.b) * p.heads + h0 + h) * kD + i % kD] : 0.0f;
  }
  // Softmax state of the warp's heads (every lane the same values), output accumulators of the thread.
  float m_r[S::kWarpHeads], l_r[S::kWarpHeads];
#pragma unroll
  for (int j = 0; j < S::kWarpHeads; ++j) {
    m_r[j] = -INFINITY;
    l_r[j] = 0.0f;
  }
  const int vd = tid % S::kDimThreads;                 // the thread's first value dim
  const int vh = (tid / S::kDimThreads) * S::kHeads;   // the thread's first head
  float o[S::kDims][S::kHeads];
#pragma unroll
  for (int c = 0; c < S::kDims; ++c)
#pragma unroll
    for (int h = 0; h < S::kHeads; ++h) o[c][h] = 0.0f;
  __syncthreads();

  for (long long t0 = sp.p0; t0 < sp.p1; t0 += kAttnTile) {
    const long long pos = t0 + lane;
    const long long row = sp.row(pos);
    // Every load of the tile first: the lane's key slice, then the thread's value dims of all 32 tokens
    // (rows of invalid tokens: row 0, zeroed after the load).
    float4 kq[S::kSlice / 4];
    const float4* krow = reinterpret_cast<const float4*>(p.keys + max(row, 0LL) * kD + warp * S::kSlice);
#pragma unroll
    for (int i = 0; i < S::kSlice / 4; ++i) kq[i] = __ldg(krow + i);
    // The rows travel as 32-bit ints (the launcher requires fewer than 2^31 tokens): 32 shuffled rows
    // in 64-bit registers made ptxas spill.
    const int row32 = static_cast<int>(row);
    float v[S::kDims][kAttnTile];
#pragma unroll
    for (int t = 0; t < kAttnTile; ++t) {
      const int rt = __shfl_sync(0xffffffffu, row32, t);
      const float* vrow = p.values + static_cast<long long>(max(rt, 0)) * kDv + vd;
#pragma unroll
      for (int c = 0; c < S::kDims; ++c) {
        const float x = __ldg(vrow + c * S::kDimThreads);
        v[c][t] = rt >= 0 ? x : 0.0f;
      }
    }
    // The first multiply-add depends on every load (their bits ANDed with p.opaque_zero, 0): without it
    // ptxas put some of the loads after the first uses of the others, a second round trip a tile. Not at
    // D = Dv = 256, where it made ptxas spill (28 B at 252 registers, sm_90).
    if constexpr (kD + kDv <= 384) {
      unsigned all = 0;
#pragma unroll
      for (int i = 0; i < S::kSlice / 4; ++i) all |= __float_as_uint(kq[i].x);
#pragma unroll
      for (int c = 0; c < S::kDims; ++c)
#pragma unroll
        for (int t = 0; t < kAttnTile; ++t) all |= __float_as_uint(v[c][t]);
      kq[0].x = __uint_as_float(__float_as_uint(kq[0].x) | (all & p.opaque_zero));
    }
    // Partial logits over the warp's quarter of the dims, 16 heads.
    float s[H];
#pragma unroll
    for (int h = 0; h < H; ++h) s[h] = 0.0f;
#pragma unroll
    for (int i = 0; i < S::kSlice / 4; ++i) {
#pragma unroll
      for (int h = 0; h < H; ++h) {
        const float4 qv = *reinterpret_cast<const float4*>(q_s + h * kD + warp * S::kSlice + 4 * i);
        s[h] = fmaf(qv.x, kq[i].x, s[h]);
        s[h] = fmaf(qv.y, kq[i].y, s[h]);
        s[h] = fmaf(qv.z, kq[i].z, s[h]);
        s[h] = fmaf(qv.w, kq[i].w, s[h]);
      }
    }
#pragma unroll
    for (int h = 0; h < H; ++h) part_s[warp][h][lane] = s[h];
    __syncthreads();  // partial logits ready; the previous tile's probabilities all read
    // Online softmax: warp w owns heads 4w..4w+3, lane t token t (as the tiles kernel).
#pragma unroll
    for (int j = 0; j < S::kWarpHeads; ++j) {
      const int h = warp * S::kWarpHeads + j;
      if (h >= hh) {  // the same for the whole warp
        p_s[h][lane] = 0.0f;
        if (lane == 0) alpha_s[h] = 1.0f;
        continue;
      }
      float x = -INFINITY;
      if (row >= 0) {
        float acc = part_s[0][h][lane];
#pragma unroll
        for (int u = 1; u < kAttnLaneWarps; ++u) acc += part_s[u][h][lane];
        x = acc * p.scale;
      }
      if (sp.probs && pos < sp.p1 && pos < sp.prow) sp.probs[(h0 + h) * sp.prow + pos] = x;  // logits, as the tiles kernel
      const float m_new = fmaxf(m_r[j], warp_max(x));
      const float e = m_new == -INFINITY ? 0.0f : expf(x - m_new);
      const float sum = warp_sum(e);
      const float alpha = softmax_rescale(m_r[j], m_new);
      l_r[j] = l_r[j] * alpha + sum;
      m_r[j] = m_new;
      p_s[h][lane] = e;
      if (lane == 0) alpha_s[h] = alpha;
    }
    __syncthreads();  // probabilities and factors ready; every partial logit read
    // Outputs: o = o * alpha + sum over the tile's tokens, in token order (as the tiles kernel).
#pragma unroll
    for (int h = 0; h < S::kHeads; ++h) {
      const float a = alpha_s[vh + h];
#pragma unroll
      for (int c = 0; c < S::kDims; ++c) o[c][h] *= a;
    }
#pragma unroll
    for (int t4 = 0; t4 < kAttnTile / 4; ++t4) {
#pragma unroll
      for (int h = 0; h < S::kHeads; ++h) {
        const float4 pv = *reinterpret_cast<const float4*>(&p_s[vh + h][4 * t4]);
#pragma unroll
        for (int c = 0; c < S::kDims; ++c) {
          o[c][h] = fmaf(pv.x, v[c][4 * t4], o[c][h]);
          o[c][h] = fmaf(pv.y, v[c][4 * t4 + 1], o[c][h]);
          o[c][h] = fmaf(pv.z, v[c][4 * t4 + 2], o[c][h]);
          o[c][h] = fmaf(pv.w, v[c][4 * t4 + 3], o[c][h]);
        }
      }
    }
    // The next tile's first __syncthreads orders these reads of p_s and alpha_s before they change.
  }
  const long long base = w * p.heads + h0;
#pragma unroll
  for (int h = 0; h < S::kHeads; ++h)
    if (vh + h < hh)
#pragma unroll
      for (int c = 0; c < S::kDims; ++c) p.part_o[(base + vh + h) * kDv + vd + c * S::kDimThreads] = o[c][h];
  if (lane == 0)
#pragma unroll
    for (int j = 0; j < S::kWarpHeads; ++j) {
      const int h = warp * S::kWarpHeads + j;
      if (h < hh) {
        p.part_ml[(base + h) * 2] = m_r[j];
        p.part_ml[(base + h) * 2 + 1] = l_r[j];
      }
    }
}

// One block per (request, head): merges the request's splits in split order.
__global__ void __launch_bounds__(kCombineThreads) attn_combine_kernel(AttnParams p) {
  const long long bh = blockIdx.x;
  const int b = static_cast<int>(bh / p.heads), h = static_cast<int>(bh % p.heads);
  const long long s0 = p.split_offset[b], s1 = min(p.split_offset[b + 1], p.max_splits);
  float M = -INFINITY;
  for (long long s = s0; s < s1; ++s) M = fmaxf(M, p.part_ml[(s * p.heads + h) * 2]);
  float L = 0.0f;
  for (long long s = s0; s < s1; ++s) {
    const float* ml = p.part_ml + (s * p.heads + h) * 2;
    L += ml[1] * softmax_rescale(ml[0], M);
  }
  const int Dv = p.vdim;
  for (int d = threadIdx.x; d < Dv; d += kCombineThreads) {
    float acc = 0.0f;
    for (long long s = s0; s < s1; ++s)
      acc += p.part_o[(s * p.heads + h) * Dv + d] * softmax_rescale(p.part_ml[(s * p.heads + h) * 2], M);
    p.out[bh * Dv + d] = L > 0.0f ? acc / L : 0.0f;
  }
  if (threadIdx.x == 0) {
    p.final_ml[bh * 2] = M;
    p.final_ml[bh * 2 + 1] = L;
  }
}

// Grid (x, requests): logits -> probabilities of request b, zeros past its attended count.
__global__ void __launch_bounds__(kProbThreads) attn_prob_kernel(AttnParams p) {
  const int b = blockIdx.y;
  const long long len = p.prob_offset[b + 1] - p.prob_offset[b];
  if (len <= 0) return;
  const long long n = min(p.attended[b], len);
  float* probs = p.probs + p.heads * p.prob_offset[b];
  const long long total = p.heads * len;
  for (long long e = static_cast<long long>(blockIdx.x) * kProbThreads + threadIdx.x; e < total;
       e += static_cast<long long>(gridDim.x) * kProbThreads) {
    const long long h = e / len, i = e % len;
    float v = 0.0f;
    if (i < n) {
      const float* ml = p.final_ml + (static_cast<long long>(b) * p.heads + h) * 2;
      v = ml[1] > 0.0f ? expf(probs[e] - ml[0]) / ml[1] : 0.0f;
    }
    probs[e] = v;
  }
}

}  // namespace ip::cuda::detail
