// The results file: layout read back exactly, resume, refusals that leave the file untouched, the writer
// lock across processes, a writer SIGKILLed between and during appends, merge of shards, inspect.
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <gtest/gtest.h>

#include "core/error.h"
#include "experiments/h5.h"
#include "experiments/results.h"

namespace {

namespace fs = std::filesystem;
using ip::exp::PointRecord;
using ip::exp::ResultsFile;

ip::exp::SweepMeta meta(const std::string& sweep_id = "sweep-A") {
  ip::exp::SweepMeta m;
  m.sweep_id = sweep_id;
  m.tool_version = "0.1.0";
  m.config_text = "[pool]\nweighting = mean, max\n";
  m.axis_keys = {"pool.weighting", "topk.tokens"};
  m.points_total = 10;
  return m;
}

constexpr int kSummaryNumbers = 29, kStepNumbers = 16;  // the float64 columns of /points and of a steps table

std::string key_of(std::size_t i) {
  return "pool.weighting=w" + std::to_string(i) + ";topk.tokens=" + std::to_string(64 * i);
}

// Point i: summary numbers 100 * (i + 1) + c / 4 for the c-th number (table order); two requests of three
// steps each for an ok point, step values 10 * b + s + c / 8 for the c-th step column (table order); tensors
// for request 0 ([4, 3] keys, [3, 2] selections) and 1.
PointRecord point(std::size_t i, bool skipped = false, bool tensors = true) {
  PointRecord r;
  r.index = i;
  r.key = key_of(i);
  r.axes = {{"pool.weighting", "w" + std::to_string(i)}, {"topk.tokens", std::to_string(64 * i)}};
  auto& s = r.summary;
  // clang-format off
  double* nums[] = {&s.tokens, &s.index_bytes_per_token, &s.exact_bytes_per_token, &s.macs_per_query,
                    &s.exact_macs_per_query, &s.token_recall, &s.block_recall, &s.mass_recall, &s.output_error,
                    &s.pool_ms, &s.score_ms, &s.topk_ms, &s.attention_ms, &s.wall_s, &s.cache_l1_hit_rate,
                    &s.cache_l2_hit_rate, &s.cache_l3_hit_rate, &s.cache_hit_rate, &s.cache_opt_hit_rate,
                    &s.cache_opt_single_hit_rate, &s.layer_ms, &s.local_ms, &s.local_prefill_ms,
                    &s.layer_output_error, &s.layer_mass_recall, &s.layer_tokens_per_step, &s.repooled_fraction_mean,
                    &s.pool_hidden_ms, &s.tokens_per_group};
  // clang-format on
  for (int c = 0; c < kSummaryNumbers; ++c) *nums[c] = 100.0 * (i + 1) + c / 4.0;
  if (skipped) {
    s.status = "skipped";
    s.reason = "k exceeds the context";
    return r;
  }
  for (int b = 0; b < 2; ++b) {
    ip::exp::RequestDetail d;
    for (int st = 0; st < 3; ++st) {
      ip::StepRecord x;
      double* v[] = {&x.token_recall,      &x.block_recall,      &x.mass_recall,    &x.output_error,
                     &x.pool_ms,           &x.score_ms,          &x.topk_ms,        &x.attention_ms,
                     &x.context_tokens,    &x.local_ms,          &x.layer_ms,       &x.layer_output_error,
                     &x.layer_mass_recall, &x.layer_tokens,      &x.repooled_fraction, &x.pool_hidden_ms};
      for (int c = 0; c < kStepNumbers; ++c) *v[c] = 10.0 * b + st + c / 8.0;
      d.steps.push_back(x);
    }
    if (tensors) {
      d.composite_keys.reshape({b == 0 ? 4 : 2, 3});
      for (ip::Index64 e = 0; e < d.composite_keys.size(); ++e) d.composite_keys.data()[e] = 0.5f * e;
      d.selected = {5, 1, 0, 2, 3, 4};
      d.k_groups = b == 0 ? 2 : 3;
    }
    r.requests.push_back(std::move(d));
  }
  return r;
}

std::string bytes_of(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const ip::Error& e) {
    return e.what();
  }
  return "(no error)";
}

#define EXPECT_HAS(text, part) EXPECT_NE((text).find(part), std::string::npos) << (text)

class ResultsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("ip_results_test_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) { return (dir_ / name).string(); }
  std::string write(const std::string& name, std::vector<std::size_t> points, const std::string& sweep = "sweep-A") {
    ResultsFile f(path(name), meta(sweep), false, false);
    for (auto i : points) f.append(point(i, i == 2));
    return path(name);
  }
  fs::path dir_;
};

