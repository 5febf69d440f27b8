// Launcher of exact batched top-k (radix select): per row, the k largest scores, best first, equal
// scores to the lower id (core/topk.h) -- the same ids as a full stable sort. -0.0 and +0.0 are equal
// (core/topk_order.h). NaN is not checked on the device (that would need a sync): a NaN ranks below
// -inf. A row shorter than k (a broken precondition) yields its scores, then ids -1 and NaN values.
// k <= 4096; rows of any length up to 2^31 - 1. The workspace needs no initialization.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

namespace ip::cuda {

constexpr int kTopkMaxK = 4096;  // the largest k topk() takes
// Keys per row the sampling step sorts.
constexpr int kTopkSamples = 4096;

// The sampling step (kernels/topk.cuh, step 0): a threshold from evenly spaced keys of each row lets the
// first pass also compact the few keys that can make the top k, so the rest of the search reads that
// list instead of the row (one full read of each row instead of two or three). The answer is the same either
// way: a list that misses a top-k key or overflows is dropped and the search goes on over the row.
// automatic: on when the batch's scores do not fit the L2 cache (rows * max_row * 4 bytes > L2 size;
// smaller batches are read again from L2) and only for rows of at least 16 * kTopkSamples scores.
enum class TopkSampling { automatic, off, on };

// How step 4 puts a row's k selected scores in order (the same order either way): one block per row
// sorts them (bitonic), or ceil(k / 32) blocks per row rank each by counting the others above it (k^2
// comparisons a row, spread over the GPU: faster for a few rows, slower for large batches).
// automatic: rank when rows * k * k <= kTopkRankMaxWork, else bitonic.
enum class TopkOrder { automatic, bitonic, rank };
constexpr long long kTopkRankMaxWork = 1LL << 26;

// How a call's steps reach the GPU (the answer is the same either way). chain: a kernel per step (6-8 of
// them, chained on sm_90 when `chained`): each step's launch and the wait for the step before it cost a
// few microseconds, whatever the step's work. single: one kernel for the whole search after the
// workspace's memset; its blocks take (step, row, block) work items in order from a counter and wait
// (spinning) until the step before theirs has finished on their row. cluster (sm_90 and later): one
// kernel, no memset; each row is searched by one thread block cluster (cluster_blocks blocks of 1024
// threads), its steps separated by cluster barriers and its histograms and candidates kept in the
// cluster's shared memory (kernels/topk_cluster.cuh). single, cluster and block order by ranks, so
// `order` bitonic with them is an error; single does not sample (`sampling` on is an error, automatic is
// off), cluster and block sample as the chain does (their kept keys in shared memory instead of a list in
// global memory).
// block: the cluster launch's search with one block of 256 threads a row and no cluster (any architecture;
// for batches of many short rows, where a row's cluster of 1024-thread blocks mostly waits at barriers).
// automatic: chain (single, cluster and block have not been timed on a GPU yet).
enum class TopkLaunch { automatic, chain, single, cluster, block };
// What `automatic` is today (the launcher dispatches on this; the cuda backend records it per point).
constexpr TopkLaunch resolve_topk_launch(TopkLaunch l) { return l == TopkLaunch::automatic ? TopkLaunch::chain : l; }

struct TopkArgs {
  int rows = 1;
  const long long* row_offset = nullptr;  // device [rows + 1]: row r is scores[row_offset[r] .. row_offset[r+1])
  long long max_row = 0;                  // longest row (host-known), for sizing and dispatch
  const float* scores = nullptr;
  int k = 1;                              // every row must hold at least k scores (NaN not allowed)
  std::int32_t* ids = nullptr;            // [rows, k], ids relative to the row start
  float* values = nullptr;                // optional [rows, k]
  void* workspace = nullptr;
  std::size_t workspace_bytes = 0;
  TopkSampling sampling = TopkSampling::automatic;  // on: every row (tests and benchmarks)
  // On sm_90 and later the 6-8 kernels of a call are launched chained (programmatic dependent launch:
  // each may start while the one before it finishes, and waits for it inside). false: plain launches,
  // one after another (for comparison; the answer is the same).
  bool chained = true;
  TopkOrder order = TopkOrder::automatic;
  // Tuning (0: the default, 4096): the fewest scores a block takes in a full-row pass. A row of n scores
  // gets at most ceil(n / min_chunk) blocks; each adds its shared histogram to the row's with up to 2048
  // global reductions at the end of a pass, so larger chunks mean fewer of those and fewer blocks (less
  // memory parallelism). 0 or at least 256; values below 4096 act as 4096 (the workspace is laid out for
  // that many blocks). The answer is the same whatever it is.
  long long min_chunk = 0;
  TopkLaunch launch = TopkLaunch::automatic;
  // Tuning: the blocks a row gets in a pass. false (the default): 8 blocks an SM over the batch, which is
  // 1.33 waves where ptxas's registers let 6 of the passes' blocks be resident (sm_90: 40 registers); true:
  // as many as are resident at once (the occupancy API), one wave, so no SM starts a second round of
  // blocks while others idle. Either is capped by the rows' chunks (min_chunk). The answer is the same.
  bool one_wave = false;
  // TopkLaunch::cluster only: blocks a row's cluster (2, 4, 8 or 16). 0: the most that keeps rows x blocks
  // within the SM count, at least 2, at most 16 where the device runs clusters of 16 (a non-portable
  // size; cudaOccupancyMaxActiveClusters says), else 8. A single row gets 16 on an H100/H200.
  int cluster_blocks = 0;
};

std::size_t topk_workspace_bytes(int rows, long long max_row, int k);
void topk(const TopkArgs& a, cudaStream_t stream);
// Whether the current device runs TopkLaunch::cluster with clusters of `blocks` blocks for rows of up to
// max_row scores at this k (cudaOccupancyMaxActiveClusters >= 1; false below sm_90 or where the kernel
// was not built for sm_90). An explicit cluster_blocks that does not fit is an error in topk().
bool topk_cluster_fits(int blocks, int k, long long max_row);

}  // namespace ip::cuda
