// The runner's bookkeeping over a sweep: generated workloads leave the cache after their last point (and
// are dropped early when the memory limit needs it) without changing any result; with a results file,
// the returned records keep only their summaries, and every point reaches the file. And what a point's
// record says (skips and their reasons at the bounds, the summary as the aggregate of its steps, the cache
// columns, saved tensors), the progress lines and tracker, the environment's intervals, the imports'
// preload checks at their bounds, and --resume's traces.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "core/error.h"
#include "core/score.h"
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
  // A dump of `w` as `indexpool` imports it (with its attention arrays when `attention`).
  std::string dump(const std::string& name, const ip::Workload& w, bool attention = true) {
    const std::string h5 = (dir_ / name).string();
    ip::h5::File f(h5, "w");
    f.write("index_keys", w.index_keys);
    f.write("index_queries", w.index_queries);
    f.write("head_weights", w.head_weights);
    if (attention) {
      f.write("attn_keys", w.attn_keys);
      f.write("attn_queries", w.attn_queries);
      f.write("values", w.values);
    }
    return h5;
  }
  fs::path dir_;
};

// A small workload to import: 512 tokens of 16 dims, 2 index heads, 2 decode steps.
ip::WorkloadSpec small_spec() {
  ip::WorkloadSpec spec;
  spec.tokens = 512;
  spec.dim = 16;
  spec.index_heads = 2;
  spec.attn_dim = 16;
  spec.attn_heads = 2;
  spec.value_dim = 16;
  spec.steps = 2;
  return spec;
}

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

// stderr into a file while it lives (the runner's progress lines; not a terminal, so plain lines).
class StderrCapture {
 public:
  explicit StderrCapture(const fs::path& file) : path_(file) {
    std::fflush(stderr);
    saved_ = ::dup(2);
    const int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, 2);
    ::close(fd);
  }
  ~StderrCapture() { restore(); }
  // Restores stderr and returns what was written to it.
  std::string text() {
    restore();
    std::ifstream in(path_);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

 private:
  void restore() {
    if (saved_ < 0) return;
    std::fflush(stderr);
    ::dup2(saved_, 2);
    ::close(saved_);
    saved_ = -1;
  }
  fs::path path_;
  int saved_ = -1;
};

// A results file's metadata for sweep `sw` (its id, axes and number of points).
SweepMeta meta_of(const Sweep& sw) {
  SweepMeta meta;
  meta.sweep_id = sw.sweep_id;
  meta.axis_keys = sw.axis_keys;
  meta.points_total = static_cast<std::int64_t>(sw.points.size());
  return meta;
}

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
  const SweepMeta meta = meta_of(sw);
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
  const ip::Workload w = ip::generate_request(small_spec(), 0);
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

// An environment variable of seconds read by `read`: `unset` when unset or empty, each of `accepted` as its
// value, and each of `refused` refused with an error naming the variable and the value. The variable is
// restored afterwards.
void check_seconds_variable(const char* name, double (*read)(), double unset,
                            std::initializer_list<std::pair<const char*, double>> accepted,
                            std::initializer_list<const char*> refused) {
  const char* was = std::getenv(name);
  const std::string saved = was ? was : "";
  unsetenv(name);
  EXPECT_EQ(read(), unset) << name;
  setenv(name, "", 1);
  EXPECT_EQ(read(), unset) << name << " empty";
  for (const auto& [v, want] : accepted) {
    setenv(name, v, 1);
    EXPECT_EQ(read(), want) << name << " = " << v;
  }
  for (const char* v : refused) {
    setenv(name, v, 1);
    try {
      read();
      ADD_FAILURE() << name << ": accepted '" << v << "'";
    } catch (const ip::Error& e) {
      EXPECT_NE(std::string(e.what()).find(fmt::format("{} = '{}'", name, v)), std::string::npos) << e.what();
    }
  }
  if (was)
    setenv(name, saved.c_str(), 1);
  else
    unsetenv(name);
}

// INDEXPOOL_PROGRESS_INTERVAL: unset or empty is 0 (the default interval); otherwise seconds in (0, 3600],
// the whole value a number.
TEST_F(RunnerTest, ProgressIntervalFromTheEnvironmentTakesSecondsUpToAnHour) {
  check_seconds_variable("INDEXPOOL_PROGRESS_INTERVAL", progress_interval_from_env, 0.0,
                         {{"0.5", 0.5}, {"3600", 3600.0}, {"1e-3", 1e-3}},
                         {"0", "-1", "3600.5", "1e9", "0.5s", "2 ", "soon", "nan", "inf"});
}