TEST_F(ResultsTest, TableAndGroupsReadBackExactly) {
  const std::string p = write("r.h5", {0, 1, 2});
  EXPECT_FALSE(fs::exists(p + ".lock"));
  ip::h5::File f(p, "r");
  EXPECT_EQ(f.attr_int("/", "schema_version"), 1);
  EXPECT_EQ(f.attr_string("/", "sweep_id"), "sweep-A");
  EXPECT_EQ(f.attr_int("/", "points_total"), 10);
  EXPECT_EQ(f.attr_string("/", "config_text"), "[pool]\nweighting = mean, max\n");
  EXPECT_HAS(f.attr_string("/", "units"), "wall_s: seconds");
  EXPECT_EQ(f.attr_string("/", "created_utc").back(), 'Z');

  const ip::h5::Table t = f.read_table("points");
  const std::vector<std::string> names = {"index",
                                          "key",
                                          "pool.weighting",
                                          "topk.tokens",
                                          "status",
                                          "reason",
                                          "run_backend",
                                          "run_device",
                                          "tokens",
                                          "index_bytes_per_token",
                                          "exact_bytes_per_token",
                                          "macs_per_query",
                                          "exact_macs_per_query",
                                          "token_recall",
                                          "block_recall",
                                          "mass_recall",
                                          "output_error",
                                          "pool_ms",
                                          "score_ms",
                                          "topk_ms",
                                          "attention_ms",
                                          "wall_s",
                                          "cache_l1_hit_rate",
                                          "cache_l2_hit_rate",
                                          "cache_l3_hit_rate",
                                          "cache_hit_rate",
                                          "cache_opt_hit_rate",
                                          "cache_opt_single_hit_rate",
                                          "layer_ms",
                                          "local_ms",
                                          "local_prefill_ms",
                                          "layer_output_error",
                                          "layer_mass_recall",
                                          "layer_tokens_per_step",
                                          "repooled_fraction_mean",
                                          "pool_hidden_ms",
                                          "tokens_per_group"};
  ASSERT_EQ(t.columns.size(), names.size());
  for (std::size_t c = 0; c < names.size(); ++c) EXPECT_EQ(t.columns[c].name, names[c]);
  ASSERT_EQ(t.rows(), 3u);
  EXPECT_EQ(t.column("index").ints, (std::vector<std::int64_t>{0, 1, 2}));
  EXPECT_EQ(t.column("key").strings[1], "pool.weighting=w1;topk.tokens=64");
  EXPECT_EQ(t.column("pool.weighting").strings, (std::vector<std::string>{"w0", "w1", "w2"}));
  EXPECT_EQ(t.column("topk.tokens").strings, (std::vector<std::string>{"0", "64", "128"}));
  EXPECT_EQ(t.column("status").strings, (std::vector<std::string>{"ok", "ok", "skipped"}));
  EXPECT_EQ(t.column("reason").strings, (std::vector<std::string>{"", "", "k exceeds the context"}));
  EXPECT_EQ(t.column("run_backend").strings, (std::vector<std::string>{"cpu", "cpu", "cpu"}));
  EXPECT_EQ(t.column("tokens").floats, (std::vector<double>{100.0, 200.0, 300.0}));
  EXPECT_EQ(t.column("exact_bytes_per_token").floats, (std::vector<double>{100.5, 200.5, 300.5}));
  EXPECT_EQ(t.column("wall_s").floats, (std::vector<double>{103.25, 203.25, 303.25}));
  // Every number in its own column: the c-th float64 column holds the c-th number of each point (a swap of
  // two fields in the writer fails here).
  ASSERT_EQ(names.size() - 8, static_cast<std::size_t>(kSummaryNumbers));
  for (int c = 0; c < kSummaryNumbers; ++c) {
    const auto& col = t.column(names[8 + c]).floats;
    ASSERT_EQ(col.size(), 3u) << names[8 + c];
    for (std::size_t i = 0; i < 3; ++i) EXPECT_EQ(col[i], 100.0 * (i + 1) + c / 4.0) << names[8 + c] << " point " << i;
  }
  EXPECT_HAS(f.info("points").type_name, "key: bytes[");
  EXPECT_HAS(f.info("points").type_name, "wall_s: float64");

  EXPECT_EQ(f.attr_string("point_000001", "key"), "pool.weighting=w1;topk.tokens=64");
  EXPECT_EQ(f.attr_string("point_000001", "status"), "ok");
  EXPECT_EQ(f.attr_string("point_000001", "topk.tokens"), "64");
  EXPECT_EQ(f.attr_string("point_000002", "reason"), "k exceeds the context");
  const ip::h5::Table steps = f.read_table("point_000001/steps");
  ASSERT_EQ(steps.rows(), 6u);
  EXPECT_EQ(steps.columns[0].name, "request");
  EXPECT_EQ(steps.column("request").ints, (std::vector<std::int64_t>{0, 0, 0, 1, 1, 1}));
  EXPECT_EQ(steps.column("step").ints, (std::vector<std::int64_t>{0, 1, 2, 0, 1, 2}));
  EXPECT_EQ(steps.column("token_recall").floats, (std::vector<double>{0, 1, 2, 10, 11, 12}));
  EXPECT_EQ(steps.column("attention_ms").floats, (std::vector<double>{0.875, 1.875, 2.875, 10.875, 11.875, 12.875}));
  ASSERT_EQ(steps.columns.size(), 2u + kStepNumbers);  // request, step, then the numbers in StepRecord order
  for (int c = 0; c < kStepNumbers; ++c) {
    const auto& col = steps.columns[2 + c];
    ASSERT_EQ(col.floats.size(), 6u) << col.name;
    for (int b = 0; b < 2; ++b)
      for (int st = 0; st < 3; ++st) EXPECT_EQ(col.floats[3 * b + st], 10.0 * b + st + c / 8.0) << col.name;
  }
  EXPECT_EQ(f.read_table("point_000002/steps").rows(), 0u);
}

