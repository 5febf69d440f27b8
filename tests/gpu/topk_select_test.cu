// The shared-memory radix select of kernels/block_select.cuh (block_radix_select: top-k's sampling step
// finds its threshold with it) against std::sort. It includes none of the library's kernels, which a
// program that also links the library would then define twice. A program of its own (made one when it
// included topk.cuh, whose shared statics clashed with the library's on the emulator).
#include <algorithm>
#include <cstdint>
#include <functional>
#include <random>
#include <vector>

#include "kernels/launch.h"
#include "kernels/block_select.cuh"
#include "tests/gpu/gpu_test.h"

namespace ip {
namespace {

// One block: out[j] = block_radix_select(v, n, ranks[j]) for each of m ranks.
template <class T>
__global__ void radix_select_kernel(const T* in, int n, const std::uint32_t* ranks, int m, T* out) {
  __shared__ T v[4096];
  __shared__ std::uint32_t h[cuda::detail::kBlockSelectBins];
  for (int i = threadIdx.x; i < n; i += blockDim.x) v[i] = in[i];
  __syncthreads();
  for (int j = 0; j < m; ++j) {
    const T t = cuda::detail::block_radix_select(v, n, ranks[j], h);
    if (threadIdx.x == 0) out[j] = t;
  }
}

// block_radix_select against std::sort: 32-bit and 64-bit values, distinct or with many duplicates (the
// rank-th value exactly), blocks of 256 and 1024 threads.
template <class T>
void check_radix_select(int n, int threads, bool few_values, std::mt19937_64& rng) {
  SCOPED_TRACE(fmt::format("bits={} n={} threads={} few_values={}", 8 * sizeof(T), n, threads, few_values));
  std::vector<T> v(static_cast<std::size_t>(n));
  for (auto& x : v) x = few_values ? static_cast<T>(rng() % 7) << (8 * sizeof(T) - 3) : static_cast<T>(rng());
  std::vector<T> desc = v;
  std::sort(desc.begin(), desc.end(), std::greater<T>());
  std::vector<std::uint32_t> ranks;
  for (long long r : {1LL, 2LL, n / 3LL, n - 1LL, static_cast<long long>(n)})
    if (r >= 1 && r <= n) ranks.push_back(static_cast<std::uint32_t>(r));
  auto d_v = test::to_device(v);
  auto d_r = test::to_device(ranks);
  auto d_out = test::poisoned<T>(ranks.size());
  IP_LAUNCH(1, threads, 0, nullptr, radix_select_kernel<T>)(d_v.data(), n, d_r.data(), static_cast<int>(ranks.size()),
                                                           d_out.data());
  IP_CUDA_CHECK(cudaGetLastError());
  const std::vector<T> got = d_out.to_host();
  for (std::size_t j = 0; j < ranks.size(); ++j) EXPECT_EQ(got[j], desc[ranks[j] - 1]) << "rank " << ranks[j];
}

// (Not named *Large*: gpu-check's sanitizer filter leaves such names out.)
TEST(TopkSelect, RadixSelectFindsTheValueOfEachRank) {
  IP_REQUIRE_GPU();
  std::mt19937_64 rng(17);
  for (int threads : {256, 1024})
    for (int n : {1, 37, 4096})
      for (bool few_values : {false, true}) {
        check_radix_select<std::uint32_t>(n, threads, few_values, rng);
        check_radix_select<std::uint64_t>(n, threads, few_values, rng);
      }
}

}  // namespace
}  // namespace ip
