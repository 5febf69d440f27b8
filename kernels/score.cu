// Launcher of multi-head index scoring: validates, chooses the math (kernels/score.h), dispatches
// precision / dim / head tiles to compile-time values and launches kernels/score.cuh.
#include "kernels/score.h"

#include <cstdint>

#include "core/error.h"
#include "kernels/cuda_check.h"
#include "kernels/launch.h"
#include "kernels/score.cuh"

namespace ip::cuda {
namespace {

using detail::ScoreParams;

constexpr int kCoreThreads = 256;       // 8 warps
constexpr int kMaxHeads = 64;

bool aligned16(const void* p) { return (reinterpret_cast<std::uintptr_t>(p) & 15u) == 0; }
bool bf16_exact(Precision p) { return p == Precision::bf16 || p == Precision::int8 || p == Precision::fp8; }
bool f16_exact(Precision p) { return p == Precision::fp16 || p == Precision::int8 || p == Precision::fp8; }
// The split math with the parts the rows allow (kernels/score.h).
ScoreMath split_for(Precision p) {
  return f16_exact(p) ? ScoreMath::f16x2 : (bf16_exact(p) ? ScoreMath::bf16x2 : ScoreMath::bf16x3);
}
bool mma_dim(int d) { return d == 64 || d == 128 || d == 256; }

void validate(const ScoreArgs& a) {
  IP_REQUIRE(a.batch.requests >= 1, "score: batch.requests = {} (must be >= 1)", a.batch.requests);
  IP_REQUIRE(a.batch.entry_offset != nullptr, "score: batch.entry_offset is null");
  IP_REQUIRE(a.batch.total_entries >= 0, "score: batch.total_entries = {} (must be >= 0)", a.batch.total_entries);
  IP_REQUIRE(a.dim >= 1, "score: dim = {} (must be >= 1)", a.dim);
  IP_REQUIRE(a.heads >= 1 && a.heads <= kMaxHeads, "score: heads = {} outside [1, {}]", a.heads, kMaxHeads);
  if (a.batch.total_entries == 0) return;
  IP_REQUIRE(a.rows != nullptr, "score: rows is null");
  IP_REQUIRE(a.queries != nullptr, "score: queries is null");
  IP_REQUIRE(aligned16(a.queries),
             "score: queries is not 16-byte aligned (the kernels load a lane's share of the query in float4; "
             "cudaMalloc's allocations are aligned)");
  IP_REQUIRE(a.head_weights != nullptr, "score: head_weights is null");
  IP_REQUIRE(a.scores != nullptr, "score: scores is null");
  const bool scaled = a.precision == Precision::int8 || a.precision == Precision::fp8;
  IP_REQUIRE(!scaled || a.scales != nullptr, "score: scales is null (precision {} needs one scale per row)",
             to_string(a.precision));
  const int eb = element_bytes(a.precision);
  IP_REQUIRE(reinterpret_cast<std::uintptr_t>(a.rows) % static_cast<std::uintptr_t>(eb) == 0,
             "score: rows is not aligned to its {}-byte elements", eb);
}

ScoreMath resolve(const ScoreArgs& a) {
  const bool mma_ok = mma_dim(a.dim) && !a.maxmin && aligned16(a.rows);
  switch (a.math) {
    case ScoreMath::automatic:
      if (!mma_ok || a.heads < 8) return ScoreMath::fp32;
      return split_for(a.precision);
    case ScoreMath::fp32:
      return ScoreMath::fp32;
    case ScoreMath::bf16x2:
    case ScoreMath::bf16x3:
    case ScoreMath::bf16:
    case ScoreMath::f16x2:
    case ScoreMath::f16:
    case ScoreMath::split:
      IP_REQUIRE(!a.maxmin, "score: tensor-core math does not support maxmin (use math fp32 or automatic)");
      IP_REQUIRE(mma_dim(a.dim), "score: unsupported dim {} for tensor-core math (64, 128 or 256)", a.dim);
      IP_REQUIRE(aligned16(a.rows), "score: rows must be 16-byte aligned for tensor-core math");
      IP_REQUIRE(a.math != ScoreMath::bf16x2 || bf16_exact(a.precision),
                 "score: math bf16x2 needs rows exact in bf16 (bf16, int8, fp8), not {} (use bf16x3)",
                 to_string(a.precision));
      IP_REQUIRE((a.math != ScoreMath::f16x2 && a.math != ScoreMath::f16) || f16_exact(a.precision),
                 "score: math f16x2 and f16 need rows exact in f16 (fp16, int8, fp8), not {} (use split or bf16)",
                 to_string(a.precision));
      if (a.math == ScoreMath::split) return split_for(a.precision);
      if (a.math == ScoreMath::bf16x3 && bf16_exact(a.precision)) return ScoreMath::bf16x2;  // rows' lo parts: 0
      return a.math;
  }
  throw Error("score: unsupported math value");
}

int sm_count() {
  int dev = 0, sms = 0;
  IP_CUDA_CHECK(cudaGetDevice(&dev));
  IP_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  return sms;
}

// Blocks of `kernel` resident on one SM at once (registers, shared memory, threads), at least 1. Both
// grids are one wave of them: every resident warp streams rows, and no SM takes a second round of work
// while others idle (the tensor-core grid of 4 blocks per SM before 2026-12-04 left 12 of the 28 warps an
// SM holds idle at 64-72 registers, and was 1.33 waves at the 140-164 registers of H = 64; the CUDA-core
// grid of 8 blocks per SM, 2-4 waves where ptxas's registers let 2-4 be resident).
template <class Kernel>
long long resident_blocks_per_sm(Kernel kernel, int threads, int smem) {
  int blocks = 0;
  IP_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, threads, smem));
  return blocks > 1 ? blocks : 1;
}

