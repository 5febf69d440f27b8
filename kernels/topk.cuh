// Exact batched top-k by radix select (launcher: kernels/topk.cu). Per row, on the order-preserving
// keys of core/topk_order.h:
//   0. sample (large batches, see the launcher): one block per row takes kTopkSamples evenly spaced keys
//      and as threshold `lo` the sample of a rank (found by a radix select in shared memory) that, for
//      scores in random order, leaves at least k keys >= lo with overwhelming probability and about
//      rank * n / samples of them. Pass 0 then compacts the keys >= lo and histograms only them (few
//      shared-memory atomics); when they number between k and compact_cap (checked), passes 1 and 2 and
//      the gather read that list: one full read of the row, not 2-3. Otherwise (inputs built against
//      the sample) a second launch of pass 0 histograms every key of those rows and the search goes on as
//      without step 0: exact either way.
//   1. up to three histogram passes (digits of 11, 11 and 10 bits, high first) over the elements that
//      match the prefix found so far; each block histograms its chunk of the row in shared memory and
//      adds it to the row's global histogram; the last block of the row to finish (ticket counter)
//      picks the digit holding the k-th largest key and updates the row state. A pass whose bucket
//      holds exactly the keys still needed ends the search early (take_all).
//      Compaction: when the pass-0 bucket and the keys above it number at most `compact_cap`, pass 1
//      also appends them (as composites with their ids) to a per-row list, and pass 2 and the gather
//      read that list instead of the row (two full reads of the row instead of four). When the pass-0
//      bucket is too large (scores uniform in [0, 1): one 11-bit digit holds 1/8 of the row), pass 2
//      compacts the pass-1 bucket instead, and the gather reads the list (three full reads, not four).
//      A compacting block gathers its entries in shared memory (kTopkStage) and reserves their place in
//      the list once, at its end.
//   2. gather: keys above the prefix (and, with take_all, those equal to it under the mask) claim
//      candidate slots with an integer atomic. A row that takes only some of its ties (key == T) lists
//      their ids when they number at most kTopkTieListCap; otherwise each block counts its ties.
//   3. ties (only rows that need a subset of the ties): the lowest-id ties. Listed ties: one block sorts
//      the ids. Otherwise an ordered scan of each block's chunk that holds ties, offset by the tie counts
//      of the blocks before it.
//   4. order the k candidates (key, id) packed as topk_composite, descending: score descending, ties to
//      the lower id. Either one block per row sorts them by a bitonic sort (each thread holds k / 512
//      candidates, 1 to 8, in registers; only the steps whose pairs lie in different warps go through
//      shared memory), or ceil(k / 32) blocks per row rank them: a candidate's place is the number of
//      candidates above it (composites are unique, so the places are a permutation), each lane one
//      candidate, the block's warps splitting the comparisons. Ranking does k^2 comparisons a row but
//      spreads them over the GPU; the launcher picks it for small batches (TopkOrder).
// Slot order after step 2 depends on atomics, but the candidate set does not, and step 4 is a total
// order: the output is deterministic.
// Each step is a kernel launch (chained on sm_90), or, with TopkLaunch::single (no sampling, ranks),
// one kernel runs steps 1-4 as work items taken in order, each block waiting for the step before on its
// row (topk_single_kernel). The steps' block bodies (topk_*_block) are the same either way. With
// TopkLaunch::cluster (sm_90) one thread block cluster searches each row in one launch, its own code in
// kernels/topk_cluster.cuh (the same passes, with the row state in the cluster's shared memory).
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

#include "core/topk_order.h"
#include "kernels/block_select.cuh"
#include "kernels/launch.h"
#include "kernels/topk.h"

