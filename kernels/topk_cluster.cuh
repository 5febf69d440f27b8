// Top-k of each row in one thread block cluster (TopkLaunch::cluster, sm_90 and later; launcher
// kernels/topk.cu). The chain of kernels/topk.cuh takes 6-8 dependent steps a call, and on an H200 a
// short row's top-k cost about 5 us a step whatever the step's work (DEVICE_RUNS.md, 2026-12-04
// evening): a top-512 of 256Ki scores took 54 us, most of the compressed indexer's time. Here each
// row gets one cluster of C blocks (8 or 16) of kTopkClusterThreads threads in a single launch, and the
// steps are cluster barriers instead of kernels; nothing goes through global memory but the row and the
// output. Same search as the chain, same answer:
//   passes 0-2 (digits of 11, 11 and 10 bits): each block histograms its chunk of the row (the keys
//     matching the prefix so far) in its shared memory; after a cluster barrier block r sums bins
//     [r * bins / C, (r + 1) * bins / C) over the cluster's blocks (distributed shared memory) and stores
//     the sums into every block's copy of the cluster histogram; after a second barrier every block
//     finds the same digit holding the k-th largest key. A bucket holding exactly the keys still needed
//     ends the search (take_all). Pass 0 reads the row (float4 loads, 64 KiB in flight a block); pass 1
//     reads it again (from L2 for a row that fits) and keeps the keys at or above the pass-0 bucket, with
//     their ids, in the block's shared memory (up to kTopkClusterListCap or the chunk's length; a chunk
//     with more reads the row again), which pass 2 and the gather then read.
//   sampling (TopkSampling, as the chain: on, or automatic for batches larger than L2): a threshold from
//     4096 evenly spaced keys found by the same passes over the samples; pass 0 then counts and keeps only
//     the keys at or above it (one read of the row, few histogram additions), and the later passes read
//     the kept keys. A threshold that leaves fewer than k keys sends the search back to a full pass 0.
//   gather: each block stages the keys it takes (above the prefix; the ties at it all, none, or -- in
//     the one block where the needed ties end -- the lowest ids, by a scan of its chunk in id order, the
//     tie counts of the blocks before it read from their histograms) as composites in shared memory and
//     appends them to rank 0's list with one reservation.
//   rank: every block copies rank 0's list and places a 1/C share of it: a candidate's place is the
//     number of composites above it (they are unique), the comparisons split over up to 32 threads.
// The same body runs one block of 256 threads a row without a cluster (TopkLaunch::block, any
// architecture; topk_block_kernel): C = 1, the cluster barriers block barriers, no cluster sums or list.
// Shared memory is dynamic only (the emulator gives each block of a cluster its own dynamic shared
// memory, emu/cuemu.h): topk_cluster_smem bytes, at most 176 KiB (k = 4096) and 120 KiB at k = 512. Rows
// shorter than k: their scores, then ids -1 and NaN values, as the chain.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/topk_order.h"
#include "kernels/cluster.cuh"
#include "kernels/topk.cuh"

