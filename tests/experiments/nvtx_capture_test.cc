// What an Nsight capture of `indexpool run --profile` holds (issue 6), checked with no GPU and no Nsight:
// the runner runs with the test's NVTX injection library (nvtx_recorder.cc) attached through
// NVTX_INJECTION64_PATH, the same hook nsys and ncu use, and the test reads back every domain, registered
// string, push and pop the process sent. Built only when the build has NVTX (a CUDA toolkit).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/ranges.h"
#include "experiments/h5.h"

namespace {

namespace fs = std::filesystem;

struct Event {
  std::string kind;  // domain, register, push, pop, mark, attached, other
  long thread = 0;
  int domain = 0;
  char type = ' ';  // push/mark: 'R' registered string, 'A' ASCII message
  std::string text;
};

std::vector<Event> read_record(const std::string& path) {
  std::vector<Event> ev;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream s(line);
    Event e;
    s >> e.kind;
    if (e.kind == "push" || e.kind == "mark") {
      std::string type;
      s >> e.thread >> e.domain >> type;
      e.type = type.empty() ? '?' : type[0];
    } else if (e.kind == "pop") {
      s >> e.thread >> e.domain;
    } else if (e.kind == "domain" || e.kind == "register") {
      s >> e.domain;
    }
    std::getline(s >> std::ws, e.text);
    ev.push_back(e);
  }
  return ev;
}

// One range of the capture: where its push and pop are in the record, its name and its nesting.
struct Range {
  std::size_t push = 0, pop = 0;  // line numbers (record order is time order: lines are written under a lock)
  long thread = 0;
  int depth = 0;  // ranges open on its thread when it was pushed
  char type = ' ';
  std::string name;
  int parent = -1;  // index of the enclosing range on the same thread
};

// Pairs pushes with pops per thread; a pop with nothing open, or ranges left open, fail the test.
std::vector<Range> ranges_of(const std::vector<Event>& ev) {
  std::vector<Range> out;
  std::map<long, std::vector<int>> open;
  for (std::size_t i = 0; i < ev.size(); ++i) {
    const Event& e = ev[i];
    if (e.kind == "push") {
      auto& st = open[e.thread];
      out.push_back({i, 0, e.thread, static_cast<int>(st.size()), e.type, e.text, st.empty() ? -1 : st.back()});
      st.push_back(static_cast<int>(out.size()) - 1);
    } else if (e.kind == "pop") {
      auto& st = open[e.thread];
      EXPECT_FALSE(st.empty()) << "line " << i + 1 << ": a pop on thread " << e.thread << " with no range open";
      if (st.empty()) continue;
      out[st.back()].pop = i;
      st.pop_back();
    }
  }
  for (const auto& [t, st] : open)
    for (int r : st) ADD_FAILURE() << "range '" << out[r].name << "' on thread " << t << " was never popped";
  return out;
}