namespace ip::cuda::detail {

constexpr int kTopkThreads = 256;
constexpr int kTopkSortThreads = 512;
constexpr int kTopkRankThreads = 256;  // step 4 by ranks: threads a block, 32 candidates a block (one a lane)
constexpr int kTopkMaxK = ::ip::cuda::kTopkMaxK;  // kernels/topk.h
constexpr int kTopkHistBins = 2048;
static_assert(kTopkHistBins == kBlockSelectBins, "the sampling step's radix select shares the pass histogram");
constexpr int kCompactUnroll = 8;  // loads in flight per thread in the full-row passes (16 spilled on sm_90)
constexpr int kTopkTieListCap = 2048;  // ties (key == T) of a row listed by id; more: the ordered scan
constexpr std::uint32_t kTopkStage = 1024;  // list entries a block gathers in shared memory while compacting
// kernels/topk.h
constexpr int kTopkSamples = ::ip::cuda::kTopkSamples;
// The most values each thread of a bitonic sort holds in registers (block_bitonic_sort's E): the final
// sort (k <= 4096 composites, kTopkSortThreads threads) and the listed ties (kTopkThreads threads).
constexpr int kTopkSortPerThread = kTopkMaxK / kTopkSortThreads;
constexpr int kTopkTiesPerThread = kTopkTieListCap / kTopkThreads;

struct alignas(16) TopkRowState {
  std::uint32_t prefix;        // digits found so far
  std::uint32_t mask;          // bits of the key they cover
  std::uint32_t k_rem;         // keys still needed among those matching prefix under mask
  std::uint32_t bucket_count;  // keys matching prefix under mask
  std::uint32_t take_all;      // every key matching the prefix is taken (search over)
  std::uint32_t done_blocks;   // ticket counter of the running pass
  std::uint32_t slots;         // candidate slots claimed by the gather
  std::uint32_t compact;       // pass 1 or 2 wrote its bucket (and the keys above) to the compact list
  std::uint32_t ccount;        // entries of the compact list
  std::uint32_t tcount;        // ids in the tie list
  std::uint32_t sampled;       // step 0 set lo: pass 0 compacts the keys >= lo (no compact after: dropped)
  std::uint32_t lo;
  std::uint32_t pad[4];
};
static_assert(sizeof(TopkRowState) == 64, "one row state per 64 bytes");

// A row's state, for a step that reads several fields before branching on them. Field by field, ptxas
// loaded take_all, branched on it, then loaded the rest, and more after the next barrier: three memory
// round trips at the start of every pass (SASS, 2026-12-04); it did the same with vector loads (split
// into the fields used) and with inline-PTX vector loads. What keeps the loads together is the branch
// depending on all of them: see the pass's first `return`.
//
// The four 16-byte loads take in done_blocks, slots, ccount and tcount, which other blocks of the row may
// be adding to (atomics) while a pass or the gather starts: a race on those words, whose values the steps
// use only when no block of the step updates them (ccount, read when a pass starts from the previous
// pass's list) or not at all (the emulator's race check between resident blocks found it, 2026-12-06).
// The race-check build reads those four as relaxed atomics (the same values) and the rest plainly, so
// that the check still sees every other field's reads.
__device__ __forceinline__ TopkRowState load_row_state(const TopkRowState* st) {
  TopkRowState r;
#if defined(IP_CUEMU) && defined(__SANITIZE_THREAD__)
  r = TopkRowState{st->prefix, st->mask, st->k_rem, st->bucket_count, st->take_all,
                   ::cuemu::load_relaxed(&st->done_blocks), ::cuemu::load_relaxed(&st->slots), st->compact,
                   ::cuemu::load_relaxed(&st->ccount), ::cuemu::load_relaxed(&st->tcount), st->sampled, st->lo,
                   {0, 0, 0, 0}};
#else
  const uint4* src = reinterpret_cast<const uint4*>(st);
  uint4* dst = reinterpret_cast<uint4*>(&r);
#pragma unroll
  for (int i = 0; i < 4; ++i) dst[i] = src[i];
#endif
  return r;
}

struct TopkParams {
  int rows;
  const long long* row_offset;
  const float* scores;
  int k;
  int bpr;      // blocks per row (gridDim.y)
  int bpr_cap;  // stride of tie_count
  TopkRowState* state;       // [rows]
  std::uint32_t* hist;       // [rows, kTopkHistBins], zero between passes
  std::uint32_t* tie_count;  // [rows, bpr_cap]
  std::uint64_t* cand;       // [rows, k]
  std::uint64_t* clist;      // [rows, compact_cap] compact list (composites)
  std::uint32_t compact_cap;
  std::uint32_t* tlist;      // [rows, kTopkTieListCap] ids of the ties at T (listed rows only)
  long long sample_min_row;  // step 0 samples rows at least this long
  std::int32_t* ids;
  float* values;
  // The single launch (topk_single_kernel): [0] the next work item, then per row kTopkSingleSteps counts
  // of the blocks done with each step. Zero at the start of a call (the launcher's memset).
  std::uint32_t* sync;
  // 0, from the launcher: a value the compiler cannot know (load_keys).
  std::uint32_t opaque_zero;
};

// Shared memory of a histogram pass (one block), of the tie step and of the rank step; the chained
// kernels declare their own, the single launch a union of the three.
struct TopkHistShared {
  std::uint32_t h[kTopkHistBins];
  std::uint64_t stage[kTopkStage];
  std::uint32_t staged, stage_base, found_rem, found_count;
  int found_digit;
  bool last, keep;
};
struct TopkTiesShared {
  std::uint32_t tie_ids[kTopkTieListCap];
};
struct TopkRankShared {
  std::uint32_t above[kTopkRankThreads / 32][32];
};

// Every kernel of the chain is launched with IP_LAUNCH_CHAINED (kernels/launch.h): it waits for the one
// before it to finish (and its writes to be visible) before anything else, and lets the next one be
// scheduled at once (its blocks wait in turn), so that launch latency overlaps the running kernel.
__device__ __forceinline__ void chained_start() {
  wait_for_prior_grids();
  allow_dependents();
}

// Chunk [begin, end) of block b among bpr over a row of n.
__device__ __forceinline__ void block_chunk(long long n, int b, int bpr, long long& begin, long long& end) {
  const long long chunk = (n + bpr - 1) / bpr;
  begin = min(n, chunk * b);
  end = min(n, begin + chunk);
}

// kCompactUnroll scores from s at i0 + u * stride (u = 0, 1, ...), issued before any is used; those at
// end or beyond read s[end - 1] instead (end > 0 and s[end - 1] in the caller's range) and come back as
// key 0. zero: 0 (TopkParams::opaque_zero). Written as `i < end ? topk_key(__ldg(s + i)) : 0u`, each load
// became a branch around the load and its key conversion, and ptxas (CUDA 13.0, sm_90) issued every load
// after the previous one's conversion: a memory round trip per score (SASS, 2026-12-04), not one per
// kCompactUnroll. Unconditional loads were still split 6 + 2 around a conversion; so every conversion
// also depends on all the loads, through their bits ANDed with a zero the compiler cannot see through.
__device__ __forceinline__ void load_keys(const float* s, long long i0, long long stride, long long end,
                                          std::uint32_t zero, std::uint32_t (&keys)[kCompactUnroll]) {
  std::uint32_t v[kCompactUnroll];
#pragma unroll
  for (int u = 0; u < kCompactUnroll; ++u) v[u] = __float_as_uint(__ldg(s + min(i0 + u * stride, end - 1)));
  std::uint32_t all = 0;
#pragma unroll
  for (int u = 0; u < kCompactUnroll; ++u) all |= v[u];
  all &= zero;
#pragma unroll
  for (int u = 0; u < kCompactUnroll; ++u) keys[u] = i0 + u * stride < end ? topk_key(__uint_as_float(v[u] | all)) : 0u;
}

// Calls f(key, i) for every i in [begin, end), the block's threads striding; kCompactUnroll loads are
// issued before any is used (memory-level parallelism for the full-row passes).
template <class F>
__device__ __forceinline__ void for_each_key(const float* s, long long begin, long long end, std::uint32_t zero,
                                             F&& f) {
  const long long step = static_cast<long long>(blockDim.x) * kCompactUnroll;
  for (long long i0 = begin + threadIdx.x; i0 < end; i0 += step) {
    std::uint32_t keys[kCompactUnroll];
    load_keys(s, i0, blockDim.x, end, zero, keys);
#pragma unroll
    for (int u = 0; u < kCompactUnroll; ++u) {
      const long long i = i0 + static_cast<long long>(u) * blockDim.x;
      if (i < end) f(keys[u], i);
    }
  }
}

template <int PASS>
struct Digit {
  static constexpr int shift = PASS == 0 ? 21 : (PASS == 1 ? 10 : 0);
  static constexpr int bits = PASS == 2 ? 10 : 11;
  static constexpr std::uint32_t mask = (1u << bits) - 1u;
};

// Step 0. Grid (rows). The sampled threshold (row state lo, sampled); rows too short, or a k too large
// for the list, are left unsampled.
__global__ void __launch_bounds__(kTopkThreads) topk_sample_kernel(TopkParams p) {
  chained_start();
  const int row = blockIdx.x;
  TopkRowState* st = p.state + row;
  const long long off = p.row_offset[row], n = p.row_offset[row + 1] - off;
  if (n < p.sample_min_row || n < 1) return;
  const int S = static_cast<int>(min(n, static_cast<long long>(kTopkSamples)));
  // Samples >= the k-th largest key: about Binomial(S, k / n), mean mu. Rank r is mu + 4 sd + 16 above.
  // (float: a double sqrt is a subroutine call, and ptxas spilled around it)
  const float mu = static_cast<float>(static_cast<double>(p.k) * S / static_cast<double>(n));
  const int r = static_cast<int>(ceilf(mu + 4.0f * sqrtf(mu) + 16.0f));
  if (r > S || static_cast<double>(r) * static_cast<double>(n) / S > 0.5 * p.compact_cap) return;  // uniform
  __shared__ std::uint32_t v[kTopkSamples];
  __shared__ std::uint32_t h[kTopkHistBins];
  const float* s = p.scores + off;
  // A thread's kTopkSamples / kTopkThreads samples loaded before any is converted or stored (as a strided
  // loop, load then store, each load waited for the one before: 16 scattered memory round trips a
  // thread; the conversions also depend on every load, through TopkParams::opaque_zero).
  {
    constexpr int kPer = kTopkSamples / kTopkThreads;
    static_assert(kPer * kTopkThreads == kTopkSamples, "whole samples a thread");
    const int t = static_cast<int>(threadIdx.x);
    std::uint32_t x[kPer];
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      const long long i = min(t + j * kTopkThreads, S - 1);
      x[j] = __float_as_uint(__ldg(s + (2 * i + 1) * n / (2LL * S)));
    }
    std::uint32_t all = 0;
#pragma unroll
    for (int j = 0; j < kPer; ++j) all |= x[j];
    all &= p.opaque_zero;
#pragma unroll
    for (int j = 0; j < kPer; ++j)
      if (t + j * kTopkThreads < S) v[t + j * kTopkThreads] = topk_key(__uint_as_float(x[j] | all));
  }
  __syncthreads();
  const std::uint32_t lo = block_radix_select(v, S, static_cast<std::uint32_t>(r), h);  // the r-th largest
  if (threadIdx.x == 0) {
    st->lo = lo;
    st->sampled = 1;
  }
}

