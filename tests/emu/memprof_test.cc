// Tests of the emulator's memory-access profile (emu/cuemu.h, "The memory-access profile"): kernels with
// known access patterns, compiled with the profile's instrumentation (tests/CMakeLists.txt), and the
// requests, sectors and wavefronts it counts for them.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "kernels/launch.h"

namespace {

using cuemu::MemLaunch;
using cuemu::MemOp;
using cuemu::MemRow;
using cuemu::MemSpace;

// The launches of f, profiled.
template <class F>
std::vector<MemLaunch> profile(F&& f) {
  cuemu::memprof_enable(true);
  f();
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  cuemu::memprof_enable(false);
  return cuemu::memprof_take();
}

// The one row of a launch with this space and op (a failure when there is none or several).
MemRow row(const MemLaunch& l, MemSpace space, MemOp op) {
  const MemRow* found = nullptr;
  int n = 0;
  for (const MemRow& r : l.rows)
    if (r.space == space && r.op == op) {
      found = &r;
      ++n;
    }
  EXPECT_EQ(n, 1) << l.kernel;
  return found ? *found : MemRow{};
}

int count(const MemLaunch& l, MemSpace space, MemOp op) {
  int n = 0;
  for (const MemRow& r : l.rows) n += r.space == space && r.op == op;
  return n;
}

template <class T>
T* device(std::size_t n) {
  T* p = nullptr;
  EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&p), n * sizeof(T)), cudaSuccess);
  EXPECT_EQ(cudaMemset(p, 0, n * sizeof(T)), cudaSuccess);
  return p;
}

__global__ void copy_kernel(const float* in, float* out, int stride) {
  const int t = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  out[t] = in[t * stride] * 2.0f;
}

TEST(Memprof, TheProgramIsInstrumented) {
  EXPECT_TRUE(cuemu::memprof_instrumented());
}

TEST(Memprof, CoalescedLoadsAndStoresTakeTheFewestSectors) {
  float* in = device<float>(192);
  float* out = device<float>(192);
  const auto l = profile([&] { IP_LAUNCH(3, 64, 0, nullptr, copy_kernel)(in, out, 1); });
  ASSERT_EQ(l.size(), 1u);
  EXPECT_EQ(l[0].kernel, "copy_kernel");
  EXPECT_NE(l[0].symbol.find("copy_kernel(float const*, float*, int)"), std::string::npos) << l[0].symbol;
  EXPECT_EQ(l[0].grid.x, 3u);
  EXPECT_EQ(l[0].block.x, 64u);
  for (MemOp op : {MemOp::load, MemOp::store}) {
    const MemRow r = row(l[0], MemSpace::global, op);
    EXPECT_EQ(r.requests, 6u);  // 3 blocks of 2 warps
    EXPECT_EQ(r.lanes, 192u);
    EXPECT_EQ(r.bytes, 192u * 4);
    EXPECT_EQ(r.units, 24u);  // 4 sectors of 32 bytes a request
    EXPECT_EQ(r.ideal, 24u);
    EXPECT_FALSE(r.module.empty());
    EXPECT_NE(r.pc, 0u);
  }
  EXPECT_EQ(l[0].unique_load_sectors, 24u);
  EXPECT_EQ(l[0].unique_store_sectors, 24u);
  EXPECT_EQ(count(l[0], MemSpace::shared, MemOp::load) + count(l[0], MemSpace::global, MemOp::atomic), 0);
  cudaFree(in);
  cudaFree(out);
}

TEST(Memprof, StridedLoadsTakeASectorALane) {
  float* in = device<float>(32 * 32);
  float* out = device<float>(32);
  const auto l = profile([&] { IP_LAUNCH(1, 32, 0, nullptr, copy_kernel)(in, out, 32); });
  ASSERT_EQ(l.size(), 1u);
  const MemRow r = row(l[0], MemSpace::global, MemOp::load);
  EXPECT_EQ(r.requests, 1u);
  EXPECT_EQ(r.units, 32u);  // every lane 128 bytes from the next
  EXPECT_EQ(r.ideal, 4u);   // 128 distinct bytes
  EXPECT_EQ(l[0].unique_load_sectors, 32u);
  cudaFree(in);
  cudaFree(out);
}

__global__ void broadcast_and_vector_kernel(const float* in, const uint4* v, uint4* out) {
  const int t = static_cast<int>(threadIdx.x);
  const float x = __ldg(in + 3);  // every lane the same word
  uint4 w = v[t];                 // 16 bytes a lane, contiguous
  w.x += static_cast<unsigned>(x);
  out[t] = w;
}