// A grid-stride grid: one wave of resident blocks at most, `per_block` entries a block step.
template <class Kernel>
void launch_grid_stride(Kernel kernel, long long per_block, const ScoreParams& p, cudaStream_t stream) {
  const long long blocks_needed = (p.entries + per_block - 1) / per_block;
  const long long cap = static_cast<long long>(sm_count()) * resident_blocks_per_sm(kernel, kCoreThreads, 0);
  const int grid = static_cast<int>(blocks_needed < cap ? blocks_needed : cap);
  IP_LAUNCH(grid, kCoreThreads, 0, stream, kernel)(p);
  IP_CUDA_CHECK(cudaGetLastError());
}

template <Precision P, int D, bool MAXMIN>
void launch_core(const ScoreParams& p, cudaStream_t stream) {
  constexpr long long per_block = kCoreThreads / 32 * detail::core_entries_per_warp<P, D, MAXMIN>();
  launch_grid_stride(detail::score_cuda_core_kernel<P, D, MAXMIN>, per_block, p, stream);
}

template <Precision P>
void launch_core_pipelined(const ScoreParams& p, cudaStream_t stream) {
  constexpr long long per_block = kCoreThreads / 32 * detail::core_entries_per_warp<P, 128, false>();
  launch_grid_stride(detail::score_cuda_core_pipelined_kernel<P, 128>, per_block, p, stream);
}

template <Precision P, bool MAXMIN>
void launch_generic(const ScoreParams& p, cudaStream_t stream) {
  launch_grid_stride(detail::score_generic_kernel<P, MAXMIN>, kCoreThreads / 32, p, stream);
}

template <Precision P, bool MAXMIN>
void dispatch_core_dim(const ScoreParams& p, bool aligned, cudaStream_t stream) {
  if (!aligned) return launch_generic<P, MAXMIN>(p, stream);
  switch (p.dim) {
    case 64: return launch_core<P, 64, MAXMIN>(p, stream);
    case 128: return launch_core<P, 128, MAXMIN>(p, stream);
    case 256: return launch_core<P, 256, MAXMIN>(p, stream);
    default: return launch_generic<P, MAXMIN>(p, stream);  // the generic-dim kernel, not a fallback of a fast one
  }
}

template <Precision P>
void dispatch_core(const ScoreParams& p, bool maxmin, bool aligned, bool pipelined, cudaStream_t stream) {
  if (pipelined && !maxmin && aligned && p.dim == 128) return launch_core_pipelined<P>(p, stream);
  if (maxmin)
    dispatch_core_dim<P, true>(p, aligned, stream);
  else
    dispatch_core_dim<P, false>(p, aligned, stream);
}

