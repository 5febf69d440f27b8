// core/cpu_isa.h: the extensions the build's code uses, the running CPU's, and the message when they differ.
#include "core/cpu_isa.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>

namespace ip {
namespace {

constexpr std::uint64_t bit(IsaBit b) { return std::uint64_t{1} << b; }

TEST(CpuIsa, NamesAreDistinct) {
  std::set<std::string> names;
  for (const char* n : kIsaNames) EXPECT_TRUE(names.insert(n).second) << n;
  EXPECT_EQ(names.size(), static_cast<std::size_t>(kIsaCount));
}

// This file is compiled with the flags of the rest of the C++ code, so its target macros are the build's.
TEST(CpuIsa, BuildBitsAreTheCompilersTargetMacros) {
  const std::pair<IsaBit, bool> expected[] = {
#if defined(__x86_64__)
    {kIsaSse3,
#if defined(__SSE3__)
     true},
#else
     false},
#endif
    {kIsaSse42,
#if defined(__SSE4_2__)
     true},
#else
     false},
#endif
    {kIsaAvx2,
#if defined(__AVX2__)
     true},
#else
     false},
#endif
    {kIsaFma,
#if defined(__FMA__)
     true},
#else
     false},
#endif
    {kIsaAvx512f,
#if defined(__AVX512F__)
     true},
#else
     false},
#endif
    {kIsaAvx512vl,
#if defined(__AVX512VL__)
     true},
#else
     false},
#endif
    {kIsaAvx512fp16,
#if defined(__AVX512FP16__)
     true},
#else
     false},
#endif
#endif
    {kIsaCount, false}};  // a sentinel, skipped below
  for (const auto& [b, on] : expected) {
    if (b == kIsaCount) continue;
    EXPECT_EQ((kBuildIsa & bit(b)) != 0, on) << kIsaNames[b];
  }
#if !defined(__x86_64__)
  EXPECT_EQ(kBuildIsa, 0u);
#endif
}

// The test runs on the machine it was built for (ctest), so the CPU has whatever the build uses.
TEST(CpuIsa, ThisCpuHasWhatTheBuildUses) {
  char names[512];
  EXPECT_EQ(kBuildIsa & ~cpu_isa(), 0u) << "missing: " << format_isa(kBuildIsa & ~cpu_isa(), names, sizeof names);
}

// cpu_isa() against the kernel's own list: each bit is the extension it is named after.
TEST(CpuIsa, CpuBitsAgreeWithProcCpuinfo) {
#if !defined(__x86_64__)
  GTEST_SKIP() << "x86-64 only";
#endif
  std::ifstream in("/proc/cpuinfo");
  std::string line, flags;
  while (std::getline(in, line))
    if (line.rfind("flags", 0) == 0) {
      flags = " " + line.substr(line.find(':') + 1) + " ";
      break;
    }
  if (flags.empty()) GTEST_SKIP() << "no flags line in /proc/cpuinfo";
  // /proc/cpuinfo's spelling where it differs from g++'s.
  const std::map<std::string, std::string> proc = {
      {"sse3", "pni"},           {"sse4.1", "sse4_1"},         {"sse4.2", "sse4_2"},
      {"bmi", "bmi1"},           {"lzcnt", "abm"},             {"avx512vbmi2", "avx512_vbmi2"},
      {"avx512vnni", "avx512_vnni"}, {"avx512bitalg", "avx512_bitalg"}, {"avx512vpopcntdq", "avx512_vpopcntdq"},
      {"avx512bf16", "avx512_bf16"}, {"avx512fp16", "avx512_fp16"}, {"avxvnni", "avx_vnni"}};
  const std::uint64_t cpu = cpu_isa();
  for (int i = 0; i < kIsaCount; ++i) {
    const auto it = proc.find(kIsaNames[i]);
    const std::string name = it == proc.end() ? kIsaNames[i] : it->second;
    const bool listed = flags.find(" " + name + " ") != std::string::npos;
    // The kernel may hide an extension the CPU reports (and libgcc then says no as well, for the AVX
    // families, when the OS does not save their registers); a bit set without the flag is the error.
    if (cpu >> i & 1) EXPECT_TRUE(listed) << kIsaNames[i] << " is reported but /proc/cpuinfo has no " << name;
    else EXPECT_FALSE(listed && name.rfind("avx", 0) != 0) << kIsaNames[i] << " is listed but not reported";
  }
}