TEST(Memprof, ABroadcastIsOneSectorAndVectorLoadsAreCoalesced) {
  float* in = device<float>(8);
  uint4* v = device<uint4>(32);
  uint4* out = device<uint4>(32);
  const auto l = profile([&] { IP_LAUNCH(1, 32, 0, nullptr, broadcast_and_vector_kernel)(in, v, out); });
  ASSERT_EQ(l.size(), 1u);
  ASSERT_EQ(count(l[0], MemSpace::global, MemOp::load), 2);
  for (const MemRow& r : l[0].rows) {
    if (r.op != MemOp::load) continue;
    EXPECT_EQ(r.requests, 1u);
    EXPECT_EQ(r.lanes, 32u);
    if (r.bytes == 32u * 4) {  // the broadcast
      EXPECT_EQ(r.units, 1u);
      EXPECT_EQ(r.ideal, 1u);
    } else {
      EXPECT_EQ(r.bytes, 32u * 16);
      EXPECT_EQ(r.units, 16u);
      EXPECT_EQ(r.ideal, 16u);
    }
  }
  const MemRow s = row(l[0], MemSpace::global, MemOp::store);
  EXPECT_EQ(s.units, 16u);
  EXPECT_EQ(l[0].unique_load_sectors, 17u);
  cudaFree(in);
  cudaFree(v);
  cudaFree(out);
}

// Shared memory: every lane writes its word, then reads with a stride of `stride` words.
__global__ void shared_stride_kernel(float* out, int stride) {
  IP_DYNAMIC_SHARED(float, s);
  const int t = static_cast<int>(threadIdx.x);
  for (int i = t; i < 32 * 32; i += 32) s[i] = static_cast<float>(i);
  __syncthreads();
  out[t] = s[(t * stride) % (32 * 32)];
}

TEST(Memprof, SharedMemoryBankConflictsAreWavefronts) {
  float* out = device<float>(32);
  for (int stride : {0, 1, 2, 32, 33}) {
    const auto l = profile([&] { IP_LAUNCH(1, 32, 32 * 32 * 4, nullptr, shared_stride_kernel)(out, stride); });
    ASSERT_EQ(l.size(), 1u);
    const MemRow st = row(l[0], MemSpace::shared, MemOp::store);
    EXPECT_EQ(st.requests, 32u);
    EXPECT_EQ(st.units, 32u);  // conflict-free
    EXPECT_EQ(st.ideal, 32u);
    const MemRow ld = row(l[0], MemSpace::shared, MemOp::load);
    EXPECT_EQ(ld.requests, 1u);
    const unsigned want = stride == 2 ? 2 : stride == 32 ? 32 : 1;  // 0: a broadcast; 33: every bank once
    EXPECT_EQ(ld.units, want) << "stride " << stride;
    EXPECT_EQ(ld.ideal, 1u);
  }
  cudaFree(out);
}

// 8- and 16-byte accesses to shared memory go a half and a quarter warp at a time.
__global__ void shared_wide_kernel(double* out, int stride) {
  __shared__ double s[64 * 4];
  const int t = static_cast<int>(threadIdx.x);
  for (int i = t; i < 64 * 4; i += 32) s[i] = i;
  __syncthreads();
  out[t] = s[t * stride];
}

TEST(Memprof, WideSharedAccessesGoAPhaseAtATime) {
  double* out = device<double>(32);
  {
    const auto l = profile([&] { IP_LAUNCH(1, 32, 0, nullptr, shared_wide_kernel)(out, 1); });
    ASSERT_EQ(l.size(), 1u);
    const MemRow ld = row(l[0], MemSpace::shared, MemOp::load);
    EXPECT_EQ(ld.units, 2u);  // two half warps of 128 bytes each
    EXPECT_EQ(ld.ideal, 2u);
  }
  {
    const auto l = profile([&] { IP_LAUNCH(1, 32, 0, nullptr, shared_wide_kernel)(out, 2); });
    ASSERT_EQ(l.size(), 1u);
    const MemRow ld = row(l[0], MemSpace::shared, MemOp::load);
    EXPECT_EQ(ld.units, 4u);  // 16 lanes over 16 words each in banks 0-1, 4-5, ...: 2 each
    EXPECT_EQ(ld.ideal, 2u);
  }
  cudaFree(out);
}

__global__ void atomic_kernel(unsigned* counts, int spread) {
  __shared__ unsigned h[32];
  const int t = static_cast<int>(threadIdx.x);
  h[t] = 0;
  __syncthreads();
  atomicAdd(&h[t % spread], 1u);
  __syncthreads();
  atomicAdd(&counts[t % spread], h[t]);
}

TEST(Memprof, AtomicsCountTheirAddresses) {
  unsigned* c = device<unsigned>(32);
  for (int spread : {1, 4, 32}) {
    const auto l = profile([&] { IP_LAUNCH(1, 32, 0, nullptr, atomic_kernel)(c, spread); });
    ASSERT_EQ(l.size(), 1u);
    const MemRow g = row(l[0], MemSpace::global, MemOp::atomic);
    EXPECT_EQ(g.requests, 1u);
    EXPECT_EQ(g.lanes, 32u);
    EXPECT_EQ(g.addresses, static_cast<unsigned>(spread));
    const MemRow s = row(l[0], MemSpace::shared, MemOp::atomic);
    EXPECT_EQ(s.requests, 1u);
    EXPECT_EQ(s.units, 32u / spread);  // lanes on one address take a turn each
    // the atomics' own load and store are not counted as plain accesses
    EXPECT_EQ(count(l[0], MemSpace::global, MemOp::load) + count(l[0], MemSpace::global, MemOp::store), 0);
    EXPECT_EQ(count(l[0], MemSpace::shared, MemOp::load), 1);  // h[t]
  }
  cudaFree(c);
}

