// Profiling in the runner, on this machine's CPU: counters asked for on the CPU backend (or with no
// device) leave a reason in every point and the sweep runs to completion; the counters and kernels
// tables of the results file read back exactly; metric names are validated before any point runs.
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <span>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "core/backend.h"
#include "core/error.h"
#include "experiments/config.h"
#include "experiments/h5.h"
#include "experiments/profiling.h"
#include "experiments/results.h"
#include "experiments/runner.h"
#include "indexpool/build_config.h"

namespace {

namespace fs = std::filesystem;
using namespace ip::exp;

std::string write_config(const std::string& name, const std::string& text) {
  const fs::path p = fs::temp_directory_path() / ("ip_profiling_" + std::to_string(::getpid()) + "_" + name);
  std::ofstream(p) << text;
  return p.string();
}

constexpr const char* kSmall =
    "backend = cpu\nthreads = 1\n[workload]\ntokens = 2Ki\nsteps = 2\n[pool]\nweighting = uniform, tfidf\n"
    "[select]\ntopk_tokens = 128\n[cache]\nenabled = false\n[profile]\ncounters = on\nkernel_records = on\n";

TEST(Profiling, CountersOnTheCpuBackendRecordWhyAndTheSweepGoesOn) {
  const std::string cfg = write_config("cpu.ini", kSmall);
  const fs::path out = fs::path(cfg).string() + ".h5";
  fs::remove(out);
  const Sweep sw = load_sweep(cfg, {"output.path=" + out.string()});
  ASSERT_EQ(sw.points.size(), 2u);
  EXPECT_TRUE(sw.points[0].profile.counters);
  validate_profiling(sw, sw.points);  // the default metrics are valid (or, without CUPTI, not checked)
  SweepMeta meta;
  meta.sweep_id = sw.sweep_id;
  meta.axis_keys = sw.axis_keys;
  meta.points_total = 2;
  {
    ResultsFile rf(out.string(), meta, false, false);
    WorkloadCache cache;
    RunOptions ro;
    ro.quiet = true;
    const auto rows = run_points(sw, sw.points, ro, cache, &rf);
    ASSERT_EQ(rows.size(), 2u);
    for (const auto& r : rows) {
      EXPECT_EQ(r.summary.status, "ok");
      EXPECT_EQ(r.profile.counters_status, "unavailable");
      EXPECT_NE(r.profile.counters_reason.find("cpu backend"), std::string::npos) << r.profile.counters_reason;
      EXPECT_NE(r.profile.counters_reason.find("backend = cuda"), std::string::npos) << r.profile.counters_reason;
      EXPECT_EQ(r.profile.kernels_status, "unavailable");
      EXPECT_TRUE(r.profile.counters.empty());
      EXPECT_TRUE(std::isfinite(r.summary.token_recall));
    }
  }
  ip::h5::File f(out.string(), "r");
  for (const char* g : {"point_000000", "point_000001"}) {
    EXPECT_EQ(f.attr_string(g, "counters_status"), "unavailable");
    EXPECT_NE(f.attr_string(g, "counters_reason").find("cpu backend"), std::string::npos);
    EXPECT_EQ(f.attr_string(g, "kernels_status"), "unavailable");
    EXPECT_FALSE(f.exists(std::string(g) + "/counters"));
    EXPECT_FALSE(f.exists(std::string(g) + "/kernels"));
  }
  fs::remove(out);
  fs::remove(cfg);
}

TEST(Profiling, CountersOffRecordOff) {
  const std::string cfg = write_config("off.ini", kSmall);
  const Sweep sw = load_sweep(cfg, {"profile.counters=off", "profile.kernel_records=off"});
  EXPECT_EQ(validate_profiling(sw, sw.points), "");
  WorkloadCache cache;
  const PointRecord r = run_point(sw.points[0], 1e12, cache);
  EXPECT_EQ(r.profile.counters_status, "off");
  EXPECT_EQ(r.profile.kernels_status, "off");
  fs::remove(cfg);
}

TEST(Profiling, ProfileModeTurnsInProcessCuptiOff) {
  const std::string cfg = write_config("mode.ini", kSmall);
  Sweep sw = load_sweep(cfg);
  EXPECT_NE(apply_profile_mode(sw.points), "");
  for (const auto& p : sw.points) EXPECT_FALSE(p.profile.counters || p.profile.kernel_records);
  // What the config asked for is recorded in each point as unavailable, with why (not as "off").
  for (const auto& p : sw.points) {
    PointProfiler prof(p);
    const ProfileResult r = prof.finish();
    if (!p.profile.counters_off.empty()) {
      EXPECT_EQ(r.counters_status, "unavailable");
      EXPECT_NE(r.counters_reason.find("--profile: Nsight"), std::string::npos) << r.counters_reason;
    }
  }
  EXPECT_TRUE(std::any_of(sw.points.begin(), sw.points.end(),
                          [](const Point& p) { return !p.profile.counters_off.empty(); }));
  EXPECT_EQ(apply_profile_mode(sw.points), "");
  fs::remove(cfg);
}

TEST(Profiling, UnknownMetricNamesKeyFileAndLine) {
  const std::string cfg = write_config(
      "bad.ini", "[workload]\ntokens = 2Ki\n[profile]\ncounters = on\nmetrics = dram__bytes_read.sum sm__nope.avg\n");
  const Sweep sw = load_sweep(cfg);
#if IP_HAVE_CUPTI
  try {
    validate_profiling(sw, sw.points);
    FAIL() << "no error for an unknown metric";
  } catch (const ip::Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(cfg + ":5"), std::string::npos) << m;
    EXPECT_NE(m.find("profile.metrics"), std::string::npos) << m;
    EXPECT_NE(m.find("sm__nope.avg"), std::string::npos) << m;
  }
  // An unknown chip names profile.chip and where it was set.
  try {
    const Sweep bad_chip = load_sweep(cfg, {"profile.chip=GB999"});
    validate_profiling(bad_chip, bad_chip.points);
    ADD_FAILURE() << "no error for an unknown chip";
  } catch (const ip::Error& e) {
    EXPECT_NE(std::string(e.what()).find("command line: key 'profile.chip' = GB999"), std::string::npos) << e.what();
  }
  // The same list checked for the A100.
  const Sweep ga = load_sweep(cfg, {"profile.chip=GA100"});
  EXPECT_THROW(validate_profiling(ga, ga.points), ip::Error);
  const Sweep ok = load_sweep(cfg, {"profile.metrics=dram__bytes_read.sum", "profile.chip=GA100"});
  EXPECT_NE(validate_profiling(ok, ok.points).find("GA100"), std::string::npos);
#else
  EXPECT_NE(validate_profiling(sw, sw.points).find("not checked"), std::string::npos);
#endif
  EXPECT_THROW(load_sweep(cfg, {"profile.metrics="}), ip::Error);  // an empty list is a config error
  fs::remove(cfg);
}