TEST(CpuIsa, FormatIsaNamesTheBitsInOrder) {
  char buf[256];
  EXPECT_STREQ(format_isa(0, buf, sizeof buf), "none");
  EXPECT_STREQ(format_isa(bit(kIsaAvx512f) | bit(kIsaSse3) | bit(kIsaAvxvnni), buf, sizeof buf),
               "sse3 avx512f avxvnni");
  const std::uint64_t all = (std::uint64_t{1} << kIsaCount) - 1;
  std::string joined;
  for (const char* n : kIsaNames) joined += (joined.empty() ? "" : " ") + std::string(n);
  EXPECT_EQ(format_isa(all, buf, sizeof buf), joined);
}

TEST(CpuIsa, FormatIsaCutsShortWithinTheBuffer) {
  char buf[16];
  // "sse3 ssse3" fits 11 bytes; "sse4.1" after it does not: "sse3 ssse3..." needs 14.
  EXPECT_STREQ(format_isa(bit(kIsaSse3) | bit(kIsaSsse3) | bit(kIsaSse41), buf, 14), "sse3 ssse3...");
  EXPECT_STREQ(format_isa(bit(kIsaSse3) | bit(kIsaSsse3) | bit(kIsaSse41), buf, 12), "sse3 sss...");
  EXPECT_STREQ(format_isa(bit(kIsaAvx512vpopcntdq), buf, 4), "...");
  std::memset(buf, 'x', sizeof buf);
  EXPECT_STREQ(format_isa(bit(kIsaAvx2), buf, 3), "");
  EXPECT_EQ(buf[3], 'x');  // nothing past n
  buf[0] = 'y';
  format_isa(bit(kIsaAvx2), buf, 0);
  EXPECT_EQ(buf[0], 'y');
}

TEST(CpuIsa, LevelIsTheHighestWholeOne) {
#if !defined(__x86_64__)
  GTEST_SKIP() << "x86-64 only";
#endif
  const std::uint64_t v2 = bit(kIsaSse3) | bit(kIsaSsse3) | bit(kIsaSse41) | bit(kIsaSse42) | bit(kIsaPopcnt);
  const std::uint64_t v3 = v2 | bit(kIsaAvx) | bit(kIsaAvx2) | bit(kIsaBmi) | bit(kIsaBmi2) | bit(kIsaF16c) |
                           bit(kIsaFma) | bit(kIsaLzcnt) | bit(kIsaMovbe);
  const std::uint64_t v4 =
      v3 | bit(kIsaAvx512f) | bit(kIsaAvx512bw) | bit(kIsaAvx512cd) | bit(kIsaAvx512dq) | bit(kIsaAvx512vl);
  EXPECT_STREQ(isa_level(0), "x86-64");
  EXPECT_STREQ(isa_level(bit(kIsaSse3)), "x86-64+");
  EXPECT_STREQ(isa_level(v2), "x86-64-v2");
  EXPECT_STREQ(isa_level(v3 & ~bit(kIsaMovbe)), "x86-64-v2+");
  EXPECT_STREQ(isa_level(v3), "x86-64-v3");
  EXPECT_STREQ(isa_level(v3 | bit(kIsaAvx512f)), "x86-64-v3+");
  EXPECT_STREQ(isa_level(v4), "x86-64-v4");
  EXPECT_STREQ(isa_level(v4 | bit(kIsaAvx512fp16)), "x86-64-v4+");
}

TEST(CpuIsa, MismatchMessageNamesWhatIsMissing) {
  char msg[1024];
  const std::uint64_t built = bit(kIsaAvx2) | bit(kIsaFma) | bit(kIsaAvx512f) | bit(kIsaAvx512fp16);
  ASSERT_TRUE(isa_mismatch_message("indexpool", built, bit(kIsaAvx2) | bit(kIsaFma) | bit(kIsaSse3), msg, sizeof msg));
  const std::string m = msg;
  EXPECT_EQ(m.rfind("indexpool: ", 0), 0u) << m;
  EXPECT_NE(m.find("(avx512f avx512fp16)"), std::string::npos) << m;
  EXPECT_EQ(m.find("avx2"), std::string::npos) << m;
  EXPECT_NE(m.find("-DINDEXPOOL_NATIVE=OFF"), std::string::npos) << m;
  EXPECT_EQ(m.back(), '\n');
  // A CPU with more than the build uses, or the same: no message.
  EXPECT_FALSE(isa_mismatch_message("indexpool", built, built | bit(kIsaAvxvnni), msg, sizeof msg));
  EXPECT_STREQ(msg, "");
  EXPECT_FALSE(isa_mismatch_message("indexpool", 0, 0, msg, sizeof msg));
}

}  // namespace
}  // namespace ip
