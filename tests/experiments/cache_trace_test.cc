// The cache model's outputs end to end: the trace a run exports (output.cache_trace) replays through
// `indexpool cache-sim` to exactly the per-level counts the run stored; bad trace paths fail before any
// work and never truncate an existing file. And the cache model by hand: the single-cache OPT bound,
// the cosine relevance in the trace, the semantic-cos / relevance check.
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "core/error.h"
#include "experiments/cache_model.h"
#include "core/pool.h"
#include "experiments/h5.h"

namespace {

namespace fs = std::filesystem;

struct Result {
  int code = -1;
  std::string out;  // stdout and stderr together
};

Result run(const std::string& args) {
  Result r;
  const std::string cmd = std::string(IP_INDEXPOOL_BIN) + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf{};
  while (fgets(buf.data(), buf.size(), p)) r.out += buf.data();
  const int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// (accesses hits misses evictions) per level from `cache-sim --json`, in level order.
std::vector<std::string> json_levels(const std::string& json) {
  static const std::regex level(
      R"re(\{"policy": "[^"]*", "capacity": \d+, "capacity_unit": "\w+", "accesses": (\d+), "hits": (\d+), "misses": (\d+), "evictions": (\d+))re");
  const auto at = json.find("\"levels\"");
  const std::string part = json.substr(at, json.find("\n  ]", at) - at);
  std::vector<std::string> out;
  for (auto it = std::sregex_iterator(part.begin(), part.end(), level); it != std::sregex_iterator(); ++it)
    out.push_back(fmt::format("{} {} {} {}", (*it)[1].str(), (*it)[2].str(), (*it)[3].str(), (*it)[4].str()));
  return out;
}

// The same from a point's cache_levels table in the results file.
std::vector<std::string> stored_levels(const std::string& h5, int point) {
  ip::h5::File f(h5, "r");
  const std::string name = fmt::format("point_{:06d}/cache_levels", point);
  const auto t = f.read_table(name);
  // Every number says its unit (the table's own attribute; the root units cover /points only).
  EXPECT_NE(f.attr_string(name, "units").find("bytes_from_below: bytes"), std::string::npos);
  const std::string mrc = fmt::format("point_{:06d}/cache_mrc", point);
  if (f.exists(mrc)) {
    EXPECT_NE(f.attr_string(mrc, "units").find("capacity_entries: cache capacity in objects"), std::string::npos);
  }
  std::vector<std::string> out;
  for (std::size_t i = 0; i < t.rows(); ++i)
    out.push_back(fmt::format("{} {} {} {}", t.column("accesses").floats[i], t.column("hits").floats[i],
                              t.column("misses").floats[i], t.column("evictions").floats[i]));
  return out;
}

class CacheTraceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("ip_cache_trace_test_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string file(const std::string& name, const std::string& text) {
    const auto p = dir_ / name;
    std::ofstream(p) << text;
    return p.string();
  }
  // A small sweep of two points (G = 2 and 4), two requests of 6 steps, caches small enough to evict.
  std::string config(const std::string& cache, const std::string& output) {
    return file("c.ini", "[workload]\ntokens = 1Ki\nsteps = 6\nrequests = 2\nindex_heads = 2\nattn_heads = 1\n"
                         "[pool]\ngroup_size = 2, 4\n[select]\ntopk_tokens = 64\n[cache]\n" + cache +
                         "[output]\npath = " + (dir_ / "r.h5").string() + "\n" + output);
  }
  fs::path dir_;
};

void expect_round_trip(const std::string& h5, const std::string& trace_pattern, const std::string& cache_args) {
  for (int point = 0; point < 2; ++point) {
    const std::string trace = fmt::format(fmt::runtime(trace_pattern), point);
    ASSERT_TRUE(fs::exists(trace)) << trace;
    const Result r = run("cache-sim --trace " + trace + " " + cache_args + " --json");
    ASSERT_EQ(r.code, 0) << r.out;
    const auto replayed = json_levels(r.out), stored = stored_levels(h5, point);
    EXPECT_EQ(replayed, stored) << "point " << point;
    ASSERT_FALSE(stored.empty());
    // 2 requests x 6 steps x 64 / G groups: the replay saw every access, and some level hit.
    EXPECT_EQ(stored[0].substr(0, stored[0].find(' ')), std::to_string(2 * 6 * 64 / (point == 0 ? 2 : 4)));
    std::uint64_t hits = 0;
    for (const auto& l : stored) hits += std::stoull(l.substr(l.find(' ') + 1));
    EXPECT_GT(hits, 0u) << "the test needs some hits to mean anything";
  }
}

TEST_F(CacheTraceTest, ExportedCsvReplaysToTheStoredCounts) {
  const std::string h5 = (dir_ / "r.h5").string();
  const auto cfg = config("levels = lru:4 clock:8 semantic(decay=0.9):16\n",
                          "cache_trace = " + (dir_ / "traces" / "t_{index}.csv").string() + "\n");
  const auto r = run("run " + cfg + " --quiet");
  ASSERT_EQ(r.code, 0) << r.out;
  expect_round_trip(h5, (dir_ / "traces" / "t_00000{}.csv").string(),
                    "--level lru:4 --level clock:8 --level 'semantic(decay=0.9):16'");
  // The csv names request and step: the first access is request 0, step 0.
  const std::string text = read_all((dir_ / "traces" / "t_000000.csv").string());
  EXPECT_EQ(text.rfind("id,size,score,request,step\n", 0), 0u) << text.substr(0, 80);
}

TEST_F(CacheTraceTest, CosineRelevanceTxtExclusiveReplays) {
  const std::string h5 = (dir_ / "r.h5").string();
  const auto cfg = config("levels = lru:4 semantic-cos:24\nmode = exclusive\nrelevance = cosine\nobject = index\n",
                          "cache_trace = " + (dir_ / "t{index}.trace").string() + "\n");
  const auto r = run("run " + cfg + " --quiet");
  ASSERT_EQ(r.code, 0) << r.out;
  expect_round_trip(h5, (dir_ / "t00000{}.trace").string(), "--level lru:4 --level semantic-cos:24 --mode exclusive");
}

TEST_F(CacheTraceTest, BadTracePathsFailBeforeWork) {
  const std::string h5 = (dir_ / "r.h5").string();
  // Two points, one path.
  auto r = run("run " + config("", "cache_trace = " + (dir_ / "one.csv").string() + "\n"));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("output.cache_trace"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("{index}"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("[1/"), std::string::npos) << "a point ran: " << r.out;
  EXPECT_FALSE(fs::exists(h5));
  // A folder that cannot be created.
  r = run("run " + config("", "cache_trace = /proc/indexpool/t_{index}.csv\n"));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("output.cache_trace '/proc/indexpool/t_000000.csv'"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(h5));
  // An existing trace is neither truncated nor replaced without --overwrite.
  const std::string keep = file("t_000001.csv", "precious\n");
  const std::string pattern = "cache_trace = " + (dir_ / "t_{index}.csv").string() + "\n";
  r = run("run " + config("", pattern));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find(keep + "' already exists; pass --overwrite"), std::string::npos) << r.out;
  EXPECT_EQ(read_all(keep), "precious\n");
  EXPECT_FALSE(fs::exists(h5));
  EXPECT_FALSE(fs::exists((dir_ / "t_000000.csv").string()));  // nothing written for the other point either
  // A bad format, and a trace without the cache model.
  r = run("run " + config("", pattern + "cache_trace_format = xml\n"));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("output.cache_trace_format"), std::string::npos) << r.out;
  r = run("run " + config("enabled = false\n", pattern));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("cache.enabled = false"), std::string::npos) << r.out;
  EXPECT_EQ(read_all(keep), "precious\n");
  // With --overwrite it is replaced (by a complete trace, no temporary left behind).
  r = run("run " + config("", pattern) + " --overwrite --quiet");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(read_all(keep).rfind("id,size,score,request,step\n", 0), 0u);
  for (const auto& e : fs::directory_iterator(dir_))
    EXPECT_EQ(e.path().string().find(".tmp"), std::string::npos) << e.path();
}