// A point the runner skips measured nothing: clear_metrics makes every number of its row NaN, not 0 (which
// a mean over points would count as a recall or an error of 0).
TEST_F(ResultsTest, ASkippedPointsNumbersAreNaN) {
  PointRecord r = point(0, true);
  ip::exp::clear_metrics(r.summary);
  {
    ResultsFile f(path("s.h5"), meta(), false, false);
    f.append(r);
  }
  ip::h5::File f(path("s.h5"), "r");
  const ip::h5::Table t = f.read_table("points");
  int numbers = 0;
  for (const auto& col : t.columns) {
    if (col.kind != ip::h5::Column::Kind::kFloat64) continue;
    ++numbers;
    ASSERT_EQ(col.floats.size(), 1u);
    EXPECT_TRUE(std::isnan(col.floats[0])) << col.name << " = " << col.floats[0];
  }
  EXPECT_EQ(numbers, kSummaryNumbers);
  EXPECT_EQ(t.column("status").strings[0], "skipped");
  EXPECT_EQ(t.column("reason").strings[0], "k exceeds the context");
}

TEST_F(ResultsTest, SavedTensorsHaveTheirShapes) {
  const std::string p = write("r.h5", {0, 2});
  ip::h5::File f(p, "r");
  EXPECT_EQ(f.info("point_000000/composite_keys").shape, (std::vector<ip::Index64>{4, 3}));
  EXPECT_EQ(f.info("point_000000/composite_keys").type_name, "float32");
  EXPECT_EQ(f.read_float("point_000000/composite_keys").data()[11], 5.5f);
  EXPECT_EQ(f.info("point_000000/selected_groups").shape, (std::vector<ip::Index64>{3, 2}));
  EXPECT_EQ(f.info("point_000000/selected_groups").type_name, "int32");
  EXPECT_EQ(f.read_int32("point_000000/selected_groups"), (std::vector<std::int32_t>{5, 1, 0, 2, 3, 4}));
  EXPECT_EQ(f.info("point_000000/request_1/composite_keys").shape, (std::vector<ip::Index64>{2, 3}));
  EXPECT_EQ(f.info("point_000000/request_1/selected_groups").shape, (std::vector<ip::Index64>{2, 3}));
  EXPECT_FALSE(f.exists("point_000002/composite_keys"));
  EXPECT_EQ(f.list("point_000002"), (std::vector<std::string>{"steps"}));
}

TEST_F(ResultsTest, ResumeSkipsHeldKeysAndAppends) {
  const std::string p = write("r.h5", {0, 1});
  {
    ResultsFile f(p, meta(), true, false);
    EXPECT_EQ(f.size(), 2u);
    EXPECT_TRUE(f.has(key_of(0)));
    EXPECT_TRUE(f.has(key_of(1)));
    EXPECT_FALSE(f.has(key_of(3)));
    EXPECT_HAS(error_of([&] { f.append(point(1)); }), "already in the file");
    f.append(point(3));
    EXPECT_EQ(f.size(), 3u);
  }
  ip::h5::File f(p, "r");
  EXPECT_EQ(f.read_table("points").column("index").ints, (std::vector<std::int64_t>{0, 1, 3}));
  EXPECT_TRUE(f.exists("point_000003/steps"));
}