// Step 1, pass PASS. Grid (rows, bpr).
// Pass 0 comes in three variants: plain (no step 0), SAMPLED (after step 0: rows it sampled compact),
// and REDO (launched after the SAMPLED one: the plain pass 0 again, for the rows whose sampled list was
// dropped, their first pass having counted only the keys >= lo).
template <int PASS, bool SAMPLED = false, bool REDO = false>
__device__ __forceinline__ void topk_hist_block(const TopkParams& p, int row, int by, TopkHistShared& sh) {
  static_assert(PASS == 0 || (!SAMPLED && !REDO), "only pass 0 is sampled or redone");
  static_assert(!(SAMPLED && REDO), "one variant at a time");
  using Dg = Digit<PASS>;
  constexpr int bins = 1 << Dg::bits;
  TopkRowState* st = p.state + row;
  const TopkRowState sv = load_row_state(st);  // the fields read below, as the previous step left them
  const long long off = p.row_offset[row], n = p.row_offset[row + 1] - off;  // with the state, not after
  // 0, but the first branch then needs every field used below, so their loads go out before it
  const std::uint32_t all_loaded = (sv.prefix | sv.mask | sv.k_rem | sv.bucket_count | sv.compact | sv.ccount |
                                    sv.sampled | sv.lo | static_cast<std::uint32_t>(n)) & p.opaque_zero;
  if (REDO && !(sv.sampled && !sv.compact)) return;  // only rows whose sampled list was dropped
  if (sv.take_all | all_loaded) return;  // the same for every block of the row
  const std::uint32_t prefix = sv.prefix, mask = sv.mask;
  const std::uint32_t k_rem = PASS == 0 ? static_cast<std::uint32_t>(p.k) : sv.k_rem;

  std::uint32_t* const h = sh.h;
  for (int d = threadIdx.x; d < bins; d += blockDim.x) h[d] = 0;
  __syncthreads();

  const float* s = p.scores + off;
  std::uint64_t* clist = p.clist + static_cast<long long>(row) * p.compact_cap;
  // The list holds every key >= lo: pass 0 takes lo from step 0's sample (the list is kept if it holds
  // between k and compact_cap keys); passes 1 and 2 take the bucket found by the previous pass (keys
  // matching prefix, and the fewer than k keys above: key >= prefix) when it fits. Pass 1 compacts the
  // pass-0 bucket, else pass 2 the pass-1 bucket. The same decision in every block.
  // A sampled pass 0 histograms only the keys >= lo (the others cannot be in the top k when the list
  // is kept; when it is not, the REDO launch counts them all).
  const bool sampled = SAMPLED && sv.sampled != 0;
  const bool listed = PASS >= 1 && sv.compact != 0;
  const bool compacting =
      PASS == 0 ? sampled
                : !listed && static_cast<unsigned long long>(sv.bucket_count) + (p.k - k_rem) <= p.compact_cap;
  const std::uint32_t lo = PASS == 0 ? sv.lo : prefix;  // lo: 0 unless sampled
  long long begin, end;
  if (listed) {  // the surviving keys are all in the compact list (ccount final: a listed pass adds none)
    block_chunk(min(sv.ccount, p.compact_cap), by, p.bpr, begin, end);  // min: memory-safe
    for (long long i = begin + threadIdx.x; i < end; i += blockDim.x) {
      const std::uint32_t key = static_cast<std::uint32_t>(clist[i] >> 32);
      if ((key & mask) == prefix) atomicAdd(&h[(key >> Dg::shift) & Dg::mask], 1u);
    }
  } else if (compacting) {
    // Warp tiles of 32 * kCompactUnroll scores. The keys >= lo go to a stage in shared memory (a shared
    // atomic per warp tile) and reach the row's list with one reservation per block, after the loop (a
    // reservation per warp tile was a global atomic round trip on one address per row for most tiles);
    // what does not fit in the stage is reserved in the list directly, per warp tile.
    std::uint64_t* const stage = sh.stage;
    std::uint32_t& staged = sh.staged;
    std::uint32_t& stage_base = sh.stage_base;
    if (threadIdx.x == 0) staged = 0;
    __syncthreads();
    block_chunk(n, by, p.bpr, begin, end);
    const int lane = threadIdx.x & 31;
    constexpr long long tile = 32 * kCompactUnroll;
    for (long long i0 = begin + (threadIdx.x >> 5) * tile; i0 < end; i0 += (blockDim.x >> 5) * tile) {
      // All the tile's loads first, then the histogram: with the shared atomic in the same loop as the
      // load, ptxas (CUDA 13.0, sm_90) issued each load after the previous key's atomic, which waits for
      // that key: kCompactUnroll dependent memory round trips a tile instead of one.
      std::uint32_t keys[kCompactUnroll];
      load_keys(s, i0 + lane, 32, end, p.opaque_zero, keys);  // i0 < end: every address stays inside the chunk
      std::uint32_t mine = 0;
#pragma unroll
      for (int u = 0; u < kCompactUnroll; ++u) {
        const long long i = i0 + u * 32 + lane;
        if (i < end && (keys[u] & mask) == prefix && (!sampled || keys[u] >= lo))
          atomicAdd(&h[(keys[u] >> Dg::shift) & Dg::mask], 1u);
        mine += i < end && keys[u] >= lo;  // pass 1, 2: in the bucket or above it
      }
      std::uint32_t inc = mine;
#pragma unroll
      for (int o = 1; o < 32; o <<= 1) {
        const std::uint32_t y = __shfl_up_sync(0xFFFFFFFFu, inc, o);
        if (lane >= o) inc += y;
      }
      const std::uint32_t warp_total = __shfl_sync(0xFFFFFFFFu, inc, 31);
      std::uint32_t wbase = 0, gbase = 0;
      if (lane == 0 && warp_total) {
        wbase = atomicAdd(&staged, warp_total);
        const std::uint32_t in_stage = wbase >= kTopkStage ? 0u : min(warp_total, kTopkStage - wbase);
        if (in_stage < warp_total) gbase = atomicAdd(&st->ccount, warp_total - in_stage);
      }
      wbase = __shfl_sync(0xFFFFFFFFu, wbase, 0);
      gbase = __shfl_sync(0xFFFFFFFFu, gbase, 0);
      // Stage order: this warp's entries are [wbase, wbase + warp_total); those at kTopkStage and beyond
      // go to the list from gbase on.
      const std::uint32_t spill_from = max(wbase, kTopkStage);
      std::uint32_t pos = wbase + inc - mine;
#pragma unroll
      for (int u = 0; u < kCompactUnroll; ++u) {
        const long long i = i0 + u * 32 + lane;
        if (i < end && keys[u] >= lo) {
          const std::uint64_t c = topk_composite(keys[u], static_cast<std::uint32_t>(i));
          if (pos < kTopkStage) {
            stage[pos] = c;
          } else {
            const std::uint32_t g = gbase + (pos - spill_from);
            if (g < p.compact_cap) clist[g] = c;
          }
          ++pos;
        }
      }
    }
    __syncthreads();
    const std::uint32_t kept = min(staged, kTopkStage);
    if (threadIdx.x == 0) stage_base = kept ? atomicAdd(&st->ccount, kept) : 0u;
    __syncthreads();
    for (std::uint32_t i = threadIdx.x; i < kept; i += blockDim.x)
      if (stage_base + i < p.compact_cap) clist[stage_base + i] = stage[i];
  } else {
    block_chunk(n, by, p.bpr, begin, end);
    for_each_key(s, begin, end, p.opaque_zero, [&](std::uint32_t key, long long) {
      if ((key & mask) == prefix) atomicAdd(&h[(key >> Dg::shift) & Dg::mask], 1u);
    });
  }
  __syncthreads();
  std::uint32_t* gh = p.hist + static_cast<long long>(row) * kTopkHistBins;
  for (int d = threadIdx.x; d < bins; d += blockDim.x)
    if (h[d]) atomicAdd(gh + d, h[d]);
  __threadfence();
  __syncthreads();
  bool& last = sh.last;
  if (threadIdx.x == 0) last = atomicAdd(&st->done_blocks, 1u) == static_cast<std::uint32_t>(p.bpr - 1);
  __syncthreads();
  if (!last) return;
  __threadfence();
  if (sampled) {  // keep the list if it holds the top k (and so the histogram counts them) and fits
    bool& keep = sh.keep;
    if (threadIdx.x == 0) {
      const std::uint32_t c = __ldcg(&st->ccount);
      keep = c >= static_cast<std::uint32_t>(p.k) && c <= p.compact_cap;
      if (!keep) {
        st->ccount = 0;  // pass 1 or 2 may compact anew
        st->done_blocks = 0;
      }
    }
    __syncthreads();
    if (!keep) {
      for (int d = threadIdx.x; d < bins; d += blockDim.x) gh[d] = 0;
      return;
    }
  }

  // The last block: find the digit of the k_rem-th largest matching key. Thread t owns the `per`
  // buckets [bins - (t+1) per, bins - t per), so lower threads own higher digits.
  constexpr int per = bins / kTopkThreads;
  static_assert(per % 4 == 0, "a thread's buckets in whole uint4");
  const int hi_d = bins - threadIdx.x * per;
  std::uint32_t cnt[per];
  std::uint32_t local = 0;
  // Its buckets [hi_d - per, hi_d) in uint4 loads (16-byte aligned: the workspace is, and per is a
  // multiple of 4), cnt[i] = bucket hi_d - 1 - i. Scalar loads, one bucket each, had the warp's lanes
  // 4 per bytes apart: 32 sectors a request for 128 bytes at per = 8, 16 at per = 4 (make mem-profile),
  // per requests in all.
  const uint4* quads = reinterpret_cast<const uint4*>(gh + hi_d - per);
#pragma unroll
  for (int q = 0; q < per / 4; ++q) {
    const uint4 x = __ldcg(quads + q);
    const int i = per - 1 - 4 * q;  // bucket hi_d - per + 4 q is cnt[per - 1 - 4 q]
    cnt[i] = x.x;
    cnt[i - 1] = x.y;
    cnt[i - 2] = x.z;
    cnt[i - 3] = x.w;
  }
#pragma unroll
  for (int i = 0; i < per; ++i) local += cnt[i];
  std::uint32_t total;
  const std::uint32_t above = block_exclusive_sum(local, total);
  int& found_digit = sh.found_digit;
  std::uint32_t& found_rem = sh.found_rem;
  std::uint32_t& found_count = sh.found_count;
  if (threadIdx.x == 0) found_digit = -1;
  __syncthreads();
  if (above < k_rem && k_rem <= above + local) {
    std::uint32_t cum = above;
#pragma unroll
    for (int i = 0; i < per; ++i) {
      if (cum < k_rem && k_rem <= cum + cnt[i]) {
        found_digit = hi_d - 1 - i;
        found_rem = k_rem - cum;
        found_count = cnt[i];
      }
      cum += cnt[i];
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    if (found_digit < 0) {  // fewer than k keys in the row: take them all (ids past them stay -1)
      st->prefix = 0;
      st->mask = 0;
      st->take_all = 1;
    } else {
      st->prefix = prefix | (static_cast<std::uint32_t>(found_digit) << Dg::shift);
      st->mask = mask | (Dg::mask << Dg::shift);
      st->k_rem = found_rem;
      st->bucket_count = found_count;
      st->take_all = found_count == found_rem ? 1u : 0u;
    }
    if (compacting) st->compact = 1;  // read by every block of this pass before the ticket
    st->done_blocks = 0;
  }
  for (int d = threadIdx.x; d < bins; d += blockDim.x) gh[d] = 0;  // clean for the next pass
}

template <int PASS, bool SAMPLED = false, bool REDO = false>
__global__ void __launch_bounds__(kTopkThreads) topk_hist_kernel(TopkParams p) {
  chained_start();
  __shared__ TopkHistShared sh;
  topk_hist_block<PASS, SAMPLED, REDO>(p, blockIdx.x, blockIdx.y, sh);
}

// Step 2. Grid (rows, bpr). Candidates from the compact list or the row. A row that takes only some of
// its ties lists their ids (at most kTopkTieListCap of them) or, with more, has each block count the
// ties in its chunk of the row, the order step 3's scan needs.
__device__ __forceinline__ void topk_gather_block(const TopkParams& p, int row, int by) {
  TopkRowState* st = p.state + row;
  const std::uint32_t prefix = st->prefix, mask = st->mask;
  const bool take_all = st->take_all != 0, compact = st->compact != 0;
  // Without take_all the search went through all three passes: bucket_count is the number of keys == T.
  const bool list_ties = !take_all && st->bucket_count <= static_cast<std::uint32_t>(kTopkTieListCap);
  const long long off = p.row_offset[row], n = p.row_offset[row + 1] - off;
  const float* s = p.scores + off;
  std::uint64_t* cand = p.cand + static_cast<long long>(row) * p.k;
  std::uint32_t* tlist = p.tlist + static_cast<long long>(row) * kTopkTieListCap;
  auto take = [&](std::uint64_t c) {
    const std::uint32_t slot = atomicAdd(&st->slots, 1u);
    if (slot < static_cast<std::uint32_t>(p.k)) cand[slot] = c;
  };
  auto list_tie = [&](std::uint32_t id) {
    const std::uint32_t t = atomicAdd(&st->tcount, 1u);
    if (t < static_cast<std::uint32_t>(kTopkTieListCap)) tlist[t] = id;
  };
  long long begin, end;
  block_chunk(n, by, p.bpr, begin, end);
  std::uint32_t ties = 0;
  if (compact) {  // the list holds every key that can still be taken, ties included
    long long cb, ce;
    block_chunk(min(st->ccount, p.compact_cap), by, p.bpr, cb, ce);
    const std::uint64_t* clist = p.clist + static_cast<long long>(row) * p.compact_cap;
    for (long long i = cb + threadIdx.x; i < ce; i += blockDim.x) {
      const std::uint64_t c = clist[i];
      const std::uint32_t mk = static_cast<std::uint32_t>(c >> 32) & mask;
      if (mk > prefix || (mk == prefix && take_all))
        take(c);
      else if (mk == prefix && list_ties)
        list_tie(static_cast<std::uint32_t>(topk_composite_id(c)));
    }
    if (!take_all && !list_ties)
      for (long long i = begin + threadIdx.x; i < end; i += blockDim.x) ties += topk_key(__ldg(s + i)) == prefix;
  } else {
    for_each_key(s, begin, end, p.opaque_zero, [&](std::uint32_t key, long long i) {
      const std::uint32_t mk = key & mask;
      if (mk > prefix || (mk == prefix && take_all))
        take(topk_composite(key, static_cast<std::uint32_t>(i)));
      else if (mk == prefix && list_ties)
        list_tie(static_cast<std::uint32_t>(i));
      else if (mk == prefix)
        ++ties;
    });
  }
  std::uint32_t total;
  block_exclusive_sum(ties, total);
  if (threadIdx.x == 0) p.tie_count[static_cast<long long>(row) * p.bpr_cap + by] = total;
}

__global__ void __launch_bounds__(kTopkThreads) topk_gather_kernel(TopkParams p) {
  chained_start();
  topk_gather_block(p, blockIdx.x, blockIdx.y);
}

// Step 3. Grid (rows, bpr). Only rows that take a strict subset of the ties at the threshold T: the
// `need` lowest ids among them fill the last `need` candidate slots.
__device__ __forceinline__ void topk_ties_block(const TopkParams& p, int row, int by, TopkTiesShared& sh) {
  const TopkRowState* st = p.state + row;
  if (st->take_all) return;
  const std::uint32_t T = st->prefix, need = st->k_rem;
  std::uint64_t* cand = p.cand + static_cast<long long>(row) * p.k + (p.k - need);
  if (st->bucket_count <= static_cast<std::uint32_t>(kTopkTieListCap)) {  // listed: one block sorts the ids
    if (by != 0) return;
    std::uint32_t* const tie_ids = sh.tie_ids;
    const int m = static_cast<int>(min(st->tcount, static_cast<std::uint32_t>(kTopkTieListCap)));
    const int n2 = bitonic_size<1>(m);
    const std::uint32_t* tlist = p.tlist + static_cast<long long>(row) * kTopkTieListCap;
    for (int i = threadIdx.x; i < n2; i += blockDim.x) tie_ids[i] = i < m ? tlist[i] : 0xFFFFFFFFu;
    __syncthreads();
    block_bitonic_sort_spread<false, kTopkTiesPerThread>(tie_ids, n2);
    for (int i = threadIdx.x; i < static_cast<int>(need); i += blockDim.x) cand[i] = topk_composite(T, tie_ids[i]);
    return;
  }
  const std::uint32_t* counts = p.tie_count + static_cast<long long>(row) * p.bpr_cap;
  if (counts[by] == 0) return;  // no ties in this chunk (block-uniform)
  std::uint32_t before = 0;
  for (int b = threadIdx.x; b < by; b += blockDim.x) before += counts[b];
  std::uint32_t offset;
  block_exclusive_sum(before, offset);  // offset = ties in the chunks before this one
  if (offset >= need) return;           // block-uniform
  const long long off = p.row_offset[row], n = p.row_offset[row + 1] - off;
  long long begin, end;
  block_chunk(n, by, p.bpr, begin, end);
  const float* s = p.scores + off;
  for (long long i0 = begin; i0 < end && offset < need; i0 += blockDim.x) {
    const long long i = i0 + threadIdx.x;
    const bool tie = i < end && topk_key(__ldg(s + i)) == T;
    std::uint32_t tile_total;
    const std::uint32_t pos = block_exclusive_sum(tie ? 1u : 0u, tile_total);
    if (tie && offset + pos < need) cand[offset + pos] = topk_composite(T, static_cast<std::uint32_t>(i));
    offset += tile_total;
  }
}

__global__ void __launch_bounds__(kTopkThreads) topk_ties_kernel(TopkParams p) {
  chained_start();
  __shared__ TopkTiesShared sh;
  topk_ties_block(p, blockIdx.x, blockIdx.y, sh);
}

// Step 4 by ranks. Grid (rows, ceil(k / 32)); block (row, b) places candidates 32 b .. 32 b + 31 and
// writes the padding slots among them (ids -1, NaN values) of a row with fewer than k candidates.
// Dynamic shared memory: k composites (8k bytes, at most 32 KiB), so that small k leaves room for more
// blocks an SM.
// v[i] = cand[i] for i < count and `fill` for count <= i < n (n <= kPer * blockDim.x), each thread's kPer
// loads issued before any store: as a strided loop (load, store, next) each load waited for the one
// before, up to k / blockDim.x memory round trips (SASS, 2026-12-04); unrolled, ptxas still put a store
// or two between them (two or three round trips), so with kTogether every store also depends on all the
// loads (ORed with their bits ANDed with zero, 0: TopkParams::opaque_zero): one round trip (the rank
// step; the sort kernel spilled 8 B with it). Loads past count read cand[count - 1] again (an L1 hit).
// Every thread of the block calls it; a __syncthreads must follow.
template <int kPer, bool kTogether>
__device__ __forceinline__ void stage_candidates(const std::uint64_t* cand, int count, int n, std::uint64_t fill,
                                                 std::uint32_t zero, std::uint64_t* v) {
  const int t = static_cast<int>(threadIdx.x), nt = static_cast<int>(blockDim.x);
  std::uint64_t c[kPer];
#pragma unroll
  for (int j = 0; j < kPer; ++j) c[j] = count > 0 ? cand[min(t + j * nt, count - 1)] : fill;
  std::uint64_t all = 0;
  if constexpr (kTogether) {
#pragma unroll
    for (int j = 0; j < kPer; ++j) all |= c[j];
    all &= zero;
  }
#pragma unroll
  for (int j = 0; j < kPer; ++j) {
    const int i = t + j * nt;
    if (i < n) v[i] = i < count ? (c[j] | all) : fill;
  }
}

// v: k composites of shared memory. blockDim.x == kTopkRankThreads.
__device__ __forceinline__ void topk_rank_block(const TopkParams& p, int row, int by, std::uint64_t* v,
                                                TopkRankShared& sh) {
  constexpr int kWarps = kTopkRankThreads / 32;
  std::uint32_t (&above)[kWarps][32] = sh.above;
  const TopkRowState* st = p.state + row;
  const long long off = p.row_offset[row];  // loaded now, with the state: the values' gather needs it
  const int k = p.k;
  const int count = st->take_all ? static_cast<int>(min(st->slots, static_cast<std::uint32_t>(k))) : k;
  const std::uint64_t* cand = p.cand + static_cast<long long>(row) * k;
  stage_candidates<kTopkMaxK / kTopkRankThreads, true>(cand, count, count, 0ull, p.opaque_zero, v);
  __syncthreads();
  const int lane = static_cast<int>(threadIdx.x) & 31, warp = static_cast<int>(threadIdx.x) >> 5;
  const int i = by * 32 + lane;
  const std::uint64_t mine = i < count ? v[i] : 0ull;
  // Warp w compares with candidates [j0, j1): every lane reads the same v[j] (a broadcast).
  const int per = (count + kWarps - 1) / kWarps;
  const int j0 = min(count, warp * per), j1 = min(count, j0 + per);
  std::uint32_t n = 0;
#pragma unroll 8
  for (int j = j0; j < j1; ++j) n += v[j] > mine ? 1u : 0u;
  above[warp][lane] = n;
  __syncthreads();
  if (warp != 0 || i >= k) return;
  const long long base = static_cast<long long>(row) * k;
  if (i < count) {
    std::uint32_t rank = 0;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) rank += above[w][lane];
    const std::int32_t id = topk_composite_id(mine);
    p.ids[base + rank] = id;
    if (p.values) p.values[base + rank] = p.scores[off + id];
  } else {  // slot i >= count: no candidate ranks there
    p.ids[base + i] = -1;
    if (p.values) p.values[base + i] = __int_as_float(0x7FC00000);
  }
}

