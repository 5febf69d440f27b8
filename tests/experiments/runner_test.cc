// The runner's bookkeeping over a sweep: generated workloads leave the cache after their last point (and
// are dropped early when the memory limit needs it) without changing any result; with a results file,
// the returned records keep only their summaries, and every point reaches the file.
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "core/workload.h"
#include "experiments/config.h"
#include "experiments/h5.h"
#include "experiments/results.h"
#include "experiments/runner.h"

namespace {

namespace fs = std::filesystem;
using namespace ip::exp;

class RunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("ip_runner_test_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  Sweep sweep(const std::string& text) {
    const std::string cfg = (dir_ / "sweep.ini").string();
    std::ofstream(cfg) << text;
    return load_sweep(cfg);
  }
  fs::path dir_;
};

// Three seeds (outer) by two weightings (inner): each seed's workload serves two points, then leaves.
constexpr const char* kSeeds =
    "backend = cpu\nthreads = 1\n[workload]\ntokens = 1Ki\nsteps = 2\nseed = 0, 1, 2\n[pool]\n"
    "weighting = uniform, tfidf\n[select]\ntopk_tokens = 64\n[cache]\nenabled = false\n";

TEST_F(RunnerTest, WorkloadsLeaveTheCacheAfterTheirLastPointAndResultsDoNotChange) {
  const Sweep sw = sweep(kSeeds);
  ASSERT_EQ(sw.points.size(), 6u);
  RunOptions ro;
  ro.quiet = true;
  WorkloadCache cache;
  const auto rows = run_points(sw, sw.points, ro, cache, nullptr);
  EXPECT_TRUE(cache.empty()) << cache.size() << " workloads still held";
  ASSERT_EQ(rows.size(), 6u);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    WorkloadCache fresh;  // the point alone, its workload made just for it
    const PointRecord alone = run_point(sw.points[i], sw.memory_limit, fresh);
    ASSERT_EQ(alone.summary.status, "ok");
    EXPECT_EQ(rows[i].summary.token_recall, alone.summary.token_recall) << i;
    EXPECT_EQ(rows[i].summary.mass_recall, alone.summary.mass_recall) << i;
    EXPECT_EQ(rows[i].summary.output_error, alone.summary.output_error) << i;
    EXPECT_FALSE(rows[i].requests.empty());  // no results file: the details stay
  }
}

TEST_F(RunnerTest, TheMemoryLimitDropsOtherGeneratedWorkloads) {
  const Sweep sw = sweep(kSeeds);
  const Point& a = sw.points[0];  // seed 0
  const Point& b = sw.points[2];  // seed 1
  {
    WorkloadCache cache;
    ASSERT_EQ(run_point(a, 1e15, cache).summary.status, "ok");
    ASSERT_EQ(run_point(b, 1e15, cache).summary.status, "ok");
    EXPECT_EQ(cache.size(), 2u);  // room for both: both kept
  }
  WorkloadCache cache;
  ASSERT_EQ(run_point(a, 1e15, cache).summary.status, "ok");
  ASSERT_EQ(cache.size(), 1u);
  const double need = estimate_point_bytes(b);
  const PointRecord r = run_point(b, need * 1.0001, cache);  // fits alone, not beside a's workload
  ASSERT_EQ(r.summary.status, "ok") << r.summary.reason;
  EXPECT_EQ(cache.size(), 1u);
  WorkloadCache fresh;
  EXPECT_EQ(r.summary.token_recall, run_point(b, 1e15, fresh).summary.token_recall);
}

TEST_F(RunnerTest, WithAResultsFileRowsKeepSummariesAndTheFileHoldsEveryPoint) {
  const Sweep sw = sweep(kSeeds);
  const std::string out = (dir_ / "r.h5").string();
  SweepMeta meta;
  meta.sweep_id = sw.sweep_id;
  meta.axis_keys = sw.axis_keys;
  meta.points_total = static_cast<std::int64_t>(sw.points.size());
  ResultsFile rf(out, meta, false, false);
  rf.set_flush_policy(ResultsFile::FlushPolicy::kBoundedOverhead);
  RunOptions ro;
  ro.quiet = true;
  WorkloadCache cache;
  const auto rows = run_points(sw, sw.points, ro, cache, &rf);
  EXPECT_EQ(rf.held(), 0u);  // run_points flushes at the end
  ASSERT_EQ(rows.size(), 6u);
  ip::h5::File f(out, "r");
  const ip::h5::Table t = f.read_table("points");
  ASSERT_EQ(t.rows(), 6u);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    EXPECT_TRUE(rows[i].requests.empty()) << i;
    EXPECT_EQ(t.column("token_recall").floats[i], rows[i].summary.token_recall) << i;
    EXPECT_EQ(f.read_table(fmt::format("point_{:06d}/steps", i)).rows(), 2u) << i;  // 1 request x 2 steps
  }
}

