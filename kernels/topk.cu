// Launcher of exact batched top-k (kernels/topk.cuh): validates, lays out the workspace, chooses the
// blocks per row and launches the passes on the stream.
#include "kernels/topk.h"

#include <algorithm>
#include <cstdint>

#include "core/error.h"
#include "kernels/cuda_check.h"
#include "kernels/launch.h"
#include "kernels/topk.cuh"
#include "kernels/topk_cluster.cuh"

namespace ip::cuda {
namespace {

using detail::TopkParams;
using detail::TopkRowState;

constexpr long long kMinChunk = 4096;     // fewest scores per block (per pass)
constexpr long long kMaxBlocksPerRow = 1024;
constexpr long long kBlocksPerSm = 8;     // target blocks per SM over the whole batch (memory parallelism)
constexpr std::size_t kAlign = 256;
constexpr long long kCompactMin = 8192;   // compact list capacity: max(kCompactMin, max_row / 16), <= max_row
constexpr long long kCompactDiv = 16;
constexpr long long kSampleMinRow = 16LL * kTopkSamples;  // automatic sampling: rows at least this long
static_assert(detail::kTopkMaxK * sizeof(std::uint64_t) <= 48 * 1024,
              "the rank kernel's dynamic shared memory (k composites) must not need the opt-in above 48 KiB");

std::size_t align_up(std::size_t x) { return (x + kAlign - 1) / kAlign * kAlign; }

long long bpr_cap(long long max_row) {
  return std::clamp<long long>((max_row + kMinChunk - 1) / kMinChunk, 1, kMaxBlocksPerRow);
}

long long compact_cap(long long max_row) {
  return std::min(max_row, std::max(kCompactMin, max_row / kCompactDiv));
}

struct Layout {
  std::size_t state, hist, sync, ties, cand, clist, tlist, total;
};

Layout layout(int rows, long long max_row, int k) {
  const std::size_t r = static_cast<std::size_t>(rows);
  Layout l{};
  l.state = 0;
  l.hist = align_up(r * sizeof(TopkRowState));
  l.sync = l.hist + align_up(r * detail::kTopkHistBins * sizeof(std::uint32_t));
  l.ties = l.sync + align_up((1 + r * detail::kTopkSingleSteps) * sizeof(std::uint32_t));
  l.cand = l.ties + align_up(r * static_cast<std::size_t>(bpr_cap(max_row)) * sizeof(std::uint32_t));
  l.clist = l.cand + align_up(r * static_cast<std::size_t>(k) * sizeof(std::uint64_t));
  l.tlist = l.clist + align_up(r * static_cast<std::size_t>(compact_cap(max_row)) * sizeof(std::uint64_t));
  l.total = l.tlist + align_up(r * static_cast<std::size_t>(detail::kTopkTieListCap) * sizeof(std::uint32_t));
  return l;
}

void validate_shape(int rows, long long max_row, int k) {
  IP_REQUIRE(rows >= 1, "top-k: rows = {} (must be >= 1)", rows);
  IP_REQUIRE(k >= 1 && k <= detail::kTopkMaxK, "top-k: k = {} outside [1, {}]", k, detail::kTopkMaxK);
  IP_REQUIRE(max_row >= k, "top-k: max_row = {} < k = {} (every row must hold at least k scores)", max_row, k);
  IP_REQUIRE(max_row <= INT32_MAX, "top-k: max_row = {} exceeds the 32-bit id range", max_row);
}

}  // namespace

std::size_t topk_workspace_bytes(int rows, long long max_row, int k) {
  validate_shape(rows, max_row, k);
  return layout(rows, max_row, k).total;
}

namespace {

// Whether `kernel` runs code compiled for sm_90 or later (griddepcontrol, clusters): its PTX version, not
// the device's, since a build without sm_90 code runs its compute_80 PTX there, JIT-compiled, where the
// sm_90 paths are stubs (the cluster kernel traps) or absent (no griddepcontrol.wait in chained kernels).
// Asked once per kernel (the answer is the build's; topk() is called for every decode step).
template <auto Kernel>
bool built_for_sm90() {
  static const bool built = [] {
    cudaFuncAttributes fa{};
    if (cudaFuncGetAttributes(&fa, reinterpret_cast<const void*>(Kernel)) != cudaSuccess) {
      (void)cudaGetLastError();
      return false;
    }
    return fa.ptxVersion >= 90;
  }();
  return built;
}

int query_active_clusters(int blocks, int k, long long max_row) {
  if (blocks == 16)
    IP_CUDA_CHECK(cudaFuncSetAttribute(detail::topk_cluster_kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  IP_CUDA_CHECK(cudaFuncSetAttribute(detail::topk_cluster_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     static_cast<int>(detail::topk_cluster_smem(k, detail::kTopkClusterListCap))));
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeClusterDimension;
  attr.val.clusterDim.x = static_cast<unsigned>(blocks);
  attr.val.clusterDim.y = 1;
  attr.val.clusterDim.z = 1;
  // gridDim, blockDim, dynamicSmemBytes, stream, attrs, numAttrs (by position: the emulator defines
  // blockDim and gridDim as macros)
  const cudaLaunchConfig_t cfg{dim3(static_cast<unsigned>(blocks)), dim3(detail::kTopkClusterThreads),
                               detail::topk_cluster_smem(k, detail::topk_cluster_keep_cap(max_row, blocks)), nullptr,
                               &attr, 1};
  int fits = 0;
  const cudaError_t err = cudaOccupancyMaxActiveClusters(&fits, detail::topk_cluster_kernel, &cfg);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();  // not supported (e.g. a non-portable size): none
    return 0;
  }
  return fits;
}

// The clusters of `blocks` that fit the device at once for this k and row length (0: none, or unknown);
// the last answer is kept per host thread (a decode loop asks the same question every step).
int active_clusters(int blocks, int k, long long max_row) {
  struct Last {
    int dev = -1, blocks = 0, k = 0;
    long long max_row = 0;
    int fits = 0;
  };
  thread_local Last last;
  int dev = 0;
  IP_CUDA_CHECK(cudaGetDevice(&dev));
  if (last.dev != dev || last.blocks != blocks || last.k != k || last.max_row != max_row)
    last = Last{dev, blocks, k, max_row, query_active_clusters(blocks, k, max_row)};
  return last.fits;
}

}  // namespace

bool topk_cluster_fits(int blocks, int k, long long max_row) {
  int dev = 0, major = 0;
  IP_CUDA_CHECK(cudaGetDevice(&dev));
  IP_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
  if (major < 9 || !built_for_sm90<detail::topk_cluster_kernel>()) return false;
  return active_clusters(blocks, k, max_row) >= 1;
}

void topk(const TopkArgs& a, cudaStream_t stream) {
  validate_shape(a.rows, a.max_row, a.k);
  IP_REQUIRE(a.row_offset != nullptr, "top-k: row_offset is null");
  IP_REQUIRE(a.scores != nullptr, "top-k: scores is null");
  IP_REQUIRE(a.ids != nullptr, "top-k: ids is null");
  IP_REQUIRE(a.sampling == TopkSampling::automatic || a.sampling == TopkSampling::off ||
                 a.sampling == TopkSampling::on,
             "top-k: sampling = {} is not automatic, off or on", static_cast<int>(a.sampling));
  IP_REQUIRE(a.order == TopkOrder::automatic || a.order == TopkOrder::bitonic || a.order == TopkOrder::rank,
             "top-k: order = {} is not automatic, bitonic or rank", static_cast<int>(a.order));
  IP_REQUIRE(a.launch == TopkLaunch::automatic || a.launch == TopkLaunch::chain || a.launch == TopkLaunch::single ||
                 a.launch == TopkLaunch::cluster || a.launch == TopkLaunch::block,
             "top-k: launch = {} is not automatic, chain, single, cluster or block", static_cast<int>(a.launch));
  const TopkLaunch launch = resolve_topk_launch(a.launch);
  const bool single = launch == TopkLaunch::single;
  const bool cluster = launch == TopkLaunch::cluster;
  const bool block = launch == TopkLaunch::block;
  const char* const launch_name = single ? "single" : cluster ? "cluster" : "block";
  IP_REQUIRE(!single || a.sampling != TopkSampling::on,
             "top-k: launch single does not sample (sampling must be automatic or off)");
  IP_REQUIRE(!(single || cluster || block) || a.order != TopkOrder::bitonic,
             "top-k: launch {} orders by ranks (order must be automatic or rank)", launch_name);
  IP_REQUIRE(a.cluster_blocks == 0 || a.cluster_blocks == 2 || a.cluster_blocks == 4 || a.cluster_blocks == 8 ||
                 a.cluster_blocks == 16,
             "top-k: cluster_blocks = {} (must be 0 for the default, 2, 4, 8 or 16)", a.cluster_blocks);
  IP_REQUIRE(a.min_chunk == 0 || a.min_chunk >= detail::kTopkThreads,
             "top-k: min_chunk = {} (must be 0 for the default or at least {})", a.min_chunk, detail::kTopkThreads);
  const Layout l = layout(a.rows, a.max_row, a.k);
  IP_REQUIRE(a.workspace != nullptr, "top-k: workspace is null");
  IP_REQUIRE(a.workspace_bytes >= l.total, "top-k: workspace_bytes = {} < {} needed (topk_workspace_bytes)",
             a.workspace_bytes, l.total);
  IP_REQUIRE(reinterpret_cast<std::uintptr_t>(a.workspace) % 16 == 0, "top-k: workspace is not 16-byte aligned");

  int dev = 0, sms = 0, major = 0;
  IP_CUDA_CHECK(cudaGetDevice(&dev));
  IP_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  IP_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
  // The passes are launched chained (programmatic dependent launch, sm_90 and later): each starts while
  // the one before it finishes, and waits for it inside (topk.cuh, chained_start).
  const bool chain = a.chained && major >= 9 && built_for_sm90<detail::topk_hist_kernel<0>>();
  long long want = (static_cast<long long>(sms) * kBlocksPerSm + a.rows - 1) / a.rows;
  if (a.one_wave) {
    int resident = 0;
    IP_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&resident, detail::topk_hist_kernel<0>,
                                                                detail::kTopkThreads, 0));
    want = static_cast<long long>(sms) * std::max(resident, 1) / a.rows;  // floor: at most one wave
  }
  const long long cap = bpr_cap(a.max_row);  // the workspace's layout (tie counts per block)
  const long long chunk_cap =
      a.min_chunk > 0 ? std::clamp<long long>((a.max_row + a.min_chunk - 1) / a.min_chunk, 1, cap) : cap;
  const int bpr = static_cast<int>(std::clamp<long long>(want, 1, chunk_cap));

