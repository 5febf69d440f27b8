// indexpool cache-sim, called as cmd_cache_sim(args) (main.cc dispatches "cache-sim" to it).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <regex>
#include <sstream>

#include <fmt/format.h>

#include "experiments/cache_sim_cmd.h"

namespace ip::exp {
namespace {

struct CmdResult {
  int rc;
  std::string out, err;
};

CmdResult run(const std::vector<std::string>& args) {
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  const int rc = cmd_cache_sim(args);
  CmdResult r{rc, ::testing::internal::GetCapturedStdout(), ::testing::internal::GetCapturedStderr()};
  return r;
}

std::string temp_file(const std::string& name, const std::string& text) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::string p =
      (std::filesystem::temp_directory_path() / fmt::format("ip_cli_{}_{}_{}", getpid(), info->name(), name)).string();
  std::ofstream(p, std::ios::binary) << text;
  return p;
}

// Exactly one JSON object: starts with '{', and the brace depth returns to zero only at the very end.
bool one_json_object(const std::string& s) {
  std::string t = s;
  while (!t.empty() && (t.back() == '\n' || t.back() == ' ')) t.pop_back();
  if (t.empty() || t.front() != '{') return false;
  int depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < t.size(); ++i) {
    const char c = t[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '{' || c == '[') ++depth;
    else if (c == '}' || c == ']') {
      if (--depth == 0 && i + 1 != t.size()) return false;
    }
  }
  return depth == 0;
}

