// cpu_isa, format_isa, isa_mismatch_message: compiled for plain x86-64 (core/CMakeLists.txt), C library calls
// only, so they run on any x86-64 CPU whatever the build's target (see core/cpu_isa.h).
#include "core/cpu_isa.h"

#include <cstdio>
#include <cstring>

namespace ip {

std::uint64_t cpu_isa() {
  std::uint64_t bits = 0;
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();  // may run before the C++ runtime's own initialization (a constructor)
  // __builtin_cpu_supports takes a string literal only, hence one line per extension.
  const bool has[kIsaCount] = {
      __builtin_cpu_supports("sse3") != 0,         __builtin_cpu_supports("ssse3") != 0,
      __builtin_cpu_supports("sse4.1") != 0,       __builtin_cpu_supports("sse4.2") != 0,
      __builtin_cpu_supports("popcnt") != 0,       __builtin_cpu_supports("avx") != 0,
      __builtin_cpu_supports("avx2") != 0,         __builtin_cpu_supports("fma") != 0,
      __builtin_cpu_supports("f16c") != 0,         __builtin_cpu_supports("bmi") != 0,
      __builtin_cpu_supports("bmi2") != 0,         __builtin_cpu_supports("lzcnt") != 0,
      __builtin_cpu_supports("movbe") != 0,        __builtin_cpu_supports("gfni") != 0,
      __builtin_cpu_supports("vaes") != 0,         __builtin_cpu_supports("vpclmulqdq") != 0,
      __builtin_cpu_supports("avx512f") != 0,      __builtin_cpu_supports("avx512cd") != 0,
      __builtin_cpu_supports("avx512bw") != 0,     __builtin_cpu_supports("avx512dq") != 0,
      __builtin_cpu_supports("avx512vl") != 0,     __builtin_cpu_supports("avx512ifma") != 0,
      __builtin_cpu_supports("avx512vbmi") != 0,   __builtin_cpu_supports("avx512vbmi2") != 0,
      __builtin_cpu_supports("avx512vnni") != 0,   __builtin_cpu_supports("avx512bitalg") != 0,
      __builtin_cpu_supports("avx512vpopcntdq") != 0, __builtin_cpu_supports("avx512bf16") != 0,
      __builtin_cpu_supports("avx512fp16") != 0,   __builtin_cpu_supports("avxvnni") != 0};
  for (int i = 0; i < kIsaCount; ++i)
    if (has[i]) bits |= std::uint64_t{1} << i;
#endif
  return bits;
}

char* format_isa(std::uint64_t bits, char* buf, std::size_t n) {
  if (n == 0) return buf;
  buf[0] = '\0';
  if (bits == 0) {
    std::snprintf(buf, n, "none");
    return buf;
  }
  std::size_t len = 0;
  for (int i = 0; i < kIsaCount; ++i) {
    if (!(bits >> i & 1)) continue;
    const std::size_t l = std::strlen(kIsaNames[i]), sep = len ? 1 : 0;
    if (len + sep + l + 1 > n) {  // no room for this name and the 0: end with "..." where it fits
      if (n >= 4) std::memcpy(buf + (len + 4 <= n ? len : n - 4), "...", 4);
      return buf;
    }
    if (sep) buf[len++] = ' ';
    std::memcpy(buf + len, kIsaNames[i], l);
    len += l;
    buf[len] = '\0';
  }
  return buf;
}

namespace {
constexpr std::uint64_t bit(IsaBit b) { return std::uint64_t{1} << b; }
}  // namespace

const char* isa_level(std::uint64_t bits) {
  constexpr std::uint64_t v2 = bit(kIsaSse3) | bit(kIsaSsse3) | bit(kIsaSse41) | bit(kIsaSse42) | bit(kIsaPopcnt);
  constexpr std::uint64_t v3 = v2 | bit(kIsaAvx) | bit(kIsaAvx2) | bit(kIsaBmi) | bit(kIsaBmi2) | bit(kIsaF16c) |
                               bit(kIsaFma) | bit(kIsaLzcnt) | bit(kIsaMovbe);
  constexpr std::uint64_t v4 =
      v3 | bit(kIsaAvx512f) | bit(kIsaAvx512bw) | bit(kIsaAvx512cd) | bit(kIsaAvx512dq) | bit(kIsaAvx512vl);
  static const char* const names[4][2] = {{"x86-64", "x86-64+"}, {"x86-64-v2", "x86-64-v2+"},
                                          {"x86-64-v3", "x86-64-v3+"}, {"x86-64-v4", "x86-64-v4+"}};
#if !defined(__x86_64__)
  return bits ? "?" : "not x86-64";
#endif
  const int level = (bits & v4) == v4 ? 3 : (bits & v3) == v3 ? 2 : (bits & v2) == v2 ? 1 : 0;
  const std::uint64_t level_bits[4] = {0, v2, v3, v4};
  return names[level][(bits & ~level_bits[level]) != 0];
}

bool isa_mismatch_message(const char* program, std::uint64_t built, std::uint64_t cpu, char* buf, std::size_t n) {
  if (n) buf[0] = '\0';
  const std::uint64_t missing = built & ~cpu;
  if (!missing) return false;
  char names[512];
  format_isa(missing, names, sizeof names);
  std::snprintf(buf, n,
                "%s: this program was compiled for a CPU with instructions this one lacks (%s): it was built with "
                "-march=native (CMake option INDEXPOOL_NATIVE, on by default) on another machine. Build it on this "
                "machine, or for every x86-64 CPU with: cmake -DINDEXPOOL_NATIVE=OFF ...\n",
                program, names);
  return true;
}

}  // namespace ip