// INDEXPOOL_STOP_GRACE: unset or empty is 20 s; otherwise seconds in [0, 86400] (0: abandon at once), the whole
// value a number.
TEST_F(RunnerTest, StopGraceFromTheEnvironmentTakesSecondsUpToADay) {
  check_seconds_variable("INDEXPOOL_STOP_GRACE", stop_grace_from_env, 20.0,
                         {{"0", 0.0}, {"2.5", 2.5}, {"86400", 86400.0}},
                         {"-1", "86400.5", "1e9", "20s", "5 ", "never", "nan", "inf"});
}

// The memory limit: a point whose estimate equals it runs; below it, the point is skipped, its reason giving
// the estimate, the limit and where the limit came from, and it measures nothing (every number NaN).
TEST_F(RunnerTest, AnEstimateAtTheMemoryLimitRunsAndOverItSkipsSayingBothSizesAndTheLimitsSource) {
  const Sweep sw = sweep(kSeeds);
  const Point& p = sw.points[0];
  const double need = estimate_point_bytes(p);
  {
    WorkloadCache cache;
    const PointRecord r = run_point(p, need, cache);
    EXPECT_EQ(r.summary.status, "ok") << r.summary.reason;
  }
  WorkloadCache cache;
  const double limit = need / 4;
  const PointRecord r = run_point(p, limit, cache, {}, nullptr, "default: 80% of the test's memory");
  ASSERT_EQ(r.summary.status, "skipped");
  EXPECT_EQ(r.summary.reason, "estimated memory " + format_bytes(need) + " exceeds the limit " + format_bytes(limit) +
                                  " (sweep.memory_limit; default: 80% of the test's memory)");
  EXPECT_TRUE(std::isnan(r.summary.token_recall));
  EXPECT_TRUE(std::isnan(r.summary.index_bytes_per_token));
  EXPECT_TRUE(r.requests.empty());
  EXPECT_TRUE(cache.empty());  // nothing generated for a point that does not run
  WorkloadCache again;
  EXPECT_EQ(run_point(p, std::nextafter(need, 0.0), again).summary.status, "skipped");
  // run_points says where the sweep's limit came from.
  Sweep low = sweep(kSeeds);
  ASSERT_FALSE(low.memory_limit_source.empty());  // no [sweep] memory_limit: a default, and what it is of
  low.memory_limit = 1024;
  RunOptions ro;
  ro.quiet = true;
  WorkloadCache c2;
  const auto rows = run_points(low, {low.points[0]}, ro, c2, nullptr);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].summary.status, "skipped");
  EXPECT_NE(rows[0].summary.reason.find("(sweep.memory_limit; " + low.memory_limit_source + ")"), std::string::npos)
      << rows[0].summary.reason;
}

// Making room for a point under the memory limit drops other generated workloads (a later point makes them
// again from their spec), never an import: those are read once, before the sweep, and a later point on the
// file would find nothing.
TEST_F(RunnerTest, TheMemoryLimitDropsGeneratedWorkloadsButKeepsImports) {
  const std::string h5 = dump("trace.h5", ip::generate_request(small_spec(), 0));
  const Sweep file = sweep("backend = cpu\nthreads = 1\n[workload]\nsource = " + h5 +
                           "\n[select]\ntopk_tokens = 64\n[cache]\nenabled = false\n");
  const Sweep gen = sweep(kSeeds);
  WorkloadCache cache;
  preload_imports(file.points, cache);
  ASSERT_EQ(cache.size(), 1u);
  const std::string import_key = cache.begin()->first;
  ASSERT_EQ(run_point(gen.points[0], 1e15, cache).summary.status, "ok");
  ASSERT_EQ(cache.size(), 2u);
  const Point& b = gen.points[2];  // another seed: fits alone, not beside what the cache holds
  const PointRecord r = run_point(b, estimate_point_bytes(b) + 1, cache);
  ASSERT_EQ(r.summary.status, "ok") << r.summary.reason;
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_EQ(cache.count(import_key), 1u) << "the import was dropped";
  const PointRecord after = run_point(file.points[0], 1e15, cache);
  EXPECT_EQ(after.summary.status, "ok") << after.summary.reason;
}