// Points on one workload share its fidelity reference on the cpu (the exact indexer and dense attention of
// each step, computed by the first point): every fidelity metric, per point and per step, is the bits the
// point gives alone. The cache keeps the references while they fit the memory limit and drops them with
// their workload.
TEST_F(RunnerTest, PointsOnOneWorkloadShareItsFidelityReferenceWithoutChangingAResult) {
  const Sweep sw = sweep(
      "backend = cpu\nthreads = 2\n[workload]\ntokens = 3000\nsteps = 3\nrequests = 2\nlength_spread = 0.5\n"
      "[pool]\nweighting = uniform, tfidf\ngroup_size = 2, 4\n[hybrid]\nenabled = false, true\nwindow = 128\n"
      "chunk = 32\n[select]\ntopk_tokens = 64, 256\n[cache]\nenabled = false\n");
  ASSERT_EQ(sw.points.size(), 16u);
  RunOptions ro;
  ro.quiet = true;
  WorkloadCache cache;
  const auto rows = run_points(sw, sw.points, ro, cache, nullptr);
  EXPECT_TRUE(cache.empty());  // the references left with their workload
  ASSERT_EQ(rows.size(), sw.points.size());
  auto same = [](double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; };
  for (std::size_t i = 0; i < rows.size(); ++i) {
    SCOPED_TRACE(sw.points[i].key);
    WorkloadCache fresh;
    const PointRecord alone = run_point(sw.points[i], sw.memory_limit, fresh);
    ASSERT_EQ(alone.summary.status, "ok") << alone.summary.reason;
    EXPECT_GT(fresh.begin()->second.reference_bytes(), 0.0);  // kept for a later point
    EXPECT_LE(fresh.begin()->second.reference_bytes(), estimate_reference_bytes(sw.points[i]));
    const PointSummary &a = rows[i].summary, &b = alone.summary;
    EXPECT_TRUE(same(a.token_recall, b.token_recall));
    EXPECT_TRUE(same(a.block_recall, b.block_recall));
    EXPECT_TRUE(same(a.mass_recall, b.mass_recall));
    EXPECT_TRUE(same(a.output_error, b.output_error));
    EXPECT_TRUE(same(a.layer_output_error, b.layer_output_error));
    EXPECT_TRUE(same(a.layer_mass_recall, b.layer_mass_recall));
    ASSERT_EQ(rows[i].requests.size(), 2u);
    for (std::size_t r = 0; r < 2; ++r) {
      const auto &x = rows[i].requests[r].steps, &y = alone.requests[r].steps;
      ASSERT_EQ(x.size(), y.size());
      for (std::size_t q = 0; q < x.size(); ++q) {
        EXPECT_TRUE(same(x[q].token_recall, y[q].token_recall)) << r << " " << q;
        EXPECT_TRUE(same(x[q].block_recall, y[q].block_recall)) << r << " " << q;
        EXPECT_TRUE(same(x[q].mass_recall, y[q].mass_recall)) << r << " " << q;
        EXPECT_TRUE(same(x[q].output_error, y[q].output_error)) << r << " " << q;
        EXPECT_TRUE(same(x[q].layer_output_error, y[q].layer_output_error)) << r << " " << q;
      }
    }
  }
  // No room beside the point's estimate and its workload: nothing kept, the same result.
  const Point& p = sw.points[5];
  WorkloadCache once;
  ASSERT_EQ(run_point(p, 1e15, once).summary.status, "ok");
  const double workload_bytes = once.begin()->second.input_bytes();
  WorkloadCache tight;
  const PointRecord t = run_point(p, estimate_point_bytes(p) + workload_bytes, tight);
  ASSERT_EQ(t.summary.status, "ok") << t.summary.reason;
  EXPECT_EQ(tight.begin()->second.reference_bytes(), 0.0);
  EXPECT_TRUE(same(t.summary.mass_recall, rows[5].summary.mass_recall));
  EXPECT_TRUE(same(t.summary.block_recall, rows[5].summary.block_recall));
  // Many steps of small keys: the references would outgrow the workload; they stop at its size.
  const Sweep many = sweep(
      "backend = cpu\nthreads = 1\n[workload]\ntokens = 1Ki\ndim = 16\nattn_dim = 16\nvalue_dim = 16\n"
      "steps = 64\n[select]\ntopk_tokens = 64\n[cache]\nenabled = false\n");
  WorkloadCache small;
  ASSERT_EQ(run_point(many.points[0], 1e15, small).summary.status, "ok");
  const CachedSource& src = small.begin()->second;
  EXPECT_GT(src.reference_bytes(), 0.5 * src.input_bytes());
  EXPECT_LE(src.reference_bytes(), src.input_bytes());
  EXPECT_LE(src.reference_bytes(), estimate_reference_bytes(many.points[0]));
  EXPECT_GT(src.reference_bytes(), 0.9 * estimate_reference_bytes(many.points[0]));  // the cap, nearly reached
}