// A point the file recorded as skipped (no device, over the memory limit) holds no results: resumed, it is
// not held and runs again; the file keeps its old record until the new one is written, which replaces it.
TEST_F(ResultsTest, ResumeRunsSkippedPointsAgain) {
  const std::string p = write("r.h5", {0, 2, 3});  // point 2 skipped
  {
    ResultsFile f(p, meta(), true, false);
    EXPECT_EQ(f.size(), 2u);
    EXPECT_EQ(f.retried(), 1u);
    EXPECT_TRUE(f.has(key_of(0)));
    EXPECT_FALSE(f.has(key_of(2)));
    EXPECT_TRUE(f.has(key_of(3)));
    {
      ip::h5::File g(p, "r");
      EXPECT_EQ(g.read_table("points").column("index").ints, (std::vector<std::int64_t>{0, 2, 3}));
      EXPECT_EQ(g.read_table("points").column("status").strings[1], "skipped");
    }
    f.append(point(2));
    EXPECT_EQ(f.size(), 3u);
    EXPECT_EQ(f.retried(), 0u);
  }
  {
    ip::h5::File g(p, "r");
    const ip::h5::Table t = g.read_table("points");
    EXPECT_EQ(t.column("index").ints, (std::vector<std::int64_t>{0, 3, 2}));
    EXPECT_EQ(t.column("status").strings, (std::vector<std::string>{"ok", "ok", "ok"}));
    EXPECT_EQ(t.column("tokens").floats[2], 300.0);
    EXPECT_TRUE(g.exists("point_000002/steps"));
  }
  // Resumed again: nothing is left to retry.
  {
    ResultsFile f(p, meta(), true, false);
    EXPECT_EQ(f.retried(), 0u);
  }
  // Skipped again: one record of it, the new one.
  const std::string q = write("q.h5", {1, 2});
  {
    ResultsFile f(q, meta(), true, false);
    PointRecord again = point(2, true);
    again.summary.reason = "still no device";
    f.append(again);
  }
  ip::h5::File g(q, "r");
  const ip::h5::Table t = g.read_table("points");
  EXPECT_EQ(t.column("index").ints, (std::vector<std::int64_t>{1, 2}));
  EXPECT_EQ(t.column("reason").strings[1], "still no device");
}

// Two skipped points, one of them run again before the run stops: the other keeps its old record (a stopped
// resume loses nothing the file said). A skip the point's settings decide is not run again.
TEST_F(ResultsTest, AStoppedResumeKeepsTheSkippedPointsItDidNotRun) {
  const std::string p = path("r.h5");
  {
    ResultsFile f(p, meta(), false, false);
    f.append(point(0));
    PointRecord a = point(1, true), b = point(2, true), c = point(3, true);
    a.summary.reason = "backend = cuda: no CUDA device (no driver)";
    b.summary.reason = "estimated memory 50.0 MiB exceeds the limit 1.0 KiB (sweep.memory_limit)";
    c.summary.reason = std::string(ip::exp::kSkipBudgetOverContext) + "4096 exceeds a request's context of 2048 tokens";
    f.append(a);
    f.append(b);
    f.append(c);
  }
  EXPECT_TRUE(ip::exp::skip_may_change("backend = cuda: no CUDA device"));
  EXPECT_FALSE(ip::exp::skip_may_change("select.topk_tokens = 4096 exceeds a request's context of 2048 tokens"));
  {
    ResultsFile f(p, meta(), true, false);
    f.set_flush_policy(ResultsFile::FlushPolicy::kBoundedOverhead);
    EXPECT_EQ(f.retried(), 2u);
    EXPECT_EQ(f.size(), 2u);  // point 0 and the settings-decided skip of point 3
    EXPECT_TRUE(f.has(key_of(3)));
    EXPECT_FALSE(f.has(key_of(1)));
    EXPECT_FALSE(f.has(key_of(2)));
    f.append(point(2));  // the first append of a run is written at once
    EXPECT_EQ(f.held(), 0u);
    EXPECT_EQ(f.size(), 3u);
    EXPECT_EQ(f.retried(), 1u);
  }  // stopped here: point 1 never ran again
  ip::h5::File g(p, "r");
  const ip::h5::Table t = g.read_table("points");
  EXPECT_EQ(t.column("index").ints, (std::vector<std::int64_t>{0, 1, 3, 2}));
  EXPECT_EQ(t.column("status").strings, (std::vector<std::string>{"ok", "skipped", "skipped", "ok"}));
  EXPECT_EQ(t.column("reason").strings[1], "backend = cuda: no CUDA device (no driver)");
  EXPECT_TRUE(g.exists("point_000001"));
  EXPECT_TRUE(g.exists("point_000002/steps"));
  ResultsFile again(p, meta(), true, false);
  EXPECT_EQ(again.retried(), 1u);
  EXPECT_EQ(again.size(), 3u);
}

