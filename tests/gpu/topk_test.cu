// ip::cuda::topk against the CPU's ip::topk (a full stable sort): sizes {1, 19, 111, 989, 100000, 2M},
// batches of rows of different lengths, heavy ties, all-equal rows, negative / zero / -0.0 scores, ties at
// the k-th score (a few, listed by id, and more than the list holds), kernel_bench's uniform scores,
// k = 1, k = n, k = 4096, poisoned outputs and workspaces, both ways of ordering the selection (bitonic
// sort and ranks), the single launch (once per check, and one batch many times over), the cluster launch
// (once per check, and one batch at every cluster size many times over), the block launch (once per
// check, the same batch many times over, and a batch of many short rows), rows shorter than k
// (padded); argument checks run without a GPU.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/topk.h"
#include "kernels/topk.h"
#include "tests/gpu/gpu_test.h"

namespace ip {
namespace {

// rounded: normal to 2 decimals, so the k-th score is tied with dozens of others even in a long row
// (a partial take of ties after compaction). uniform24: kernel_bench's scores, 24-bit uniform in [0, 1):
// one 11-bit digit holds 1/8 of the row, too many for pass 1's compaction, so pass 2 compacts.
// clustered_ties: 1.0 at every 8th id of the second half (n/16 ties, more than the tie list holds), the
// rest below: a partial take by the ordered scan, which the first half's blocks skip.
enum class Dist { normal, few_values, all_equal, signed_zeros, ascending, rounded, uniform24, clustered_ties };

std::vector<float> make_row(long long n, Dist dist, std::mt19937& rng) {
  std::vector<float> s(static_cast<std::size_t>(n));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (long long i = 0; i < n; ++i) {
    switch (dist) {
      case Dist::normal: s[i] = normal(rng); break;
      case Dist::few_values: s[i] = static_cast<float>(static_cast<int>(rng() % 5) - 2); break;  // heavy ties
      case Dist::all_equal: s[i] = 0.25f; break;
      case Dist::signed_zeros: {
        const float v[] = {0.0f, -0.0f, -1.0f, -std::numeric_limits<float>::infinity(), -1e-40f};
        s[i] = v[rng() % 5];
        break;
      }
      case Dist::ascending: s[i] = static_cast<float>(i % 1000); break;  // ties spread over the row
      case Dist::rounded: s[i] = std::round(normal(rng) * 100.0f) / 100.0f; break;
      case Dist::uniform24: s[i] = static_cast<float>(rng() >> 8) * (1.0f / 16777216.0f); break;
      case Dist::clustered_ties: s[i] = i >= n / 2 && i % 8 == 0 ? 1.0f : normal(rng) * 0.1f - 5.0f; break;
    }
  }
  return s;
}

// Distinct scores (a permutation of 0 .. n-1), then the k-th largest value copied over `copies` ids
// below it spread over the whole row: the k-th score is tied `copies` + 1 times and only the lowest id
// is taken (a partial take of a few ties, listed by id; from the compact list when `base` = normal).
std::vector<float> threshold_ties(long long n, int k, int copies, std::mt19937& rng) {
  IP_REQUIRE(copies <= n - k, "threshold_ties: {} copies, but only {} scores lie below the k-th", copies, n - k);
  std::vector<float> s(static_cast<std::size_t>(n));
  for (long long i = 0; i < n; ++i) s[i] = static_cast<float>(i);
  std::shuffle(s.begin(), s.end(), rng);
  const float v = static_cast<float>(n - k);
  for (int c = 0; c < copies; ++c) {
    long long i = static_cast<long long>(rng() % static_cast<unsigned>(n));
    while (s[i] >= v) i = (i + 1) % n;
    s[i] = v;
  }
  return s;
}

// A batch of rows on the device, its outputs and workspace poisoned (the launcher must not rely on a
// clean workspace), and the arguments of a call over it.
struct DeviceBatch {
  cuda::DeviceBuffer<float> scores;
  cuda::DeviceBuffer<long long> off;
  cuda::DeviceBuffer<std::int32_t> ids;
  cuda::DeviceBuffer<float> vals;
  cuda::DeviceBuffer<unsigned char> ws;
  cuda::TopkArgs a;