// The levels, in order, as (policy, capacity, accesses, hits, misses).
std::vector<std::string> levels_of(const std::string& json) {
  static const std::regex level(
      R"re(\{"policy": "([^"]*)", "capacity": (\d+), "capacity_unit": "\w+", "accesses": (\d+), "hits": (\d+), "misses": (\d+), "evictions": (\d+))re");
  std::vector<std::string> out;
  const auto levels_at = json.find("\"levels\"");
  const auto stop = json.find("\n  ]", levels_at);  // the end of the top-level levels array
  const std::string part = json.substr(levels_at, stop - levels_at);
  for (auto it = std::sregex_iterator(part.begin(), part.end(), level); it != std::sregex_iterator(); ++it)
    out.push_back(fmt::format("{} {} {} {} {} ev {}", (*it)[1].str(), (*it)[2].str(), (*it)[3].str(), (*it)[4].str(),
                              (*it)[5].str(), (*it)[6].str()));
  return out;
}

TEST(CacheSimCli, JsonLevelsInOrderByHand) {
  // a b a c b as ids 1 2 1 3 2; L1 lru:1, L2 lru:2 (nine):
  //   1: both miss, fill both. 2: both miss; L1 evicts 1; L2 [2 1]. 1: L1 miss, L2 hit; L1 evicts 2.
  //   3: both miss; L2 evicts 2 -> [3 1]; L1 evicts 1. 2: both miss; L2 evicts 1 -> [2 3]; L1 evicts 3.
  //   L1: 5 accesses, 0 hits, 5 misses, 4 evictions. L2: 5 accesses, 1 hit, 4 misses, 2 evictions.
  const std::string t = temp_file("abacb.txt", "1\n2\n1\n3\n2\n");
  const CmdResult r = run({"--trace", t, "--level", "lru:1", "--level", "lru:2", "--json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_TRUE(r.err.empty()) << r.err;
  EXPECT_TRUE(one_json_object(r.out)) << r.out;
  EXPECT_EQ(levels_of(r.out), (std::vector<std::string>{"lru 1 5 0 5 ev 4", "lru 2 5 1 4 ev 2"})) << r.out;
  EXPECT_NE(r.out.find("\"mode\": \"nine\""), std::string::npos);
  EXPECT_NE(r.out.find("\"accesses\": 5,\n"), std::string::npos);
  std::filesystem::remove(t);
}

TEST(CacheSimCli, GoldenCountThroughTheCommand) {
  const std::string trace = std::string(IP_SHARED_DATA_DIR) + "/cloudPhysicsIO.oracleGeneral.bin";
  ASSERT_TRUE(std::filesystem::exists(trace)) << "missing golden trace " << trace;
  const CmdResult r = run({"--trace", trace, "--level", "lru:128MiB", "--level", "clock:1GiB", "--json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_TRUE(one_json_object(r.out));
  const auto lv = levels_of(r.out);
  ASSERT_EQ(lv.size(), 2u) << r.out;
  // 113872 accesses, 93374 LRU misses at 128 MiB (../shared/data/README.md).
  EXPECT_EQ(lv[0].substr(0, lv[0].find(" ev")), "lru 134217728 113872 20498 93374");
  EXPECT_EQ(lv[1].rfind("clock 1073741824 93374 ", 0), 0u) << lv[1];  // L2 sees L1's misses
}

TEST(CacheSimCli, MrcAndShards) {
  // a b c a b d a (1 2 3 1 2 4 1): misses 7 at 1 and 2 entries, 4 from 3 entries on.
  const std::string t = temp_file("mrc.txt", "1\n2\n3\n1\n2\n4\n1\n");
  const CmdResult r = run({"--trace", t, "--level", "lru:2", "--json", "--mrc"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_TRUE(one_json_object(r.out)) << r.out;
  EXPECT_NE(r.out.find("\"columns\": [\"capacity_entries\", \"misses\"], \"points\": [[1, 7], [3, 4], [4, 4]]"),
            std::string::npos) << r.out;
  const CmdResult s = run({"--trace", t, "--level", "lru:2", "--shards", "1"});
  ASSERT_EQ(s.rc, 0) << s.err;
  EXPECT_NE(s.out.find("3 4 0.571429"), std::string::npos) << s.out;
  EXPECT_NE(s.out.find("max |error| 0.000000"), std::string::npos) << s.out;
  std::filesystem::remove(t);
}

// A semantic level ranks by scores: on a trace without them (oracleGeneral; a txt trace that gives none) the
// command says so on stderr, with --json and -q too; without a semantic level, or with scores, nothing.
TEST(CacheSimCli, SemanticLevelsOnATraceWithoutScoresAreNoted) {
  const std::string oracle = std::string(IP_SHARED_DATA_DIR) + "/cloudPhysicsIO.oracleGeneral.bin";
  const CmdResult o = run({"--trace", oracle, "--level", "semantic:1GiB", "--json", "-q"});
  ASSERT_EQ(o.rc, 0) << o.err;
  EXPECT_NE(o.err.find("an oracleGeneral trace has no scores, so the semantic level(s) (semantic)"), std::string::npos)
      << o.err;
  const std::string plain = temp_file("plain.txt", "1\n2\n1\n"), scored = temp_file("scored.txt", "1 4 0.5\n2 4 2\n1 4 1\n");
  const CmdResult p = run({"--trace", plain, "--level", "lru:2", "--level", "semantic-cos:4", "-q"});
  ASSERT_EQ(p.rc, 0) << p.err;
  EXPECT_NE(p.err.find("every access of this trace has score 1"), std::string::npos) << p.err;
  for (const auto& args : {std::vector<std::string>{"--trace", plain, "--level", "lru:2", "-q"},
                           std::vector<std::string>{"--trace", scored, "--level", "semantic:8", "-q"}}) {
    const CmdResult q = run(args);
    ASSERT_EQ(q.rc, 0) << q.err;
    EXPECT_EQ(q.err.find("note:"), std::string::npos) << q.err;
  }
  std::filesystem::remove(plain);
  std::filesystem::remove(scored);
}

// --stream: the same level counts as reading the trace whole; SHARDS alone reports an estimated error;
// a policy that needs the future is refused before reading.
TEST(CacheSimCli, StreamedTraceGivesTheSameCounts) {
  const std::string trace = std::string(IP_SHARED_DATA_DIR) + "/cloudPhysicsIO.oracleGeneral.bin";
  const std::vector<std::string> levels = {"--level", "lru:16KiB", "--level", "clock:1MiB", "--level", "sieve:100"};
  for (const char* mode : {"nine", "inclusive", "exclusive"}) {
    std::vector<std::string> args = {"--trace", trace, "--json", "--mode", mode, "-q"};
    args.insert(args.end(), levels.begin(), levels.end());
    const CmdResult whole = run(args);
    args.push_back("--stream");
    const CmdResult streamed = run(args);
    ASSERT_EQ(whole.rc, 0) << whole.err;
    ASSERT_EQ(streamed.rc, 0) << streamed.err;
    EXPECT_TRUE(one_json_object(streamed.out)) << streamed.out;
    EXPECT_EQ(levels_of(streamed.out), levels_of(whole.out)) << mode;
    EXPECT_EQ(levels_of(streamed.out).size(), 3u);
    EXPECT_NE(streamed.out.find("\"streamed\": true"), std::string::npos);
  }
  // A csv trace with requests and steps: the same per-request and per-step rows streamed, in every
  // mode, with chunks of 2^20 accesses and a trace that is not a multiple of them.
  {
    std::string text = "id,size,request,step\n";
    std::mt19937_64 rng(5);
    for (int i = 0; i < (1 << 20) + 777; ++i)
      text += fmt::format("{},{},{},{}\n", rng() % 3000, 1 + rng() % 64, rng() % 7, i / 5000);
    const std::string csv = temp_file("rs.csv", text);
    for (const char* mode : {"nine", "inclusive", "exclusive"}) {
      std::vector<std::string> args = {"--trace", csv, "--json", "--mode", mode, "-q", "--level", "lru:2KiB",
                                       "--level", "semantic:500", "--level", "clock:40KiB"};
      const CmdResult whole = run(args);
      args.push_back("--stream");
      const CmdResult streamed = run(args);
      ASSERT_EQ(whole.rc, 0) << whole.err;
      ASSERT_EQ(streamed.rc, 0) << streamed.err;
      const auto from = [](const std::string& out, const char* key) {
        const auto b = out.find(key);
        return b == std::string::npos ? std::string() : out.substr(b);
      };
      ASSERT_NE(from(whole.out, "\"requests\""), "") << whole.out.substr(0, 2000);
      EXPECT_NE(from(whole.out, "\"steps\""), "");
      EXPECT_EQ(from(streamed.out, "\"requests\""), from(whole.out, "\"requests\"")) << mode;
      EXPECT_EQ(levels_of(streamed.out), levels_of(whole.out)) << mode;
    }
    std::filesystem::remove(csv);
  }
  const CmdResult s = run({"--trace", trace, "--level", "lru:100", "--stream", "--shards", "0.1", "--json", "-q"});
  ASSERT_EQ(s.rc, 0) << s.err;
  EXPECT_TRUE(one_json_object(s.out)) << s.out;
  EXPECT_NE(s.out.find("\"estimated_error\": {\"replicas\": 4, \"mean_sd\": 0."), std::string::npos) << s.out;
  EXPECT_EQ(s.out.find("\"mrc\""), std::string::npos) << s.out;  // no exact curve was asked for
  const CmdResult both = run({"--trace", trace, "--level", "lru:100", "--stream", "--shards", "0.1", "--mrc", "-q"});
  const CmdResult mem = run({"--trace", trace, "--level", "lru:100", "--shards", "0.1", "-q"});
  ASSERT_EQ(both.rc, 0) << both.err;
  EXPECT_EQ(both.out.substr(both.out.find("# exact")), mem.out.substr(mem.out.find("# exact")));
  const CmdResult opt = run({"--trace", trace, "--level", "lru:10", "--level", "opt:100", "--stream"});
  EXPECT_EQ(opt.rc, 1);
  EXPECT_NE(opt.err.find("--level 'opt:100': opt needs the whole trace"), std::string::npos) << opt.err;
  EXPECT_TRUE(opt.out.empty());
  const CmdResult missing = run({"--trace", "/nonexistent/t.bin", "--stream"});
  EXPECT_EQ(missing.rc, 1);
  EXPECT_NE(missing.err.find("trace '/nonexistent/t.bin': no such file"), std::string::npos) << missing.err;
}

TEST(CacheSimCli, CsvGivesPerRequestAndPerStep) {
  // Request 0: 5, 5 (miss, hit); request 1: 6 (miss, evicts 5 from the 1-entry level).
  const std::string t = temp_file("g.csv", "id,request,step\n5,0,0\n5,0,1\n6,1,1\n");
  const CmdResult r = run({"--trace", t, "--level", "fifo:1", "--json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_TRUE(one_json_object(r.out)) << r.out;
  EXPECT_NE(r.out.find("{\"request\": 0, \"levels\": [{\"accesses\": 2, \"hits\": 1, \"misses\": 1, \"evictions\": 0"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("{\"request\": 1, \"levels\": [{\"accesses\": 1, \"hits\": 0, \"misses\": 1, \"evictions\": 1"),
            std::string::npos);
  EXPECT_NE(r.out.find("{\"step\": 1, \"levels\": [{\"accesses\": 2, \"hits\": 1, \"misses\": 1, \"evictions\": 1"),
            std::string::npos);
  std::filesystem::remove(t);
}

TEST(CacheSimCli, BadInputFailsBeforeSimulating) {
  const std::string good = temp_file("good.txt", "1\n2\n");
  const std::string bad = temp_file("bad.txt", "1\n2\nthree\n");
  const std::string dir = std::filesystem::path(good).parent_path().string();
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"--trace", good, "--level", "nosuch:10"}, "--level 'nosuch:10': unknown policy 'nosuch'"},
      {{"--trace", good, "--level", "lru:0"}, "--level 'lru:0': capacity '0' is impossible"},
      {{"--trace", good, "--level", "lru:12XB"}, "unknown unit 'XB'"},
      {{"--trace", good, "--level", "lru"}, "--level 'lru': expected POLICY:CAPACITY"},
      {{"--trace", bad, "--level", "lru:10"}, bad + ":3: id 'three'"},
      {{"--trace", good + ".none", "--level", "lru:10"}, "trace '" + good + ".none': no such file"},
      {{"--trace", dir, "--level", "lru:10"}, "trace '" + dir + "': a directory, not a trace file"},
      {{"--trace", dir, "--stream"}, "trace '" + dir + "': a directory, not a trace file"},
      {{"--trace", good, "--mode", "both"}, "--mode 'both'"},
      {{"--trace", good, "--format", "xml"}, "--format 'xml'"},
      {{"--trace", good, "--shards", "2"}, "--shards 2"},
      {{"--trace", good, "--shards", "1e-9"}, "the rate must be in (0, 1]"},  // below one id in 2^24
      {{"--level", "lru:10"}, "--trace FILE is required"},
      {{"--trace", good, "--levle", "lru:10"}, "unrecognised option '--levle'"},
  };
  for (const auto& c : cases) {
    const CmdResult r = run(c.args);
    EXPECT_NE(r.rc, 0) << fmt::format("{}", fmt::join(c.args, " "));
    EXPECT_NE(r.err.find(c.message), std::string::npos) << "expected '" << c.message << "' in: " << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
  }
  // A usage error (an option the command does not know) exits 2, bad input 1.
  EXPECT_EQ(run({"--trace", good, "--levle", "lru:10"}).rc, 2);
  EXPECT_EQ(run({"--trace", good, "--level", "lru:0"}).rc, 1);
  const std::string empty = temp_file("empty.txt", "# nothing\n");
  EXPECT_NE(run({"--trace", empty}).err.find("holds no accesses"), std::string::npos);
  for (const auto& p : {good, bad, empty}) std::filesystem::remove(p);
}

TEST(CacheSimCli, HelpAndDefaultHierarchy) {
  const CmdResult h = run({"--help"});
  EXPECT_EQ(h.rc, 0);
  EXPECT_NE(h.out.find("--level"), std::string::npos);
  EXPECT_NE(h.out.find("semantic"), std::string::npos);
  const std::string t = temp_file("d.txt", "1 512\n2 512\n1 512 0.5\n");
  const CmdResult r = run({"--trace", t, "--json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto lv = levels_of(r.out);
  ASSERT_EQ(lv.size(), 3u) << r.out;
  // 16 KiB holds 32 objects of 512 bytes: only the first two accesses miss L1.
  EXPECT_EQ(lv[0], "lru 16384 3 1 2 ev 0");
  EXPECT_EQ(lv[1], "clock 262144 2 0 2 ev 0");
  EXPECT_EQ(lv[2], "semantic 8388608 2 0 2 ev 0");
  std::filesystem::remove(t);
}

// Progress lines go to stderr (stdout keeps the one JSON object): forced here by --progress, for a
// trace far below the size that turns them on by itself; --quiet silences them; not both.
TEST(CacheSimCli, ProgressLinesOnStderrOnly) {
  const std::string t = temp_file("p.txt", "1\n2\n1\n3\n2\n");
  const CmdResult r = run({"--trace", t, "--level", "lru:2", "--json", "--mrc", "--progress"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_TRUE(one_json_object(r.out)) << r.out;
  EXPECT_NE(r.err.find("cache-sim: read 5 accesses from " + t), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("cache-sim: simulated 5 accesses through 1 level in"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("M accesses/s)"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("cache-sim: exact LRU curve in"), std::string::npos) << r.err;
  const CmdResult q = run({"--trace", t, "--level", "lru:2", "--quiet"});
  ASSERT_EQ(q.rc, 0) << q.err;
  EXPECT_TRUE(q.err.empty()) << q.err;
  // --stream as well: a short trace off a terminal prints nothing on stderr unless --progress asks.
  const CmdResult streamed = run({"--trace", t, "--level", "lru:2", "--stream"});
  ASSERT_EQ(streamed.rc, 0) << streamed.err;
  EXPECT_TRUE(streamed.err.empty()) << streamed.err;
  const CmdResult asked = run({"--trace", t, "--level", "lru:2", "--stream", "--progress"});
  ASSERT_EQ(asked.rc, 0) << asked.err;
  EXPECT_NE(asked.err.find("cache-sim: streamed 5 accesses from " + t), std::string::npos) << asked.err;
  const CmdResult both = run({"--trace", t, "--quiet", "--progress"});
  EXPECT_NE(both.rc, 0);
  EXPECT_NE(both.err.find("--quiet and --progress"), std::string::npos) << both.err;
  std::filesystem::remove(t);
}

// a b a c b (1 2 1 3 2) through lru:1 over lru:2KiB (nine), its totals and the table. L1 misses all 5 and
// evicts 4 times; L2 holds every 1-byte object: 1 2 miss, 1 hits, 3 misses, 2 hits. 2 hits of 5; a level
// reads the bytes of its misses from below (1 byte an access without a size).
TEST(CacheSimCli, TotalsAndTableByHand) {
  const std::string t = temp_file("abacb.txt", "1\n2\n1\n3\n2\n");
  const CmdResult j = run({"--trace", t, "--level", "lru:1", "--level", "lru:2KiB", "--json"});
  ASSERT_EQ(j.rc, 0) << j.err;
  EXPECT_NE(j.out.find("\"schema_version\": 1,\n  \"trace\": \"" + t + "\",\n  \"format\": \"txt\",\n  \"mode\": \"nine\",\n"
                       "  \"streamed\": false,\n  \"accesses\": 5,\n  \"hits\": 2,\n  \"hit_rate\": 0.4,\n"),
            std::string::npos)
      << j.out;
  EXPECT_NE(j.out.find("{\"policy\": \"lru\", \"capacity\": 1, \"capacity_unit\": \"entries\", \"accesses\": 5"),
            std::string::npos)
      << j.out;
  EXPECT_NE(j.out.find("{\"policy\": \"lru\", \"capacity\": 2048, \"capacity_unit\": \"bytes\", \"accesses\": 5"),
            std::string::npos)
      << j.out;
  // The table, with runs of spaces read as one.
  const auto words = [](const std::string& text) {
    std::vector<std::string> lines;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
      std::istringstream ws(line);
      std::string w, joined;
      while (ws >> w) joined += (joined.empty() ? "" : " ") + w;
      lines.push_back(joined);
    }
    return lines;
  };
  for (const bool stream : {false, true}) {
    std::vector<std::string> args = {"--trace", t, "--level", "lru:1", "--level", "lru:2KiB"};
    if (stream) args.push_back("--stream");
    const CmdResult r = run(args);
    ASSERT_EQ(r.rc, 0) << r.err;
    const auto lines = words(r.out);
    ASSERT_EQ(lines.size(), 5u) << r.out;
    EXPECT_EQ(lines[0], "trace " + t + (stream ? " (txt, streamed)" : " (txt)") + ": 5 accesses; mode nine");
    EXPECT_EQ(lines[2], "L1 lru 1 entries 5 0 5 0.0000 4 0 0 5");
    EXPECT_EQ(lines[3], "L2 lru 2KiB 5 2 3 0.4000 0 0 0 3");
    EXPECT_EQ(lines[4], "overall: 2 hits of 5 accesses (0.4000)");
  }
  std::filesystem::remove(t);
}

// The counters beside hits and misses. An object larger than a byte level bypasses it (a miss and a bypass):
// 1 (200 B), 2 (50 B), 1 (200 B) through lru:100B over lru:1KiB: L1 misses all 3, bypasses 2 and reads
// 450 bytes from below; L2 misses 1 and 2 (250 bytes) and hits 1. Inclusive, lru:2 over lru:2 with 1 2 1 3:
// 1 hits L1, so L2 never sees it again; at 3 L2 evicts 1, the least recent there, and so invalidates L1's copy.
TEST(CacheSimCli, BypassesInvalidationsAndBytesByHand) {
  const std::string sized = temp_file("sized.txt", "1 200\n2 50\n1 200\n");
  const CmdResult b = run({"--trace", sized, "--level", "lru:100B", "--level", "lru:1KiB", "--json"});
  ASSERT_EQ(b.rc, 0) << b.err;
  EXPECT_NE(b.out.find("\"accesses\": 3, \"hits\": 0, \"misses\": 3, \"evictions\": 0, \"invalidations\": 0, "
                       "\"bypasses\": 2, \"bytes_from_below\": 450, \"hit_rate\": 0}"),
            std::string::npos)
      << b.out;
  EXPECT_NE(b.out.find("\"accesses\": 3, \"hits\": 1, \"misses\": 2, \"evictions\": 0, \"invalidations\": 0, "
                       "\"bypasses\": 0, \"bytes_from_below\": 250,"),
            std::string::npos)
      << b.out;
  const std::string cycle = temp_file("cycle.txt", "1\n2\n1\n3\n");
  const CmdResult i = run({"--trace", cycle, "--level", "lru:2", "--level", "lru:2", "--mode", "inclusive", "--json"});
  ASSERT_EQ(i.rc, 0) << i.err;
  const auto l1 = i.out.find("\"accesses\": 4, \"hits\": 1, \"misses\": 3, ");
  ASSERT_NE(l1, std::string::npos) << i.out;
  EXPECT_NE(i.out.find("\"invalidations\": 1, \"bypasses\": 0", l1), std::string::npos) << i.out;
  std::filesystem::remove(sized);
  std::filesystem::remove(cycle);
}

// Strings in the JSON are escaped: a backslash doubled, a control character as \u00XX.
TEST(CacheSimCli, JsonEscapesTheTracePath) {
  const std::string t = temp_file("back\\slash\x1f.txt", "1\n");
  const CmdResult r = run({"--trace", t, "--level", "lru:1", "--json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_TRUE(one_json_object(r.out)) << r.out;
  const std::string dir = t.substr(0, t.size() - std::string("back\\slash\x1f.txt").size());
  EXPECT_NE(r.out.find("\"trace\": \"" + dir + "back\\\\slash\\u001f.txt\","), std::string::npos) << r.out;
  std::filesystem::remove(t);
}

// A path is bytes, JSON is UTF-8: well-formed sequences (2, 3 and 4 bytes) pass through, every other byte
// (a lone continuation byte, a cut sequence, an overlong form, a surrogate, 0xff) becomes U+FFFD.
TEST(CacheSimCli, JsonTracePathIsAlwaysUtf8) {
  const std::string good = "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80";  // U+00E9, U+20AC, U+1F600
  const std::string name = good + "|\xff|\x80|\xc3|\xc0\xaf|\xed\xa0\x80|\xf4\x90\x80\x80.txt";
  const std::string t = temp_file(name, "1\n");
  const CmdResult r = run({"--trace", t, "--level", "lru:1", "--json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_TRUE(one_json_object(r.out)) << r.out;
  const std::string dir = t.substr(0, t.size() - name.size());
  const std::string bad = "\\ufffd";
  EXPECT_NE(r.out.find("\"trace\": \"" + dir + good + "|" + bad + "|" + bad + "|" + bad + "|" + bad + bad + "|" + bad +
                       bad + bad + "|" + bad + bad + bad + bad + ".txt\","),
            std::string::npos)
      << r.out;
  std::filesystem::remove(t);
}

// SHARDS at rate 1 samples every access, so its curve is the exact one, at each capacity where it may
// change: 1 2 3 1 2 4 1 misses 7 of 7 at 1 and 2 entries, 4 of 7 from 3 on; the cycle 1 2 3 4 1 2 3 4 misses
// all 8 below 4 entries and 4 of 8 at 4, its number of distinct ids. At rate 0.75 the estimate changes at
// ceil(k / 0.75) entries: 2, 3, 4, 6, 7, 8, ... after 1.
TEST(CacheSimCli, ShardsPointsInJson) {
  const std::string t = temp_file("mrc.txt", "1\n2\n3\n1\n2\n4\n1\n");
  const CmdResult r = run({"--trace", t, "--level", "lru:2", "--shards", "1", "--json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_TRUE(one_json_object(r.out)) << r.out;
  EXPECT_NE(r.out.find("\"shards\": {\"rate\": 1, \"sampled\": 7, \"mean_abs_error\": 0, \"max_abs_error\": 0,"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("\"points\": [[1, 1], [2, 1], [3, 0.5714285714285714]]}"), std::string::npos) << r.out;
  const std::string cycle = temp_file("cycle.txt", "1\n2\n3\n4\n1\n2\n3\n4\n");
  const CmdResult c = run({"--trace", cycle, "--level", "lru:2", "--shards", "1", "--json"});
  ASSERT_EQ(c.rc, 0) << c.err;
  EXPECT_NE(c.out.find("\"points\": [[1, 1], [2, 1], [3, 1], [4, 0.5]]}"), std::string::npos) << c.out;
  std::string text;
  for (int round = 0; round < 2; ++round)
    for (int id = 0; id < 200; ++id) text += fmt::format("{}\n", id);
  const std::string loop = temp_file("loop.txt", text);
  const CmdResult s = run({"--trace", loop, "--level", "lru:2", "--shards", "0.75", "--json", "-q"});
  ASSERT_EQ(s.rc, 0) << s.err;
  const auto at = s.out.find("\"points\": [[", s.out.find("\"shards\""));
  ASSERT_NE(at, std::string::npos) << s.out;
  std::vector<int> caps;
  static const std::regex point(R"re(\[(\d+), [0-9.e-]+\])re");
  const std::string points = s.out.substr(at + 11);
  for (auto it = std::sregex_iterator(points.begin(), points.end(), point); it != std::sregex_iterator() && caps.size() < 7;
       ++it)
    caps.push_back(std::stoi((*it)[1].str()));
  EXPECT_EQ(caps, (std::vector<int>{1, 2, 3, 4, 6, 7, 8})) << s.out.substr(at, 200);
  std::filesystem::remove(t);
  std::filesystem::remove(cycle);
  std::filesystem::remove(loop);
}

// --stream --shards alone estimates the distinct ids from the sample (sampled distinct / rate): near the
// exact count that --mrc reports.
TEST(CacheSimCli, StreamedShardsEstimatesDistinct) {
  const std::string trace = std::string(IP_SHARED_DATA_DIR) + "/cloudPhysicsIO.oracleGeneral.bin";
  const CmdResult exact = run({"--trace", trace, "--level", "lru:100", "--mrc", "--json", "-q"});
  const CmdResult est = run({"--trace", trace, "--level", "lru:100", "--stream", "--shards", "0.1", "--json", "-q"});
  ASSERT_EQ(exact.rc, 0) << exact.err;
  ASSERT_EQ(est.rc, 0) << est.err;
  std::smatch m, e;
  ASSERT_TRUE(std::regex_search(exact.out, m, std::regex("\"distinct\": (\\d+)"))) << exact.out.substr(0, 2000);
  ASSERT_TRUE(std::regex_search(est.out, e, std::regex("\"estimated_distinct\": (\\d+)"))) << est.out.substr(0, 2000);
  const double distinct = std::stod(m[1].str()), estimated = std::stod(e[1].str());
  EXPECT_GT(estimated, 0.75 * distinct) << estimated << " vs " << distinct;
  EXPECT_LT(estimated, 1.25 * distinct) << estimated << " vs " << distinct;
}

// A csv trace that names steps but not requests: per-step rows only (step 0: 5 misses; step 1: 5 hits, 6
// misses and evicts 5 from the one-entry level), and the table says where they are.
TEST(CacheSimCli, CsvWithStepsOnly) {
  const std::string t = temp_file("s.csv", "id,step\n5,0\n5,1\n6,1\n");
  const CmdResult r = run({"--trace", t, "--level", "fifo:1", "--json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_TRUE(one_json_object(r.out)) << r.out;
  EXPECT_EQ(r.out.find("\"requests\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("{\"step\": 0, \"levels\": [{\"accesses\": 1, \"hits\": 0, \"misses\": 1, \"evictions\": 0"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("{\"step\": 1, \"levels\": [{\"accesses\": 2, \"hits\": 1, \"misses\": 1, \"evictions\": 1"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("\"format\": \"csv\""), std::string::npos) << r.out;
  const CmdResult text = run({"--trace", t, "--level", "fifo:1"});
  ASSERT_EQ(text.rc, 0) << text.err;
  EXPECT_NE(text.out.find("per-request and per-step statistics: see --json\n"), std::string::npos) << text.out;
  std::filesystem::remove(t);
}

}  // namespace
}  // namespace ip::exp