// A point's requests are the workload's requests 0..B-1, each as generate_request makes it (its own length
// under length_spread, its own keys).
TEST_F(RunnerTest, EachGeneratedRequestIsTheWorkloadsRequestOfItsNumber) {
  const Sweep sw = sweep(
      "backend = cpu\nthreads = 2\n[workload]\ntokens = 1Ki\ndim = 16\nattn_dim = 16\nvalue_dim = 16\nsteps = 2\n"
      "requests = 3\nlength_spread = 0.5\n[select]\ntopk_tokens = 64\n[cache]\nenabled = false\n");
  const Point& p = sw.points[0];
  WorkloadCache cache;
  const PointRecord r = run_point(p, 1e15, cache);
  ASSERT_EQ(r.summary.status, "ok") << r.summary.reason;
  ASSERT_EQ(cache.size(), 1u);
  const auto& reqs = cache.begin()->second.requests;
  ASSERT_EQ(reqs.size(), 3u);
  ASSERT_EQ(r.requests.size(), 3u);
  double total = 0;
  for (int b = 0; b < 3; ++b) {
    const ip::Workload want = ip::generate_request(p.workload, b);
    ASSERT_EQ(reqs[b].tokens(), ip::request_tokens(p.workload, b)) << b;
    ASSERT_EQ(reqs[b].index_keys.size(), want.index_keys.size()) << b;
    EXPECT_EQ(std::memcmp(reqs[b].index_keys.data(), want.index_keys.data(), want.index_keys.bytes()), 0) << b;
    EXPECT_EQ(r.requests[b].steps.back().context_tokens, static_cast<double>(want.tokens())) << b;
    total += static_cast<double>(want.tokens());
  }
  EXPECT_NE(reqs[0].tokens(), reqs[1].tokens());  // length_spread: the lengths differ
  EXPECT_EQ(r.summary.tokens, total / 3);         // the mean context
}

// The budget is checked against a request's context at its first decode step: k equal to it runs, one more
// is skipped. With a growing context that is the prompt plus one step's appended tokens.
TEST_F(RunnerTest, ABudgetEqualToTheContextAtTheFirstDecodeStepRuns) {
  const std::string base =
      "backend = cpu\nthreads = 1\n[cache]\nenabled = false\n[workload]\ntokens = 256\ndim = 16\nattn_dim = 16\n"
      "value_dim = 16\nsteps = 3\n";
  const Sweep fixed = sweep(base + "[select]\ntopk_tokens = 256, 257\n");
  ASSERT_EQ(fixed.points.size(), 2u);
  WorkloadCache c1;
  const PointRecord at = run_point(fixed.points[0], 1e15, c1);
  EXPECT_EQ(at.summary.status, "ok") << at.summary.reason;
  EXPECT_EQ(at.summary.token_recall, 1.0);  // the whole context selected
  const PointRecord over = run_point(fixed.points[1], 1e15, c1);
  EXPECT_EQ(over.summary.status, "skipped");
  EXPECT_EQ(over.summary.reason, "select.topk_tokens = 257 exceeds a request's context of 256 tokens");
  const Sweep grow = sweep(base + "append_per_step = 64\n[select]\ntopk_tokens = 320, 321\n");
  ASSERT_EQ(grow.points.size(), 2u);
  WorkloadCache c2;
  const PointRecord g = run_point(grow.points[0], 1e15, c2);
  EXPECT_EQ(g.summary.status, "ok") << g.summary.reason;
  const PointRecord h = run_point(grow.points[1], 1e15, c2);
  EXPECT_EQ(h.summary.status, "skipped");
  EXPECT_EQ(h.summary.reason,
            "select.topk_tokens = 321 exceeds a request's context of 320 tokens at its first decode step");
}

// The progress tracker counts every request's decode steps: steps and steps_done summed over the requests.
TEST_F(RunnerTest, TheProgressTrackerCountsTheStepsOfEveryRequest) {
  const Sweep sw = sweep(
      "backend = cpu\nthreads = 1\n[workload]\ntokens = 1Ki\ndim = 16\nattn_dim = 16\nvalue_dim = 16\nsteps = 2\n"
      "requests = 3\n[select]\ntopk_tokens = 64\n[cache]\nenabled = false\n");
  PointProgress tracker;
  WorkloadCache cache;
  const PointRecord r = run_point(sw.points[0], 1e15, cache, {}, &tracker);
  ASSERT_EQ(r.summary.status, "ok") << r.summary.reason;
  EXPECT_EQ(tracker.requests.load(), 3);
  EXPECT_EQ(tracker.requests_done.load(), 3);
  EXPECT_EQ(tracker.steps.load(), 6);
  EXPECT_EQ(tracker.steps_done.load(), 6);
  EXPECT_FALSE(tracker.batched.load());
}

