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
#include "core/provenance.h"
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
  // A file of shard `shard` ("i/N") of sweep-A holding `points`, all ok.
  std::string shard_file(const std::string& name, const std::string& shard, std::vector<std::size_t> points) {
    auto m = meta();
    m.shard = shard;
    ResultsFile f(path(name), m, false, false);
    for (auto i : points) f.append(point(i, false, false));
    return path(name);
  }
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

// The provenance a results file carries: every root attribute from SweepMeta under its own name (a field
// written under another's name, or left out, fails here), the optional ones only when set, and each point
// group's run_backend, run_device, run_kernels and git_revision (also in /points: run_backend, run_device).
TEST_F(ResultsTest, RootAndPointAttributesRecordTheRun) {
  ip::exp::SweepMeta m = meta();
  m.tool_version = "indexpool 0.1.0 (abc1234)";
  m.git_revision = "abc1234";
  m.config_path = "/cfg/sweep.ini";
  m.argv = "indexpool run /cfg/sweep.ini --shard 1/3";
  m.host = "node17";
  m.backend = "cuda";
  m.device = "0: NVIDIA H100, sm_90, 79.6 GiB";
  m.shard = "1/3";
  m.imports = "/data/dump.h5: 4096 bytes, digest 0123456789abcdef";
  m.sweep_settings = "pool.weighting=mean,max,\n";
  m.started_utc = "2024-05-06T07:08:09Z";
  PointRecord r = point(1);
  r.summary.backend = "cuda";
  r.summary.device = "0: NVIDIA H100";
  r.summary.kernels = "attention tiles, top-k chain";
  {
    ResultsFile f(path("r.h5"), m, false, false);
    f.append(r);
    f.append(point(3));
  }
  ip::h5::File f(path("r.h5"), "r");
  const std::pair<const char*, std::string> strings[] = {
      {"tool_version", m.tool_version}, {"git_revision", m.git_revision}, {"config_path", m.config_path},
      {"argv", m.argv},                 {"host", m.host},                 {"backend", m.backend},
      {"device", m.device},             {"shard", m.shard},               {"imported_workloads", m.imports},
      {"sweep_settings", m.sweep_settings}, {"started_utc", m.started_utc}};
  for (const auto& [name, value] : strings) {
    ASSERT_TRUE(f.has_attr("/", name)) << name;
    EXPECT_EQ(f.attr_string("/", name), value) << name;
  }
  EXPECT_FALSE(f.has_attr("/", "resumed_by"));
  EXPECT_FALSE(f.has_attr("/", "merged_from"));
  const ip::h5::Table t = f.read_table("points");
  EXPECT_EQ(t.column("run_backend").strings, (std::vector<std::string>{"cuda", "cpu"}));
  EXPECT_EQ(t.column("run_device").strings, (std::vector<std::string>{"0: NVIDIA H100", ""}));
  EXPECT_EQ(f.attr_string("point_000001", "run_backend"), "cuda");
  EXPECT_EQ(f.attr_string("point_000001", "run_device"), "0: NVIDIA H100");
  EXPECT_EQ(f.attr_string("point_000001", "run_kernels"), "attention tiles, top-k chain");
  EXPECT_EQ(f.attr_string("point_000003", "run_kernels"), "");
  for (const char* g : {"point_000001", "point_000003"}) EXPECT_EQ(f.attr_string(g, "git_revision"), "abc1234") << g;
  // Unset optional fields write no attribute (an empty imported_workloads would read as "imports nothing").
  const std::string q = write("q.h5", {0});
  ip::h5::File g(q, "r");
  for (const char* name : {"imported_workloads", "sweep_settings", "started_utc"}) EXPECT_FALSE(g.has_attr("/", name)) << name;
}