namespace ip::cuda::detail {

constexpr int kTopkClusterThreads = 1024;
constexpr int kTopkClusterMaxBlocks = 16;

// The most composites a block keeps of its chunk after pass 0 (the pass-0 bucket and the keys above it),
// which pass 2 and the gather then read instead of the row: 96 KiB. The launcher passes the capacity of
// a call (TopkParams::compact_cap): this, or a chunk's length if smaller (less shared memory, more
// blocks an SM for short rows).
constexpr std::uint32_t kTopkClusterListCap = 12288;
// float4 loads a thread has in flight in a pass over the row (64 KiB a block; 8 spilled 20 B at the 64
// registers a thread of a 1024-thread block gets on sm_90, 4 take 48).
constexpr int kTopkClusterUnroll = 4;

// The same search in one block a row (TopkLaunch::block, any architecture): kTopkBlockThreads threads,
// the cluster barriers plain block barriers, distributed shared memory the block's own; no
// cluster-wide sums (the block's histogram is the row's). Meant for batches of many short rows, where a
// cluster of 1024-thread blocks a row leaves most of an SM's threads waiting at barriers.
constexpr int kTopkBlockThreads = 256;
// Composites it keeps (less shared memory than a cluster block: 3 blocks an SM at k = 512, 57 KiB).
constexpr std::uint32_t kTopkBlockListCap = 4096;

// A barrier over the row's blocks: the cluster's, or the block's (kCluster false: one block a row).
template <bool kCluster>
__device__ __forceinline__ void row_sync() {
  if constexpr (kCluster) cluster_sync();
  else __syncthreads();
}

// Dynamic shared memory, in 32-bit words, then k + k + cap composites (cap: topk_cluster_keep_cap).
struct TopkClusterSmem {
  static constexpr int hist = 0;             // [2048] this block's histogram of the pass
  static constexpr int total = 2048;         // [2048] the cluster's histogram (each block its own copy)
  static constexpr int warp_sums = 4096;     // [32] block scans
  static constexpr int ctl = 4096 + 32;      // [32] the words below
  static constexpr int words = 4096 + 64;    // then std::uint64_t stage[k], list[k], kept[cap] (8-byte aligned)
  // ctl
  static constexpr int staged = 0;      // composites in stage
  static constexpr int listed = 1;      // composites in list (rank 0's is the cluster's)
  static constexpr int digit = 2;       // the pass's digit (0xFFFFFFFF: none found)
  static constexpr int rem = 3;         // keys still needed among those with that digit
  static constexpr int count = 4;       // keys with that digit
  static constexpr int base = 5;        // where the block's composites go in rank 0's list
  static constexpr int before = 6;      // ties at the prefix in the blocks of lower rank
  static constexpr int kept = 7;        // composites of the chunk pass 1 kept (more than the cap: none usable)
};
static_assert(TopkClusterSmem::words % 2 == 0, "the composites start 8-byte aligned");

// Composites a block keeps at most: kTopkClusterListCap, or the longest chunk if shorter.
__host__ __device__ __forceinline__ std::uint32_t topk_cluster_keep_cap(long long max_row, int cluster_blocks,
                                                                      std::uint32_t list_cap = kTopkClusterListCap) {
  const long long chunk = (max_row + cluster_blocks - 1) / cluster_blocks;
  return static_cast<std::uint32_t>(chunk < list_cap ? chunk : list_cap);
}

// lists: 2 for a cluster (stage and rank 0's list), 1 for one block a row (no list).
__host__ __device__ __forceinline__ std::size_t topk_cluster_smem(int k, std::uint32_t keep_cap, int lists = 2) {
  return TopkClusterSmem::words * sizeof(std::uint32_t) +
         (static_cast<std::size_t>(lists) * k + keep_cap) * sizeof(std::uint64_t);
}

// Calls f(key, i) for every i in [begin, end) of s, the block's threads striding: up to 3 scalars until
// s + i is 16-byte aligned, then float4 loads, kTopkClusterUnroll of them issued before any key is
// converted (each conversion also depends on all of them through `zero`, TopkParams::opaque_zero, as in
// load_keys), then the last 0-3 scalars.
template <class F>
__device__ __forceinline__ void for_each_key_vec(const float* s, long long begin, long long end, std::uint32_t zero,
                                                 F&& f) {
  constexpr int U = kTopkClusterUnroll;
  const long long t = threadIdx.x, bd = blockDim.x;
  const long long mis = static_cast<long long>((reinterpret_cast<std::uintptr_t>(s + begin) >> 2) & 3u);
  const long long body = min(end, begin + ((4 - mis) & 3));
  if (begin + t < body) f(topk_key(__ldg(s + begin + t)), begin + t);
  const long long nv = (end - body) >> 2;
  const float4* const v = reinterpret_cast<const float4*>(s + body);
  for (long long j0 = t; j0 < nv; j0 += bd * U) {
    float4 x[U];
#pragma unroll
    for (int u = 0; u < U; ++u) x[u] = __ldg(v + min(j0 + u * bd, nv - 1));
    std::uint32_t all = 0;
#pragma unroll
    for (int u = 0; u < U; ++u)
      all |= __float_as_uint(x[u].x) | __float_as_uint(x[u].y) | __float_as_uint(x[u].z) | __float_as_uint(x[u].w);
    all &= zero;
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const long long j = j0 + u * bd;
      if (j < nv) {
        const long long i = body + 4 * j;
        f(topk_key(__uint_as_float(__float_as_uint(x[u].x) | all)), i);
        f(topk_key(__uint_as_float(__float_as_uint(x[u].y) | all)), i + 1);
        f(topk_key(__uint_as_float(__float_as_uint(x[u].z) | all)), i + 2);
        f(topk_key(__uint_as_float(__float_as_uint(x[u].w) | all)), i + 3);
      }
    }
  }
  const long long tail = body + 4 * nv;
  if (tail + t < end) f(topk_key(__ldg(s + tail + t)), tail + t);
}