// A /points table that holds a point twice (no indexpool writes one) is refused, not counted wrong.
TEST_F(ResultsTest, ResumeRefusesAPointRecordedTwice) {
  const std::string p = write("r.h5", {0, 2});
  {
    ip::h5::File f(p, "a");
    ip::h5::Table t = f.read_table("points");
    ip::h5::Table twice = t;
    for (std::size_t c = 0; c < t.columns.size(); ++c) {
      ip::h5::Column& d = twice.columns[c];
      if (!d.strings.empty()) d.strings.push_back(d.strings[1]);
      else if (!d.ints.empty()) d.ints.push_back(d.ints[1]);
      else d.floats.push_back(d.floats[1]);
    }
    f.remove("points");
    f.write_table("points", twice, 64);
  }
  const std::string e = error_of([&] { ResultsFile f(p, meta(), true, false); });
  EXPECT_HAS(e, "holds point 2 twice");
}

TEST_F(ResultsTest, ResumeRefusesAnotherSweepOrSchemaAndLeavesTheFile) {
  const std::string p = write("r.h5", {0});
  const std::string before = bytes_of(p);
  const std::string sweep = error_of([&] { ResultsFile f(p, meta("sweep-B"), true, false); });
  EXPECT_HAS(sweep, p);
  EXPECT_HAS(sweep, "sweep-A");
  EXPECT_HAS(sweep, "sweep-B");
  EXPECT_EQ(bytes_of(p), before);

  ip::h5::File(p, "a").set_attr("/", "schema_version", std::int64_t{2});
  const std::string changed = bytes_of(p);
  const std::string schema = error_of([&] { ResultsFile f(p, meta(), true, false); });
  EXPECT_HAS(schema, p);
  EXPECT_HAS(schema, "schema_version 2");
  EXPECT_HAS(schema, "schema_version 1");
  EXPECT_EQ(bytes_of(p), changed);
  const std::string text = ip::exp::inspect_results(p);
  EXPECT_HAS(text, "schema_version 2 differs from the version this indexpool reads (1)");
  EXPECT_HAS(text, "point_000000/");
}

// A file whose /points columns differ (another build, other axes): the message names the columns
// only one side has, not all ~70 of them, and the file is left as it was.
TEST_F(ResultsTest, ResumeWithOtherColumnsNamesTheDifference) {
  const std::string p = write("r.h5", {0});
  const std::string before = bytes_of(p);
  ip::exp::SweepMeta other = meta();
  other.axis_keys = {"pool.weighting", "select.k"};
  const std::string e = error_of([&] { ResultsFile f(p, other, true, false); });
  EXPECT_HAS(e, p);
  EXPECT_HAS(e, "only the file has: topk.tokens");
  EXPECT_HAS(e, "only this sweep has: select.k");
  EXPECT_HAS(e, "--overwrite");
  EXPECT_EQ(e.find("mass_recall"), std::string::npos) << e;  // the shared columns are not listed
  EXPECT_EQ(bytes_of(p), before);
}

TEST_F(ResultsTest, ExistingFileNeedsResumeOrOverwrite) {
  const std::string p = write("r.h5", {0, 1});
  const std::string before = bytes_of(p);
  const std::string e = error_of([&] { ResultsFile f(p, meta(), false, false); });
  EXPECT_HAS(e, p);
  EXPECT_HAS(e, "--resume");
  EXPECT_HAS(e, "--overwrite");
  EXPECT_EQ(bytes_of(p), before);
  ResultsFile f(p, meta(), false, true);
  EXPECT_EQ(f.size(), 0u);
  EXPECT_EQ(bytes_of(p), before);  // replaced only by the first append
  f.append(point(5));
  EXPECT_EQ(ip::h5::File(p, "r").read_table("points").column("index").ints, (std::vector<std::int64_t>{5}));
}

TEST_F(ResultsTest, WideStringsRewriteTheTable) {
  const std::string p = path("r.h5");
  ResultsFile f(p, meta(), false, false);
  f.append(point(0));
  PointRecord wide = point(1, true);
  wide.summary.reason = std::string(100, 'x');
  f.append(wide);
  f.append(point(3));
  const ip::h5::Table t = ip::h5::File(p, "r").read_table("points");
  EXPECT_EQ(t.column("reason").strings, (std::vector<std::string>{"", std::string(100, 'x'), ""}));
  EXPECT_EQ(t.column("tokens").floats, (std::vector<double>{100.0, 200.0, 400.0}));
}