// select.fidelity = false: no exact indexer or dense attention, so no references kept for later points, and
// the recalls and errors are NaN (not measured), not 0.
TEST_F(RunnerTest, WithoutFidelityNoReferencesAreKeptAndTheRecallsAreNotMeasured) {
  const Sweep sw = sweep(
      "backend = cpu\nthreads = 1\n[workload]\ntokens = 1Ki\ndim = 16\nattn_dim = 16\nvalue_dim = 16\nsteps = 2\n"
      "[select]\ntopk_tokens = 64\nfidelity = false\n[cache]\nenabled = false\n");
  WorkloadCache cache;
  const PointRecord r = run_point(sw.points[0], 1e15, cache);
  ASSERT_EQ(r.summary.status, "ok") << r.summary.reason;
  ASSERT_EQ(cache.size(), 1u);
  EXPECT_EQ(cache.begin()->second.reference_bytes(), 0.0);
  EXPECT_TRUE(cache.begin()->second.references.empty());
  EXPECT_TRUE(std::isnan(r.summary.token_recall));
  EXPECT_TRUE(std::isnan(r.summary.block_recall));
  EXPECT_TRUE(std::isnan(r.summary.mass_recall));
  EXPECT_TRUE(std::isnan(r.summary.output_error));
  EXPECT_GT(r.summary.index_bytes_per_token, 0.0);  // what does not need the references is still measured
}

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}
double mean_of(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return s / static_cast<double>(v.size());
}

// The summary is the point's steps aggregated over every request: times are medians over all steps (pool:
// over the steps that built the index), recalls and errors means, repooling the mean over the steps after
// each request's first; sizes are per context token and per query (the mean over requests). fp32 keys of
// 16 dims, 2 index heads, G = 4, 1 Ki tokens per request: 64 index bytes per token against 16 x 4 = 64 x 4.
TEST_F(RunnerTest, TheSummaryAggregatesTheStepsOfEveryRequest) {
  const Sweep sw = sweep(
      "backend = cpu\nthreads = 1\n[workload]\ntokens = 1Ki\ndim = 16\nindex_heads = 2\nattn_dim = 16\n"
      "value_dim = 16\nsteps = 3\nrequests = 2\n[pool]\nprecision = fp32\ngroup_size = 4\n[select]\n"
      "topk_tokens = 64\n[cache]\nenabled = false\n");
  WorkloadCache cache;
  const PointRecord r = run_point(sw.points[0], 1e15, cache);
  ASSERT_EQ(r.summary.status, "ok") << r.summary.reason;
  ASSERT_EQ(r.requests.size(), 2u);
  std::vector<double> pool, score, topk, attn, layer, tok, blk, mass, err, repooled;
  for (const RequestDetail& d : r.requests) {
    ASSERT_EQ(d.steps.size(), 3u);
    EXPECT_EQ(d.k_groups, 16);  // ceil(64 / 4)
    for (std::size_t q = 0; q < d.steps.size(); ++q) {
      const ip::StepRecord& s = d.steps[q];
      if (s.pool_ms > 0) pool.push_back(s.pool_ms);
      score.push_back(s.score_ms);
      topk.push_back(s.topk_ms);
      attn.push_back(s.attention_ms);
      layer.push_back(s.layer_ms);
      tok.push_back(s.token_recall);
      blk.push_back(s.block_recall);
      mass.push_back(s.mass_recall);
      err.push_back(s.output_error);
      if (q > 0) repooled.push_back(s.repooled_fraction);
    }
  }
  ASSERT_FALSE(pool.empty());
  ASSERT_LT(pool.size(), 6u);  // some steps built no index: they are not pool times
  const PointSummary& s = r.summary;
  EXPECT_TRUE(same_bits(s.pool_ms, median_of(pool)));
  EXPECT_TRUE(same_bits(s.score_ms, median_of(score)));
  EXPECT_TRUE(same_bits(s.topk_ms, median_of(topk)));
  EXPECT_TRUE(same_bits(s.attention_ms, median_of(attn)));
  EXPECT_TRUE(same_bits(s.layer_ms, median_of(layer)));
  EXPECT_DOUBLE_EQ(s.token_recall, mean_of(tok));
  EXPECT_DOUBLE_EQ(s.block_recall, mean_of(blk));
  EXPECT_DOUBLE_EQ(s.mass_recall, mean_of(mass));
  EXPECT_DOUBLE_EQ(s.output_error, mean_of(err));
  EXPECT_DOUBLE_EQ(s.repooled_fraction_mean, mean_of(repooled));
  EXPECT_EQ(s.tokens, 1024.0);
  EXPECT_EQ(s.index_bytes_per_token, 16.0);  // 16 dims x 4 bytes / 4 tokens
  EXPECT_EQ(s.exact_bytes_per_token, 64.0);
  EXPECT_EQ(s.macs_per_query, ip::scoring_macs(256, 2, 16));  // 256 groups x 2 heads x 16 dims
  EXPECT_EQ(s.exact_macs_per_query, ip::scoring_macs(1024, 2, 16));
  EXPECT_EQ(s.tokens_per_group, 4.0);
}