// --resume replaces a trace only when the sweep it continues could have written it: of a point the results
// file does not hold, written since that file's sweep began. A file older than the sweep, or any file when
// there is no results file to resume, is left as it is, and the run stops before any point; the traces of
// points the file holds are not looked at (those points do not run).
TEST_F(CacheTraceTest, ResumeReplacesOnlyTracesOfTheSweepItContinues) {
  const std::string h5 = (dir_ / "r.h5").string();
  const std::string pattern = "cache_trace = " + (dir_ / "t_{index}.csv").string() + "\n";
  const std::string other = file("t_000001.csv", "precious\n");
  auto back_an_hour = [](const std::string& path) {
    fs::last_write_time(path, fs::last_write_time(path) - std::chrono::hours(1));
  };
  // No results file: nothing to continue.
  auto r = run("run " + config("", pattern) + " --resume --quiet");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find(other + "' already exists and there is no results file '" + h5 + "' to resume"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(read_all(other), "precious\n");
  EXPECT_FALSE(fs::exists(h5));
  // Both points skipped (memory limit), so both run again on --resume: a file from before the sweep began
  // is not one of its traces.
  fs::remove(other);
  r = run("run " + config("", pattern) + " --quiet --set sweep.memory_limit=1Ki");
  ASSERT_EQ(r.code, 0) << r.out;
  {
    ip::h5::File f(h5, "r");
    EXPECT_TRUE(f.has_attr("/", "started_utc"));
  }
  file("t_000001.csv", "precious\n");
  back_an_hour(other);
  r = run("run " + config("", pattern) + " --resume --quiet");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find(other + "' already exists and was last written before the sweep in '" + h5 + "' began"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(read_all(other), "precious\n");
  // Written since (as a stopped run of the sweep leaves it): replaced by the point's trace.
  file("t_000001.csv", "partial\n");
  r = run("run " + config("", pattern) + " --resume --quiet");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(read_all(other).rfind("id,size,score,request,step\n", 0), 0u);
  // Every point held: resumed again, their traces are not looked at, however old.
  back_an_hour(other);
  r = run("run " + config("", pattern) + " --resume");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("2 of 2 points already"), std::string::npos) << r.out;
}

TEST_F(CacheTraceTest, SemanticCosNeedsCosineRelevance) {
  const auto r = run("list " + config("levels = lru:4 semantic-cos:16\n", ""));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("cache.relevance = cosine"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("semantic-cos:16"), std::string::npos) << r.out;
}

// The cache model by hand. One request, one group per step: groups a b c a b c (0 1 2 0 1 2).
struct Selections {
  std::vector<std::int32_t> selected;
  std::vector<float> mass, similarity;
  ip::exp::RequestSelections view(double bytes) {
    return ip::exp::RequestSelections{&selected, &mass, &similarity, 1, static_cast<ip::Index64>(selected.size()),
                                      bytes};
  }
};

Selections abcabc() { return Selections{{0, 1, 2, 0, 1, 2}, {1, 1, 1, 1, 1, 1}, {.1f, .2f, .3f, .4f, .5f, .6f}}; }

ip::exp::CacheParams params(std::vector<std::string> levels) {
  ip::exp::CacheParams p;
  p.levels = std::move(levels);
  p.mrc = false;
  return p;
}

// lru:1 over lru:1 (nine): the cycle of three misses everywhere, and so does opt:1 over opt:1 (each
// level of one entry must take every object it misses). One opt cache of 1 + 1 = 2 entries:
// a b miss; c evicts b (next used at 4, after a at 3); a hits; b evicts a (never used again); c hits:
// 2 hits of 6. The bound (1/3) lies above both hierarchies (0).
TEST(CacheModel, SingleOptBoundByHand) {
  Selections s = abcabc();
  const auto r = ip::exp::simulate_cache(params({"lru:1", "lru:1"}), {s.view(512)});
  EXPECT_EQ(r.accesses, 6);
  EXPECT_EQ(r.hit_rate, 0.0);
  EXPECT_EQ(r.opt_hit_rate, 0.0);
  EXPECT_EQ(r.opt_single_entries, 2.0);
  EXPECT_DOUBLE_EQ(r.opt_single_hit_rate, 2.0 / 6.0);
  // Byte capacities: 512 B and 1 KiB of 512-byte objects hold 1 + 2 = 3: every second round hits.
  const auto b = ip::exp::simulate_cache(params({"lru:512B", "lru:1KiB"}), {s.view(512)});
  EXPECT_EQ(b.opt_single_entries, 3.0);
  EXPECT_DOUBLE_EQ(b.opt_single_hit_rate, 0.5);
  // The hierarchy itself: L1 (1 entry) misses all 6, and L2 (LRU of 2 entries) misses the cycle of 3.
  EXPECT_EQ(b.hit_rate, 0.0);
  // Capacity larger than the distinct objects: capped at 3.
  EXPECT_EQ(ip::exp::simulate_cache(params({"lru:100"}), {s.view(512)}).opt_single_entries, 3.0);
  // Objects of two sizes (two requests of different object bytes): no bound, NaN.
  Selections t = abcabc();
  const auto mixed = ip::exp::simulate_cache(params({"lru:4KiB"}), {s.view(512), t.view(1024)});
  EXPECT_TRUE(std::isnan(mixed.opt_single_hit_rate));
  EXPECT_TRUE(std::isnan(mixed.opt_single_entries));
  // Off: NaN.
  auto off = params({"lru:1"});
  off.opt_bound = false;
  EXPECT_TRUE(std::isnan(ip::exp::simulate_cache(off, {s.view(512)}).opt_single_hit_rate));
}

TEST(CacheModel, TraceCarriesTheChosenRelevance) {
  Selections s = abcabc(), t = abcabc();
  t.selected = {5, 6, 7, 5, 6, 7};
  auto p = params({"lru:1"});
  const auto mass = ip::exp::cache_trace(p, {s.view(512), t.view(512)});
  ASSERT_EQ(mass.accesses.size(), 12u);
  // Step by step, requests interleaved: (request 0, step 0), (request 1, step 0), (request 0, step 1) ...
  EXPECT_EQ(mass.accesses[1].id, (std::uint64_t{1} << 40) | 5);
  EXPECT_EQ(mass.accesses[1].request, 1u);
  EXPECT_EQ(mass.accesses[2].id, 1u);
  EXPECT_EQ(mass.accesses[2].step, 1u);
  EXPECT_EQ(mass.accesses[2].score, 1.0f);
  p.relevance = "cosine";
  const auto cosine = ip::exp::cache_trace(p, {s.view(512), t.view(512)});
  EXPECT_EQ(cosine.accesses[2].score, .2f);
  EXPECT_EQ(cosine.accesses[11].score, .6f);
  // The check of the cache keys together.
  auto sc = params({"lru:1", "semantic-cos:2"});
  EXPECT_THROW(ip::exp::validate_cache_point(sc), ip::Error);
  sc.relevance = "cosine";
  EXPECT_NO_THROW(ip::exp::validate_cache_point(sc));
  sc.relevance = "attention";
  EXPECT_THROW(ip::exp::validate_cache(sc), ip::Error);
}

// The bound at its edges. Groups a a a a b: 2 distinct objects (one last use each), not the 3 accesses
// that come back; a capacity of 100 is capped at those 2, and one of 1 entry still gets its OPT replay
// (a stays: 3 hits of 5). Objects of 0 bytes take no room in a byte capacity: a b c a b c in 1 KiB holds
// all 3, so the second round hits. No accesses at all: rates 0, no bound, no curve.
TEST(CacheModel, SingleOptBoundEdges) {
  Selections s{{0, 0, 0, 0, 1}, {1, 1, 1, 1, 1}, {}};
  const auto big = ip::exp::simulate_cache(params({"lru:100"}), {s.view(512)});
  EXPECT_EQ(big.opt_single_entries, 2.0);
  EXPECT_DOUBLE_EQ(big.opt_single_hit_rate, 3.0 / 5.0);
  const auto one = ip::exp::simulate_cache(params({"lru:1"}), {s.view(512)});
  EXPECT_EQ(one.opt_single_entries, 1.0);
  EXPECT_DOUBLE_EQ(one.opt_single_hit_rate, 3.0 / 5.0);
  Selections z = abcabc();
  const auto zero = ip::exp::simulate_cache(params({"lru:1KiB"}), {z.view(0)});
  EXPECT_EQ(zero.opt_single_entries, 3.0);
  EXPECT_DOUBLE_EQ(zero.opt_single_hit_rate, 0.5);
  auto with_mrc = params({"lru:1"});
  with_mrc.mrc = true;
  const auto none = ip::exp::simulate_cache(with_mrc, std::vector<ip::exp::RequestSelections>{});
  EXPECT_EQ(none.accesses, 0.0);
  EXPECT_EQ(none.hit_rate, 0.0);
  EXPECT_EQ(none.opt_hit_rate, 0.0);
  EXPECT_TRUE(std::isnan(none.opt_single_entries));
  EXPECT_TRUE(std::isnan(none.opt_single_hit_rate));
  EXPECT_TRUE(none.mrc_capacity.empty());
  ASSERT_EQ(none.levels.size(), 1u);
  EXPECT_EQ(none.levels[0].accesses, 0.0);
}

// Each level's numbers by hand: lru:512B over lru:1KiB (one and two 512-byte objects, nine), groups
// a b c a b c. L1 misses all 6 and evicts 5 times; L2 (LRU of 2) sees those 6 and misses the cycle of
// 3 too, evicting 4 times (c, a, b, c push out a, b, c, a). Each level reads 6 x 512 bytes from below.
// Under OPT, L1 (one entry) still misses all 6, and L2 as opt of 2 keeps a over b at c, then c over a at
// b: a (3) and c (5) hit, 2 of 6.
TEST(CacheModel, LevelResultsByHand) {
  Selections s = abcabc();
  const auto r = ip::exp::simulate_cache(params({"lru:512B", "lru:1KiB"}), {s.view(512)});
  ASSERT_EQ(r.levels.size(), 2u);
  const auto& l1 = r.levels[0];
  const auto& l2 = r.levels[1];
  EXPECT_EQ(l1.policy, "lru");
  EXPECT_EQ(l1.capacity, "512 B");
  EXPECT_EQ(l2.capacity, "1KiB");
  EXPECT_EQ(std::vector<double>({l1.accesses, l1.hits, l1.misses, l1.evictions, l1.bytes_from_below}),
            std::vector<double>({6, 0, 6, 5, 6 * 512}));
  EXPECT_EQ(std::vector<double>({l2.accesses, l2.hits, l2.misses, l2.evictions, l2.bytes_from_below}),
            std::vector<double>({6, 0, 6, 4, 6 * 512}));
  EXPECT_EQ(l1.hit_rate, 0.0);
  EXPECT_EQ(l1.opt_hit_rate, 0.0);
  EXPECT_DOUBLE_EQ(l2.opt_hit_rate, 2.0 / 6.0);
  EXPECT_DOUBLE_EQ(r.opt_hit_rate, 2.0 / 6.0);
  // The bound off: every OPT rate NaN, the levels' too.
  auto off = params({"lru:512B", "lru:1KiB"});
  off.opt_bound = false;
  const auto o = ip::exp::simulate_cache(off, {s.view(512)});
  EXPECT_TRUE(std::isnan(o.opt_hit_rate));
  EXPECT_TRUE(std::isnan(o.levels[1].opt_hit_rate));
}

// The LRU miss-ratio curve: every capacity up to the distinct objects (a b c a b c: misses 6, 6, 3 of 6
// at 1, 2, 3 entries); past 4096 entries, steps of c / 64: 5000 distinct groups give 1 .. 4096, then 4160,
// 4225, 4291, 4358, 4426, 4495, 4565, 4636, 4708, 4781, 4855, 4930 (the next, 5007, is past 5000).
TEST(CacheModel, MissRatioCurveCapacities) {
  auto p = params({"lru:1"});
  p.mrc = true;
  Selections s = abcabc();
  const auto r = ip::exp::simulate_cache(p, {s.view(512)});
  EXPECT_EQ(r.mrc_capacity, (std::vector<double>{1, 2, 3}));
  EXPECT_EQ(r.mrc_miss_ratio, (std::vector<double>{1, 1, 0.5}));
  Selections wide;
  for (int g = 0; g < 5000; ++g) wide.selected.push_back(g), wide.mass.push_back(1);
  p.opt_bound = false;
  const auto w = ip::exp::simulate_cache(p, {wide.view(64)});
  ASSERT_EQ(w.mrc_capacity.size(), 4096u + 12u);
  EXPECT_EQ(w.mrc_capacity[4095], 4096.0);
  EXPECT_EQ(w.mrc_capacity[4096], 4160.0);
  EXPECT_EQ(w.mrc_capacity[4097], 4225.0);
  EXPECT_EQ(w.mrc_capacity.back(), 4930.0);
  for (const double m : w.mrc_miss_ratio) ASSERT_EQ(m, 1.0);  // no group comes back
}

// The trace of requests of different lengths and several groups a step: a request takes part in the steps
// it has; every access of a step carries that step; sizes past 2^32 - 1 bytes are held at 2^32 - 1.
TEST(CacheModel, TraceOfUnevenRequests) {
  Selections a{{0, 1, 2, 3, 4, 5}, {1, 1, 1, 1, 1, 1}, {}}, b{{7}, {1}, {}};
  ip::exp::RequestSelections two = a.view(1e10);
  two.k_groups = 2, two.steps = 3;  // 3 steps of 2 groups
  const auto t = ip::exp::cache_trace(params({"lru:1"}), {two, b.view(64)});
  ASSERT_EQ(t.accesses.size(), 7u);
  std::vector<std::string> seen;
  for (const auto& x : t.accesses)
    seen.push_back(fmt::format("{}:{} r{} s{} {}", x.id >> 40, x.id & 0xFFFFFFFFFF, x.request, x.step, x.size));
  EXPECT_EQ(seen, (std::vector<std::string>{"0:0 r0 s0 4294967295", "0:1 r0 s0 4294967295", "1:7 r1 s0 64",
                                            "0:2 r0 s1 4294967295", "0:3 r0 s1 4294967295", "0:4 r0 s2 4294967295",
                                            "0:5 r0 s2 4294967295"}));
  // Cosine relevance needs one similarity per selection.
  auto p = params({"lru:1"});
  p.relevance = "cosine";
  b.similarity = {.5f, .5f};
  EXPECT_THROW(ip::exp::cache_trace(p, {b.view(64)}), ip::Error);
}

// The checks of the cache keys, one item at a time; none with the model off.
TEST(CacheModel, ValidateCacheKeys) {
  auto message = [](const ip::exp::CacheParams& p) {
    try {
      ip::exp::validate_cache_point(p);
    } catch (const ip::Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  auto p = params({"lru:4"});
  EXPECT_EQ(message(p), "no error");
  p.kv_bytes = 8;
  EXPECT_EQ(message(p), "no error");
  p.kv_bytes = 1;
  EXPECT_EQ(message(p), "no error");
  for (const int bad : {0, 9}) {
    p.kv_bytes = bad;
    EXPECT_NE(message(p).find(fmt::format("cache.kv_bytes: {}", bad)), std::string::npos) << message(p);
  }
  p.kv_bytes = 2;
  p.object = "tokens";
  EXPECT_NE(message(p).find("cache.object: 'tokens'"), std::string::npos) << message(p);
  p.object = "index";
  EXPECT_EQ(message(p), "no error");
  p.levels = {};
  EXPECT_NE(message(p).find("cache.levels: no levels"), std::string::npos) << message(p);
  p.levels = {"lru:4", "lru:0"};
  EXPECT_NE(message(p).find("cache.levels: 'lru:0'"), std::string::npos) << message(p);
  p.levels = {"lru:4", "semantic-cos():16"};  // the policy with an (empty) parameter list
  EXPECT_NE(message(p).find("cache.relevance = cosine"), std::string::npos) << message(p);
  p.mode = "both";
  p.relevance = "attention";
  p.enabled = false;
  EXPECT_EQ(message(p), "no error");
  EXPECT_NO_THROW(ip::exp::validate_cache(p));
}

// The size of one accessed object: the group's KV (G tokens of keys and values, kv_bytes each), or its
// stored index rows (maxmin stores 2 a group; fp8 adds one fp32 scale a row: 128 + 4 bytes).
TEST(CacheModel, ObjectBytes) {
  ip::PooledIndex index;
  index.group_size = 4;
  index.method = ip::Weighting::maxmin;
  index.rows.precision = ip::Precision::fp8;
  index.rows.cols = 128;
  auto p = params({"lru:4"});
  EXPECT_EQ(ip::exp::cache_object_bytes(p, index, 128, 64), 4.0 * (128 + 64) * 2);
  p.kv_bytes = 1;
  EXPECT_EQ(ip::exp::cache_object_bytes(p, index, 128, 64), 4.0 * (128 + 64));
  p.object = "index";
  EXPECT_EQ(ip::exp::cache_object_bytes(p, index, 128, 64), 2.0 * (128 + 4));
  index.method = ip::Weighting::uniform;
  index.rows.precision = ip::Precision::fp32;
  EXPECT_EQ(ip::exp::cache_object_bytes(p, index, 128, 64), 128.0 * 4);
}

}  // namespace