// threads_per_request runs a point's requests several at once on the cpu: the same bits as one after
// another (every metric, per step, and the selections), progress counts up to the number of requests,
// and the memory estimate counts the requests under way.
TEST_F(RunnerTest, RequestsRunConcurrentlyWithThreadsPerRequestAndGiveTheSameBits) {
  const std::string base =
      "backend = cpu\nthreads = 2\n[workload]\ntokens = 5000\nsteps = 3\nrequests = 5\nlength_spread = 0.5\n"
      "[pool]\nweighting = tfidf\n[hybrid]\nenabled = false, true\nwindow = 128\nchunk = 32\n[select]\n"
      "topk_tokens = 128\n[output]\nsave_tensors = true\n";
  const Sweep one_by_one = sweep(base), concurrent = sweep("threads_per_request = 1\n" + base);
  ASSERT_EQ(concurrent.points.size(), 2u);
  auto same = [](double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; };
  for (std::size_t i = 0; i < 2; ++i) {
    SCOPED_TRACE(concurrent.points[i].key);
    WorkloadCache c1, c2;
    const PointRecord a = run_point(one_by_one.points[i], 1e15, c1);
    std::vector<std::size_t> done;
    const PointRecord b = run_point(concurrent.points[i], 1e15, c2,
                                    [&](std::size_t d, std::size_t t, std::string_view) {
                                      EXPECT_EQ(t, 5u);
                                      done.push_back(d);
                                    });
    ASSERT_EQ(b.summary.status, "ok") << b.summary.reason;
    EXPECT_EQ(done, (std::vector<std::size_t>{1, 2, 3, 4, 5}));
    EXPECT_TRUE(same(a.summary.token_recall, b.summary.token_recall));
    EXPECT_TRUE(same(a.summary.block_recall, b.summary.block_recall));
    EXPECT_TRUE(same(a.summary.mass_recall, b.summary.mass_recall));
    EXPECT_TRUE(same(a.summary.output_error, b.summary.output_error));
    EXPECT_TRUE(same(a.summary.layer_output_error, b.summary.layer_output_error));
    EXPECT_TRUE(same(a.summary.cache_hit_rate, b.summary.cache_hit_rate));
    EXPECT_TRUE(same(a.summary.index_bytes_per_token, b.summary.index_bytes_per_token));
    ASSERT_EQ(a.requests.size(), 5u);
    ASSERT_EQ(b.requests.size(), 5u);
    for (std::size_t r = 0; r < 5; ++r) {
      EXPECT_EQ(a.requests[r].selected, b.requests[r].selected) << r;
      EXPECT_EQ(a.requests[r].composite_keys.size(), b.requests[r].composite_keys.size()) << r;
      EXPECT_EQ(std::memcmp(a.requests[r].composite_keys.data(), b.requests[r].composite_keys.data(),
                            a.requests[r].composite_keys.bytes()), 0) << r;
      ASSERT_EQ(a.requests[r].steps.size(), b.requests[r].steps.size());
      for (std::size_t q = 0; q < a.requests[r].steps.size(); ++q) {
        EXPECT_TRUE(same(a.requests[r].steps[q].mass_recall, b.requests[r].steps[q].mass_recall)) << r << " " << q;
        EXPECT_TRUE(same(a.requests[r].steps[q].layer_output_error, b.requests[r].steps[q].layer_output_error))
            << r << " " << q;
      }
    }
  }
  // Two requests under way at once on two threads: their per-request arrays twice (save_tensors off).
  const Sweep plain = sweep("backend = cpu\nthreads = 2\n[workload]\ntokens = 64Ki\nrequests = 4\n"),
              two = sweep("backend = cpu\nthreads = 2\nthreads_per_request = 1\n[workload]\ntokens = 64Ki\n"
                          "requests = 4\n"),
              halves = sweep("backend = cpu\nthreads = 2\nthreads_per_request = 2\n[workload]\ntokens = 64Ki\n"
                             "requests = 4\n");
  EXPECT_GT(estimate_point_bytes(two.points[0]), estimate_point_bytes(plain.points[0]));
  EXPECT_EQ(estimate_point_bytes(halves.points[0]), estimate_point_bytes(plain.points[0]));  // one at a time
}