// FlushPolicy::kBoundedOverhead: quick appends are held and written together; the file on disk is always
// a prefix of what was appended; held keys count as in the file; flush() and the destructor write the
// rest; the result reads back the same as a file written one point at a time (a wide string inside a
// batch included).
TEST_F(ResultsTest, HeldPointsReachTheFileOnFlushAndAtTheEnd) {
  auto make = [](std::size_t i) {
    PointRecord r = point(i, i % 3 == 2);
    if (i == 17) r.summary.reason = std::string(100, 'y');
    return r;
  };
  const std::string p = path("held.h5"), q = path("each.h5");
  std::size_t max_held = 0;
  {
    ResultsFile f(p, meta(), false, false);
    f.set_flush_policy(ResultsFile::FlushPolicy::kBoundedOverhead);
    for (std::size_t i = 0; i < 40; ++i) {
      f.append(make(i));
      EXPECT_EQ(f.size(), i + 1);
      EXPECT_TRUE(f.has(key_of(i)));
      max_held = std::max(max_held, f.held());
      if (!fs::exists(p)) {
        EXPECT_EQ(f.held(), i + 1);
        continue;
      }
      const ip::h5::Table t = ip::h5::File(p, "r").read_table("points");
      ASSERT_EQ(t.rows() + f.held(), i + 1) << i;
      for (std::size_t r = 0; r < t.rows(); ++r) ASSERT_EQ(t.column("key").strings[r], key_of(r));
    }
    EXPECT_HAS(error_of([&] { f.append(make(39)); }), "already in the file");
    f.flush();
    EXPECT_EQ(f.held(), 0u);
    EXPECT_EQ(ip::h5::File(p, "r").read_table("points").rows(), 40u);
    for (std::size_t i = 40; i < 45; ++i) f.append(make(i));
  }  // the destructor writes what is still held
  EXPECT_GT(max_held, 1u) << "appends microseconds apart were each written at once";
  {
    ResultsFile f(q, meta(), false, false);
    for (std::size_t i = 0; i < 45; ++i) {
      f.append(make(i));
      EXPECT_EQ(f.held(), 0u);
    }
  }
  ip::h5::File a(p, "r"), b(q, "r");
  const ip::h5::Table ta = a.read_table("points"), tb = b.read_table("points");
  ASSERT_EQ(ta.rows(), 45u);
  for (const char* c : {"key", "status", "reason", "pool.weighting"})
    EXPECT_EQ(ta.column(c).strings, tb.column(c).strings) << c;
  EXPECT_EQ(ta.column("index").ints, tb.column("index").ints);
  for (const char* c : {"tokens", "mass_recall", "wall_s"}) EXPECT_EQ(ta.column(c).floats, tb.column(c).floats) << c;
  for (std::size_t i = 0; i < 45; ++i) {
    const std::string g = fmt::format("point_{:06d}", i);
    EXPECT_EQ(a.list(g), b.list(g)) << g;
    EXPECT_EQ(a.read_table(g + "/steps").column("mass_recall").floats,
              b.read_table(g + "/steps").column("mass_recall").floats)
        << g;
  }
  ResultsFile again(p, meta(), true, false);  // resumed: the 15 skipped points (i % 3 == 2) run again
  EXPECT_EQ(again.size(), 30u);
  EXPECT_EQ(again.retried(), 15u);
}

// Appends replace the file (new file, rename): a reader that has it open keeps a complete snapshot.
TEST_F(ResultsTest, AReaderKeepsItsSnapshotWhileAppendsReplaceTheFile) {
  const std::string p = path("r.h5");
  ResultsFile f(p, meta(), false, false);
  f.append(point(0));
  ip::h5::File reader(p, "r");
  f.append(point(1));
  f.append(point(2));
  EXPECT_EQ(reader.read_table("points").rows(), 1u);
  EXPECT_FALSE(reader.exists("point_000001"));
  EXPECT_EQ(ip::h5::File(p, "r").read_table("points").rows(), 3u);
}

TEST_F(ResultsTest, SecondWriterIsRefusedWhileTheFirstLives) {
  const std::string p = path("r.h5");
  {
    ResultsFile first(p, meta(), false, false);
    EXPECT_HAS(error_of([&] { ResultsFile second(p, meta(), false, true); }), "another indexpool run is writing");
  }
  int ready[2], release[2];
  ASSERT_EQ(::pipe(ready), 0);
  ASSERT_EQ(::pipe(release), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(ready[0]);
    ::close(release[1]);
    try {
      ResultsFile f(p, meta(), false, true);
      char c = 'r';
      if (::write(ready[1], &c, 1) != 1) ::_exit(2);
      if (::read(release[0], &c, 1) < 0) ::_exit(3);  // blocks until the parent closes its end
      ::_exit(0);
    } catch (...) {
      ::_exit(1);
    }
  }
  ::close(ready[1]);
  ::close(release[0]);
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  const std::string e = error_of([&] { ResultsFile second(p, meta(), false, true); });
  ::close(release[1]);
  int status = 0;
  ::waitpid(child, &status, 0);
  EXPECT_HAS(e, "another indexpool run is writing '" + p + "'");
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  ResultsFile after(p, meta(), false, true);  // the child is gone: free again
}