// One radix pass of a row's cluster (every thread of every block calls it) over the keys each_key(f)
// gives this block (f(key, id) for each). Updates prefix, mask and rem and returns 1 when the bucket holds
// exactly the rem keys still needed (take_all), else 0; `digit` gets the bucket's digit, whose bin of
// `hist` then holds this block's count of the keys matching the new prefix. Returns -1, changing
// nothing, when the keys number fewer than rem (only a sampled pass 0 can see that).
template <int PASS, int kThreads, bool kCluster, class Each>
__device__ __forceinline__ int topk_cluster_pass(Each&& each_key, unsigned C, unsigned rank, std::uint32_t* sw,
                                                 std::uint32_t& prefix, std::uint32_t& mask, std::uint32_t& rem,
                                                 int& digit) {
  using Dg = Digit<PASS>;
  using L = TopkClusterSmem;
  constexpr int bins = 1 << Dg::bits;
  constexpr int per = bins / kThreads;  // bins a thread sums and searches: 2, 2, 1 (1024 threads)
  static_assert(per * kThreads == bins, "whole bins a thread");
  std::uint32_t* const hist = sw + L::hist;
  std::uint32_t* const total = sw + L::total;
  std::uint32_t* const ctl = sw + L::ctl;
  const int t = static_cast<int>(threadIdx.x);
  const int pb = bins / static_cast<int>(C);  // bins this block sums for the cluster
  const int lo_d = static_cast<int>(rank) * pb;
  // This block's histogram, and its share of the cluster's zeroed (only this block writes that share of
  // its own copy; the other blocks' shares arrive as stores after the first barrier below).
  for (int d = t; d < bins; d += kThreads) hist[d] = 0;
  if constexpr (kCluster)
    for (int d = t; d < pb; d += kThreads) total[lo_d + d] = 0;
  __syncthreads();
  const std::uint32_t pre = prefix, msk = mask;
  each_key([&](std::uint32_t key, long long) {
    if ((key & msk) == pre) atomicAdd(&hist[(key >> Dg::shift) & Dg::mask], 1u);
  });
  row_sync<kCluster>();  // every block's histogram is complete (and every block of the cluster has started)
  if constexpr (kCluster) {
    // Thread t sums `per` (bin, block) pairs of this block's share: j = t + u * threads, bin lo_d + j % pb
    // of block j / pb; the remote loads go out before any is added.
    {
      std::uint32_t v[per];
#pragma unroll
      for (int u = 0; u < per; ++u) {
        const int j = t + u * kThreads;
        v[u] = *cluster_map(hist + lo_d + j % pb, static_cast<unsigned>(j / pb));
      }
#pragma unroll
      for (int u = 0; u < per; ++u) {
        const int j = t + u * kThreads;
        if (v[u]) atomicAdd(&total[lo_d + j % pb], v[u]);
      }
    }
    __syncthreads();
#pragma unroll
    for (int u = 0; u < per; ++u) {
      const int j = t + u * kThreads;
      const unsigned r = static_cast<unsigned>(j / pb);
      if (r != rank) *cluster_map(total + lo_d + j % pb, r) = total[lo_d + j % pb];
    }
    cluster_sync();  // every block holds the whole cluster histogram in `total`
  }
  // One block a row: its histogram is the row's.
  const std::uint32_t* const sums = kCluster ? total : hist;
  // The digit of the rem-th largest matching key: thread t owns bins [bins - (t+1) per, bins - t per),
  // lower threads higher digits (as the chain's last block does).
  const int hi_d = bins - t * per;
  std::uint32_t cnt[per];
  std::uint32_t local = 0;
#pragma unroll
  for (int i = 0; i < per; ++i) {
    cnt[i] = sums[hi_d - 1 - i];
    local += cnt[i];
  }
  if (t == 0) ctl[L::digit] = 0xFFFFFFFFu;  // ordered before the writes below by the scan's barriers
  std::uint32_t all;
  const std::uint32_t above = block_exclusive_sum(local, all, sw + L::warp_sums);
  const std::uint32_t want = rem;
  if (above < want && want <= above + local) {
    std::uint32_t cum = above;
#pragma unroll
    for (int i = 0; i < per; ++i) {
      if (cum < want && want <= cum + cnt[i]) {
        ctl[L::digit] = static_cast<std::uint32_t>(hi_d - 1 - i);
        ctl[L::rem] = want - cum;
        ctl[L::count] = cnt[i];
      }
      cum += cnt[i];
    }
  }
  __syncthreads();
  const std::uint32_t d = ctl[L::digit];
  if (d == 0xFFFFFFFFu) return -1;
  digit = static_cast<int>(d);
  prefix |= d << Dg::shift;
  mask |= Dg::mask << Dg::shift;
  rem = ctl[L::rem];
  return ctl[L::count] == rem ? 1 : 0;
}