// output.save_tensors keeps each request's composite keys (one row per group) and its selections (k_g group
// ids per step); without it neither is kept.
TEST_F(RunnerTest, SaveTensorsKeepsEachRequestsCompositeKeysAndSelections) {
  const std::string base =
      "backend = cpu\nthreads = 1\n[workload]\ntokens = 1Ki\ndim = 16\nattn_dim = 16\nvalue_dim = 16\nsteps = 3\n"
      "requests = 2\n[pool]\ngroup_size = 4\n[select]\ntopk_tokens = 64\n[cache]\nenabled = false\n";
  const Sweep saved = sweep(base + "[output]\nsave_tensors = true\n"), plain = sweep(base);
  WorkloadCache c1, c2;
  const PointRecord r = run_point(saved.points[0], 1e15, c1);
  ASSERT_EQ(r.summary.status, "ok") << r.summary.reason;
  ASSERT_EQ(r.requests.size(), 2u);
  for (const RequestDetail& d : r.requests) {
    ASSERT_EQ(d.composite_keys.size(), std::size_t{256 * 16});  // 1024 / 4 groups x 16 dims
    EXPECT_EQ(d.composite_keys.dim(0), 256);
    ASSERT_EQ(d.selected.size(), std::size_t{3 * 16});  // 3 steps x ceil(64 / 4) groups
    for (std::int32_t g : d.selected) EXPECT_TRUE(g >= 0 && g < 256) << g;
  }
  const PointRecord q = run_point(plain.points[0], 1e15, c2);
  ASSERT_EQ(q.summary.status, "ok") << q.summary.reason;
  for (const RequestDetail& d : q.requests) {
    EXPECT_TRUE(d.composite_keys.empty());
    EXPECT_TRUE(d.selected.empty());
  }
}

// The cache columns are the cache model's rates: levels 1..3, overall, the OPT hierarchy and the single OPT
// cache; NaN with the cache model off.
TEST_F(RunnerTest, TheCacheColumnsAreTheCacheModelsRates) {
  const std::string base =
      "backend = cpu\nthreads = 1\n[workload]\ntokens = 4Ki\ndim = 16\nattn_dim = 16\nvalue_dim = 16\nsteps = 8\n"
      "requests = 2\n[select]\ntopk_tokens = 256\n[cache]\n";
  const Sweep on = sweep(base + "enabled = true\nlevels = lru:8 clock:16 lru:32\nobject = index\n"),
              off = sweep(base + "enabled = false\n");
  WorkloadCache cache;
  const PointRecord r = run_point(on.points[0], 1e15, cache);
  ASSERT_EQ(r.summary.status, "ok") << r.summary.reason;
  ASSERT_EQ(r.cache.levels.size(), 3u);
  const PointSummary& s = r.summary;
  EXPECT_TRUE(same_bits(s.cache_l1_hit_rate, r.cache.levels[0].hit_rate));
  EXPECT_TRUE(same_bits(s.cache_l2_hit_rate, r.cache.levels[1].hit_rate));
  EXPECT_TRUE(same_bits(s.cache_l3_hit_rate, r.cache.levels[2].hit_rate));
  EXPECT_TRUE(same_bits(s.cache_hit_rate, r.cache.hit_rate));
  EXPECT_TRUE(same_bits(s.cache_opt_hit_rate, r.cache.opt_hit_rate));
  EXPECT_TRUE(same_bits(s.cache_opt_single_hit_rate, r.cache.opt_single_hit_rate));
  EXPECT_FALSE(std::isnan(s.cache_l3_hit_rate));
  EXPECT_NE(r.cache.opt_hit_rate, r.cache.opt_single_hit_rate);  // (so the two columns can tell each other apart)
  const PointRecord o = run_point(off.points[0], 1e15, cache);
  ASSERT_EQ(o.summary.status, "ok") << o.summary.reason;
  EXPECT_TRUE(o.cache.levels.empty());
  for (double v : {o.summary.cache_l1_hit_rate, o.summary.cache_l2_hit_rate, o.summary.cache_l3_hit_rate,
                   o.summary.cache_hit_rate, o.summary.cache_opt_hit_rate, o.summary.cache_opt_single_hit_rate})
    EXPECT_TRUE(std::isnan(v));
}