// A child appends points 0, 1, ... (resuming), reporting each; the parent SIGKILLs it after `acks` reports
// plus `delay_us`, so the kill falls between or inside appends.
pid_t run_and_kill(const std::string& p, int acks, int delay_us) {
  int fds[2];
  if (::pipe(fds) != 0) return -1;
  const pid_t child = ::fork();
  if (child == 0) {
    ::close(fds[0]);
    try {
      ResultsFile f(p, meta(), true, false);
      for (std::size_t i = f.size();; ++i) {
        f.append(point(i, false, false));
        char c = 'a';
        if (::write(fds[1], &c, 1) != 1) ::_exit(2);
      }
    } catch (...) {
      ::_exit(1);
    }
  }
  ::close(fds[1]);
  char c;
  for (int n = 0; n < acks && ::read(fds[0], &c, 1) == 1; ++n) {
  }
  ::usleep(delay_us);
  ::kill(child, SIGKILL);
  int status = 0;
  ::waitpid(child, &status, 0);
  ::close(fds[0]);
  return WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL ? child : -1;
}

TEST_F(ResultsTest, KilledWriterLeavesAPrefixAndResumes) {
  const std::string p = path("r.h5");
  std::size_t last = 0;
  for (int round = 0; round < 4; ++round) {
    ASSERT_GT(run_and_kill(p, 15, 700 * round), 0) << "round " << round;
    std::size_t n = 0;
    {
      ip::h5::File f(p, "r");
      const ip::h5::Table t = f.read_table("points");
      n = t.rows();
      ASSERT_GE(n, last + 15) << "round " << round;
      std::set<std::string> keys(t.column("key").strings.begin(), t.column("key").strings.end());
      EXPECT_EQ(keys.size(), n);
      for (std::size_t i = 0; i < n; ++i) {
        ASSERT_EQ(t.column("index").ints[i], static_cast<std::int64_t>(i));
        ASSERT_EQ(t.column("key").strings[i], key_of(i));
        ASSERT_TRUE(f.exists("point_" + fmt::format("{:06d}", i) + "/steps"));
      }
      EXPECT_FALSE(f.exists("point_" + fmt::format("{:06d}", n)));
    }
    ResultsFile again(p, meta(), true, false);  // the lock died with the child
    EXPECT_EQ(again.size(), n);
    for (const auto& e : fs::directory_iterator(dir_))
      EXPECT_EQ(e.path().filename().string().find(".tmp-"), std::string::npos) << e.path();
    last = n;
  }
}

TEST_F(ResultsTest, MergeJoinsShardsAndRefusesMismatches) {
  const std::string a = write("a.h5", {4, 0, 2});
  const std::string b = write("b.h5", {3, 1});
  const std::string out = path("all.h5");
  ip::exp::merge_results(out, {a, b});
  ip::h5::File f(out, "r");
  const ip::h5::Table t = f.read_table("points");
  EXPECT_EQ(t.column("index").ints, (std::vector<std::int64_t>{0, 1, 2, 3, 4}));
  for (std::size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(t.column("key").strings[i], key_of(i));
    EXPECT_EQ(t.column("tokens").floats[i], 100.0 * (i + 1));
    EXPECT_EQ(f.attr_string(fmt::format("point_{:06d}", i), "key"), key_of(i));
  }
  // The merged file says when it was made, and from what: each input's path, shard, host, time and argv.
  const std::string a_made = ip::h5::File(a, "r").attr_string("/", "created_utc");
  EXPECT_GE(f.attr_string("/", "created_utc"), a_made);
  const std::string from = f.attr_string("/", "merged_from");
  EXPECT_HAS(from, a + " (shard ");
  EXPECT_HAS(from, "written " + a_made);
  EXPECT_HAS(from, "\n" + b + " (shard ");
  {  // A merged input lists its own inputs, indented, below its line.
    const std::string c = write("c.h5", {5}), again = path("again.h5");
    ip::exp::merge_results(again, {out, c});
    const std::string nested = ip::h5::File(again, "r").attr_string("/", "merged_from");
    EXPECT_HAS(nested, out + " (shard ");
    EXPECT_HAS(nested, "\n  " + a + " (shard ");
    EXPECT_HAS(nested, "\n" + c + " (shard ");
  }
  EXPECT_EQ(f.attr_string("/", "sweep_id"), "sweep-A");
  EXPECT_EQ(f.read_table("point_000003/steps").column("step").ints, (std::vector<std::int64_t>{0, 1, 2, 0, 1, 2}));
  EXPECT_EQ(f.info("point_000001/request_1/composite_keys").shape, (std::vector<ip::Index64>{2, 3}));

  EXPECT_HAS(error_of([&] { ip::exp::merge_results(out, {a, b}); }), "already exists");
  const std::string dup = write("dup.h5", {2});
  const std::string o2 = path("o2.h5");
  const std::string e = error_of([&] { ip::exp::merge_results(o2, {a, dup}); });
  EXPECT_HAS(e, "point '" + key_of(2) + "' is in both '" + a + "' and '" + dup + "'");
  const std::string other = write("other.h5", {1}, "sweep-B");
  const std::string e2 = error_of([&] { ip::exp::merge_results(o2, {a, other}); });
  EXPECT_HAS(e2, other);
  EXPECT_HAS(e2, a);
  EXPECT_HAS(e2, "sweep-B");
  EXPECT_FALSE(fs::exists(o2));
  // A run writing the output holds its lock: merge refuses (the run would rename its file over ours).
  {
    const int fd = ::open((o2 + ".lock").c_str(), O_RDWR | O_CREAT, 0644);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::flock(fd, LOCK_EX), 0);
    EXPECT_HAS(error_of([&] { ip::exp::merge_results(o2, {a, b}); }), "another indexpool run is writing");
    ::unlink((o2 + ".lock").c_str());
    ::close(fd);
  }
  EXPECT_FALSE(fs::exists(o2));
  for (const auto& entry : fs::directory_iterator(dir_))
    EXPECT_EQ(entry.path().filename().string().find(".tmp-"), std::string::npos) << entry.path();
}