// An imported workload has no gates of its own: each point gives it workload.gate_decay, gate_spread and
// the seed's gates, as a generated request gets them, so the hybrid layer's local branch follows them.
TEST_F(RunnerTest, ImportedWorkloadTakesItsGatesFromThePoint) {
  ip::WorkloadSpec spec;
  spec.tokens = 512;
  spec.dim = 16;
  spec.index_heads = 2;
  spec.attn_dim = 16;
  spec.attn_heads = 2;
  spec.value_dim = 16;
  spec.steps = 2;
  const ip::Workload w = ip::generate_request(spec, 0);
  const std::string h5 = (dir_ / "trace.h5").string();
  {
    ip::h5::File f(h5, "w");
    f.write("index_keys", w.index_keys);
    f.write("index_queries", w.index_queries);
    f.write("head_weights", w.head_weights);
    f.write("attn_keys", w.attn_keys);
    f.write("attn_queries", w.attn_queries);
    f.write("values", w.values);
  }
  const Sweep sw = sweep("backend = cpu\nthreads = 1\n[workload]\nsource = " + h5 +
                         "\nseed = 3\ngate_decay = 0.5, 0.99\ngate_spread = 0.25\n[hybrid]\nenabled = true\n"
                         "window = 64\nchunk = 16\ncombine = gate:0.5\n[select]\ntopk_tokens = 64\n[cache]\n"
                         "enabled = false\n");
  ASSERT_EQ(sw.points.size(), 2u);
  std::vector<double> err;
  for (const Point& p : sw.points) {
    WorkloadCache cache;
    preload_imports({p}, cache);
    const PointRecord r = run_point(p, 1e15, cache);
    ASSERT_EQ(r.summary.status, "ok") << r.summary.reason;
    ASSERT_EQ(cache.size(), 1u);
    const ip::GateParams g = cache.begin()->second.requests.at(0).gates, want = ip::gate_params(p.workload, 0);
    EXPECT_EQ(g.decay, want.decay);
    EXPECT_EQ(g.spread, 0.25f);
    EXPECT_EQ(g.seed, want.seed);
    err.push_back(r.summary.layer_output_error);
  }
  EXPECT_EQ(sw.points[0].workload.gate_decay, 0.5);
  EXPECT_TRUE(std::isfinite(err[0]) && std::isfinite(err[1]));
  EXPECT_NE(err[0], err[1]);  // the local branch ran with the point's gates
}

// Progress names what was done: with select.batched on backend = auto, one "request" per request when the
// point runs on the cpu (no device: one request after another), one "batched step" per decode step when
// it runs batched on a device.
TEST_F(RunnerTest, ProgressNamesRequestsOrBatchedStepsByWhereThePointRan) {
  const Sweep sw = sweep(
      "backend = auto\nthreads = 1\n[workload]\ntokens = 1Ki\nsteps = 3\nrequests = 4\n[select]\ntopk_tokens = 64\n"
      "batched = true\n[cache]\nenabled = false\n");
  ASSERT_EQ(sw.points.size(), 1u);
  std::vector<std::string> units;
  std::vector<std::size_t> done, totals;
  WorkloadCache cache;
  const PointRecord r = run_point(sw.points[0], 1e15, cache, [&](std::size_t d, std::size_t t, std::string_view u) {
    units.emplace_back(u);
    done.push_back(d);
    totals.push_back(t);
  });
  ASSERT_EQ(r.summary.status, "ok") << r.summary.reason;
  const bool batched = r.summary.backend == "cuda";
  const std::size_t n = batched ? 3 : 4;
  ASSERT_EQ(units.size(), n) << r.summary.backend;
  for (std::size_t i = 0; i < n; ++i) {
    EXPECT_EQ(units[i], batched ? "batched step" : "request");
    EXPECT_EQ(done[i], i + 1);
    EXPECT_EQ(totals[i], n);
  }
}

}  // namespace