// The progress lines on stderr (not a terminal: plain lines): each point's "[i/n] key | elapsed ... | ETA"
// (no estimate before a point has finished), a skipped point's reason, a note of a point that ran, and the
// count at the end; no "resuming" line for a new results file.
TEST_F(RunnerTest, ProgressLinesNameEachPointItsSkipOrNoteAndTheCount) {
  const Sweep sw = sweep(
      "backend = cpu\nthreads = 1\n[workload]\ntokens = 1Ki\ndim = 16\nattn_dim = 16\nvalue_dim = 16\nsteps = 2\n"
      "[select]\ntopk_tokens = 64, 2048\n[kernels]\ntopk = chain\n[cache]\nenabled = false\n");
  ASSERT_EQ(sw.points.size(), 2u);
  const SweepMeta meta = meta_of(sw);  // 2 points
  ResultsFile rf((dir_ / "r.h5").string(), meta, false, false);
  RunOptions ro;
  ro.progress_interval_s = 3600;  // no lines from within a point
  WorkloadCache cache;
  StderrCapture cap(dir_ / "stderr.txt");
  const auto rows = run_points(sw, sw.points, ro, cache, &rf);
  const std::string err = cap.text();
  ASSERT_EQ(rows.size(), 2u);
  const std::string note = "the kernels.* forms apply to the cuda backend only; this point ran on the cpu";
  EXPECT_EQ(rows[0].summary.status, "ok");
  EXPECT_EQ(rows[0].summary.reason, note);
  EXPECT_EQ(rows[1].summary.status, "skipped");
  EXPECT_NE(err.find("[1/2] " + sw.points[0].key + " | elapsed 0."), std::string::npos) << err;
  EXPECT_NE(err.find(" | ETA ?\n"), std::string::npos) << err;
  EXPECT_NE(err.find("[1/2] note: " + note + "\n"), std::string::npos) << err;
  EXPECT_NE(err.find("[2/2] " + sw.points[1].key + " | elapsed "), std::string::npos) << err;
  EXPECT_NE(err.find("[2/2] skipped: select.topk_tokens = 2048 exceeds a request's context of 1024 tokens\n"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("\n2 points in "), std::string::npos) << err;
  EXPECT_EQ(err.find("resuming"), std::string::npos) << err;
  EXPECT_EQ(err.find("[2/2] note:"), std::string::npos) << err;  // a skip is not a note
  // The same point with every kernel form automatic has no note.
  const Sweep plain = sweep(
      "backend = cpu\nthreads = 1\n[workload]\ntokens = 1Ki\ndim = 16\nattn_dim = 16\nvalue_dim = 16\nsteps = 2\n"
      "[select]\ntopk_tokens = 64\n[cache]\nenabled = false\n");
  WorkloadCache c2;
  EXPECT_EQ(run_point(plain.points[0], 1e15, c2).summary.reason, "");
}

// The summary table: axis columns named without their section, the compression ratio as uncompressed / index
// bytes, a skipped point's reason.
TEST_F(RunnerTest, TheSummaryTableNamesAxesByKeyAndGivesTheRatioOfExactToIndexBytes) {
  PointRecord ok, skipped;
  ok.axes = {{"pool.weighting", "tfidf"}};
  ok.summary.index_bytes_per_token = 64;
  ok.summary.exact_bytes_per_token = 256;
  ok.summary.macs_per_query = 3e6;
  skipped.axes = {{"pool.weighting", "cosine"}};
  skipped.summary.status = "skipped";
  skipped.summary.reason = "no room";
  const std::string t = summary_table({"pool.weighting"}, {ok, skipped});
  const std::string head = t.substr(0, t.find('\n'));
  EXPECT_NE(head.find(" weighting "), std::string::npos) << head;
  EXPECT_EQ(head.find("pool.weighting"), std::string::npos) << head;
  const std::size_t row = t.find("tfidf");
  ASSERT_NE(row, std::string::npos);
  const std::string line = t.substr(row, t.find('\n', row) - row);
  EXPECT_NE(line.find(" 64.00 "), std::string::npos) << line;
  EXPECT_NE(line.find(" 4.00x "), std::string::npos) << line;
  EXPECT_NE(line.find(" 3.00 "), std::string::npos) << line;  // millions of multiply-adds
  EXPECT_NE(t.find("cosine skipped: no room\n"), std::string::npos) << t;
}

// preload_imports reads a file once, however many points name it: the source holds its one request.
TEST_F(RunnerTest, PreloadReadsAFileOnceForAllItsPoints) {
  const std::string h5 = dump("trace.h5", ip::generate_request(small_spec(), 0));
  const Sweep sw = sweep("backend = cpu\nthreads = 1\n[workload]\nsource = " + h5 +
                         "\n[select]\ntopk_tokens = 64, 128\n[cache]\nenabled = false\n");
  ASSERT_EQ(sw.points.size(), 2u);
  WorkloadCache cache;
  preload_imports(sw.points, cache);
  ASSERT_EQ(cache.size(), 1u);
  EXPECT_EQ(cache.begin()->second.requests.size(), 1u);
  const PointRecord r = run_point(sw.points[1], 1e15, cache);
  ASSERT_EQ(r.summary.status, "ok") << r.summary.reason;
  EXPECT_EQ(r.requests.size(), 1u);
}

// What preload_imports refuses at its bounds: limits.max_context below the file's context (equal is fine), a
// growing context whose file has no more tokens than its steps append, the hybrid layer over a file with no
// attention arrays, an fp16 index of a key beyond 65504 (65504 itself is fine); cosine weights over a key of
// norm 0 are fine (its weight is the floor, exactly).
TEST_F(RunnerTest, PreloadRefusesAnImportPastItsBoundsAndAcceptsOneAtThem) {
  const ip::Workload w = ip::generate_request(small_spec(), 0);  // 512 tokens, 2 steps
  const std::string h5 = dump("trace.h5", w), bare = dump("bare.h5", w, false);
  const std::string head = "backend = cpu\nthreads = 1\n[workload]\nsource = ";
  const auto preload = [&](const std::string& source, const std::string& more) -> std::string {
    const Sweep sw = sweep(head + source + "\n[select]\ntopk_tokens = 64\n[cache]\nenabled = false\n" + more);
    WorkloadCache cache;
    try {
      preload_imports(sw.points, cache);
    } catch (const ip::Error& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_EQ(preload(h5, "[limits]\nmax_context = 512\n"), "");
  EXPECT_NE(preload(h5, "[limits]\nmax_context = 511\n")
                .find("the imported context has 512 tokens, more than limits.max_context = 511 tokens"),
            std::string::npos);
  // 512 tokens over 2 steps: 255 appended per step leaves a 2-token prompt, 256 leaves none.
  EXPECT_EQ(preload(h5, "[workload]\nappend_per_step = 255\n"), "");
  EXPECT_NE(preload(h5, "[workload]\nappend_per_step = 256\n").find("has 512 tokens, not more than its 2 steps x 256"),
            std::string::npos);
  EXPECT_NE(preload(bare, "[hybrid]\nenabled = true\nwindow = 64\nchunk = 16\n")
                .find("hybrid.enabled = true: the imported workload '" + bare + "' has no attention keys"),
            std::string::npos);
  EXPECT_EQ(preload(bare, "[hybrid]\nenabled = false\n"), "");
  ip::Workload big = w;
  big.index_keys.data()[7 * 16 + 3] = 65504.0f;  // fp16's largest finite value
  EXPECT_EQ(preload(dump("edge.h5", big), "[pool]\nprecision = fp16\n"), "");
  big.index_keys.data()[7 * 16 + 3] = 65505.0f;
  EXPECT_NE(preload(dump("over.h5", big), "[pool]\nprecision = fp16\n")
                .find("the imported index key of token 7 has the value 65505 (dimension 3)"),
            std::string::npos);
  ip::Workload zero = w;
  std::fill_n(zero.index_keys.data() + 5 * 16, 16, 0.0f);  // token 5's key is 0
  EXPECT_EQ(preload(dump("zero.h5", zero), "[pool]\nweighting = cosine\n"), "");
}

// sized_point sizes an imported point from the file: its tokens before the appended ones, one request, the
// file's steps and dims (attention heads from the attention queries, dims from the keys).
TEST_F(RunnerTest, SizedPointTakesTheImportsShape) {
  ip::WorkloadSpec spec = small_spec();
  spec.attn_heads = 3;
  spec.attn_dim = 8;
  spec.value_dim = 12;
  spec.steps = 4;
  const ip::Workload w = ip::generate_request(spec, 0);
  const ImportShape shape = import_shape(w);
  EXPECT_EQ(shape.tokens, 512);
  EXPECT_EQ(shape.steps, 4);
  EXPECT_EQ(shape.dim, 16);
  EXPECT_EQ(shape.index_heads, 2);
  EXPECT_EQ(shape.attn_heads, 3);
  EXPECT_EQ(shape.attn_dim, 8);
  EXPECT_EQ(shape.value_dim, 12);
  const std::string h5 = dump("trace.h5", w);
  const Sweep sw = sweep("backend = cpu\nthreads = 1\n[workload]\nsource = " + h5 +
                         "\nappend_per_step = 16\n[select]\ntopk_tokens = 64\n[cache]\nenabled = false\n");
  Point p = sw.points[0];
  p.workload.requests = 3;  // (the config refuses it with an import; the file's one request counts)
  const Point q = sized_point(p, shape);
  EXPECT_EQ(q.workload.tokens, 512 - 4 * 16);
  EXPECT_EQ(q.workload.append_per_step, 16);
  EXPECT_EQ(q.workload.requests, 1);
  EXPECT_EQ(q.workload.steps, 4);
  EXPECT_EQ(q.workload.attn_heads, 3);
  EXPECT_EQ(q.workload.dim, 16);
}

// A stop asked for before the sweep runs no point: the results file holds none, and the count at the end
// says so (the points run, not the points planned).
TEST_F(RunnerTest, AStopAskedForBeforeTheFirstPointRunsNone) {
  const Sweep sw = sweep(kSeeds);
  const std::string out = (dir_ / "r.h5").string();
  const SweepMeta meta = meta_of(sw);
  ResultsFile rf(out, meta, false, false);
  volatile std::sig_atomic_t stop = 1;
  RunOptions ro;
  ro.progress_interval_s = 3600;
  ro.stop = &stop;
  WorkloadCache cache;
  StderrCapture cap(dir_ / "stderr.txt");
  const auto rows = run_points(sw, sw.points, ro, cache, &rf);
  const std::string err = cap.text();
  EXPECT_TRUE(rows.empty());
  EXPECT_FALSE(rf.has(sw.points[0].key));
  EXPECT_NE(err.find("0 points in "), std::string::npos) << err;
  EXPECT_EQ(err.find("[1/6]"), std::string::npos) << err;
}

// Within a point of several requests, the progress line counts requests and the decode steps of all of them.
TEST_F(RunnerTest, ProgressWithinAPointOfSeveralRequestsCountsRequestsAndAllTheirSteps) {
  const Sweep sw = sweep(
      "backend = cpu\nthreads = 1\n[workload]\ntokens = 4Ki\ndim = 16\nattn_dim = 16\nvalue_dim = 16\nsteps = 24\n"
      "requests = 3\n[select]\ntopk_tokens = 64\n[cache]\nenabled = false\n");
  RunOptions ro;
  ro.progress_interval_s = 0.001;
  WorkloadCache cache;
  StderrCapture cap(dir_ / "stderr.txt");
  const auto rows = run_points(sw, sw.points, ro, cache, nullptr);
  const std::string err = cap.text();
  ASSERT_EQ(rows.size(), 1u);
  ASSERT_EQ(rows[0].summary.status, "ok") << rows[0].summary.reason;
  const std::size_t at = err.find("[1/1] point 1 of 1 | decoding: ");
  ASSERT_NE(at, std::string::npos) << err;
  const std::string line = err.substr(at, err.find('\n', at) - at);
  EXPECT_NE(line.find(" of 3 requests, "), std::string::npos) << line;
  EXPECT_NE(line.find(" of 72 decode steps done | "), std::string::npos) << line;  // 3 requests x 24 steps
}

// --resume replaces a trace of a point the file does not hold when the trace was written since the resumed
// sweep began; the file gives that time in whole seconds, so a trace of the same second is of the sweep.
TEST_F(RunnerTest, ResumeReplacesATraceWrittenInTheSecondTheSweepBegan) {
  const std::string results = (dir_ / "r.h5").string(), traces = (dir_ / "t{index}.txt").string();
  const Sweep sw = sweep(kSeeds + std::string("[output]\npath = ") + results + "\ncache_trace = " + traces + "\n");
  // (kSeeds turns the cache model off; a trace needs it)
  std::vector<Point> points = sw.points;
  for (Point& p : points) p.cache.enabled = true;
  const SweepMeta meta = meta_of(sw);  // points: sw.points with the cache on
  {  // a run that wrote point 0 and stopped
    ResultsFile first(results, meta, false, false);
    RunOptions ro;
    ro.quiet = true;
    WorkloadCache cache;
    ASSERT_EQ(run_points(sw, {points[0]}, ro, cache, &first).size(), 1u);
  }
  ResultsFile rf(results, meta, true, false);
  ASSERT_TRUE(rf.resumed());
  const std::time_t began = rf.sweep_began();
  ASSERT_GE(began, 0);
  const std::string trace = cache_trace_path(points[1]);
  std::ofstream(trace) << "1\n";
  const auto set_mtime = [&](std::time_t t) {
    const struct timespec times[2] = {{t, 0}, {t, 0}};
    ASSERT_EQ(::utimensat(AT_FDCWD, trace.c_str(), times, 0), 0);
  };
  set_mtime(began);
  EXPECT_NO_THROW(check_cache_traces(points, false, true, &rf));
  set_mtime(began - 1);
  try {
    check_cache_traces(points, false, true, &rf);
    ADD_FAILURE() << "a trace from before the sweep began was accepted";
  } catch (const ip::Error& e) {
    EXPECT_NE(std::string(e.what()).find("was last written before the sweep"), std::string::npos) << e.what();
  }
}

}  // namespace