// The merge summary: the sweep's points the output lacks, the shards no input holds (those that own a
// missing point), and the inputs' shards that lack some of their own points (a run stopped early). Without
// a shard attribute in every input, only the points.
TEST_F(ResultsTest, MergeSummarySaysWhichPointsAndShardsAreMissing) {
  const auto shard_file = [&](const std::string& name, const std::string& shard, std::vector<std::size_t> points) {
    auto m = meta();
    m.shard = shard;
    ResultsFile f(path(name), m, false, false);
    for (auto i : points) f.append(point(i, false, false));
    return path(name);
  };
  const std::string s0 = shard_file("s0.h5", "0/5", {0}), s1 = shard_file("s1.h5", "1/5", {1, 6});
  const auto sum = ip::exp::merge_results(path("m.h5"), {s0, s1});
  EXPECT_EQ(sum.points, 3);
  EXPECT_EQ(sum.points_total, 10);
  EXPECT_EQ(sum.missing, (std::vector<std::int64_t>{2, 3, 4, 5, 7, 8, 9}));
  EXPECT_EQ(sum.missing_shards, (std::vector<std::string>{"2/5", "3/5", "4/5"}));
  EXPECT_EQ(sum.incomplete_shards, (std::vector<std::string>{"0/5"}));
  EXPECT_EQ(ip::exp::describe_missing(sum),
            "7 of the sweep's 10 points are missing (point indexes 2-5, 7-9); no input holds shards 2/5, 3/5, 4/5 "
            "(run them with --shard, then merge again); shard 0/5 stopped before its last point (--resume with the "
            "same --shard finishes it)");
  EXPECT_EQ(ip::h5::File(path("m.h5"), "r").attr_string("/", "shard"), "0/5,1/5");
  const std::string unknown = write("u.h5", {3});  // no shard attribute: only the points
  const auto u = ip::exp::merge_results(path("mu.h5"), {s0, unknown});
  EXPECT_EQ(u.missing.size(), 8u);
  EXPECT_TRUE(u.missing_shards.empty());
  EXPECT_TRUE(u.incomplete_shards.empty());
  const auto whole = ip::exp::merge_results(path("w.h5"), {write("all.h5", {0, 1, 2, 3, 4, 5, 6, 7, 8, 9})});
  EXPECT_TRUE(whole.missing.empty());
  EXPECT_EQ(ip::exp::describe_missing(whole), "");
}

TEST_F(ResultsTest, InspectDescribesTheFile) {
  const std::string text = ip::exp::inspect_results(write("r.h5", {0, 1, 2}));
  EXPECT_HAS(text, "points: 3 of 10 (ok: 2, skipped: 1)");
  EXPECT_HAS(text, "  pool.weighting (bytes)");
  EXPECT_HAS(text, "  wall_s (float64)");
  EXPECT_HAS(text, "sweep_id: sweep-A");
  EXPECT_HAS(text, "  | weighting = mean, max");
  EXPECT_HAS(text, "point_000002/  key=" + key_of(2) + ", status=skipped");
  EXPECT_HAS(text, "composite_keys  float32 [4, 3]");
  EXPECT_HAS(text, "selected_groups  int32 [3, 2]");
}

}  // namespace
