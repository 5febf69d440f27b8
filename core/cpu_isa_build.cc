// kBuildIsa: compiled with the flags of the rest of the C++ code (with -march=native, the build machine's
// extensions), so its target macros are the ones the code was compiled for. Constant data only: no code here
// runs before the check in core/cpu_isa.cc.
#include "core/cpu_isa.h"

namespace ip {

namespace {
constexpr std::uint64_t bit(IsaBit b) { return std::uint64_t{1} << b; }
}  // namespace

extern const std::uint64_t kBuildIsa = 0
#if defined(__x86_64__)
#if defined(__SSE3__)
    | bit(kIsaSse3)
#endif
#if defined(__SSSE3__)
    | bit(kIsaSsse3)
#endif
#if defined(__SSE4_1__)
    | bit(kIsaSse41)
#endif
#if defined(__SSE4_2__)
    | bit(kIsaSse42)
#endif
#if defined(__POPCNT__)
    | bit(kIsaPopcnt)
#endif
#if defined(__AVX__)
    | bit(kIsaAvx)
#endif
#if defined(__AVX2__)
    | bit(kIsaAvx2)
#endif
#if defined(__FMA__)
    | bit(kIsaFma)
#endif
#if defined(__F16C__)
    | bit(kIsaF16c)
#endif
#if defined(__BMI__)
    | bit(kIsaBmi)
#endif
#if defined(__BMI2__)
    | bit(kIsaBmi2)
#endif
#if defined(__LZCNT__)
    | bit(kIsaLzcnt)
#endif
#if defined(__MOVBE__)
    | bit(kIsaMovbe)
#endif
#if defined(__GFNI__)
    | bit(kIsaGfni)
#endif
#if defined(__VAES__)
    | bit(kIsaVaes)
#endif
#if defined(__VPCLMULQDQ__)
    | bit(kIsaVpclmulqdq)
#endif
#if defined(__AVX512F__)
    | bit(kIsaAvx512f)
#endif
#if defined(__AVX512CD__)
    | bit(kIsaAvx512cd)
#endif
#if defined(__AVX512BW__)
    | bit(kIsaAvx512bw)
#endif
#if defined(__AVX512DQ__)
    | bit(kIsaAvx512dq)
#endif
#if defined(__AVX512VL__)
    | bit(kIsaAvx512vl)
#endif
#if defined(__AVX512IFMA__)
    | bit(kIsaAvx512ifma)
#endif
#if defined(__AVX512VBMI__)
    | bit(kIsaAvx512vbmi)
#endif
#if defined(__AVX512VBMI2__)
    | bit(kIsaAvx512vbmi2)
#endif
#if defined(__AVX512VNNI__)
    | bit(kIsaAvx512vnni)
#endif
#if defined(__AVX512BITALG__)
    | bit(kIsaAvx512bitalg)
#endif
#if defined(__AVX512VPOPCNTDQ__)
    | bit(kIsaAvx512vpopcntdq)
#endif
#if defined(__AVX512BF16__)
    | bit(kIsaAvx512bf16)
#endif
#if defined(__AVX512FP16__)
    | bit(kIsaAvx512fp16)
#endif
#if defined(__AVXVNNI__)
    | bit(kIsaAvxvnni)
#endif
#endif  // __x86_64__
    ;

}  // namespace ip
