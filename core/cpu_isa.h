// The x86 instruction-set extensions the CPU code was compiled to use, and a check, run before anything
// else, that the CPU running it has them.
//
// The default build compiles for the machine it is built on (-march=native, option INDEXPOOL_NATIVE). A
// binary built on a login node with AVX-512 and run on a compute node without it would die of SIGILL
// somewhere in the middle of a sweep, with no message; the check names what is missing instead, and exits 1
// before any work starts. Only extensions a compiler emits on its own (vector, bit manipulation, FP16) are
// listed; system ones (XSAVE, AMX, RDRAND, ...) appear only through intrinsics, which IndexPool does not use.
//
// core/cpu_isa.cc and experiments/isa_guard.cc are compiled for plain x86-64 whatever the build's target, so
// the check itself runs on any x86-64 CPU; they use no inline C++ library code (std::string and the like),
// whose one linked copy could come from a translation unit compiled for the build's target.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ip {

// One bit per extension, in the order of kIsaNames.
enum IsaBit : int {
  kIsaSse3, kIsaSsse3, kIsaSse41, kIsaSse42, kIsaPopcnt, kIsaAvx, kIsaAvx2, kIsaFma, kIsaF16c, kIsaBmi, kIsaBmi2,
  kIsaLzcnt, kIsaMovbe, kIsaGfni, kIsaVaes, kIsaVpclmulqdq, kIsaAvx512f, kIsaAvx512cd, kIsaAvx512bw, kIsaAvx512dq,
  kIsaAvx512vl, kIsaAvx512ifma, kIsaAvx512vbmi, kIsaAvx512vbmi2, kIsaAvx512vnni, kIsaAvx512bitalg,
  kIsaAvx512vpopcntdq, kIsaAvx512bf16, kIsaAvx512fp16, kIsaAvxvnni, kIsaCount
};

// The extensions' names as g++'s -m options and __builtin_cpu_supports spell them (/proc/cpuinfo writes some
// differently: sse4_1, avx512_fp16, avx_vnni).
inline constexpr const char* kIsaNames[kIsaCount] = {
    "sse3",       "ssse3",        "sse4.1",     "sse4.2",     "popcnt",       "avx",          "avx2",
    "fma",        "f16c",         "bmi",        "bmi2",       "lzcnt",        "movbe",        "gfni",
    "vaes",       "vpclmulqdq",   "avx512f",    "avx512cd",   "avx512bw",     "avx512dq",     "avx512vl",
    "avx512ifma", "avx512vbmi",   "avx512vbmi2", "avx512vnni", "avx512bitalg", "avx512vpopcntdq", "avx512bf16",
    "avx512fp16", "avxvnni"};

// The extensions the CPU code of this build may use: the compiler's target macros where core/cpu_isa_build.cc
// was compiled, with the flags of the rest of the C++ code. 0 on other architectures.
extern const std::uint64_t kBuildIsa;

// The extensions the running CPU has (of those listed; all bits 0 on other architectures).
std::uint64_t cpu_isa();

// The names of the set bits, space-separated, into buf (at most n bytes with the terminating 0; cut short
// with "..." when it does not fit); "none" for 0. Returns buf.
char* format_isa(std::uint64_t bits, char* buf, std::size_t n);

// The highest x86-64 microarchitecture level (psABI: x86-64, -v2, -v3, -v4) whose extensions `bits` all has,
// with "+" when `bits` has others besides ("x86-64-v4+" for -march=native on a recent Xeon); "not x86-64" on
// other architectures.
const char* isa_level(std::uint64_t bits);

// When `cpu` lacks some of `built`: the message for `program` naming them, into buf, and true; false and ""
// otherwise.
bool isa_mismatch_message(const char* program, std::uint64_t built, std::uint64_t cpu, char* buf, std::size_t n);

}  // namespace ip
