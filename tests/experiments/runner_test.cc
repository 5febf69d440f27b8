// The runner's bookkeeping over a sweep: generated workloads leave the cache after their last point (and
// are dropped early when the memory limit needs it) without changing any result; with a results file,
// the returned records keep only their summaries, and every point reaches the file.
#include <unistd.h>

#include <cmath>
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
    const ip::GateParams g = cache.begin()->second.at(0).gates, want = ip::gate_params(p.workload, 0);
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