  DeviceBatch(const std::vector<std::vector<float>>& rows, int k, bool with_values) {
    std::vector<long long> o = {0};
    std::vector<float> all;
    long long max_row = 0;
    for (const auto& r : rows) {
      all.insert(all.end(), r.begin(), r.end());
      o.push_back(o.back() + static_cast<long long>(r.size()));
      max_row = std::max<long long>(max_row, static_cast<long long>(r.size()));
    }
    const int R = static_cast<int>(rows.size());
    scores = test::to_device(all);
    off = test::to_device(o);
    ids = test::poisoned<std::int32_t>(static_cast<std::size_t>(R) * k + 1);  // one guard element past the end
    vals = test::poisoned<float>(static_cast<std::size_t>(R) * k + 1);
    ws = test::poisoned<unsigned char>(cuda::topk_workspace_bytes(R, max_row, k));
    a.rows = R;
    a.row_offset = off.data();
    a.max_row = max_row;
    a.scores = scores.data();
    a.k = k;
    a.ids = ids.data();
    a.values = with_values ? vals.data() : nullptr;
    a.workspace = ws.data();
    a.workspace_bytes = ws.size();
  }
  // One call with the outputs (and, with fresh_workspace, the workspace) poisoned with `poison` first;
  // the outputs on the host.
  std::pair<std::vector<std::int32_t>, std::vector<float>> run(int poison, bool fresh_workspace = false) {
    ids.fill_bytes(poison);
    vals.fill_bytes(poison);
    if (fresh_workspace) ws.fill_bytes(poison);
    cuda::topk(a, nullptr);
    IP_CUDA_CHECK(cudaDeviceSynchronize());
    std::pair<std::vector<std::int32_t>, std::vector<float>> out{ids.to_host(), vals.to_host()};
    // The guard past the last row's k outputs keeps the poison: nothing was written beyond the end.
    unsigned char id_guard[sizeof(std::int32_t)], val_guard[sizeof(float)];
    std::memcpy(id_guard, &out.first.back(), sizeof id_guard);
    std::memcpy(val_guard, &out.second.back(), sizeof val_guard);
    for (unsigned char g : id_guard) EXPECT_EQ(g, static_cast<unsigned char>(poison)) << "id written past the end";
    for (unsigned char g : val_guard) EXPECT_EQ(g, static_cast<unsigned char>(poison)) << "value written past the end";
    return out;
  }
};

void check(const std::vector<std::vector<float>>& rows, int k, bool with_values = true,
           cuda::TopkSampling sampling = cuda::TopkSampling::automatic, long long min_chunk = 0,
           bool one_wave = false) {
  long long max_row = 0;
  for (const auto& r : rows) max_row = std::max<long long>(max_row, static_cast<long long>(r.size()));
  SCOPED_TRACE(fmt::format("rows={} max_row={} k={} sampling={} min_chunk={} one_wave={}", rows.size(), max_row, k,
                           static_cast<int>(sampling), min_chunk, one_wave));
  const int R = static_cast<int>(rows.size());
  DeviceBatch b(rows, k, with_values);
  b.a.sampling = sampling;
  b.a.min_chunk = min_chunk;
  b.a.one_wave = one_wave;
  // Both ways of ordering the selected scores (step 4), whatever `automatic` would pick for this batch,
  // then the single launch (ranks, no sampling; not with sampling on); each twice: first on a poisoned
  // workspace (nothing left by the way before may help), then on the one it used. Then the cluster
  // launch and the block launch (they use no workspace; they sample as the chain does), once each.
  for (int rep = 0; rep < 8; ++rep) {
    if (sampling == cuda::TopkSampling::on && (rep == 4 || rep == 5)) continue;
    b.a.order = rep < 2 ? cuda::TopkOrder::bitonic : cuda::TopkOrder::rank;
    b.a.launch = rep < 4   ? cuda::TopkLaunch::chain
                 : rep < 6 ? cuda::TopkLaunch::single
                 : rep < 7 ? cuda::TopkLaunch::cluster
                           : cuda::TopkLaunch::block;
    SCOPED_TRACE(rep < 2   ? "order bitonic"
                 : rep < 4 ? "order rank"
                 : rep < 6 ? "launch single"
                 : rep < 7 ? "launch cluster"
                           : "launch block");
    const auto [ids, vals] = b.run(rep % 2 ? 0x5A : 0xFF, /*fresh_workspace=*/rep % 2 == 0);
    for (int r = 0; r < R; ++r) {
      const auto& s = rows[r];
      const std::vector<std::int32_t> ref = ip::topk(s.data(), static_cast<Index64>(s.size()), k);
      for (int i = 0; i < k; ++i) {
        const std::int32_t got = ids[static_cast<std::size_t>(r) * k + i];
        ASSERT_EQ(got, ref[i]) << "row " << r << " rank " << i << " rep " << rep;
        if (with_values) {
          const float v = vals[static_cast<std::size_t>(r) * k + i];
          ASSERT_EQ(std::memcmp(&v, &s[got], sizeof v), 0) << "row " << r << " rank " << i << " value bits";
        }
      }
    }
  }
}

TEST(Topk, SizesAndDistributions) {
  IP_REQUIRE_GPU();
  std::mt19937 rng(3);
  for (long long n : {1LL, 19LL, 111LL, 989LL, 100000LL})
    for (Dist d : {Dist::normal, Dist::few_values, Dist::all_equal, Dist::signed_zeros, Dist::ascending, Dist::rounded,
                   Dist::uniform24, Dist::clustered_ties})
      for (long long k : {1LL, 7LL, n, 2048LL, 4096LL}) {
        if (k > n || k > 4096) continue;
        check({make_row(n, d, rng)}, static_cast<int>(k));
      }
}

TEST(Topk, BatchesOfDifferentLengths) {
  IP_REQUIRE_GPU();
  std::mt19937 rng(5);
  for (Dist d : {Dist::normal, Dist::few_values, Dist::signed_zeros}) {
    std::vector<std::vector<float>> rows;
    for (long long n : {19LL, 4096LL, 989LL, 100000LL, 111LL, 20000LL}) rows.push_back(make_row(n, d, rng));
    check(rows, 19);
    rows.erase(rows.begin());
    rows.erase(rows.begin() + 3);  // drop 19 and 111: k = 989 fits the rest
    check(rows, 989, false);
  }
  std::vector<std::vector<float>> many;
  for (int r = 0; r < 64; ++r) many.push_back(make_row(5000 + 37 * r, r % 2 ? Dist::normal : Dist::few_values, rng));
  check(many, 4096);
}

TEST(Topk, LongRows) {
  IP_REQUIRE_GPU();
  std::mt19937 rng(9);
  check({make_row(2 * 1024 * 1024, Dist::normal, rng)}, 2048);
  check({make_row(2 * 1024 * 1024, Dist::few_values, rng)}, 4096);
  check({make_row(2 * 1024 * 1024, Dist::rounded, rng), make_row(1 << 20, Dist::rounded, rng)}, 2048);
  check({make_row(2 * 1024 * 1024 + 17, Dist::ascending, rng), make_row(3000000, Dist::normal, rng)}, 1000);
  // kernel_bench's distribution (pass 2 compacts), and ties at the k-th score: a few (listed), many
  // (the ordered scan).
  check({make_row(1 << 20, Dist::uniform24, rng), make_row(3 << 19, Dist::uniform24, rng)}, 2048);
  check({threshold_ties(1 << 20, 2048, 40, rng), threshold_ties(300000, 2048, 2047, rng)}, 2048);
  check({make_row(1 << 20, Dist::clustered_ties, rng)}, 4096);
}

// Distinct scores in id order, ascending or descending: the top k (and the keys a compact list keeps)
// lie in one or two blocks' chunks of the row, more than the 1024 a block gathers in shared memory
// while compacting (kTopkStage), so the rest are reserved in the list directly.
std::vector<float> ramp(long long n, bool up) {
  std::vector<float> s(static_cast<std::size_t>(n));
  for (long long i = 0; i < n; ++i) s[i] = static_cast<float>(up ? i : n - 1 - i) / static_cast<float>(n);
  return s;
}

// The largest scores sit exactly where the sampling step looks (with rows of n >= kTopkSamples keys,
// samples at (2i + 1) n / (2 kTopkSamples)): its threshold keeps fewer than k keys, and the list is dropped.
std::vector<float> sample_spikes(long long n, std::mt19937& rng) {
  std::vector<float> s = make_row(n, Dist::normal, rng);
  const long long S = std::min<long long>(n, cuda::kTopkSamples);
  for (long long i = 0; i < S; ++i) s[(2 * i + 1) * n / (2 * S)] = 100.0f + static_cast<float>(i % 97);
  return s;
}

// Step 0 on for every row: the list is kept (random orders), dropped for holding fewer than k keys (spikes)
// or more than it can (heavy ties), and rows with and without it share a batch; the same ids as the CPU.
TEST(Topk, SampledThreshold) {
  IP_REQUIRE_GPU();
  std::mt19937 rng(13);
  const auto on = cuda::TopkSampling::on;
  for (long long n : {19LL, 5000LL, 100000LL, 300000LL})
    for (Dist d : {Dist::normal, Dist::few_values, Dist::all_equal, Dist::ascending, Dist::rounded, Dist::uniform24,
                   Dist::clustered_ties})
      for (int k : {1, 100, 2048, 4096}) {
        if (k > n) continue;
        check({make_row(n, d, rng)}, k, true, on);
      }
  for (int k : {1, 512, 4096}) {
    check({threshold_ties(300000, k, 7, rng)}, k, true, on);
    check({sample_spikes(100000, rng), sample_spikes(300000, rng)}, k, true, on);
  }
  std::vector<std::vector<float>> mixed;
  for (int r = 0; r < 12; ++r) {
    const long long n = 40000 + 7919LL * r;
    const Dist d = r % 3 == 1 ? Dist::uniform24 : Dist::few_values;
    mixed.push_back(r % 3 == 0 ? sample_spikes(n, rng) : make_row(n, d, rng));
  }
  check(mixed, 2048, false, on);
  // List entries concentrated in one block's chunk: the sampled pass 0 (on) and pass 1's compaction (off).
  for (auto sampling : {on, cuda::TopkSampling::off})
    for (int k : {512, 2048}) check({ramp(65536, true), ramp(65536, false), ramp(300000, true)}, k, true, sampling);
  // automatic: one 2Mi-key row fits the L2 cache (no sampling); 8 of them do not (sampled)
  std::vector<std::vector<float>> big;
  for (int r = 0; r < 8; ++r) big.push_back(make_row(2 * 1024 * 1024, r % 2 ? Dist::uniform24 : Dist::normal, rng));
  check(big, 2048);
}

TEST(Topk, TiesAtTheThreshold) {
  IP_REQUIRE_GPU();
  std::mt19937 rng(11);
  for (long long n : {5000LL, 100000LL})
    for (int k : {1, 100, 2048, 4096}) {
      check({threshold_ties(n, k, 3, rng)}, k);
      if (n - k >= 2500) check({threshold_ties(n, k, 2500, rng)}, k);  // more ties than the tie list holds
    }
  // Rows of one batch on different paths: listed ties, the ordered scan, no ties, compacted or not.
  check({threshold_ties(200000, 512, 10, rng), make_row(200000, Dist::clustered_ties, rng),
         make_row(150000, Dist::uniform24, rng), make_row(70000, Dist::normal, rng)},
        512);
}

// Larger chunks a block (TopkArgs::min_chunk): fewer blocks a row, down to one; the same ids.
TEST(Topk, LargerChunksGiveTheSameIds) {
  IP_REQUIRE_GPU();
  std::mt19937 rng(19);
  const auto off = cuda::TopkSampling::off, on = cuda::TopkSampling::on;
  for (long long chunk : {16384LL, 65536LL, 1LL << 22}) {
    check({make_row(1 << 20, Dist::normal, rng)}, 2048, true, off, chunk);
    check({make_row(300000, Dist::uniform24, rng), threshold_ties(200000, 512, 40, rng)}, 512, true, off, chunk);
    check({make_row(300000, Dist::clustered_ties, rng), sample_spikes(100000, rng)}, 1000, true, on, chunk);
  }
}

// TopkArgs::one_wave changes only the blocks a row gets (fewer here: the emulator reports 1 resident block
// an SM), not the answer.
TEST(Topk, OneWaveGivesTheSameIds) {
  IP_REQUIRE_GPU();
  std::mt19937 rng(23);
  std::vector<std::vector<float>> rows;
  for (int r = 0; r < 5; ++r) rows.push_back(make_row(200000 + 7919 * r, r % 2 ? Dist::uniform24 : Dist::rounded, rng));
  rows.push_back(threshold_ties(150000, 700, 30, rng));
  for (auto sampling : {cuda::TopkSampling::off, cuda::TopkSampling::on}) check(rows, 700, true, sampling, 0, true);
}

// The single launch's blocks hand each step to the next through counters and fences in global memory,
// which only a GPU runs concurrently (the emulator runs one block at a time, so there this is three
// ordinary calls): the same batch many times, every answer the CPU's. A lost wait or a stale read shows
// as a wrong id in some calls.
TEST(Topk, SingleLaunchRepeatedly) {
  IP_REQUIRE_GPU();
#if defined(IP_CUEMU)
  const int calls = 3;
#else
  const int calls = 40;
#endif
  std::mt19937 rng(29);
  std::vector<std::vector<float>> rows;
  for (int r = 0; r < 12; ++r)
    rows.push_back(r % 3 == 2 ? threshold_ties(60000 + 1000 * r, 300, 20, rng)
                              : make_row(40000 + 9973 * r, r % 3 ? Dist::uniform24 : Dist::rounded, rng));
  const int k = 300;
  DeviceBatch b(rows, k, true);
  b.a.launch = cuda::TopkLaunch::single;
  std::vector<std::vector<std::int32_t>> ref;
  for (const auto& s : rows) ref.push_back(ip::topk(s.data(), static_cast<Index64>(s.size()), k));
  for (int c = 0; c < calls; ++c) {
    const auto [ids, vals] = b.run(c % 2 ? 0x5A : 0xFF, /*fresh_workspace=*/c % 4 == 0);
    for (std::size_t r = 0; r < rows.size(); ++r)
      for (int i = 0; i < k; ++i) ASSERT_EQ(ids[r * k + i], ref[r][i]) << "call " << c << " row " << r << " rank " << i;
  }
}

// The cluster launch at every cluster size: each row's blocks hand their histograms and candidates to
// each other through distributed shared memory between cluster barriers, which only a GPU runs
// concurrently (the emulator runs a cluster's blocks together on one thread, in a shuffled order, so a
// missing barrier shows there only in some orders): the same batch many times, every answer the CPU's.
// Rows of every kind the search distinguishes: an early end in pass 0 or 1 (take_all), all three passes,
// ties at the k-th score taken by all, none or some of a block's chunk (the ordered scan), rows of at
// most k scores, rows shorter than the cluster has blocks, and chunks whose pass-0 bucket is kept after
// pass 1 (read from shared memory after it) or is too large to keep (read from the row).
TEST(Topk, ClusterLaunchAtEveryClusterSize) {
  IP_REQUIRE_GPU();
#if defined(IP_CUEMU)
  const int calls = 2;
#else
  const int calls = 20;
#endif
  std::mt19937 rng(31);
  std::vector<std::vector<float>> rows;
  rows.push_back(threshold_ties(70000, 300, 40, rng));
  rows.push_back(make_row(50000, Dist::uniform24, rng));
  rows.push_back(make_row(45000, Dist::clustered_ties, rng));
  rows.push_back(make_row(30000, Dist::few_values, rng));
  rows.push_back(make_row(60000, Dist::rounded, rng));
  rows.push_back(make_row(300, Dist::normal, rng));  // exactly k: every score, no pass
  rows.push_back(make_row(9, Dist::normal, rng));    // fewer than k: padded; fewer scores than blocks
  rows.push_back(make_row(60000, Dist::all_equal, rng));  // a chunk of 30000 keeps more than the cap
  rows.push_back(ramp(40000, false));  // the top k in the first block's chunk
  const int k = 300;
  DeviceBatch b(rows, k, true);
  b.a.launch = cuda::TopkLaunch::cluster;
  std::vector<std::vector<std::int32_t>> ref;
  for (const auto& s : rows) {
    const int n = static_cast<int>(std::min<std::size_t>(s.size(), k));
    ref.push_back(ip::topk(s.data(), static_cast<Index64>(s.size()), n));
  }
  for (int blocks : {2, 4, 8, 16, 0, 1}) {  // 1: the block launch (one block a row, no cluster)
    if (blocks == 16 && !cuda::topk_cluster_fits(16, k, b.a.max_row)) {
      std::printf("note: this device cannot run clusters of 16 such blocks: that size is not checked here\n");
      continue;
    }
    for (int c = 0; c < calls; ++c) {
      b.a.launch = blocks == 1 ? cuda::TopkLaunch::block : cuda::TopkLaunch::cluster;
      b.a.cluster_blocks = blocks == 1 ? 0 : blocks;
      const auto [ids, vals] = b.run(c % 2 ? 0x5A : 0x33);
      for (std::size_t r = 0; r < rows.size(); ++r)
        for (int i = 0; i < k; ++i) {
          const std::int32_t want = i < static_cast<int>(ref[r].size()) ? ref[r][i] : -1;
          ASSERT_EQ(ids[r * k + i], want) << "cluster_blocks " << blocks << " call " << c << " row " << r << " rank " << i;
          const float v = vals[r * k + i];
          if (want >= 0) ASSERT_EQ(std::memcmp(&v, &rows[r][want], sizeof v), 0) << "row " << r << " rank " << i;
          else ASSERT_TRUE(std::isnan(v)) << "row " << r << " padding slot " << i;
        }
    }
  }
}

// The block launch over a batch of many short rows (what it is for: the decode step's per-request
// top-k), every kind of row, with sampling off and on (rows of 8Ki sample only when asked).
TEST(Topk, BlockLaunchManyShortRows) {
  IP_REQUIRE_GPU();
  std::mt19937 rng(41);
  const Dist kinds[] = {Dist::normal, Dist::few_values, Dist::all_equal, Dist::signed_zeros, Dist::ascending,
                        Dist::rounded, Dist::uniform24, Dist::clustered_ties};
  std::vector<std::vector<float>> rows;
  for (int r = 0; r < 160; ++r) rows.push_back(make_row(r % 7 == 0 ? 8192 - r : 8192, kinds[r % 8], rng));
  rows.push_back(threshold_ties(8192, 512, 40, rng));
  const int k = 512;
  std::vector<std::vector<std::int32_t>> ref;
  for (const auto& r : rows) ref.push_back(ip::topk(r.data(), static_cast<Index64>(r.size()), k));
  DeviceBatch b(rows, k, true);
  b.a.launch = cuda::TopkLaunch::block;
  for (auto sampling : {cuda::TopkSampling::off, cuda::TopkSampling::on}) {
    b.a.sampling = sampling;
    const auto [ids, vals] = b.run(0x5A);
    for (std::size_t r = 0; r < rows.size(); ++r)
      for (int i = 0; i < k; ++i) {
        const std::int32_t got = ids[r * k + i];
        ASSERT_EQ(got, ref[r][i]) << "sampling " << static_cast<int>(sampling) << " row " << r << " rank " << i;
        ASSERT_EQ(std::memcmp(&vals[r * k + i], &rows[r][got], sizeof(float)), 0) << "row " << r << " rank " << i;
      }
  }
}

// The cluster launch's sampling (on here for every row): the kept keys >= the sampled threshold read from
// shared memory (uniform scores), a threshold that leaves fewer than k keys (spikes where the samples
// are: pass 0 again over every key), and a chunk with more keys >= the threshold than it keeps (1.0 at
// every even id, the rest below: those blocks read their chunk again, counting only the keys >= it).
TEST(Topk, ClusterLaunchSamplesAsTheChain) {
  IP_REQUIRE_GPU();
  std::mt19937 rng(37);
  std::vector<std::vector<float>> rows;
  rows.push_back(make_row(300000, Dist::uniform24, rng));
  rows.push_back(sample_spikes(200000, rng));
  std::vector<float> half = make_row(300000, Dist::normal, rng);
  for (std::size_t i = 0; i < half.size(); i += 2) half[i] = 10.0f;
  rows.push_back(half);
  rows.push_back(make_row(250000, Dist::rounded, rng));
  for (int k : {100, 1000}) {
    DeviceBatch b(rows, k, true);
    b.a.launch = cuda::TopkLaunch::cluster;
    b.a.sampling = cuda::TopkSampling::on;
    std::vector<std::vector<std::int32_t>> ref;
    for (const auto& r : rows) ref.push_back(ip::topk(r.data(), static_cast<Index64>(r.size()), k));
    for (int blocks : {2, 16, 1}) {  // 1: the block launch (one block a row, no cluster)
      if (blocks == 16 && !cuda::topk_cluster_fits(16, k, b.a.max_row)) {
        std::printf("note: this device cannot run clusters of 16 such blocks (k = %d): not checked here\n", k);
        continue;
      }
      b.a.launch = blocks == 1 ? cuda::TopkLaunch::block : cuda::TopkLaunch::cluster;
      b.a.cluster_blocks = blocks == 1 ? 0 : blocks;
      const auto [ids, vals] = b.run(0x5A);
      for (std::size_t r = 0; r < rows.size(); ++r)
        for (int i = 0; i < k; ++i) {
          const std::int32_t got = ids[r * k + i];
          ASSERT_EQ(got, ref[r][i]) << "k " << k << " cluster_blocks " << blocks << " row " << r << " rank " << i;
          ASSERT_EQ(std::memcmp(&vals[r * k + i], &rows[r][got], sizeof(float)), 0) << "row " << r << " rank " << i;
        }
    }
  }
}

// A row shorter than k (a broken precondition the launcher cannot see: only max_row >= k is checked)
// yields its own top scores, then ids -1 and NaN values, in both orders and in the single launch.
TEST(Topk, RowsShorterThanKArePadded) {
  IP_REQUIRE_GPU();
  std::mt19937 rng(17);
  const int k = 300;
  const std::vector<std::vector<float>> rows = {make_row(5000, Dist::normal, rng), make_row(37, Dist::few_values, rng),
                                                make_row(299, Dist::normal, rng), make_row(1, Dist::normal, rng)};
  const int R = static_cast<int>(rows.size());
  DeviceBatch b(rows, k, true);
  for (int way = 0; way < 5; ++way) {
    SCOPED_TRACE(way == 0   ? "order bitonic"
                 : way == 1 ? "order rank"
                 : way == 2 ? "launch single"
                 : way == 3 ? "launch cluster"
                            : "launch block");
    b.a.order = way == 0 ? cuda::TopkOrder::bitonic : cuda::TopkOrder::rank;
    b.a.launch = way == 2   ? cuda::TopkLaunch::single
                 : way == 3 ? cuda::TopkLaunch::cluster
                 : way == 4 ? cuda::TopkLaunch::block
                            : cuda::TopkLaunch::chain;
    const auto [ids, vals] = b.run(0x5A, /*fresh_workspace=*/true);  // not 0xFF: that reads as id -1
    for (int r = 0; r < R; ++r) {
      const auto& s = rows[r];
      const int n = static_cast<int>(std::min<std::size_t>(s.size(), k));
      const std::vector<std::int32_t> ref = ip::topk(s.data(), static_cast<Index64>(s.size()), n);
      for (int i = 0; i < k; ++i) {
        const std::int32_t got = ids[static_cast<std::size_t>(r) * k + i];
        const float v = vals[static_cast<std::size_t>(r) * k + i];
        std::uint32_t vb;
        std::memcpy(&vb, &v, sizeof vb);
        if (i < n) {
          ASSERT_EQ(got, ref[i]) << "row " << r << " rank " << i;
          ASSERT_EQ(std::memcmp(&v, &s[got], sizeof v), 0) << "row " << r << " rank " << i;
        } else {
          ASSERT_EQ(got, -1) << "row " << r << " padding slot " << i;
          ASSERT_EQ(vb, 0x7FC00000u) << "row " << r << " padding slot " << i;
        }
      }
    }
  }
}

TEST(Topk, BadArgumentsAreRejectedOnTheHost) {
  // Runs without a GPU: validation throws before any CUDA call.
  long long off[2] = {0, 100};
  float s[1] = {0};
  std::int32_t ids[1];
  alignas(16) unsigned char ws[16];
  auto good = [&] {
    cuda::TopkArgs a;
    a.rows = 1;
    a.row_offset = off;
    a.max_row = 100;
    a.scores = s;
    a.k = 10;
    a.ids = ids;
    a.workspace = ws;
    a.workspace_bytes = cuda::topk_workspace_bytes(1, 100, 10);
    return a;
  };
  auto expect_error = [](const cuda::TopkArgs& a, const std::string& needle) {
    try {
      cuda::topk(a, nullptr);
      ADD_FAILURE() << "no error for " << needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  auto a = good();
  a.k = 0;
  expect_error(a, "k = 0");
  a = good();
  a.k = 4097;
  a.max_row = 5000;
  expect_error(a, "k = 4097");
  a = good();
  a.k = 101;
  expect_error(a, "max_row");
  a = good();
  a.rows = 0;
  expect_error(a, "rows");
  a = good();
  a.max_row = 1LL << 31;
  expect_error(a, "32-bit");
  a = good();
  a.row_offset = nullptr;
  expect_error(a, "row_offset");
  a = good();
  a.scores = nullptr;
  expect_error(a, "scores");
  a = good();
  a.ids = nullptr;
  expect_error(a, "ids");
  a = good();
  a.workspace = nullptr;
  expect_error(a, "workspace is null");
  a = good();
  a.workspace_bytes -= 1;
  expect_error(a, "workspace_bytes");
  a = good();
  a.workspace = ws + 8;  // 8-byte aligned only
  expect_error(a, "workspace is not 16-byte aligned");
  a = good();
  a.sampling = static_cast<cuda::TopkSampling>(9);
  expect_error(a, "sampling = 9");
  a = good();
  a.order = static_cast<cuda::TopkOrder>(7);
  expect_error(a, "order = 7");
  a = good();
  a.launch = static_cast<cuda::TopkLaunch>(5);
  expect_error(a, "launch = 5");
  a = good();
  a.launch = cuda::TopkLaunch::single;
  a.sampling = cuda::TopkSampling::on;
  expect_error(a, "does not sample");
  a = good();
  a.launch = cuda::TopkLaunch::single;
  a.order = cuda::TopkOrder::bitonic;
  expect_error(a, "orders by ranks");
  a = good();
  a.launch = cuda::TopkLaunch::cluster;
  a.order = cuda::TopkOrder::bitonic;
  expect_error(a, "launch cluster orders by ranks");
  a = good();
  a.launch = cuda::TopkLaunch::block;
  a.order = cuda::TopkOrder::bitonic;
  expect_error(a, "launch block orders by ranks");
  for (int blocks : {3, 1, -2, 17, 32}) {
    a = good();
    a.launch = cuda::TopkLaunch::cluster;
    a.cluster_blocks = blocks;
    expect_error(a, "cluster_blocks = " + std::to_string(blocks) + " (must be 0 for the default");
  }
  // Every valid value of each setting passes its own check and reaches the next one (here the null
  // workspace, checked after them all).
  auto expect_valid = [&](const char* what, auto edit) {
    a = good();
    edit(a);
    a.workspace = nullptr;
    try {
      cuda::topk(a, nullptr);
      ADD_FAILURE() << what << ": no error for the null workspace";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("workspace is null"), std::string::npos) << what << ": " << e.what();
    }
  };
  for (auto s : {cuda::TopkSampling::automatic, cuda::TopkSampling::off, cuda::TopkSampling::on})
    expect_valid("sampling", [s](cuda::TopkArgs& x) { x.sampling = s; });
  for (auto o : {cuda::TopkOrder::automatic, cuda::TopkOrder::bitonic, cuda::TopkOrder::rank})
    expect_valid("order", [o](cuda::TopkArgs& x) { x.order = o; });
  for (auto l : {cuda::TopkLaunch::automatic, cuda::TopkLaunch::chain, cuda::TopkLaunch::single,
                 cuda::TopkLaunch::cluster, cuda::TopkLaunch::block})
    expect_valid("launch", [l](cuda::TopkArgs& x) { x.launch = l; });
  for (int blocks : {0, 2, 4, 8, 16})
    expect_valid("cluster_blocks", [blocks](cuda::TopkArgs& x) {
      x.launch = cuda::TopkLaunch::cluster;
      x.cluster_blocks = blocks;
    });
  expect_valid("min_chunk = 256", [](cuda::TopkArgs& x) { x.min_chunk = 256; });  // kTopkThreads, the least
  a = good();
  a.min_chunk = 100;
  expect_error(a, "min_chunk = 100");
  a = good();
  a.min_chunk = -1;
  expect_error(a, "min_chunk = -1");
  EXPECT_THROW(cuda::topk_workspace_bytes(1, 5, 10), Error);
  // The edges of the shape checks are let through (topk_workspace_bytes validates as topk() does).
  EXPECT_NO_THROW(cuda::topk_workspace_bytes(1, 10, 10));                // max_row = k
  EXPECT_NO_THROW(cuda::topk_workspace_bytes(1, 4096, cuda::kTopkMaxK));  // the largest k
  EXPECT_NO_THROW(cuda::topk_workspace_bytes(1, INT32_MAX, 10));          // the longest row
  EXPECT_THROW(cuda::topk_workspace_bytes(1, 4096, cuda::kTopkMaxK + 1), Error);
  EXPECT_THROW(cuda::topk_workspace_bytes(1, 9, 10), Error);
  EXPECT_GE(cuda::topk_workspace_bytes(64, 1 << 20, 2048), 64u * 2048 * 8);
}

}  // namespace
}  // namespace ip