template <Precision P, int D, int NT, bool F16>
void launch_mma(const ScoreParams& p, cudaStream_t stream) {
  constexpr int smem = detail::kMmaSmemBytes<D, NT, F16>;
  constexpr int threads = detail::kMmaWarps * 32;
  auto kernel = [] {
    if constexpr (F16)
      return detail::score_mma_f16_kernel<P, D, NT>;
    else
      return detail::score_mma_kernel<P, D, NT>;
  }();
  if (smem > 48 * 1024) IP_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  const long long tiles = (p.entries + detail::kMmaEntriesPerBlock - 1) / detail::kMmaEntriesPerBlock;
  const long long cap = static_cast<long long>(sm_count()) * resident_blocks_per_sm(kernel, threads, smem);
  const int grid = static_cast<int>(tiles < cap ? tiles : cap);
  IP_LAUNCH(grid, threads, smem, stream, kernel)(p);
  IP_CUDA_CHECK(cudaGetLastError());
}

template <Precision P, int D, bool F16>
void dispatch_mma_heads(const ScoreParams& p, cudaStream_t stream) {
  const int nt = (p.heads + 7) / 8;
  if (nt <= 1) return launch_mma<P, D, 1, F16>(p, stream);
  if (nt <= 2) return launch_mma<P, D, 2, F16>(p, stream);
  if (nt <= 4) return launch_mma<P, D, 4, F16>(p, stream);
  if (nt <= 8) return launch_mma<P, D, 8, F16>(p, stream);
  throw Error(fmt::format("score: unsupported heads {} for tensor-core math", p.heads));
}

template <Precision P, bool F16 = false>
void dispatch_mma(const ScoreParams& p, cudaStream_t stream) {
  switch (p.dim) {
    case 64: return dispatch_mma_heads<P, 64, F16>(p, stream);
    case 128: return dispatch_mma_heads<P, 128, F16>(p, stream);
    case 256: return dispatch_mma_heads<P, 256, F16>(p, stream);
    default: throw Error(fmt::format("score: unsupported dim {} for tensor-core math", p.dim));
  }
}

}  // namespace

ScoreMath resolve_score_math(const ScoreArgs& a) {
  validate(a);
  return resolve(a);
}

void score(const ScoreArgs& a, cudaStream_t stream) {
  const ScoreMath math = resolve_score_math(a);
  if (a.batch.total_entries == 0) return;
  ScoreParams p{a.batch.requests, a.batch.entry_offset, a.batch.total_entries,
                static_cast<const unsigned char*>(a.rows), a.scales, a.dim, a.queries, a.head_weights, a.heads,
                a.scores, math == ScoreMath::bf16x2 || math == ScoreMath::bf16x3 || math == ScoreMath::f16x2,
                math == ScoreMath::bf16x3, 0u};
  if (math == ScoreMath::fp32) {
    const bool aligned = aligned16(a.rows);
    switch (a.precision) {
      case Precision::fp32: return dispatch_core<Precision::fp32>(p, a.maxmin, aligned, a.pipelined, stream);
      case Precision::fp16: return dispatch_core<Precision::fp16>(p, a.maxmin, aligned, a.pipelined, stream);
      case Precision::bf16: return dispatch_core<Precision::bf16>(p, a.maxmin, aligned, a.pipelined, stream);
      case Precision::int8: return dispatch_core<Precision::int8>(p, a.maxmin, aligned, a.pipelined, stream);
      case Precision::fp8: return dispatch_core<Precision::fp8>(p, a.maxmin, aligned, a.pipelined, stream);
      default: throw Error("score: unsupported precision");
    }
  }
  if (math == ScoreMath::f16x2 || math == ScoreMath::f16) {
    switch (a.precision) {
      case Precision::fp16: return dispatch_mma<Precision::fp16, true>(p, stream);
      case Precision::int8: return dispatch_mma<Precision::int8, true>(p, stream);
      case Precision::fp8: return dispatch_mma<Precision::fp8, true>(p, stream);
      default: throw Error("score: f16 parts need rows exact in f16");
    }
  }
  switch (a.precision) {
    case Precision::fp32: return dispatch_mma<Precision::fp32>(p, stream);
    case Precision::fp16: return dispatch_mma<Precision::fp16>(p, stream);
    case Precision::bf16: return dispatch_mma<Precision::bf16>(p, stream);
    case Precision::int8: return dispatch_mma<Precision::int8>(p, stream);
    case Precision::fp8: return dispatch_mma<Precision::fp8>(p, stream);
    default: throw Error("score: unsupported precision");
  }
}

}  // namespace ip::cuda