// Grid: rows x C blocks, clusters of C along x (C a power of two, 2 to 16): row blockIdx.x / C; or
// (kCluster false) one block a row, C = 1.
template <int kThreads, bool kCluster>
__device__ __forceinline__ void topk_rows_body(const TopkParams& p) {
  using L = TopkClusterSmem;
  IP_DYNAMIC_SHARED(std::uint32_t, sw);
  std::uint32_t* const hist = sw + L::hist;
  std::uint32_t* const ctl = sw + L::ctl;
  std::uint64_t* const stage = reinterpret_cast<std::uint64_t*>(sw + L::words);
  std::uint64_t* const list = stage + p.k;                 // rank 0's is the cluster's (one block a row: none)
  std::uint64_t* const kept = kCluster ? list + p.k : list;
  const unsigned C = kCluster ? cluster_blocks() : 1u, rank = kCluster ? cluster_rank() : 0u;
  const int row = static_cast<int>(blockIdx.x / C);
  const int t = static_cast<int>(threadIdx.x);
  const std::uint32_t k = static_cast<std::uint32_t>(p.k);
  const long long off = p.row_offset[row], n = p.row_offset[row + 1] - off;
  const float* const s = p.scores + off;
  const std::uint32_t zero = p.opaque_zero;
  long long begin, end;
  block_chunk(n, static_cast<int>(rank), static_cast<int>(C), begin, end);
  if (t == 0) {
    ctl[L::staged] = 0;
    ctl[L::listed] = 0;  // rank 0's: the list's reservations, after a cluster barrier
    ctl[L::kept] = 0;
  }
  // The keys of this block's chunk with their ids, those >= lo only (lo: 0, or the sampled threshold):
  // from the row, or from `kept` once a pass has kept them all (pass 1 every key >= the pass-0 bucket's
  // lowest, a sampled pass 0 every key >= lo: all that later passes and the gather look at).
  bool from_kept = false;  // the same in every thread of the block (not of the cluster)
  std::uint32_t n_kept = 0, lo = 0;
  auto each_key = [&](auto&& f) {
    if (from_kept) {
      for (std::uint32_t i = static_cast<std::uint32_t>(t); i < n_kept; i += kThreads) {
        const std::uint64_t c = kept[i];
        f(static_cast<std::uint32_t>(c >> 32), static_cast<long long>(topk_composite_id(c)));
      }
    } else {
      for_each_key_vec(s, begin, end, zero, [&](std::uint32_t key, long long i) {
        if (key >= lo) f(key, i);
      });
    }
  };
  // The row's keys >= keep_lo, passed on to f and kept (with their ids) in `kept`.
  auto count_and_keep = [&](std::uint32_t keep_lo, auto&& f) {
    for_each_key_vec(s, begin, end, zero, [&](std::uint32_t key, long long i) {
      if (key < keep_lo) return;
      f(key, i);
      const std::uint32_t slot = atomicAdd(&ctl[L::kept], 1u);
      if (slot < p.compact_cap) kept[slot] = topk_composite(key, static_cast<std::uint32_t>(i));
    });
  };
  std::uint32_t prefix = 0, mask = 0;  // a row of at most k scores: every key matches, all taken
  std::uint32_t rem = static_cast<std::uint32_t>(min(n, static_cast<long long>(p.k)));
  bool take_all = n <= p.k;  // the same in every block of the cluster, as everything below that branches
  int digit = -1;
  if (take_all) {
    row_sync<kCluster>();  // rank 0's counters are zero before any block reserves (the passes' barriers do it otherwise)
  } else {
    // Sampling (rows of at least p.sample_min_row; the launcher's TopkSampling): a threshold lo from S
    // evenly spaced keys, the r-th largest of them (r as the chain's step 0 takes it), found by the same
    // passes over the samples (each block holds S / C of them in `kept`); pass 0 then counts and keeps
    // only the keys >= lo: one read of the row, few histogram additions, and passes 1, 2 and the gather
    // over the kept keys. When fewer than k keys are >= lo (scores arranged against the sample), pass 0
    // runs again over every key, as without sampling. Used only when the samples fit `kept` and the keys
    // expected >= lo fill at most half of it.
    bool sampled = false;
    if (n >= p.sample_min_row) {
      const long long S = min(n, static_cast<long long>(kTopkSamples));
      const float mu = static_cast<float>(static_cast<double>(p.k) * S / static_cast<double>(n));
      const long long r = static_cast<long long>(ceilf(mu + 4.0f * sqrtf(mu) + 16.0f));
      const long long per_block = (S + C - 1) / C;
      sampled = r <= S && per_block <= 2LL * p.compact_cap &&
                static_cast<double>(r) * static_cast<double>(n) / S <= 0.5 * C * p.compact_cap;
      if (sampled) {
        std::uint32_t* const samples = reinterpret_cast<std::uint32_t*>(kept);
        const long long i0 = min(S, per_block * rank), i1 = min(S, i0 + per_block);
        for (long long i = i0 + t; i < i1; i += kThreads)
          samples[i - i0] = topk_key(__ldg(s + (2 * i + 1) * n / (2 * S)));
        __syncthreads();
        const std::uint32_t n_samples = static_cast<std::uint32_t>(i1 - i0);
        auto each_sample = [&](auto&& f) {
          for (std::uint32_t i = static_cast<std::uint32_t>(t); i < n_samples; i += kThreads)
            f(samples[i], static_cast<long long>(i));
        };
        std::uint32_t sp = 0, sm = 0, sr = static_cast<std::uint32_t>(r);
        int sd = -1;
        // The r-th largest sample's key, or (a bucket of exactly the needed samples) the lowest key of its
        // bucket: either way at least r samples are >= it. S >= r samples: found.
        if (topk_cluster_pass<0, kThreads, kCluster>(each_sample, C, rank, sw, sp, sm, sr, sd) == 0 &&
            topk_cluster_pass<1, kThreads, kCluster>(each_sample, C, rank, sw, sp, sm, sr, sd) == 0)
          topk_cluster_pass<2, kThreads, kCluster>(each_sample, C, rank, sw, sp, sm, sr, sd);
        lo = sp;
        __syncthreads();  // the samples are read; `kept` is the kept keys' from here
        const int found = topk_cluster_pass<0, kThreads, kCluster>(
            [&](auto&& f) { count_and_keep(lo, f); }, C, rank, sw, prefix, mask, rem, digit);
        if (found >= 0) {
          take_all = found == 1;
          n_kept = ctl[L::kept];  // final: every thread counted before the pass's barriers
          from_kept = n_kept <= p.compact_cap;
        } else {
          sampled = false;  // fewer than k keys >= lo: the search starts again over every key
          lo = 0;
          __syncthreads();  // ctl[kept] is read
          if (t == 0) ctl[L::kept] = 0;
        }
      }
    }
    if (!sampled) {
      const int found = topk_cluster_pass<0, kThreads, kCluster>(each_key, C, rank, sw, prefix, mask, rem, digit);
      if (found < 0) __trap();  // cannot happen: n > k keys, all counted
      take_all = found == 1;
      if (!take_all) {
        // pass 1 keeps the keys >= the pass-0 bucket's lowest (prefix: its digit, zeros below)
        take_all = topk_cluster_pass<1, kThreads, kCluster>([&](auto&& f) { count_and_keep(prefix, f); }, C, rank, sw, prefix, mask, rem,
                                        digit) == 1;
        n_kept = ctl[L::kept];
        from_kept = n_kept <= p.compact_cap;
      }
    } else if (!take_all) {
      take_all = topk_cluster_pass<1, kThreads, kCluster>(each_key, C, rank, sw, prefix, mask, rem, digit) == 1;
    }
    if (!take_all) take_all = topk_cluster_pass<2, kThreads, kCluster>(each_key, C, rank, sw, prefix, mask, rem, digit) == 1;
  }

  // Gather. Unless take_all, the needed rem ties (keys matching prefix under the full mask) are the
  // lowest ids: this block takes those of its chunk ranked [before, before + mine) among the row's.
  std::uint32_t take = 0, mine = 0;
  if (!take_all) {
    mine = hist[digit];  // this block's count from the last pass, which no block changes any more
    if (t == 0) {
      std::uint32_t before = 0;  // one block a row: none before it
      if constexpr (kCluster)
        for (unsigned r = 0; r < rank; ++r) before += *cluster_map(hist + digit, r);
      ctl[L::before] = before;
    }
    __syncthreads();
    const std::uint32_t before = ctl[L::before];
    take = rem > before ? min(rem - before, mine) : 0u;
  }
  const bool ties_all = take_all || take == mine;  // every tie of the chunk (or none: mine == 0)
  const bool ties_some = !ties_all && take > 0;    // the block where the needed ties end
  each_key([&](std::uint32_t key, long long i) {
    const std::uint32_t m = key & mask;
    if (m > prefix || (m == prefix && ties_all)) {
      const std::uint32_t slot = atomicAdd(&ctl[L::staged], 1u);
      if (slot < k) stage[slot] = topk_composite(key, static_cast<std::uint32_t>(i));
    }
  });
  if (ties_some) {  // the first `take` ties of the chunk in id order: contiguous pieces a thread, scanned
    const long long piece = (end - begin + kThreads - 1) / kThreads;
    const long long a = min(end, begin + t * piece), b = min(end, a + piece);
    std::uint32_t c = 0;
    for (long long i = a; i < b; ++i) c += (topk_key(s[i]) & mask) == prefix ? 1u : 0u;
    std::uint32_t all;
    std::uint32_t rank_in = block_exclusive_sum(c, all, sw + L::warp_sums);
    for (long long i = a; i < b && rank_in < take; ++i) {
      const std::uint32_t key = topk_key(s[i]);
      if ((key & mask) != prefix) continue;
      const std::uint32_t slot = atomicAdd(&ctl[L::staged], 1u);
      if (slot < k) stage[slot] = topk_composite(key, static_cast<std::uint32_t>(i));
      ++rank_in;
    }
  }
  __syncthreads();
  const std::uint32_t staged = min(ctl[L::staged], k);
  std::uint32_t count = staged;  // one block a row: the staged composites are the row's list, in place
  if constexpr (kCluster) {
    if (t == 0) ctl[L::base] = atomicAdd(cluster_map(ctl + L::listed, 0), staged);
    __syncthreads();
    {
      const std::uint32_t base = ctl[L::base];
      std::uint64_t* const list0 = cluster_map(list, 0);
      for (std::uint32_t i = static_cast<std::uint32_t>(t); i < staged; i += kThreads)
        if (base + i < k) list0[base + i] = stage[i];
    }
    cluster_sync();  // rank 0's list is complete

    // Rank: every block copies the list and places its share [c0, c1) of it.
    if (t == 0) ctl[L::count] = min(*cluster_map(ctl + L::listed, 0), k);
    __syncthreads();
    count = ctl[L::count];
    {
      const std::uint64_t* const list0 = cluster_map(list, 0);
      for (std::uint32_t i = static_cast<std::uint32_t>(t); i < count; i += kThreads) stage[i] = list0[i];
    }
    __syncthreads();
  }
  const int c0 = static_cast<int>(static_cast<unsigned long long>(count) * rank / C);
  const int c1 = static_cast<int>(static_cast<unsigned long long>(count) * (rank + 1) / C);
  const int m = c1 - c0;
  int tpc = 32;  // threads a candidate: a power of two, so that a candidate's threads sit in one warp
  while (tpc > 1 && tpc * m > kThreads) tpc >>= 1;
  const int per_round = kThreads / tpc;
  const long long out = static_cast<long long>(row) * p.k;
  for (int r0 = 0; r0 < m; r0 += per_round) {  // the same trip count in every thread (the shuffles)
    const int ci = r0 + t / tpc, seg = t % tpc;
    const bool valid = ci < m;
    const std::uint64_t me = valid ? stage[c0 + ci] : 0;
    std::uint32_t above = 0;
    if (valid)
      for (std::uint32_t j = static_cast<std::uint32_t>(seg); j < count; j += static_cast<std::uint32_t>(tpc))
        above += stage[j] > me ? 1u : 0u;
    for (int o = tpc / 2; o >= 1; o >>= 1) above += __shfl_xor_sync(0xFFFFFFFFu, above, o);
    if (valid && seg == 0) {
      const std::int32_t id = topk_composite_id(me);
      p.ids[out + above] = id;
      if (p.values) p.values[out + above] = s[id];
    }
  }
  if (rank == 0)
    for (std::uint32_t i = count + static_cast<std::uint32_t>(t); i < k; i += kThreads) {
      p.ids[out + i] = -1;
      if (p.values) p.values[out + i] = __int_as_float(0x7FC00000);
    }
  if constexpr (kCluster) cluster_sync();  // no block reads rank 0's shared memory any more
}

// One thread block cluster a row (sm_90; trap where clusters do not exist).
__global__ void __launch_bounds__(kTopkClusterThreads, 1) topk_cluster_kernel(TopkParams p) {
  topk_rows_body<kTopkClusterThreads, true>(p);
}

// One block a row (TopkLaunch::block), any architecture.
__global__ void __launch_bounds__(kTopkBlockThreads, 3) topk_block_kernel(TopkParams p) {
  topk_rows_body<kTopkBlockThreads, false>(p);
}

}  // namespace ip::cuda::detail