  auto* ws = static_cast<unsigned char*>(a.workspace);
  TopkParams p{a.rows,
               a.row_offset,
               a.scores,
               a.k,
               bpr,
               static_cast<int>(cap),
               reinterpret_cast<TopkRowState*>(ws + l.state),
               reinterpret_cast<std::uint32_t*>(ws + l.hist),
               reinterpret_cast<std::uint32_t*>(ws + l.ties),
               reinterpret_cast<std::uint64_t*>(ws + l.cand),
               reinterpret_cast<std::uint64_t*>(ws + l.clist),
               static_cast<std::uint32_t>(compact_cap(a.max_row)),
               reinterpret_cast<std::uint32_t*>(ws + l.tlist),
               0,
               a.ids,
               a.values,
               reinterpret_cast<std::uint32_t*>(ws + l.sync),
               0u};
  // Whether the batch's scores exceed L2 (then each full pass reads them from DRAM): automatic sampling.
  int l2 = 0;
  IP_CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
  const bool beyond_l2 = static_cast<double>(a.rows) * static_cast<double>(a.max_row) * sizeof(float) > l2;
  // Sampling of the cluster and block launches (their kept keys in shared memory) as the chain decides it
  // (below): on for every row, automatic for batches larger than L2.
  const long long kept_sample_min_row = a.sampling == TopkSampling::on                          ? 0
                                        : a.sampling == TopkSampling::automatic && beyond_l2 ? kSampleMinRow
                                                                                             : INT64_MAX;
  // The cluster launch keeps its state in shared memory: no workspace, no memset.
  if (cluster) {
    IP_REQUIRE(major >= 9, "top-k: launch cluster needs thread block clusters (sm_90 or later; this device is sm_{}x)",
               major);
    IP_REQUIRE(built_for_sm90<detail::topk_cluster_kernel>(),
               "top-k: launch cluster needs the kernels built for sm_90 (CMAKE_CUDA_ARCHITECTURES with 90); this build "
               "runs PTX of an older architecture here, where the cluster kernel is a stub");
    IP_REQUIRE(static_cast<long long>(a.rows) * detail::kTopkClusterMaxBlocks <= INT32_MAX,
               "top-k: launch cluster takes at most {} rows", INT32_MAX / detail::kTopkClusterMaxBlocks);
    IP_CUDA_CHECK(cudaFuncSetAttribute(detail::topk_cluster_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(detail::topk_cluster_smem(a.k, detail::kTopkClusterListCap))));
    // Default size: as many blocks a row as keep the batch within about one block an SM (16 for a single
    // row where the device runs clusters of 16, the portable 8 otherwise; at least 2).
    int blocks = a.cluster_blocks;
    if (blocks == 0) {
      blocks = active_clusters(16, a.k, a.max_row) >= 1 ? 16 : 8;  // else at most the portable size
      while (blocks > 2 && static_cast<long long>(a.rows) * blocks > sms) blocks /= 2;
    } else {
      // An explicit size that the device cannot hold (clusters of 16 whole SMs need that many free SMs in
      // one GPC) fails here, named, rather than as the launch's cudaErrorClusterOutOfResources.
      IP_REQUIRE(active_clusters(blocks, a.k, a.max_row) >= 1,
                 "top-k: cluster_blocks = {}: this device cannot run clusters of {} blocks of {} threads with {} B of "
                 "shared memory each (cudaOccupancyMaxActiveClusters: 0); use 0 (the largest that fits) or a smaller "
                 "size",
                 blocks, blocks, detail::kTopkClusterThreads,
                 detail::topk_cluster_smem(a.k, detail::topk_cluster_keep_cap(a.max_row, blocks)));
    }
    if (blocks == 16)  // (set on every call: a cached occupancy answer may outlive a reset context's attributes)
      IP_CUDA_CHECK(cudaFuncSetAttribute(detail::topk_cluster_kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
    p.compact_cap = detail::topk_cluster_keep_cap(a.max_row, blocks);
    p.sample_min_row = kept_sample_min_row;
    const std::size_t smem = detail::topk_cluster_smem(a.k, p.compact_cap);
    const unsigned grid = static_cast<unsigned>(a.rows) * static_cast<unsigned>(blocks);
    IP_LAUNCH_CLUSTER(grid, detail::kTopkClusterThreads, smem, stream, static_cast<unsigned>(blocks),
                      detail::topk_cluster_kernel)(p);
    IP_CUDA_CHECK(cudaGetLastError());
    return;
  }
  // One block a row: the cluster launch's search without the cluster; no workspace, no memset.
  if (block) {
    p.compact_cap = detail::topk_cluster_keep_cap(a.max_row, 1, detail::kTopkBlockListCap);
    p.sample_min_row = kept_sample_min_row;
    const std::size_t smem = detail::topk_cluster_smem(a.k, p.compact_cap, 1);
    if (smem > 48 * 1024)
      IP_CUDA_CHECK(cudaFuncSetAttribute(detail::topk_block_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(smem)));
    IP_LAUNCH(static_cast<unsigned>(a.rows), detail::kTopkBlockThreads, smem, stream, detail::topk_block_kernel)(p);
    IP_CUDA_CHECK(cudaGetLastError());
    return;
  }
  // Row states, histograms and the single launch's counters start at zero; the passes leave the
  // histograms zero.
  IP_CUDA_CHECK(cudaMemsetAsync(ws, 0, l.ties, stream));
  if (single) {
    // Enough blocks for the widest step, at most as many as the GPU holds at once (more would only spin).
    const long long kb = detail::topk_single_blocks(detail::kTopkSingleSteps - 1, bpr, a.k);
    long long items = 0;
    for (int s = 0; s < detail::kTopkSingleSteps; ++s) items += detail::topk_single_blocks(s, bpr, a.k);
    IP_REQUIRE(static_cast<long long>(a.rows) * items < (1LL << 31),
               "top-k: launch single takes at most 2^31 work items ({} rows x {} blocks a row)", a.rows, items);
    const std::size_t smem = static_cast<std::size_t>(a.k) * sizeof(std::uint64_t);  // the rank step's
    // With the static shared memory (about 16.5 KiB), k = 4096 passes the 48 KiB a block gets unasked.
    IP_CUDA_CHECK(cudaFuncSetAttribute(detail::topk_single_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(smem)));
    int resident = 0;
    IP_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&resident, detail::topk_single_kernel,
                                                                detail::kTopkThreads, smem));
    const long long widest = static_cast<long long>(a.rows) * std::max<long long>(bpr, kb);
    const long long grid = std::min(widest, static_cast<long long>(sms) * std::max(resident, 1));
    IP_LAUNCH(static_cast<unsigned>(grid), detail::kTopkThreads, smem, stream, detail::topk_single_kernel)(p);
    IP_CUDA_CHECK(cudaGetLastError());
    return;
  }
  // Step 0 when the batch would be read from DRAM on every pass (or when asked for).
  const bool sample = a.sampling == TopkSampling::on ||
                      (a.sampling == TopkSampling::automatic && beyond_l2 && a.max_row >= kSampleMinRow);
  p.sample_min_row = a.sampling == TopkSampling::on ? 0 : kSampleMinRow;
  const dim3 grid(static_cast<unsigned>(a.rows), static_cast<unsigned>(bpr));
  if (sample) {  // step 0, the sampled pass 0, then pass 0 over every key for rows whose list was dropped
    IP_LAUNCH_CHAINED(static_cast<unsigned>(a.rows), detail::kTopkThreads, 0, stream, chain,
                      detail::topk_sample_kernel)(p);
    IP_CUDA_CHECK(cudaGetLastError());
    IP_LAUNCH_CHAINED(grid, detail::kTopkThreads, 0, stream, chain, detail::topk_hist_kernel<0, true, false>)(p);
    IP_CUDA_CHECK(cudaGetLastError());
    IP_LAUNCH_CHAINED(grid, detail::kTopkThreads, 0, stream, chain, detail::topk_hist_kernel<0, false, true>)(p);
  } else {
    IP_LAUNCH_CHAINED(grid, detail::kTopkThreads, 0, stream, chain, detail::topk_hist_kernel<0>)(p);
  }
  IP_CUDA_CHECK(cudaGetLastError());
  IP_LAUNCH_CHAINED(grid, detail::kTopkThreads, 0, stream, chain, detail::topk_hist_kernel<1>)(p);
  IP_CUDA_CHECK(cudaGetLastError());
  IP_LAUNCH_CHAINED(grid, detail::kTopkThreads, 0, stream, chain, detail::topk_hist_kernel<2>)(p);
  IP_CUDA_CHECK(cudaGetLastError());
  IP_LAUNCH_CHAINED(grid, detail::kTopkThreads, 0, stream, chain, detail::topk_gather_kernel)(p);
  IP_CUDA_CHECK(cudaGetLastError());
  IP_LAUNCH_CHAINED(grid, detail::kTopkThreads, 0, stream, chain, detail::topk_ties_kernel)(p);
  IP_CUDA_CHECK(cudaGetLastError());
  const bool rank = a.order == TopkOrder::rank ||
                    (a.order == TopkOrder::automatic &&
                     static_cast<long long>(a.rows) * a.k * a.k <= kTopkRankMaxWork);
  if (rank) {
    const dim3 rgrid(static_cast<unsigned>(a.rows), static_cast<unsigned>((a.k + 31) / 32));
    const std::size_t smem = static_cast<std::size_t>(a.k) * sizeof(std::uint64_t);  // <= 32 KiB: k <= 4096
    IP_LAUNCH_CHAINED(rgrid, detail::kTopkRankThreads, smem, stream, chain, detail::topk_rank_kernel)(p);
  } else {
    IP_LAUNCH_CHAINED(static_cast<unsigned>(a.rows), detail::kTopkSortThreads, 0, stream, chain,
                      detail::topk_sort_kernel)(p);
  }
  IP_CUDA_CHECK(cudaGetLastError());
}

}  // namespace ip::cuda