// A point with the cache model on: its levels (numbered from 1, closest first) and the LRU miss-ratio curve,
// each number in its own column; a point without the cache model has neither table.
TEST_F(ResultsTest, CacheTablesReadBackExactly) {
  PointRecord r = point(0);
  for (int l = 0; l < 2; ++l) {
    ip::exp::CacheLevelResult lv;
    lv.policy = l == 0 ? "lru" : "clock";
    lv.capacity = l == 0 ? "16 KiB" : "256 KiB";
    lv.accesses = 100 + l;
    lv.hits = 60 + l;
    lv.misses = 40 + l;
    lv.evictions = 30 + l;
    lv.bytes_from_below = 4096 + l;
    lv.hit_rate = 0.6 + l / 8.0;
    lv.opt_hit_rate = 0.75 + l / 8.0;
    r.cache.levels.push_back(lv);
  }
  r.cache.mrc_capacity = {1, 2, 4};
  r.cache.mrc_miss_ratio = {0.5, 0.25, 0.125};
  PointRecord plain = point(1);
  PointRecord no_mrc = point(3);
  no_mrc.cache.levels = r.cache.levels;
  {
    ResultsFile f(path("c.h5"), meta(), false, false);
    f.append(r);
    f.append(plain);
    f.append(no_mrc);
  }
  ip::h5::File f(path("c.h5"), "r");
  const ip::h5::Table lv = f.read_table("point_000000/cache_levels");
  ASSERT_EQ(lv.rows(), 2u);
  EXPECT_EQ(lv.column("level").ints, (std::vector<std::int64_t>{1, 2}));
  EXPECT_EQ(lv.column("policy").strings, (std::vector<std::string>{"lru", "clock"}));
  EXPECT_EQ(lv.column("capacity").strings, (std::vector<std::string>{"16 KiB", "256 KiB"}));
  EXPECT_EQ(lv.column("accesses").floats, (std::vector<double>{100, 101}));
  EXPECT_EQ(lv.column("hits").floats, (std::vector<double>{60, 61}));
  EXPECT_EQ(lv.column("misses").floats, (std::vector<double>{40, 41}));
  EXPECT_EQ(lv.column("evictions").floats, (std::vector<double>{30, 31}));
  EXPECT_EQ(lv.column("bytes_from_below").floats, (std::vector<double>{4096, 4097}));
  EXPECT_EQ(lv.column("hit_rate").floats, (std::vector<double>{0.6, 0.725}));
  EXPECT_EQ(lv.column("opt_hit_rate").floats, (std::vector<double>{0.75, 0.875}));
  EXPECT_HAS(f.attr_string("point_000000/cache_levels", "units"), "level: 1 = closest to the indexer");
  const ip::h5::Table mrc = f.read_table("point_000000/cache_mrc");
  EXPECT_EQ(mrc.column("capacity_entries").floats, (std::vector<double>{1, 2, 4}));
  EXPECT_EQ(mrc.column("miss_ratio").floats, (std::vector<double>{0.5, 0.25, 0.125}));
  EXPECT_HAS(f.attr_string("point_000000/cache_mrc", "units"), "miss_ratio");
  EXPECT_FALSE(f.exists("point_000001/cache_levels"));
  EXPECT_FALSE(f.exists("point_000001/cache_mrc"));
  EXPECT_TRUE(f.exists("point_000003/cache_levels"));
  EXPECT_FALSE(f.exists("point_000003/cache_mrc"));
}

// Records append refuses, each before anything is written (the file keeps what it had): selections that do
// not fill whole rows of k_groups (or k_groups 0), a point without the sweep's axes in order, and a second
// point with an index already in the file under another key.
TEST_F(ResultsTest, AppendRefusesMalformedRecordsAndLeavesTheFile) {
  const std::string p = path("r.h5");
  ResultsFile f(p, meta(), false, false);
  f.append(point(0));
  const std::string before = bytes_of(p);
  PointRecord ragged = point(1);
  ragged.requests[1].selected = {1, 2, 3, 4, 5};  // k_groups 3: not whole rows
  const std::string e = error_of([&] { f.append(ragged); });
  EXPECT_HAS(e, "point '" + key_of(1) + "', request 1: 5 selected ids are not a multiple of k_groups = 3");
  EXPECT_HAS(e, "results file '" + p + "'");
  EXPECT_EQ(bytes_of(p), before);

  ResultsFile g(path("z.h5"), meta(), false, false);
  PointRecord zero = point(1);
  zero.requests[0].k_groups = 0;
  EXPECT_HAS(error_of([&] { g.append(zero); }), "not a multiple of k_groups = 0");
  EXPECT_FALSE(fs::exists(path("z.h5")));

  ResultsFile h(path("a.h5"), meta(), false, false);
  PointRecord swapped = point(4);
  std::swap(swapped.axes[0], swapped.axes[1]);
  EXPECT_HAS(error_of([&] { h.append(swapped); }), "does not have the sweep's axes in order");
  PointRecord short_axes = point(4);
  short_axes.axes.pop_back();
  EXPECT_HAS(error_of([&] { h.append(short_axes); }), "does not have the sweep's axes in order");
  EXPECT_FALSE(h.has(key_of(4)));
  EXPECT_EQ(h.size(), 0u);
  h.append(point(4));
  PointRecord same_index = point(5);
  same_index.index = 4;
  EXPECT_HAS(error_of([&] { h.append(same_index); }), "point index 4 is already in the file (point '" + key_of(5) + "')");
  EXPECT_EQ(h.size(), 1u);
  EXPECT_EQ(ip::h5::File(path("a.h5"), "r").read_table("points").column("index").ints, (std::vector<std::int64_t>{4}));
}