// A lane's local array (on its stack) is not device or shared memory; half the lanes store.
__global__ void local_and_divergent_kernel(const int* in, int* out, int k) {
  int local[16];
  const int t = static_cast<int>(threadIdx.x);
  for (int i = 0; i < 16; ++i) local[i] = in[i] + t;
  if (t < 16) out[t] = local[(t + k) % 16];
}

TEST(Memprof, LocalVariablesAreLeftOutAndInactiveLanesAreNotCounted) {
  int* in = device<int>(16);
  int* out = device<int>(32);
  const auto l = profile([&] { IP_LAUNCH(1, 32, 0, nullptr, local_and_divergent_kernel)(in, out, 5); });
  ASSERT_EQ(l.size(), 1u);
  const MemRow st = row(l[0], MemSpace::global, MemOp::store);
  EXPECT_EQ(st.requests, 1u);
  EXPECT_EQ(st.lanes, 16u);
  EXPECT_EQ(st.units, 2u);
  for (const MemRow& r : l[0].rows) EXPECT_EQ(r.space, MemSpace::global);
  cudaFree(in);
  cudaFree(out);
}

TEST(Memprof, OnlyEnabledLaunchesAreProfiled) {
  float* in = device<float>(32);
  float* out = device<float>(32);
  IP_LAUNCH(1, 32, 0, nullptr, copy_kernel)(in, out, 1);
  EXPECT_TRUE(cuemu::memprof_take().empty());
  const auto l = profile([&] {
    IP_LAUNCH(1, 32, 0, nullptr, copy_kernel)(in, out, 1);
    IP_LAUNCH(1, 32, 0, nullptr, copy_kernel)(in, out, 1);
  });
  ASSERT_EQ(l.size(), 2u);
  EXPECT_EQ(l[1].index, l[0].index + 1);
  // a label and a run go with the launches after them; a new label ends the run
  const auto labelled = profile([&] {
    cuemu::memprof_label("a");
    cuemu::memprof_run(0);
    IP_LAUNCH(1, 32, 0, nullptr, copy_kernel)(in, out, 1);
    cuemu::memprof_label("b");
    IP_LAUNCH(1, 32, 0, nullptr, copy_kernel)(in, out, 1);
  });
  ASSERT_EQ(labelled.size(), 2u);
  EXPECT_EQ(labelled[0].label, "a");
  EXPECT_EQ(labelled[0].run, 0);
  EXPECT_EQ(labelled[1].label, "b");
  EXPECT_EQ(labelled[1].run, -1);
  cudaFree(in);
  cudaFree(out);
}

// CUEMU_MEMPROF=<file>: a first line that says how the file was made, then a JSON line a launch. Run in a
// fresh process (the variable is read at the program's first launch).
TEST(MemprofDeathTest, TheEnvironmentVariableWritesAJsonLineALaunch) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const std::string path = testing::TempDir() + "/memprof_env_test.jsonl";
  std::remove(path.c_str());
  EXPECT_EXIT(
      {
        setenv("CUEMU_MEMPROF", path.c_str(), 1);
        float* in = device<float>(64);
        float* out = device<float>(64);
        cuemu::memprof_label("case one");
        cuemu::memprof_run(2);
        IP_LAUNCH(2, 32, 0, nullptr, copy_kernel)(in, out, 1);
        std::exit(0);
      },
      testing::ExitedWithCode(0), "");
  std::ifstream f(path);
  std::string first, second, third;
  ASSERT_TRUE(std::getline(f, first));
  ASSERT_TRUE(std::getline(f, second));
  EXPECT_FALSE(std::getline(f, third));
  EXPECT_NE(first.find("\"profile\": \"cuemu memory-access profile"), std::string::npos) << first;
  EXPECT_NE(first.find("\"command\": \""), std::string::npos) << first;
  EXPECT_NE(first.find("emu_memprof_test"), std::string::npos) << first;
  EXPECT_NE(second.find("{\"launch\": 0, \"case\": \"case one\", \"run\": 2, \"kernel\": \"copy_kernel\""),
            std::string::npos)
      << second;
  EXPECT_NE(second.find("\"grid\": [2, 1, 1], \"block\": [32, 1, 1], \"unique_load_sectors\": 8, "
                        "\"unique_store_sectors\": 8"),
            std::string::npos)
      << second;
  EXPECT_NE(second.find("\"space\": \"global\", \"op\": \"load\", \"requests\": 2, \"lanes\": 64, \"bytes\": 256, "
                        "\"units\": 8, \"ideal\": 8, \"addresses\": 0}"),
            std::string::npos)
      << second;
  std::remove(path.c_str());
}

}  // namespace