TEST(Profiling, CounterAndKernelTablesReadBack) {
  ProfileResult r;
  r.counters_status = "ok";
  r.chip = "GH100";
  r.passes = 8;
  r.counters = {{"pool", "dram__bytes_read.sum", 1.5e9, "byte", 16, "sum"},
                {"pool", "lts__t_sector_hit_rate.pct", 42.5, "percent", 16, "mean"},
                {"score", "dram__bytes_read.sum", 3.0e8, "byte", 32, "sum"}};
  r.kernels_status = "ok";
  KernelLaunch k;
  k.name = "void ip::cuda::pool_kernel<4>(ip::cuda::PoolArgs)";
  k.stage = "pool";
  k.pass = 3;
  k.duration_ns = 12345;
  k.grid_x = 1024, k.grid_y = 2, k.grid_z = 3, k.block_x = 256, k.block_y = 4, k.block_z = 5;
  k.registers_per_thread = 40, k.static_shared_bytes = 4096, k.dynamic_shared_bytes = 16384;
  r.kernels = {k};
  const fs::path path = fs::temp_directory_path() / ("ip_profiling_tables_" + std::to_string(::getpid()) + ".h5");
  {
    ip::h5::File f(path.string(), "w");
    f.create_group("point_000007");
    write_profile(f, "point_000007", r);
    f.close();
  }
  ip::h5::File f(path.string(), "r");
  EXPECT_EQ(f.attr_string("point_000007", "counters_status"), "ok");
  EXPECT_EQ(f.attr_string("point_000007", "counters_chip"), "GH100");
  EXPECT_EQ(f.attr_int("point_000007", "counters_passes"), 8);
  const ip::h5::Table c = f.read_table("point_000007/counters");
  ASSERT_EQ(c.rows(), 3u);
  std::vector<std::string> names;
  for (const auto& col : c.columns) names.push_back(col.name);
  EXPECT_EQ(names, (std::vector<std::string>{"stage", "metric", "value", "unit", "calls", "aggregate"}));
  EXPECT_EQ(c.column("stage").strings, (std::vector<std::string>{"pool", "pool", "score"}));
  EXPECT_EQ(c.column("metric").strings[1], "lts__t_sector_hit_rate.pct");
  EXPECT_DOUBLE_EQ(c.column("value").floats[0], 1.5e9);
  EXPECT_EQ(c.column("unit").strings[1], "percent");
  EXPECT_EQ(c.column("calls").ints[2], 32);
  EXPECT_EQ(c.column("aggregate").strings[1], "mean");
  const ip::h5::Table kt = f.read_table("point_000007/kernels");
  ASSERT_EQ(kt.rows(), 1u);
  EXPECT_EQ(kt.column("name").strings[0], k.name);
  EXPECT_EQ(kt.column("stage").strings[0], "pool");
  EXPECT_EQ(kt.column("pass").ints[0], 3);
  EXPECT_DOUBLE_EQ(kt.column("duration_ns").floats[0], 12345);
  const std::vector<std::int64_t> dims = {kt.column("grid_x").ints[0],  kt.column("grid_y").ints[0],
                                          kt.column("grid_z").ints[0],  kt.column("block_x").ints[0],
                                          kt.column("block_y").ints[0], kt.column("block_z").ints[0]};
  EXPECT_EQ(dims, (std::vector<std::int64_t>{1024, 2, 3, 256, 4, 5}));
  EXPECT_EQ(kt.column("registers_per_thread").ints[0], 40);
  EXPECT_EQ(kt.column("static_shared_bytes").ints[0], 4096);
  EXPECT_EQ(kt.column("dynamic_shared_bytes").ints[0], 16384);
  fs::remove(path);
}