// Each run that resumes a file adds one line to resumed_by at its first write (none for a run that writes
// nothing), below the lines of earlier resumes; the root attributes still name the run that created it.
TEST_F(ResultsTest, EachResumingRunAddsOneLineToResumedBy) {
  const std::string p = path("r.h5");
  auto run = [&](const std::string& argv, std::vector<std::size_t> points, bool resume) {
    ip::exp::SweepMeta m = meta();
    m.argv = argv;
    m.host = "host-" + argv;
    m.shard = "0/1";
    ResultsFile f(p, m, resume, false);
    EXPECT_EQ(f.resumed(), resume);
    for (auto i : points) f.append(point(i));
  };
  run("creator", {0}, false);
  EXPECT_FALSE(ip::h5::File(p, "r").has_attr("/", "resumed_by"));
  run("first", {1, 3}, true);
  run("idle", {}, true);
  run("second", {4}, true);
  ip::h5::File f(p, "r");
  const std::string by = f.attr_string("/", "resumed_by");
  std::vector<std::string> lines;
  std::istringstream in(by);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  ASSERT_EQ(lines.size(), 2u) << by;
  EXPECT_HAS(lines[0], " on host host-first (shard 0/1): 0.1.0; argv: first");
  EXPECT_EQ(lines[0].substr(lines[0].size() - 5), "first");
  EXPECT_HAS(lines[1], " on host host-second (shard 0/1): 0.1.0; argv: second");
  EXPECT_EQ(ip::parse_utc(lines[0].substr(0, lines[0].find(' '))) >= 0, true) << lines[0];
  EXPECT_EQ(f.attr_string("/", "argv"), "creator");
  EXPECT_EQ(f.attr_string("/", "host"), "host-creator");
  EXPECT_EQ(f.read_table("points").column("index").ints, (std::vector<std::int64_t>{0, 1, 3, 4}));
}

// Resumed, a file says when its sweep began: started_utc (the run that created it), else created_utc.
TEST_F(ResultsTest, SweepBeganIsStartedUtcElseCreatedUtc) {
  ip::exp::SweepMeta m = meta();
  m.started_utc = "2021-03-04T05:06:07Z";
  {
    ResultsFile f(path("s.h5"), m, false, false);
    EXPECT_FALSE(f.resumed());
    EXPECT_EQ(f.sweep_began(), -1);
    f.append(point(0));
  }
  {
    ResultsFile f(path("s.h5"), meta(), true, false);
    EXPECT_EQ(f.sweep_began(), ip::parse_utc("2021-03-04T05:06:07Z"));
  }
  const std::string q = write("c.h5", {0});
  ip::h5::File(q, "a").set_attr("/", "created_utc", std::string("2022-01-02T03:04:05Z"));
  ResultsFile f(q, meta(), true, false);
  EXPECT_EQ(f.sweep_began(), ip::parse_utc("2022-01-02T03:04:05Z"));
}

// A writer removes what a killed run or merge of the same path left (`<path>.tmp-<pid>`), and only that:
// another results file's temporaries in the folder stay.
TEST_F(ResultsTest, OpeningRemovesOnlyThisPathsStaleTemporaries) {
  const std::string p = path("r.h5");
  for (const char* name : {"r.h5.tmp-999999", "r.h5.tmp-1", "q.h5.tmp-999999", "xr.h5.tmp-5"})
    std::ofstream(path(name)) << "left by a killed run";
  { ResultsFile f(p, meta(), false, false); }
  EXPECT_FALSE(fs::exists(path("r.h5.tmp-999999")));
  EXPECT_FALSE(fs::exists(path("r.h5.tmp-1")));
  EXPECT_TRUE(fs::exists(path("q.h5.tmp-999999")));
  EXPECT_TRUE(fs::exists(path("xr.h5.tmp-5")));
}

