// Access-statistics update on the device (CPU reference: core/stats.cc AccessStats::update).
//   decay kernel: mass[i] = decayed_mass(mass[i], decay, step_mass[i]) for every token, grid-stride,
//                 one coalesced 4-byte load of each array per token (same bits as the CPU where both
//                 contract the expression to one fma, see core/stats_math.h).
//   count kernel: one block per selected range (blocks stride over ranges when there are more than
//                 the grid), its threads stride over the range's tokens: count[i] += 1 with an integer
//                 atomic (deterministic; overlapping ranges count twice, as on the CPU). Ranges are
//                 clipped to [0, tokens): the device never writes outside the arrays.
#include <algorithm>
#include <cstdint>

#include "core/stats_math.h"
#include "kernels/cuda_check.h"
#include "kernels/launch.h"
#include "kernels/stats.h"

namespace ip::cuda {
namespace {

constexpr int kDecayThreads = 256;
constexpr long long kDecayMaxBlocks = 1 << 16;
constexpr int kCountThreads = 128;
constexpr int kCountMaxBlocks = 1 << 16;

__global__ void decay_mass_kernel(float* __restrict__ mass, const float* __restrict__ step, long long tokens,
                                  float decay) {
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < tokens; i += stride)
    mass[i] = decayed_mass(mass[i], decay, step[i]);
}

__global__ void count_ranges_kernel(std::uint32_t* __restrict__ count, const long long* __restrict__ ranges,
                                    int n_ranges, long long tokens) {
  for (int r = blockIdx.x; r < n_ranges; r += gridDim.x) {
    long long first = ranges[2LL * r], last = ranges[2LL * r + 1];
    first = first < 0 ? 0 : first;
    last = last > tokens ? tokens : last;
    for (long long i = first + threadIdx.x; i < last; i += blockDim.x) atomicAdd(count + i, 1u);
  }
}

}  // namespace

void update_stats(const StatsArgs& a, cudaStream_t stream) {
  validate_stats_args(a);
  if (a.tokens > 0) {
    const long long blocks = std::min((a.tokens + kDecayThreads - 1) / kDecayThreads, kDecayMaxBlocks);
    IP_LAUNCH(static_cast<int>(blocks), kDecayThreads, 0, stream, decay_mass_kernel)(a.mass, a.step_mass, a.tokens,
                                                                                      a.decay);
    IP_CUDA_CHECK(cudaGetLastError());
  }
  if (a.tokens > 0 && a.n_ranges > 0) {
    const int blocks = std::min(a.n_ranges, kCountMaxBlocks);
    IP_LAUNCH(blocks, kCountThreads, 0, stream, count_ranges_kernel)(a.count, a.ranges, a.n_ranges, a.tokens);
    IP_CUDA_CHECK(cudaGetLastError());
  }
}

}  // namespace ip::cuda