// A point whose counters or kernel records were not read: both reasons read back, each under its own
// attribute, and no chip or pass count (those describe counters that were read).
TEST(Profiling, UnavailableRecordsReasonsAndNoChip) {
  ProfileResult r;
  r.counters_status = "unavailable";
  r.counters_reason = "no GPU here";
  r.kernels_status = "unavailable";
  r.kernels_reason = "another profiler holds CUPTI";
  r.chip = "GH100";
  r.passes = 8;
  const fs::path path = fs::temp_directory_path() / ("ip_profiling_unavail_" + std::to_string(::getpid()) + ".h5");
  {
    ip::h5::File f(path.string(), "w");
    f.create_group("point_000000");
    write_profile(f, "point_000000", r);
    f.close();
  }
  ip::h5::File f(path.string(), "r");
  EXPECT_EQ(f.attr_string("point_000000", "counters_reason"), "no GPU here");
  EXPECT_EQ(f.attr_string("point_000000", "kernels_status"), "unavailable");
  EXPECT_EQ(f.attr_string("point_000000", "kernels_reason"), "another profiler holds CUPTI");
  EXPECT_FALSE(f.has_attr("point_000000", "counters_chip"));
  EXPECT_FALSE(f.has_attr("point_000000", "counters_passes"));
  EXPECT_FALSE(f.exists("point_000000/counters"));
  fs::remove(path);
}

// Kernel records alone (counters off): no metric list to check, and --profile turns off only what was on:
// the records are unavailable with why, the counters stay "off".
TEST(Profiling, KernelRecordsAloneInProfileMode) {
  const std::string cfg = write_config("records.ini", kSmall);
  Sweep sw = load_sweep(cfg, {"profile.counters=off"});
  EXPECT_EQ(validate_profiling(sw, sw.points), "");
  EXPECT_NE(apply_profile_mode(sw.points).find("profile.kernel_records"), std::string::npos);
  for (const auto& p : sw.points) {
    EXPECT_FALSE(p.profile.kernel_records);
    EXPECT_TRUE(p.profile.counters_off.empty()) << p.profile.counters_off;
    PointProfiler prof(p);
    const ProfileResult r = prof.finish();
    EXPECT_EQ(r.counters_status, "off");
    EXPECT_EQ(r.kernels_status, "unavailable");
    EXPECT_NE(r.kernels_reason.find("--profile: Nsight"), std::string::npos) << r.kernels_reason;
  }
  fs::remove(cfg);
}

// A stand-in backend of any name, forwarding every stage to the cpu backend.
class NamedBackend final : public ip::Backend {
 public:
  explicit NamedBackend(std::string name) : name_(std::move(name)), cpu_(ip::make_cpu_backend(1)) {}
  std::string name() const override { return name_; }
  std::string device() const override { return "test"; }
  void build_index(ip::MatrixView<const float> keys, const ip::PoolParams& p, const ip::AccessStats* stats,
                   const float* query_ref, ip::PooledIndex& out) override {
    cpu_->build_index(keys, p, stats, query_ref, out);
  }
  void score_index(const ip::PooledIndex& index, const ip::IndexQuery& q, float* out) override {
    cpu_->score_index(index, q, out);
  }
  void score_tokens(ip::MatrixView<const float> keys, const ip::IndexQuery& q, float* out) override {
    cpu_->score_tokens(keys, q, out);
  }
  std::vector<std::int32_t> topk(const float* scores, ip::Index64 n, ip::Index64 k) override {
    return cpu_->topk(scores, n, k);
  }
  ip::AttentionOutput attention(ip::MatrixView<const float> keys, ip::MatrixView<const float> values,
                                ip::MatrixView<const float> queries, std::span<const ip::Index64> tokens,
                                bool want_probs) override {
    return cpu_->attention(keys, values, queries, tokens, want_probs);
  }
  void update_stats(ip::AccessStats& stats, std::span<const float> step_mass,
                    std::span<const std::pair<ip::Index64, ip::Index64>> selected_ranges) override {
    cpu_->update_stats(stats, step_mass, selected_ranges);
  }