// Paths and axes a results file cannot have are refused before any lock or file is made.
TEST_F(ResultsTest, ImpossiblePathsAndAxesAreRefused) {
  const std::string nowhere = path("no_such_folder/r.h5");
  const std::string e = error_of([&] { ResultsFile f(nowhere, meta(), false, false); });
  EXPECT_HAS(e, "folder '" + path("no_such_folder") + "' does not exist");
  for (const std::vector<std::string>& axes :
       {std::vector<std::string>{"pool.weighting", "pool.weighting"}, std::vector<std::string>{"status"},
        std::vector<std::string>{"tokens"}}) {
    ip::exp::SweepMeta m = meta();
    m.axis_keys = axes;
    const std::string d = error_of([&] { ResultsFile f(path("d.h5"), m, false, false); });
    EXPECT_HAS(d, "column '" + axes.back() + "' appears twice");
  }
  EXPECT_FALSE(fs::exists(path("d.h5.lock")));
  fs::create_symlink(write("target.h5", {0}), path("link.h5"));
  EXPECT_HAS(error_of([&] { ResultsFile f(path("link.h5"), meta(), true, false); }), "is a symbolic link");
}

// merge refuses inputs that are not shards of one sweep as this indexpool writes them: another schema
// version, other /points columns, one point index under two keys. Nothing is written.
TEST_F(ResultsTest, MergeRefusesOtherSchemasColumnsAndIndexClashes) {
  const std::string a = write("a.h5", {0, 1});
  const std::string o = path("o.h5");
  const std::string old = write("old.h5", {3});
  ip::h5::File(old, "a").set_attr("/", "schema_version", std::int64_t{2});
  EXPECT_HAS(error_of([&] { ip::exp::merge_results(o, {old}); }),
             "merge: '" + old + "' has schema_version 2, this indexpool reads schema_version 1");
  EXPECT_HAS(error_of([&] { ip::exp::merge_results(o, {a, old}); }), "has schema_version 2 but");
  ip::exp::SweepMeta other = meta();
  other.axis_keys = {"pool.weighting", "select.k"};
  {
    ResultsFile f(path("cols.h5"), other, false, false);
    PointRecord r = point(3);
    r.axes[1].first = "select.k";
    f.append(r);
  }
  const std::string cols = error_of([&] { ip::exp::merge_results(o, {a, path("cols.h5")}); });
  EXPECT_HAS(cols, "merge: the /points columns of '" + path("cols.h5") + "'");
  EXPECT_HAS(cols, "select.k");
  {
    ResultsFile f(path("clash.h5"), meta(), false, false);
    PointRecord r = point(7);
    r.index = 1;  // index 1 under point 7's key
    f.append(r);
  }
  EXPECT_HAS(error_of([&] { ip::exp::merge_results(o, {a, path("clash.h5")}); }),
             "merge: point index 1 is in both '" + a + "' and '" + path("clash.h5") + "' with different keys");
  EXPECT_FALSE(fs::exists(o));
}

// The merged file's shard attribute and summary when the inputs' shards are not one list of i/N: an input
// without one, shards of different counts N, or a shard attribute that does not parse (i >= N) leave the
// shards unknown: the attribute is "" and only the missing points are listed.
TEST_F(ResultsTest, MergeLeavesShardsUnknownWhenTheInputsDoNotNameOneN) {
  const std::string s0 = shard_file("s0.h5", "0/5", {0}), t1 = shard_file("t1.h5", "1/4", {1});
  const std::string bad = shard_file("bad.h5", "5/5", {2}), unknown = write("u.h5", {3});
  for (const auto& [name, second] : {std::pair<std::string, std::string>{"mixed.h5", t1}, {"bad_m.h5", bad},
                                     {"unknown_m.h5", unknown}}) {
    const auto sum = ip::exp::merge_results(path(name), {s0, second});
    EXPECT_EQ(sum.missing.size(), 8u) << name;
    EXPECT_TRUE(sum.missing_shards.empty()) << name;
    EXPECT_TRUE(sum.incomplete_shards.empty()) << name;
    EXPECT_EQ(ip::h5::File(path(name), "r").attr_string("/", "shard"), "") << name;
  }
}