__global__ void __launch_bounds__(kTopkRankThreads) topk_rank_kernel(TopkParams p) {
  chained_start();
  IP_DYNAMIC_SHARED(std::uint64_t, v);
  __shared__ TopkRankShared sh;
  topk_rank_block(p, blockIdx.x, blockIdx.y, v, sh);
}

// ---- the whole search in one launch ----
// Steps of the single launch: passes 0, 1 and 2, gather, ties, rank (no sampling, order by ranks).
constexpr int kTopkSingleSteps = 6;
static_assert(kTopkRankThreads == kTopkThreads, "the single launch runs every step with one block size");

// Blocks a row takes in step s of the single launch: the passes, gather and ties bpr, the rank step
// ceil(k / 32).
__host__ __device__ __forceinline__ int topk_single_blocks(int step, int bpr, int k) {
  return step < kTopkSingleSteps - 1 ? bpr : (k + 31) / 32;
}

// Waits (thread 0, then the block) until *count reaches `want`, then makes the writes released before
// the count's increments visible to the block (the fence cooperative groups' grid sync uses).
__device__ __forceinline__ void topk_wait_count(const std::uint32_t* count, std::uint32_t want) {
  if (threadIdx.x == 0) {
    unsigned ns = 32;
#if defined(IP_CUEMU)
    while (::cuemu::load_relaxed(count) < want) {  // the emulator's race check sees a strong read
#else
    while (*reinterpret_cast<const volatile std::uint32_t*>(count) < want) {
#endif
      __nanosleep(ns);
      if (ns < 512) ns *= 2;
    }
    __threadfence();
  }
  __syncthreads();
}

// The single launch (TopkLaunch::single): one kernel does what the chain's six do, with one launch's
// latency instead of six. Work items are (step, row, block of the step), numbered step by step; each
// block takes the next item from a counter (sync[0]), waits until every block of the step before it
// on the same row has finished (a per-row count, sync[1 + row * kTopkSingleSteps + step]), runs that
// step's block body and counts itself done. A block waits only on items numbered below its own, which
// blocks already running hold, so the wait ends however many blocks are resident: the grid is sized
// for the GPU, not for the work. Dynamic shared memory: k composites (the rank step's). Bounded to 2
// blocks an SM: 93 registers on sm_80, 96 on sm_90, no spill (unbounded, ptxas chose 80 on sm_90 and
// spilled 40 B; bounded to 3 blocks it spilled 28-84 B). One row of 1Mi scores takes 256 blocks a step,
// which 2 an SM hold at once.
__global__ void __launch_bounds__(kTopkThreads, 2) topk_single_kernel(TopkParams p) {
  union Shared {
    TopkHistShared hist;
    TopkTiesShared ties;
    TopkRankShared rank;
  };
  __shared__ Shared sh;
  __shared__ std::uint32_t item_sh;
  IP_DYNAMIC_SHARED(std::uint64_t, v);
  std::uint32_t* const done = p.sync + 1;
  const std::uint32_t rows = static_cast<std::uint32_t>(p.rows);
  for (;;) {
    __syncthreads();  // the previous item's shared memory and item_sh are no longer read
    if (threadIdx.x == 0) item_sh = atomicAdd(p.sync, 1u);
    __syncthreads();
    std::uint32_t item = item_sh;
    int step = 0;
    std::uint32_t nb = static_cast<std::uint32_t>(topk_single_blocks(0, p.bpr, p.k));
    while (step < kTopkSingleSteps && item >= rows * nb) {
      item -= rows * nb;
      if (++step < kTopkSingleSteps) nb = static_cast<std::uint32_t>(topk_single_blocks(step, p.bpr, p.k));
    }
    if (step == kTopkSingleSteps) return;  // no work left (block-uniform)
    const int row = static_cast<int>(item / nb), by = static_cast<int>(item % nb);
    std::uint32_t* const row_done = done + static_cast<long long>(row) * kTopkSingleSteps;
    if (step == kTopkSingleSteps - 1) {
      // The rank step needs the gather; the ties step only for a row that takes some of its ties (not
      // take_all, set by the passes before the gather): most rows skip that wait and its wake-up.
      topk_wait_count(row_done + step - 2, static_cast<std::uint32_t>(topk_single_blocks(step - 2, p.bpr, p.k)));
      if (!p.state[row].take_all)
        topk_wait_count(row_done + step - 1, static_cast<std::uint32_t>(topk_single_blocks(step - 1, p.bpr, p.k)));
    } else if (step > 0) {
      topk_wait_count(row_done + step - 1, static_cast<std::uint32_t>(topk_single_blocks(step - 1, p.bpr, p.k)));
    }
    switch (step) {
      case 0: topk_hist_block<0>(p, row, by, sh.hist); break;
      case 1: topk_hist_block<1>(p, row, by, sh.hist); break;
      case 2: topk_hist_block<2>(p, row, by, sh.hist); break;
      case 3: topk_gather_block(p, row, by); break;
      case 4: topk_ties_block(p, row, by, sh.ties); break;
      default: topk_rank_block(p, row, by, v, sh.rank); break;
    }
    __syncthreads();  // every thread's writes of this item are done
    if (threadIdx.x == 0) {
      __threadfence();
      atomicAdd(row_done + step, 1u);
    }
  }
}

// Step 4. Grid (rows), kTopkSortThreads threads. Bitonic sort of bitonic_size<1>(k) composites: the k
// candidates, then padding 0 (sorts last, id -1).
__global__ void __launch_bounds__(kTopkSortThreads) topk_sort_kernel(TopkParams p) {
  chained_start();
  __shared__ std::uint64_t v[kTopkMaxK];
  const int row = blockIdx.x;
  const TopkRowState* st = p.state + row;
  const int k = p.k;
  const std::uint32_t count = st->take_all ? min(st->slots, static_cast<std::uint32_t>(k)) : static_cast<std::uint32_t>(k);
  const int n2 = bitonic_size<1>(k);
  const std::uint64_t* cand = p.cand + static_cast<long long>(row) * k;
  const long long off = p.row_offset[row];
  stage_candidates<kTopkMaxK / kTopkSortThreads, false>(cand, static_cast<int>(count), n2, 0ull, p.opaque_zero, v);
  __syncthreads();
  block_bitonic_sort_spread<true, kTopkSortPerThread>(v, n2);
  // Ids first, then every value load of the thread, then the stores (a load per step of a strided loop
  // waited for the one before). A row with no candidate loads nothing; otherwise a padding slot (id -1)
  // reads the row's first score, unused.
  constexpr int kOut = kTopkMaxK / kTopkSortThreads;
  const int t = static_cast<int>(threadIdx.x), nt = static_cast<int>(blockDim.x);
  std::int32_t ids[kOut];
  float vals[kOut];
#pragma unroll
  for (int j = 0; j < kOut; ++j) {
    const int i = t + j * nt;
    const std::uint64_t c = i < k ? v[i] : 0ull;
    ids[j] = c ? topk_composite_id(c) : -1;
  }
#pragma unroll
  for (int j = 0; j < kOut; ++j)
    vals[j] = p.values && count > 0 ? p.scores[off + max(ids[j], 0)] : __int_as_float(0x7FC00000);
#pragma unroll
  for (int j = 0; j < kOut; ++j) {
    const int i = t + j * nt;
    if (i >= k) continue;
    p.ids[static_cast<long long>(row) * k + i] = ids[j];
    if (p.values) p.values[static_cast<long long>(row) * k + i] = ids[j] >= 0 ? vals[j] : __int_as_float(0x7FC00000);
  }
}

}  // namespace ip::cuda::detail
