// Trace formats: round trips, the oracleGeneral layout byte by byte, and bad input named by file and
// line (or record); capacities and level specs.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "cache_sim/capacity.h"
#include "cache_sim/trace.h"
#include "core/error.h"
#include "tests/cache_sim/test_util.h"

namespace ip::cache {
namespace {

std::string temp_path(const std::string& name) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  return (std::filesystem::temp_directory_path() /
          fmt::format("ip_cache_{}_{}_{}_{}", getpid(), info->test_suite_name(), info->name(), name))
      .string();
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

// The message of the ip::Error that `f` throws ("no error" when it does not).
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

Trace sample_trace() {
  Trace t;
  t.accesses = test::random_trace(5, 500, 60, 70000);
  t.accesses[3].id = UINT64_MAX;  // extremes survive every format
  t.accesses[4].id = 0;
  t.accesses[5].size = UINT32_MAX;
  t.accesses[6].size = 0;
  t.accesses[7].score = 0.0f;
  t.accesses[8].score = 1e-30f;
  t.accesses[9].score = 123456.789f;
  return t;
}

TEST(Trace, CsvRoundTripKeepsEveryField) {
  const Trace t = sample_trace();
  const std::string p = temp_path("t.csv");
  write_trace(p, TraceFormat::csv, t);
  const Trace r = read_trace(p, TraceFormat::csv);
  ASSERT_EQ(r.accesses.size(), t.accesses.size());
  EXPECT_TRUE(r.has_request);
  EXPECT_TRUE(r.has_step);
  for (std::size_t i = 0; i < t.accesses.size(); ++i) {
    const Access &a = t.accesses[i], &b = r.accesses[i];
    ASSERT_EQ(a.id, b.id) << i;
    ASSERT_EQ(a.size, b.size) << i;
    ASSERT_EQ(std::memcmp(&a.score, &b.score, sizeof(float)), 0) << i << ": " << a.score << " vs " << b.score;
    ASSERT_EQ(a.request, b.request) << i;
    ASSERT_EQ(a.step, b.step) << i;
  }
  std::filesystem::remove(p);
}

TEST(Trace, TxtRoundTripKeepsIdSizeScore) {
  const Trace t = sample_trace();
  const std::string p = temp_path("t.txt");
  write_trace(p, TraceFormat::txt, t);
  const Trace r = read_trace(p, TraceFormat::txt);
  ASSERT_EQ(r.accesses.size(), t.accesses.size());
  EXPECT_FALSE(r.has_request);
  for (std::size_t i = 0; i < t.accesses.size(); ++i) {
    ASSERT_EQ(t.accesses[i].id, r.accesses[i].id) << i;
    ASSERT_EQ(t.accesses[i].size, r.accesses[i].size) << i;
    ASSERT_EQ(t.accesses[i].score, r.accesses[i].score) << i;
  }
  std::filesystem::remove(p);
}

TEST(Trace, OracleRoundTripKeepsIdAndSize) {
  const Trace t = sample_trace();
  const std::string p = temp_path("t.bin");
  write_trace(p, TraceFormat::oracle, t);
  EXPECT_EQ(std::filesystem::file_size(p), t.accesses.size() * 24);
  const Trace r = read_trace(p, TraceFormat::oracle);
  ASSERT_EQ(r.accesses.size(), t.accesses.size());
  for (std::size_t i = 0; i < t.accesses.size(); ++i) {
    ASSERT_EQ(t.accesses[i].id, r.accesses[i].id) << i;
    ASSERT_EQ(t.accesses[i].size, r.accesses[i].size) << i;
  }
  std::filesystem::remove(p);
}

TEST(Trace, OracleLayoutByHand) {
  // Ids 5, 9, 5 with sizes 100, 200, 100: records (time, id, size, next) = (0,5,100,2), (1,9,200,-1),
  // (2,5,100,-1), little-endian, 24 bytes each.
  Trace t;
  t.accesses = {Access{5, 100}, Access{9, 200}, Access{5, 100}};
  const std::string p = temp_path("hand.bin");
  write_trace(p, TraceFormat::oracle, t);
  std::ifstream in(p, std::ios::binary);
  const std::vector<unsigned char> d((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_EQ(d.size(), 72u);
  const std::vector<unsigned char> rec1 = {1, 0, 0, 0,  9, 0, 0, 0, 0, 0, 0, 0,  200, 0, 0, 0,
                                           255, 255, 255, 255, 255, 255, 255, 255};
  EXPECT_EQ(std::vector<unsigned char>(d.begin() + 24, d.begin() + 48), rec1);
  EXPECT_EQ(d[16], 2);  // record 0's next access: index 2
  EXPECT_EQ(d[4], 5);
  std::filesystem::remove(p);
}

TEST(Trace, NextUsesByHand) {
  EXPECT_EQ(next_uses(test::letters("abacb")), (std::vector<std::int64_t>{2, 4, -1, -1, -1}));
}

TEST(Trace, TextFormsAndDefaults) {
  const std::string p = temp_path("forms.txt");
  write_file(p, "# a comment\n\n7\n8 4096\n9 16 0.25   # trailing comment\n\t10\t1\t2\r\n");
  const Trace t = read_trace(p, TraceFormat::txt);
  ASSERT_EQ(t.accesses.size(), 4u);
  EXPECT_EQ(t.accesses[0].id, 7u);
  EXPECT_EQ(t.accesses[0].size, 1u);
  EXPECT_EQ(t.accesses[0].score, 1.0f);
  EXPECT_EQ(t.accesses[1].size, 4096u);
  EXPECT_EQ(t.accesses[2].score, 0.25f);
  EXPECT_EQ(t.accesses[3].id, 10u);
  EXPECT_EQ(t.accesses[3].score, 2.0f);
  // csv: columns in any order, only id required.
  const std::string c = temp_path("cols.csv");
  write_file(c, "step, id\n3, 11\n4, 12\n");
  const Trace u = read_trace(c, TraceFormat::csv);
  ASSERT_EQ(u.accesses.size(), 2u);
  EXPECT_EQ(u.accesses[1].id, 12u);
  EXPECT_EQ(u.accesses[1].step, 4u);
  EXPECT_TRUE(u.has_step);
  EXPECT_FALSE(u.has_request);
  std::filesystem::remove(p);
  std::filesystem::remove(c);
}

TEST(Trace, BadTextLinesNameFileAndLine) {
  const std::string p = temp_path("bad.txt");
  const auto bad = [&](const std::string& text, TraceFormat f = TraceFormat::txt) {
    write_file(p, text);
    return error_of([&] { read_trace(p, f); });
  };
  EXPECT_NE(bad("1\n2\nx\n").find(p + ":3: id 'x'"), std::string::npos);
  EXPECT_NE(bad("1 2 3 4\n").find(p + ":1: 4 fields"), std::string::npos);
  EXPECT_NE(bad("1\n-5\n").find(p + ":2: id '-5'"), std::string::npos);
  EXPECT_NE(bad("1 4294967296\n").find(p + ":1: size '4294967296'"), std::string::npos);
  EXPECT_NE(bad("1 1 -1\n").find(p + ":1: score '-1' must be"), std::string::npos);
  EXPECT_NE(bad("1 1 nan\n").find(p + ":1: score 'nan'"), std::string::npos);
  EXPECT_NE(bad("1 1 1e40\n").find(p + ":1: score '1e40'"), std::string::npos);
  EXPECT_NE(bad("1 1x\n").find(p + ":1: size '1x'"), std::string::npos);
  EXPECT_NE(bad("id,size\n1,2\n3\n", TraceFormat::csv).find(p + ":3: 1 fields, expected 2"), std::string::npos);
  EXPECT_NE(bad("size,score\n1,2\n", TraceFormat::csv).find(p + ":1: the header names no 'id' column"),
            std::string::npos);
  EXPECT_NE(bad("id,colour\n", TraceFormat::csv).find(p + ":1: unknown column 'colour'"), std::string::npos);
  EXPECT_NE(bad("id,id\n", TraceFormat::csv).find(p + ":1: column 'id' appears twice"), std::string::npos);
  EXPECT_NE(bad("# nothing\n", TraceFormat::csv).find("no header line"), std::string::npos);
  EXPECT_NE(bad("id,request\n1,\n", TraceFormat::csv).find(p + ":2: request ''"), std::string::npos);
  EXPECT_NE(error_of([&] { read_trace(p + ".missing", TraceFormat::txt); }).find(p + ".missing"), std::string::npos);
  std::filesystem::remove(p);
}

TEST(Trace, BadOracleFilesNameTheRecord) {
  const std::string p = temp_path("bad.bin");
  std::string rec(24, '\0');
  const std::int64_t none = -1;
  std::memcpy(rec.data() + 16, &none, 8);
  write_file(p, rec + rec + rec.substr(0, 10));
  EXPECT_NE(error_of([&] { read_trace(p, TraceFormat::oracle); }).find(p + "': record 2 is truncated"),
            std::string::npos);
  std::string backwards = rec;
  const std::int64_t zero = 0;
  std::memcpy(backwards.data() + 16, &zero, 8);  // record 1 says its next access is record 0
  write_file(p, rec + backwards);
  EXPECT_NE(error_of([&] { read_trace(p, TraceFormat::oracle); }).find("record 1: next access index 0"),
            std::string::npos);
  write_file(p, "");
  EXPECT_EQ(read_trace(p, TraceFormat::oracle).accesses.size(), 0u);
  std::filesystem::remove(p);
}

// Streaming in chunks of any size (and text read a few bytes at a time, so that lines are cut at every
// place) gives the accesses of read_trace, in order; a bad line deep in the file is named as before.
TEST(Trace, StreamedInChunksGivesTheSameAccesses) {
  const Trace t = sample_trace();
  for (const TraceFormat f : {TraceFormat::txt, TraceFormat::csv, TraceFormat::oracle}) {
    const std::string p = temp_path(std::string("s.") + trace_format_name(f));
    write_trace(p, f, t);
    const Trace whole = read_trace(p, f);
    ASSERT_EQ(whole.accesses.size(), t.accesses.size());
    for (const std::size_t chunk : {std::size_t{1}, std::size_t{7}, std::size_t{1} << 20}) {
      std::vector<Access> got;
      std::size_t calls = 0;
      const Trace header = stream_trace(p, f, [&](const Access* a, std::size_t n) {
        ASSERT_GE(n, 1u);
        ASSERT_LE(n, chunk);
        got.insert(got.end(), a, a + n);
        ++calls;
      }, chunk);
      EXPECT_TRUE(header.accesses.empty());
      EXPECT_EQ(header.has_request, whole.has_request);
      EXPECT_EQ(calls, (whole.accesses.size() + chunk - 1) / chunk) << trace_format_name(f) << " chunk " << chunk;
      ASSERT_EQ(got.size(), whole.accesses.size());
      for (std::size_t i = 0; i < got.size(); ++i) {
        ASSERT_EQ(got[i].id, whole.accesses[i].id) << trace_format_name(f) << " " << i;
        ASSERT_EQ(got[i].size, whole.accesses[i].size);
        ASSERT_EQ(got[i].score, whole.accesses[i].score);
        ASSERT_EQ(got[i].request, whole.accesses[i].request);
        ASSERT_EQ(got[i].step, whole.accesses[i].step);
      }
    }
    if (f != TraceFormat::oracle)
      for (const std::size_t block : {1, 2, 5, 64}) {
        std::vector<Access> got;
        detail::stream_text_trace(p, f == TraceFormat::csv, [&](const Access* a, std::size_t n) {
          got.insert(got.end(), a, a + n);
        }, 3, block);
        ASSERT_EQ(got.size(), whole.accesses.size()) << "block " << block;
        for (std::size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i].id, whole.accesses[i].id) << "block " << block;
      }
    std::filesystem::remove(p);
  }
  // No final newline, CRLF, comments; a bad line found after several blocks and chunks.
  const std::string p = temp_path("cut.txt");
  write_file(p, "# c\r\n1 2\r\n\n3 4 0.5  # x\n5\n6 7\n8 x\n9");
  std::vector<std::uint64_t> ids;
  EXPECT_EQ(error_of([&] {
              detail::stream_text_trace(p, false, [&](const Access* a, std::size_t n) {
                for (std::size_t i = 0; i < n; ++i) ids.push_back(a[i].id);
              }, 2, 3);
            }),
            p + ":7: size 'x' is not an unsigned integer");
  EXPECT_EQ(ids, (std::vector<std::uint64_t>{1, 3, 5, 6}));  // whole chunks before the bad line
  write_file(p, "1 2\r\n\n3 4 0.5  # x\n5\n6 7\n9");
  ids.clear();
  for (const std::size_t block : {1, 4, 100})
    detail::stream_text_trace(p, false, [&](const Access* a, std::size_t n) {
      for (std::size_t i = 0; i < n; ++i) ids.push_back(a[i].id);
    }, 2, block);
  EXPECT_EQ(ids, (std::vector<std::uint64_t>{1, 3, 5, 6, 9, 1, 3, 5, 6, 9, 1, 3, 5, 6, 9}));
  std::filesystem::remove(p);
}

TEST(Trace, FormatNames) {
  EXPECT_EQ(parse_trace_format("oracle"), TraceFormat::oracle);
  EXPECT_THROW(parse_trace_format("bin"), Error);
  EXPECT_EQ(guess_trace_format("x/cloudPhysicsIO.oracleGeneral.bin"), TraceFormat::oracle);
  EXPECT_EQ(guess_trace_format("t.oracleGeneral.zst"), TraceFormat::oracle);
  EXPECT_EQ(guess_trace_format("t.csv"), TraceFormat::csv);
  EXPECT_EQ(guess_trace_format("t.trace"), TraceFormat::txt);
}

TEST(Capacity, EntriesAndBytes) {
  EXPECT_EQ(parse_capacity("1000").value, 1000u);
  EXPECT_FALSE(parse_capacity("1000").bytes);
  EXPECT_EQ(parse_capacity("16KiB").value, 16384u);
  EXPECT_TRUE(parse_capacity("16KiB").bytes);
  EXPECT_EQ(parse_capacity("8MiB").value, 8388608u);
  EXPECT_EQ(parse_capacity("1GiB").value, 1073741824u);
  EXPECT_EQ(parse_capacity("3kB").value, 3000u);
  EXPECT_EQ(parse_capacity("5B").value, 5u);
  EXPECT_EQ(parse_capacity("4294967294").value, 4294967294u);
  EXPECT_EQ(parse_capacity("256KiB").text(), "256KiB");
  EXPECT_EQ(parse_capacity("1000").text(), "1000 entries");
}

TEST(Capacity, ImpossibleCapacitiesNameTheText) {
  const auto msg = [](const std::string& t) { return error_of([&] { parse_capacity(t); }); };
  EXPECT_NE(msg("0").find("capacity '0' is impossible"), std::string::npos);
  EXPECT_NE(msg("0KiB").find("capacity '0KiB' is impossible"), std::string::npos);
  EXPECT_NE(msg("").find("capacity ''"), std::string::npos);
  EXPECT_NE(msg("-3").find("capacity '-3'"), std::string::npos);
  // Fractions: not read, said so (0.5MiB was "impossible", as if 0 bytes had been asked for).
  EXPECT_NE(msg("1.5MiB").find("capacity '1.5MiB': a whole number"), std::string::npos) << msg("1.5MiB");
  EXPECT_NE(msg("0.5MiB").find("fractions are not read"), std::string::npos) << msg("0.5MiB");
  EXPECT_NE(msg("0x10").find("unknown unit 'x10'"), std::string::npos) << msg("0x10");
  EXPECT_NE(msg("0abc").find("unknown unit 'abc'"), std::string::npos) << msg("0abc");
  EXPECT_NE(msg("16XB").find("unknown unit 'XB'"), std::string::npos);
  EXPECT_NE(msg("99999999999999999999").find("too large"), std::string::npos);
  EXPECT_NE(msg("20000000000TiB").find("too large"), std::string::npos);
  EXPECT_NE(msg("4294967295").find("impossible: at most 4294967294 entries"), std::string::npos);
}

TEST(Capacity, LevelSpecs) {
  const LevelSpec s = parse_level_spec("semantic(decay=0.9):8MiB");
  EXPECT_EQ(s.policy, "semantic(decay=0.9)");
  EXPECT_EQ(s.capacity.value, 8u << 20);
  const auto msg = [](const std::string& t) { return error_of([&] { parse_level_spec(t); }); };
  EXPECT_NE(msg("lru").find("level 'lru': expected POLICY:CAPACITY"), std::string::npos);
  EXPECT_NE(msg(":10").find("expected POLICY:CAPACITY"), std::string::npos);
  EXPECT_NE(msg("nosuch:10").find("level 'nosuch:10': unknown policy 'nosuch'"), std::string::npos);
  EXPECT_NE(msg("lru:0").find("level 'lru:0': capacity '0' is impossible"), std::string::npos);
  EXPECT_NE(msg("semantic(decay=3):10").find("decay"), std::string::npos);
}

}  // namespace
}  // namespace ip::cache