// An input a running indexpool is writing (it holds the input's lock): the summary names it, and its shard's
// missing points are "still running", not "stopped before its last point".
TEST_F(ResultsTest, MergeSaysWhichInputsAreStillBeingWritten) {
  auto m0 = meta(), m1 = meta();
  m0.shard = "0/2";
  m1.shard = "1/2";
  const std::string s0 = path("s0.h5"), s1 = path("s1.h5");
  {
    ResultsFile f(s0, m0, false, false);
    f.append(point(0, false, false));
  }
  ResultsFile writing(s1, m1, false, false);  // still open: holds s1.h5.lock
  writing.append(point(1, false, false));
  const auto sum = ip::exp::merge_results(path("m.h5"), {s0, s1});
  EXPECT_EQ(sum.running, (std::vector<std::string>{s1}));
  EXPECT_EQ(sum.running_shards, (std::vector<std::string>{"1/2"}));
  EXPECT_EQ(sum.incomplete_shards, (std::vector<std::string>{"0/2"}));
  EXPECT_HAS(ip::exp::describe_missing(sum), "; shard 1/2 is still running (merge again into a new file when it has finished)");
  // A lock file nobody holds (a writer that finished or died) is not a running writer.
  const int fd = ::open((s0 + ".lock").c_str(), O_RDWR | O_CREAT, 0644);
  ASSERT_GE(fd, 0);
  ::close(fd);
  const auto again = ip::exp::merge_results(path("m2.h5"), {s0});
  EXPECT_TRUE(again.running.empty());
  ::unlink((s0 + ".lock").c_str());
}

// The merged file began when its earliest input began (started_utc, else created_utc); the resumed_by of
// the first input is not the merged file's own (merged_from lists every input's resumes under it).
TEST_F(ResultsTest, MergeKeepsTheEarliestStartAndEachInputsResumes) {
  const auto started = [&](const std::string& name, const std::string& when, std::size_t i) {
    auto m = meta();
    m.started_utc = when;
    ResultsFile f(path(name), m, false, false);
    f.append(point(i, false, false));
    return path(name);
  };
  const std::string late = started("late.h5", "2023-06-02T00:00:00Z", 0);
  const std::string early = started("early.h5", "2023-06-01T12:00:00Z", 1);
  const std::string later = started("later.h5", "2023-06-03T00:00:00Z", 2);
  {
    auto m = meta();
    m.argv = "resumer";
    ResultsFile f(late, m, true, false);
    f.append(point(3, false, false));
  }
  ip::exp::merge_results(path("m.h5"), {late, early, later});
  ip::h5::File f(path("m.h5"), "r");
  EXPECT_EQ(f.attr_string("/", "started_utc"), "2023-06-01T12:00:00Z");
  EXPECT_FALSE(f.has_attr("/", "resumed_by"));
  const std::string from = f.attr_string("/", "merged_from");
  EXPECT_HAS(from, late + " (shard ");
  EXPECT_HAS(from, "\n  resumed ");
  EXPECT_HAS(from, "; argv: resumer\n" + early + " (shard ");
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

// Of many points, inspect lists the first 15 and the last 5 groups and counts the rest (a file of 16,000
// points printed 64,000 lines and took 300 MB); --all lists every one.
TEST_F(ResultsTest, InspectCountsThePointGroupsOfABigFile) {
  std::vector<std::size_t> points(25);
  for (std::size_t i = 0; i < points.size(); ++i) points[i] = i;
  const std::string p = write("big.h5", points);
  const std::string text = ip::exp::inspect_results(p);
  EXPECT_HAS(text, "points: 25 of 10");
  for (std::size_t i : {0, 14, 20, 24}) EXPECT_HAS(text, fmt::format("point_{:06d}/  key=", i));
  for (std::size_t i : {15, 19}) EXPECT_EQ(text.find(fmt::format("point_{:06d}/", i)), std::string::npos) << i;
  EXPECT_HAS(text, "  ... 5 more point_<index> groups like these ('indexpool inspect FILE --all' lists every one)\n"
                   "  point_000020/");
  EXPECT_HAS(text, "  points  table [25]");  // what follows the point groups is listed
  const std::string all = ip::exp::inspect_results(p, true);
  for (std::size_t i = 0; i < 25; ++i) EXPECT_HAS(all, fmt::format("point_{:06d}/  key=", i));
  EXPECT_EQ(all.find("more point_<index> groups"), std::string::npos);
  // At the limit, every group is listed.
  const std::string at_limit = ip::exp::inspect_results(write("twenty.h5", std::vector<std::size_t>(
                                                                               points.begin(), points.begin() + 20)));
  for (std::size_t i = 0; i < 20; ++i) EXPECT_HAS(at_limit, fmt::format("point_{:06d}/  key=", i));
}

}  // namespace
