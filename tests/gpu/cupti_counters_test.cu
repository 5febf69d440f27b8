// CUPTI on a GPU (label gpu): DRAM bytes of a streaming copy against the bytes it must move, user replay
// with inputs restored between passes, kernel records. The pooling kernel is not merged yet, so a copy
// kernel written here stands in for it; scripts/gpu-profile-check.sh checks pooling through the runner.
#include <cstdio>

#include <cstring>
#include <memory>

#include "experiments/profile_types.h"
#include "kernels/cupti_counters.h"
#include "kernels/kernel_records.h"
#include "tests/gpu/gpu_test.h"

namespace ip {
namespace {

// out[i] = in[i], 16 bytes per thread per iteration, grid-stride; every byte read once, written once.
__global__ void copy_kernel(const float4* __restrict__ in, float4* __restrict__ out, long long n) {
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) out[i] = in[i];
}

// x[i] += 1: changes its own input, so every replay pass must start from restored data.
__global__ void increment_kernel(float* x, long long n) {
  const long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) x[i] += 1.0f;
}

int sm_count() {
  int dev = 0, sms = 0;
  IP_CUDA_CHECK(cudaGetDevice(&dev));
  IP_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  return sms;
}

// Skips with CUPTI's explanation when this machine does not let us read counters (e.g. no permission:
// the message names ERR_NVGPUCTRPERM and the fix); any other failure fails the test.
#define IP_MAKE_PROFILER(var, metrics)                                 \
  std::unique_ptr<cupti::RangeProfiler> var;                           \
  try {                                                                \
    var = std::make_unique<cupti::RangeProfiler>(0, metrics);          \
  } catch (const cupti::CountersUnavailable& e) {                      \
    GTEST_SKIP() << "counters cannot be read here: " << e.what();      \
  }

TEST(CuptiCounters, CopyDramBytesMatchDeclaredBytes) {
  IP_REQUIRE_GPU();
  int dev = 0, l2 = 0;
  IP_CUDA_CHECK(cudaGetDevice(&dev));
  IP_CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
  // Working set (read + written) >= 8x L2, and at least 512 MiB each way.
  const long long bytes = std::max<long long>(512ll << 20, 4ll * l2) & ~15ll;
  const long long n = bytes / 16;
  cuda::DeviceBuffer<float4> in(static_cast<std::size_t>(n)), out(static_cast<std::size_t>(n));
  in.fill_bytes(0x11);
  out.fill_bytes(0);
  IP_CUDA_CHECK(cudaDeviceSynchronize());
  IP_MAKE_PROFILER(prof, (std::vector<std::string>{"dram__bytes_read.sum", "dram__bytes_write.sum"}));
  ASSERT_GE(prof->passes(), 1u);
  int passes = 0;
  const std::vector<double> v = prof->measure(
      "copy",
      [&] {
        ++passes;
        copy_kernel<<<sm_count() * 4, 256>>>(in.data(), out.data(), n);
        IP_CUDA_CHECK(cudaGetLastError());
      },
      {});
  EXPECT_EQ(static_cast<std::size_t>(passes), prof->passes());
  ASSERT_EQ(v.size(), 2u);
  std::printf("copy of %.1f MiB (L2 %.1f MiB): DRAM read %.1f MiB, written %.1f MiB, %d passes\n", bytes / 1048576.0,
              l2 / 1048576.0, v[0] / 1048576.0, v[1] / 1048576.0, passes);
  EXPECT_NEAR(v[0] / static_cast<double>(bytes), 1.0, 0.05) << "DRAM bytes read";
  EXPECT_NEAR(v[1] / static_cast<double>(bytes), 1.0, 0.05) << "DRAM bytes written";
  // Every element written by the measured runs.
  const auto h = out.to_host();
  const float expect = [] {
    float f;
    std::memset(&f, 0x11, sizeof f);
    return f;
  }();
  EXPECT_EQ(h.front().x, expect);
  EXPECT_EQ(h.back().w, expect);
}

TEST(CuptiCounters, ReplayRestoresInputs) {
  IP_REQUIRE_GPU();
  const long long n = 1 << 20;
  const std::vector<float> start(static_cast<std::size_t>(n), 5.0f);
  auto x = test::to_device(start);
  IP_MAKE_PROFILER(prof, exp::default_metrics());
  int restores = 0;
  prof->measure(
      "increment",
      [&] {
        increment_kernel<<<static_cast<unsigned>((n + 255) / 256), 256>>>(x.data(), n);
        IP_CUDA_CHECK(cudaGetLastError());
      },
      [&] {
        ++restores;
        x.upload(start);
      });
  EXPECT_EQ(static_cast<std::size_t>(restores), prof->passes() - 1);
  for (float v : x.to_host()) ASSERT_EQ(v, 6.0f);  // one application, whatever the pass count
}

TEST(CuptiCounters, KernelRecordsNameShapeAndTag) {
  IP_REQUIRE_GPU();
  std::unique_ptr<cupti::KernelRecorder> rec;
  try {
    rec = std::make_unique<cupti::KernelRecorder>();
  } catch (const cupti::CountersUnavailable& e) {
    GTEST_SKIP() << "kernel records unavailable: " << e.what();
  }
  const long long n = 1 << 22;
  cuda::DeviceBuffer<float4> in(static_cast<std::size_t>(n)), out(static_cast<std::size_t>(n));
  in.fill_bytes(0);
  rec->collect();  // drop whatever ran before
  rec->push_tag(0x30005);
  copy_kernel<<<123, 128>>>(in.data(), out.data(), n);
  IP_CUDA_CHECK(cudaGetLastError());
  rec->pop_tag();
  copy_kernel<<<7, 64>>>(in.data(), out.data(), n);
  IP_CUDA_CHECK(cudaGetLastError());
  const auto ks = rec->collect();
  ASSERT_EQ(ks.size(), 2u);
  EXPECT_NE(ks[0].name.find("copy_kernel"), std::string::npos) << ks[0].name;
  EXPECT_NE(ks[0].name.find("float4"), std::string::npos) << ks[0].name;  // demangled
  EXPECT_EQ(ks[0].grid[0], 123);
  EXPECT_EQ(ks[0].block[0], 128);
  EXPECT_EQ(ks[0].tag, 0x30005u);
  EXPECT_EQ(ks[1].grid[0], 7);
  EXPECT_EQ(ks[1].tag, 0u);
  EXPECT_GT(ks[0].duration_ns, 0u);
  EXPECT_GT(ks[0].registers_per_thread, 0);
}

}  // namespace
}  // namespace ip
