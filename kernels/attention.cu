// Launcher of decode attention: validate, lay out the workspace, dispatch (D, Dv) to compile-time
// sizes (64, 128, 256; anything else takes the generic kernel), launch the five kernels on the stream.
#include "kernels/attention.h"

#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>

#include "kernels/attention.cuh"
#include "kernels/cuda_check.h"
#include "kernels/launch.h"

namespace ip::cuda {
namespace {

using detail::AttnParams;

constexpr std::size_t kAlign = 256;
std::size_t align_up(std::size_t x) { return (x + kAlign - 1) / kAlign * kAlign; }

// Byte offsets of the workspace parts (one definition for the size query and the launch).
struct Layout {
  SplitPlan plan;
  std::size_t status = 0, attended = 0, partial_pos = 0, split_offset = 0, part_ml = 0, part_o = 0, final_ml = 0;
  std::size_t total = 0;
};

Layout layout_of(const AttentionArgs& a, long long max_attended) {
  Layout l;
  const long long B = a.batch.requests;
  l.plan = plan_splits(B, max_attended, a.blocks ? -1 : a.batch.total_tokens, detail::kAttnTargetSplits,
                       detail::kAttnMinSplit, detail::kAttnTile);
  const auto H = static_cast<std::size_t>(a.heads), S = static_cast<std::size_t>(l.plan.max_splits);
  std::size_t at = 0;
  auto take = [&](std::size_t bytes) {
    const std::size_t off = at;
    at = align_up(at + bytes);
    return off;
  };
  l.status = take(sizeof(int));
  l.attended = take(sizeof(long long) * B);
  l.partial_pos = take(sizeof(long long) * B);
  l.split_offset = take(sizeof(long long) * (B + 1));
  l.part_ml = take(sizeof(float) * S * H * 2);
  l.part_o = take(sizeof(float) * S * H * static_cast<std::size_t>(a.vdim));
  l.final_ml = take(sizeof(float) * B * H * 2);
  l.total = at;
  return l;
}

void validate(const AttentionArgs& a, long long max_attended) {
  IP_REQUIRE(a.batch.requests >= 1 && a.batch.requests <= 65535, "attention: batch.requests = {} (must be 1..65535)",
             a.batch.requests);
  IP_REQUIRE(a.batch.token_offset != nullptr, "attention: batch.token_offset is null");
  IP_REQUIRE(a.batch.total_tokens >= 0, "attention: batch.total_tokens = {} (negative)", a.batch.total_tokens);
  IP_REQUIRE(a.dim >= 1, "attention: dim = {} (must be >= 1)", a.dim);
  IP_REQUIRE(a.vdim >= 1, "attention: vdim = {} (must be >= 1)", a.vdim);
  IP_REQUIRE(a.heads >= 1, "attention: heads = {} (must be >= 1)", a.heads);
  IP_REQUIRE((a.heads + detail::kAttnHeads - 1) / detail::kAttnHeads <= 65535, "attention: heads = {} (too many)",
             a.heads);
  IP_REQUIRE(max_attended >= 1, "attention: max_attended = {} (must be >= 1)", max_attended);
  IP_REQUIRE(!a.blocks || a.block_offset != nullptr, "attention: blocks given without block_offset");
  IP_REQUIRE(!a.blocks || a.block_size >= 1, "attention: block_size = {} (must be >= 1)", a.block_size);
  IP_REQUIRE(!a.probs || a.prob_offset != nullptr, "attention: probs given without prob_offset");
}

}  // namespace

std::size_t attention_workspace_bytes(const AttentionArgs& a, long long max_attended) {
  validate(a, max_attended);
  return layout_of(a, max_attended).total;
}

void attention(const AttentionArgs& a, cudaStream_t stream) {
  validate(a, a.max_attended);
  IP_REQUIRE(a.batch.total_tokens == 0 || (a.keys && a.values), "attention: keys or values is null");
  // The kernels load row 0 in place of an invalid token (a block id past its request's end, or -1) and
  // discard it: with blocks, row 0 must exist.
  IP_REQUIRE(!a.blocks || a.batch.total_tokens >= 1, "attention: blocks given over a batch of 0 tokens");
  IP_REQUIRE(a.queries != nullptr, "attention: queries is null");
  IP_REQUIRE(a.out != nullptr, "attention: out is null");
  const Layout l = layout_of(a, a.max_attended);
  IP_REQUIRE(a.workspace != nullptr, "attention: workspace is null");
  IP_REQUIRE(a.workspace_bytes >= l.total, "attention: workspace of {} bytes, {} bytes needed", a.workspace_bytes,
             l.total);
  IP_REQUIRE(l.plan.max_splits <= 0x7fffffffLL, "attention: {} splits exceed one launch", l.plan.max_splits);

  if (resolve_attn_kernel(a.kernel) == AttnKernel::lanes) {
    IP_REQUIRE(detail::attn_lanes_dims(a.dim, a.vdim),
               "attention: kernel = lanes takes dim and vdim in {{64, 128, 256}}, not dim {} / vdim {}", a.dim,
               a.vdim);
    IP_REQUIRE(((reinterpret_cast<std::uintptr_t>(a.keys) | reinterpret_cast<std::uintptr_t>(a.values)) & 15u) == 0,
               "attention: kernel = lanes needs 16-byte aligned keys and values");
    IP_REQUIRE(a.batch.total_tokens < (1LL << 31), "attention: kernel = lanes takes fewer than 2^31 tokens, not {}",
               a.batch.total_tokens);
  }
  int dev = 0, smem_max = 0;
  IP_CUDA_CHECK(cudaGetDevice(&dev));
  IP_CUDA_CHECK(cudaDeviceGetAttribute(&smem_max, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  const std::size_t smem = detail::attn_smem_bytes(a.dim, a.vdim);
  if (smem > static_cast<std::size_t>(smem_max))
    throw Error(fmt::format("attention: unsupported dim {} / vdim {}: {} bytes of shared memory, the device allows {}",
                            a.dim, a.vdim, smem, smem_max));

  AttnParams p;
  p.requests = a.batch.requests;
  p.token_offset = a.batch.token_offset;
  p.keys = a.keys;
  p.values = a.values;
  p.dim = a.dim;
  p.vdim = a.vdim;
  p.queries = a.queries;
  p.heads = a.heads;
  p.blocks = a.blocks;
  p.block_offset = a.block_offset;
  p.block_size = a.blocks ? a.block_size : 1;
  p.max_attended = a.max_attended;
  p.out = a.out;
  p.probs = a.probs;
  p.prob_offset = a.prob_offset;
  p.scale = 1.0f / std::sqrt(static_cast<float>(a.dim));  // as core/attention.cc
  p.split_tokens = l.plan.split_tokens;
  p.max_splits = l.plan.max_splits;
  auto* ws = static_cast<unsigned char*>(a.workspace);
  p.status = reinterpret_cast<int*>(ws + l.status);
  p.attended = reinterpret_cast<long long*>(ws + l.attended);
  p.partial_pos = reinterpret_cast<long long*>(ws + l.partial_pos);
  p.split_offset = reinterpret_cast<long long*>(ws + l.split_offset);
  p.part_ml = reinterpret_cast<float*>(ws + l.part_ml);
  p.part_o = reinterpret_cast<float*>(ws + l.part_o);
  p.final_ml = reinterpret_cast<float*>(ws + l.final_ml);

  IP_CUDA_CHECK(cudaMemsetAsync(p.status, 0, sizeof(int), stream));
  IP_LAUNCH(p.requests, detail::kPrepThreads, 0, stream, detail::attn_prep_kernel)(p);
  IP_CUDA_CHECK(cudaGetLastError());
  IP_LAUNCH(1, detail::kScanThreads, 0, stream, detail::attn_scan_kernel)(p);
  IP_CUDA_CHECK(cudaGetLastError());

  if (resolve_attn_kernel(a.kernel) == AttnKernel::lanes) {
    const dim3 lgrid(static_cast<unsigned>(l.plan.max_splits),
                     static_cast<unsigned>((a.heads + detail::kAttnLaneHeads - 1) / detail::kAttnLaneHeads));
    auto launch_lanes = [&](auto kernel) {
      IP_LAUNCH(lgrid, detail::kAttnThreads, 0, stream, kernel)(p);
      IP_CUDA_CHECK(cudaGetLastError());
    };
    auto lanes_dv = [&](auto kd) {
      constexpr int kD = decltype(kd)::value;
      switch (a.vdim) {
        case 64: return launch_lanes(detail::attn_lanes_kernel<kD, 64>);
        case 128: return launch_lanes(detail::attn_lanes_kernel<kD, 128>);
        default: return launch_lanes(detail::attn_lanes_kernel<kD, 256>);
      }
    };
    if (lgrid.x > 0) {
      switch (a.dim) {
        case 64: lanes_dv(std::integral_constant<int, 64>{}); break;
        case 128: lanes_dv(std::integral_constant<int, 128>{}); break;
        default: lanes_dv(std::integral_constant<int, 256>{}); break;
      }
    }
  }
  const dim3 grid(resolve_attn_kernel(a.kernel) == AttnKernel::lanes ? 0u : static_cast<unsigned>(l.plan.max_splits),
                  static_cast<unsigned>((a.heads + detail::kAttnHeads - 1) / detail::kAttnHeads));
  auto launch = [&](auto kernel) {
    if (smem > 48 * 1024)
      IP_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
    IP_LAUNCH(grid, detail::kAttnThreads, smem, stream, kernel)(p);
    IP_CUDA_CHECK(cudaGetLastError());
  };
  auto dispatch_dv = [&](auto kd) {
    constexpr int kD = decltype(kd)::value;
    switch (a.vdim) {
      case 64: return launch(detail::attn_split_kernel<kD, 64>);
      case 128: return launch(detail::attn_split_kernel<kD, 128>);
      case 256: return launch(detail::attn_split_kernel<kD, 256>);
      default: return launch(detail::attn_split_kernel<0, 0>);  // generic: any vdim that fits
    }
  };
  if (grid.x > 0) {
    switch (a.dim) {
      case 64: dispatch_dv(std::integral_constant<int, 64>{}); break;
      case 128: dispatch_dv(std::integral_constant<int, 128>{}); break;
      case 256: dispatch_dv(std::integral_constant<int, 256>{}); break;
      default: launch(detail::attn_split_kernel<0, 0>); break;  // generic: any dim that fits
    }
  }

  const long long bh = static_cast<long long>(a.batch.requests) * a.heads;
  IP_REQUIRE(bh <= 0x7fffffffLL, "attention: {} requests x heads exceed one launch", bh);
  IP_LAUNCH(static_cast<unsigned>(bh), detail::kCombineThreads, 0, stream, detail::attn_combine_kernel)(p);
  IP_CUDA_CHECK(cudaGetLastError());
  if (a.probs) {
    const long long per_request = static_cast<long long>(a.heads) * a.max_attended;
    long long x = (per_request + detail::kProbThreads * 8 - 1) / (detail::kProbThreads * 8);
    x = x < 1 ? 1 : (x > detail::kProbBlocksMax ? detail::kProbBlocksMax : x);
    const dim3 pgrid(static_cast<unsigned>(x), static_cast<unsigned>(a.batch.requests));
    IP_LAUNCH(pgrid, detail::kProbThreads, 0, stream, detail::attn_prob_kernel)(p);
    IP_CUDA_CHECK(cudaGetLastError());
  }
}

void attention_check(const AttentionArgs& a, cudaStream_t stream) {
  IP_REQUIRE(a.workspace != nullptr, "attention_check: workspace is null");
  int st = 0;
  // The status word sits at offset 0 of the workspace.
  IP_CUDA_CHECK(cudaMemcpyAsync(&st, a.workspace, sizeof(int), cudaMemcpyDeviceToHost, stream));
  IP_CUDA_CHECK(cudaStreamSynchronize(stream));
  if (!st) return;
  std::string why;
  auto add = [&](int bit, const char* text) {
    if (st & bit) why += (why.empty() ? "" : "; ") + std::string(text);
  };
  add(detail::kStatusBadBlock, "a block id lies outside its request (or block_offset decreases)");
  add(detail::kStatusPartialTwice, "the partial last block of a request is listed more than once");
  add(detail::kStatusTooLong, fmt::format("a request attends more than max_attended = {} tokens", a.max_attended).c_str());
  add(detail::kStatusProbRowShort, "a probability row (prob_offset) is shorter than the attended count");
  add(detail::kStatusTooManySplits, "more splits than the workspace holds");
  throw Error("attention: invalid input: " + why);
}

}  // namespace ip::cuda