int run(const std::string& cmd, std::string& out) {
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return -1;
  std::array<char, 4096> buf{};
  while (std::fgets(buf.data(), buf.size(), p)) out += buf.data();
  const int status = pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

class NvtxCapture : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("ip_nvtx_capture_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Runs `bin run cfg args` with the recorder attached; returns the record's events.
  std::vector<Event> capture(const std::string& bin, const std::string& cfg, const std::string& args) {
    const std::string rec = (dir_ / "record.txt").string();
    fs::remove(rec);
    std::string out;
    const int rc = run("NVTX_INJECTION64_PATH='" IP_NVTX_RECORDER "' IP_NVTX_RECORD='" + rec + "' '" + bin + "' run '" +
                           cfg + "' " + args,
                       out);
    EXPECT_EQ(rc, 0) << out;
    EXPECT_TRUE(fs::exists(rec)) << "the recorder wrote nothing: NVTX did not load it\n" << out;
    return read_record(rec);
  }

  // The checks every --profile capture must pass; `points` are the keys of the points in the results
  // file, in order. Returns the ranges for further checks.
  std::vector<Range> check_capture(const std::vector<Event>& ev, const std::vector<std::string>& points) {
    // One domain, IndexPool, and nothing in the default domain or through calls the code does not make.
    int domains = 0;
    for (const Event& e : ev) {
      if (e.kind == "domain") {
        ++domains;
        EXPECT_EQ(e.text, ip::prof::kDomainName);
      }
      if (e.kind == "push" || e.kind == "pop" || e.kind == "mark") {
        EXPECT_EQ(e.domain, 1) << e.kind << " '" << e.text << "' outside the IndexPool domain";
      }
      EXPECT_NE(e.kind, "other") << e.text;
      EXPECT_NE(e.kind, "mark") << e.text;
    }
    EXPECT_EQ(domains, 1);
    std::set<std::string> registered;
    for (const Event& e : ev)
      if (e.kind == "register") registered.insert(e.text);

    const std::vector<Range> rs = ranges_of(ev);
    std::set<std::string> stage_names;
    for (int s = 0; s < static_cast<int>(ip::prof::Stage::count); ++s)
      stage_names.insert(ip::prof::stage_name(static_cast<ip::prof::Stage>(s)));

    // Exactly one sweep range, outermost on its thread, and every other range inside it (in time).
    std::vector<int> sweeps;
    for (std::size_t i = 0; i < rs.size(); ++i)
      if (rs[i].name == "sweep") sweeps.push_back(static_cast<int>(i));
    EXPECT_EQ(sweeps.size(), 1u);
    if (sweeps.size() != 1) return rs;
    const Range& sweep = rs[sweeps[0]];
    EXPECT_EQ(sweep.depth, 0);
    for (const Range& r : rs) {
      if (&r != &sweep) {
        EXPECT_TRUE(r.push > sweep.push && r.pop < sweep.pop) << "range '" << r.name << "' outside the sweep range";
      }
    }

    // Exactly one point range per point, named "point <index>: <key>", children of the sweep, in order.
    std::vector<int> pts;
    for (std::size_t i = 0; i < rs.size(); ++i)
      if (rs[i].name.rfind("point ", 0) == 0) pts.push_back(static_cast<int>(i));
    EXPECT_EQ(pts.size(), points.size()) << "point ranges in the capture vs points in the results file";
    for (std::size_t j = 0; j < pts.size() && j < points.size(); ++j) {
      const Range& p = rs[pts[j]];
      EXPECT_EQ(p.name, "point " + std::to_string(j) + ": " + points[j]);
      EXPECT_EQ(p.parent, sweeps[0]) << p.name;
      EXPECT_EQ(p.type, 'A') << p.name << ": a per-point name is an ASCII message";
    }

    // Every other range is a stage, with a registered name (nsys's --nvtx-capture matches registered
    // strings), and the stages a point runs happen inside exactly one point range.
    for (const Range& r : rs) {
      if (&r == &sweep || r.name.rfind("point ", 0) == 0) continue;
      EXPECT_TRUE(stage_names.count(r.name)) << "unknown range '" << r.name << "'";
      EXPECT_EQ(r.type, 'R') << r.name;
      EXPECT_TRUE(registered.count(r.name)) << r.name;
      if (r.name == "output" && r.parent == sweeps[0]) continue;  // the final flush of the results file
      int inside = 0;
      for (int j : pts) inside += r.push > rs[j].push && r.pop < rs[j].pop;
      EXPECT_EQ(inside, 1) << "stage range '" << r.name << "' (line " << r.push + 1 << ") is in " << inside
                           << " point ranges";
    }
    return rs;
  }

  // The stage ranges directly or indirectly inside point range `pt`, counted by name.
  static std::map<std::string, int> stages_in(const std::vector<Range>& rs, const Range& pt) {
    std::map<std::string, int> n;
    for (const Range& r : rs)
      if (r.push > pt.push && r.pop < pt.pop) ++n[r.name];
    return n;
  }

  fs::path dir_;
};

std::vector<std::string> point_keys(const std::string& h5) {
  ip::h5::File f(h5, "r");
  const ip::h5::Table t = f.read_table("points");
  return t.column("key").strings;
}

const char* kConfig =
    "[workload]\ntokens = 2Ki\nsteps = 3\nindex_heads = 4\nattn_heads = 2\nrequests = 2\nlength_spread = 0.5\n"
    "[pool]\nweighting = uniform, tfidf, cosine\ngroup_size = 2, 4\n[select]\ntopk_tokens = 128\n"
    "[cache]\nenabled = true\n";

#ifndef IP_INDEXPOOL_EMU_BIN  // this file is built twice: the cpu cases here, the emulator case below

TEST_F(NvtxCapture, ProfileModeHoldsOneRangePerPointWithItsStagesInside) {
  const std::string cfg = (dir_ / "sweep.ini").string(), h5 = (dir_ / "sweep.h5").string();
  std::ofstream(cfg) << kConfig;
  const auto ev = capture(IP_INDEXPOOL_BIN, cfg, "--profile --quiet --set backend=cpu --set output.path=" + h5);
  ASSERT_FALSE(ev.empty());
  EXPECT_EQ(ev.front().kind, "attached");
  const std::vector<std::string> keys = point_keys(h5);
  ASSERT_EQ(keys.size(), 6u);
  const std::vector<Range> rs = check_capture(ev, keys);
  // What each point ran: 2 requests of 3 steps, so 6 score, top-k, attention, fidelity and stats ranges,
  // and one more fidelity range before the first of them (the workload's shared fidelity references,
  // computed by the first point and checked by the others before their timed loops); the pool range once
  // per request for uniform (never relearns) and at least that for the others; one cache-model replay and
  // one results-file append. The workload is made for the first point only (the others reuse it).
  int p = 0;
  for (const Range& r : rs) {
    if (r.name.rfind("point ", 0) != 0) continue;
    SCOPED_TRACE(r.name);
    auto n = stages_in(rs, r);
    for (const char* s : {"score", "topk", "attention", "stats"}) EXPECT_EQ(n[s], 6) << s;
    EXPECT_EQ(n["fidelity"], 7);
    const Range* first_fidelity = nullptr;
    const Range* first_pool = nullptr;
    for (const Range& s : rs)
      if (s.push > r.push && s.pop < r.pop) {
        if (s.name == "fidelity" && !first_fidelity) first_fidelity = &s;
        if (s.name == "pool" && !first_pool) first_pool = &s;
      }
    ASSERT_TRUE(first_fidelity && first_pool);
    EXPECT_LT(first_fidelity->pop, first_pool->push) << "the shared references come before the timed loop";
    EXPECT_GE(n["pool"], 2);
    if (r.name.find("uniform") != std::string::npos) {
      EXPECT_EQ(n["pool"], 2);
    }
    EXPECT_EQ(n["cache_model"], 1);
    EXPECT_EQ(n["output"], 1);
    EXPECT_EQ(n["workload"], p == 0 ? 1 : 0);
    ++p;
  }
}

// A point that is skipped (here: top-k larger than a request's context) still has its range, with no
// pipeline stage inside, so the capture and the results file list the same points.
TEST_F(NvtxCapture, SkippedPointsHaveARangeAndNoStages) {
  const std::string cfg = (dir_ / "sweep.ini").string(), h5 = (dir_ / "sweep.h5").string();
  std::ofstream(cfg) << kConfig;
  const auto ev = capture(IP_INDEXPOOL_BIN, cfg,
                          "--profile --quiet --set pool.weighting=uniform --set select.topk_tokens=128,4096 "
                          "--set output.path=" +
                              h5);
  const std::vector<std::string> keys = point_keys(h5);
  ASSERT_EQ(keys.size(), 4u);
  const std::vector<Range> rs = check_capture(ev, keys);
  int skipped = 0;
  for (const Range& r : rs) {
    if (r.name.rfind("point ", 0) != 0) continue;
    SCOPED_TRACE(r.name);
    auto n = stages_in(rs, r);
    if (r.name.find("topk_tokens=4096") != std::string::npos) {
      ++skipped;
      for (const char* s : {"pool", "score", "topk", "attention", "fidelity", "stats", "cache_model"})
        EXPECT_EQ(n[s], 0) << s;
    } else {
      EXPECT_EQ(n["score"], 6);
    }
    EXPECT_EQ(n["output"], 1);
  }
  EXPECT_EQ(skipped, 2);
}

#else  // IP_INDEXPOOL_EMU_BIN: backend = cuda on the CPU emulator of the kernels (label emu)

// With backend = cuda, --profile also brackets the sweep with cudaProfilerStart/Stop, which is what
// nsys --capture-range=cudaProfilerApi captures. The emulator logs those two calls into the same file
// as the recorder (CUEMU_PROFILER_LOG), so the test sees the capture's bounds: every point range and all
// its stages lie between one start and one stop.
TEST_F(NvtxCapture, CudaProfilerCaptureOnTheEmulatorHoldsOneRangePerPoint) {
  const std::string cfg = (dir_ / "sweep.ini").string(), h5 = (dir_ / "sweep.h5").string();
  std::ofstream(cfg) << kConfig;
  ::setenv("CUEMU_PROFILER_LOG", (dir_ / "record.txt").c_str(), 1);
  const auto ev = capture(IP_INDEXPOOL_EMU_BIN, cfg, "--profile --quiet --set backend=cuda --set output.path=" + h5);
  ::unsetenv("CUEMU_PROFILER_LOG");
  const std::vector<std::string> keys = point_keys(h5);
  ASSERT_EQ(keys.size(), 6u);
  const std::vector<Range> rs = check_capture(ev, keys);
  std::vector<std::size_t> starts, stops;
  for (std::size_t i = 0; i < ev.size(); ++i) {
    if (ev[i].kind == "cudaProfilerStart") starts.push_back(i);
    if (ev[i].kind == "cudaProfilerStop") stops.push_back(i);
  }
  ASSERT_EQ(starts.size(), 1u);
  ASSERT_EQ(stops.size(), 1u);
  int points = 0;
  for (const Range& r : rs) {
    if (r.name == "sweep") continue;
    EXPECT_TRUE(r.push > starts[0] && r.pop < stops[0]) << "range '" << r.name << "' outside the capture";
    if (r.name.rfind("point ", 0) != 0) continue;
    ++points;
    auto n = stages_in(rs, r);
    for (const char* s : {"score", "topk", "attention", "fidelity", "stats"}) EXPECT_EQ(n[s], 6) << r.name << ": " << s;
    EXPECT_EQ(n["cache_model"], 1) << r.name;
  }
  EXPECT_EQ(points, 6);
}

// select.batched: a point's requests decode together, one batch_step range per step (3 here, for the 2
// requests together), one pool range for the batch's one pool launch, and no per-request score or top-k.
TEST_F(NvtxCapture, BatchedPointsHaveOneBatchStepRangePerStep) {
  const std::string cfg = (dir_ / "sweep.ini").string(), h5 = (dir_ / "sweep.h5").string();
  std::ofstream(cfg) << kConfig;
  const auto ev = capture(IP_INDEXPOOL_EMU_BIN, cfg,
                          "--profile --quiet --set backend=cuda --set select.batched=true "
                          "--set pool.weighting=uniform,positional --set output.path=" +
                              h5);
  const std::vector<std::string> keys = point_keys(h5);
  ASSERT_EQ(keys.size(), 4u);
  const std::vector<Range> rs = check_capture(ev, keys);
  for (const Range& r : rs) {
    if (r.name.rfind("point ", 0) != 0) continue;
    auto n = stages_in(rs, r);
    EXPECT_EQ(n["batch_step"], 3) << r.name;
    EXPECT_EQ(n["pool"], 1) << r.name;
    EXPECT_EQ(n["fidelity"], 6) << r.name;  // per request and step
    EXPECT_EQ(n["score"] + n["topk"] + n["attention"], 0) << r.name;
  }
}

#endif

}  // namespace