 private:
  std::string name_;
  std::unique_ptr<ip::Backend> cpu_;
};

ProfileResult wrapped(bool counters, bool kernel_records, const std::string& backend) {
  Point p;
  p.profile.counters = counters;
  p.profile.kernel_records = kernel_records;
  PointProfiler prof(p);
  auto inner = std::make_unique<NamedBackend>(backend);
  const ip::Backend* raw = inner.get();
  const auto b = prof.wrap(std::move(inner));
  EXPECT_EQ(b.get(), raw) << "nothing to measure off the cuda backend: the backend itself";
  return prof.finish();
}

// Off the cuda backend only what was asked for is unavailable (the other stays "off"), and stderr says each
// distinct reason once per process, however many points give it.
TEST(Profiling, WrapMarksOnlyWhatWasAskedAndSaysEachReasonOnce) {
  static int round = 0;  // fresh backend names, so reasons said by earlier tests (or repeats) do not count
  ++round;
  const std::string a = fmt::format("test-a{}-{}", ::getpid(), round), b = fmt::format("test-b{}-{}", ::getpid(), round);
  ::testing::internal::CaptureStderr();
  const ProfileResult counters = wrapped(true, false, a);
  const ProfileResult again = wrapped(true, false, a);
  const ProfileResult records = wrapped(false, true, b);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(counters.counters_status, "unavailable");
  EXPECT_NE(counters.counters_reason.find("the point ran on the " + a + " backend"), std::string::npos)
      << counters.counters_reason;
  EXPECT_EQ(counters.kernels_status, "off");
  EXPECT_EQ(again.counters_reason, counters.counters_reason);
  EXPECT_EQ(records.counters_status, "off");
  EXPECT_EQ(records.kernels_status, "unavailable");
  EXPECT_NE(records.kernels_reason.find("the point ran on the " + b + " backend"), std::string::npos);
  auto count = [&](const std::string& line) {
    std::size_t n = 0;
    for (auto at = err.find(line); at != std::string::npos; at = err.find(line, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count("indexpool: counters not read: the point ran on the " + a + " backend"), 1u) << err;
  EXPECT_EQ(count("indexpool: kernel records not read: the point ran on the " + b + " backend"), 1u) << err;
  EXPECT_EQ(count("not read:"), 2u) << err;
#if !IP_HAVE_CUPTI
  // On the cuda backend the reason is the build, not the backend.
  ::testing::internal::CaptureStderr();
  const ProfileResult cuda = wrapped(true, true, "cuda");
  ::testing::internal::GetCapturedStderr();
  EXPECT_NE(cuda.counters_reason.find("this build has no CUPTI"), std::string::npos) << cuda.counters_reason;
  EXPECT_NE(cuda.kernels_reason.find("this build has no CUPTI"), std::string::npos) << cuda.kernels_reason;
#endif
}

// --profile without the CUDA profiler API says why: the cpu backend, or (backend cuda or auto) no usable device.
TEST(Profiling, ProfileCaptureSaysWhyItCannotStart) {
  for (const char* backend : {"cpu", "auto", "cuda"}) {
    Point p;
    p.backend = backend;
    ::testing::internal::CaptureStderr();
    bool capturing = false;
    {
      const ProfileCapture capture({p});
      capturing = capture.capturing();
    }
    const std::string err = ::testing::internal::GetCapturedStderr();
    if (std::string(backend) == "cpu") {
      EXPECT_FALSE(capturing);
      EXPECT_NE(err.find("the points run on the cpu backend"), std::string::npos) << err;
    } else if (!capturing) {
      EXPECT_NE(err.find("no CUDA device is usable"), std::string::npos) << backend << ": " << err;
    }
    if (!capturing) {
      EXPECT_NE(err.find("--nvtx-capture='sweep@IndexPool'"), std::string::npos) << err;
    }
  }
}

}  // namespace
