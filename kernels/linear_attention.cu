// Launchers of the gated linear attention kernels (kernels/linear_attention.cuh): validate the
// arguments (ip::Error naming the bad one) before any CUDA call, launch on the stream, check.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "core/error.h"
#include "kernels/cuda_check.h"
#include "kernels/launch.h"
#include "kernels/linear_attention.cuh"
#include "kernels/linear_attention.h"

namespace ip::cuda {
namespace {

constexpr int kMaxDim = 1 << 16;          // dk, dv bound (int index arithmetic in shared memory)
constexpr int kDefaultSmemBytes = 48 * 1024;

int smem_optin_bytes() {
  int dev = 0, bytes = 0;
  IP_CUDA_CHECK(cudaGetDevice(&dev));
  IP_CUDA_CHECK(cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  return bytes;
}

long long smem_bytes(int dk, int chunk, bool outputs) {
  return gla_smem_floats(dk, chunk, outputs) * static_cast<long long>(sizeof(float));
}

void validate_gla(const GlaArgs& a, const char* what) {
  IP_REQUIRE(a.n >= 0, "{}: n = {} tokens (must be >= 0)", what, a.n);
  IP_REQUIRE(a.dk >= 1 && a.dk <= kMaxDim, "{}: dk = {} outside [1, {}]", what, a.dk, kMaxDim);
  IP_REQUIRE(a.dv >= 1 && a.dv <= kMaxDim, "{}: dv = {} outside [1, {}]", what, a.dv, kMaxDim);
  IP_REQUIRE(a.state, "{}: state is null", what);
  if (a.n == 0) return;
  IP_REQUIRE(a.keys, "{}: keys are null", what);
  IP_REQUIRE(a.values, "{}: values are null", what);
  IP_REQUIRE(a.gates, "{}: gates are null", what);
  IP_REQUIRE(!a.queries || a.out, "{}: queries given but out is null", what);
}

}  // namespace

int gla_max_chunk(int dk, bool outputs, int want) {
  IP_REQUIRE(dk >= 1 && dk <= kMaxDim, "gla_max_chunk: dk = {} outside [1, {}]", dk, kMaxDim);
  const long long limit = smem_optin_bytes();
  for (int c = std::min(want, 4096); c >= 1; --c)
    if (smem_bytes(dk, c, outputs) <= limit) return c;
  return 0;
}

void gla_chunked(const GlaArgs& a, cudaStream_t stream) {
  validate_gla(a, "gla_chunked");
  IP_REQUIRE(a.chunk >= 1 && a.chunk <= 4096, "gla_chunked: chunk = {} outside [1, 4096]", a.chunk);
  if (a.workspace) {
    const std::size_t need = gla_chunked_workspace_bytes(a.n, a.dk, a.dv, a.chunk);
    IP_REQUIRE(a.workspace_bytes >= need, "gla_chunked: workspace_bytes = {} < {} needed (gla_chunked_workspace_bytes)",
               a.workspace_bytes, need);
    IP_REQUIRE(reinterpret_cast<std::uintptr_t>(a.workspace) % 4 == 0, "gla_chunked: workspace is not 4-byte aligned");
    IP_REQUIRE(gla_num_chunks(a.n, a.chunk) < (1LL << 31), "gla_chunked: {} chunks exceed one launch",
               gla_num_chunks(a.n, a.chunk));
  }
  if (a.n == 0) return;
  const bool outputs = a.queries != nullptr;
  const long long bytes = smem_bytes(a.dk, a.chunk, outputs);
  const int limit = smem_optin_bytes();
  if (bytes > limit)
    throw Error(fmt::format("gla_chunked: unsupported chunk = {} with dk = {}: needs {} bytes of shared memory, the "
                            "device allows {} (largest chunk that fits: {})",
                            a.chunk, a.dk, bytes, limit, gla_max_chunk(a.dk, outputs, a.chunk)));
  GlaKernelParams p{a.keys, a.values, a.gates, a.queries, a.out, a.state, a.n, a.dk, a.dv, a.chunk};
  const int tiles = (a.dv + kGlaTile - 1) / kGlaTile;
  auto allow = [&](auto kernel, long long b) {
    if (b > kDefaultSmemBytes)
      IP_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(b)));
  };
  if (!a.workspace) {
    allow(gla_chunked_kernel, bytes);
    IP_LAUNCH(tiles, kGlaThreads, static_cast<std::size_t>(bytes), stream, gla_chunked_kernel)(p);
    IP_CUDA_CHECK(cudaGetLastError());
    return;
  }
  // The chunk-parallel form: sums, scan, outputs.
  const long long chunks = gla_num_chunks(a.n, a.chunk);
  float* const U = static_cast<float*>(a.workspace);
  float* const G = U + chunks * a.dk * static_cast<long long>(a.dv);
  const dim3 grid(static_cast<unsigned>(chunks), static_cast<unsigned>(tiles));
  const long long sum_bytes = smem_bytes(a.dk, a.chunk, false);
  allow(gla_chunk_sums_kernel, sum_bytes);
  IP_LAUNCH(grid, kGlaThreads, static_cast<std::size_t>(sum_bytes), stream, gla_chunk_sums_kernel)(p, U, G);
  IP_CUDA_CHECK(cudaGetLastError());
  const long long elems = static_cast<long long>(a.dk) * a.dv;
  IP_LAUNCH(static_cast<unsigned>((elems + kGlaScanThreads - 1) / kGlaScanThreads), kGlaScanThreads, 0, stream,
            gla_state_scan_kernel)(a.state, U, G, chunks, a.dk, a.dv, outputs);
  IP_CUDA_CHECK(cudaGetLastError());
  if (outputs) {
    allow(gla_chunk_outputs_kernel, bytes);
    IP_LAUNCH(grid, kGlaThreads, static_cast<std::size_t>(bytes), stream, gla_chunk_outputs_kernel)(p, U);
    IP_CUDA_CHECK(cudaGetLastError());
  }
}

std::size_t gla_chunked_workspace_bytes(long long n, int dk, int dv, int chunk) {
  IP_REQUIRE(n >= 0, "gla_chunked_workspace_bytes: n = {} tokens (must be >= 0)", n);
  IP_REQUIRE(dk >= 1 && dk <= kMaxDim, "gla_chunked_workspace_bytes: dk = {} outside [1, {}]", dk, kMaxDim);
  IP_REQUIRE(dv >= 1 && dv <= kMaxDim, "gla_chunked_workspace_bytes: dv = {} outside [1, {}]", dv, kMaxDim);
  IP_REQUIRE(chunk >= 1 && chunk <= 4096, "gla_chunked_workspace_bytes: chunk = {} outside [1, 4096]", chunk);
  const long long chunks = gla_num_chunks(n, chunk);
  return static_cast<std::size_t>(chunks) * (static_cast<std::size_t>(dk) * dv + dk) * sizeof(float);
}

void gla_append(const GlaArgs& a, cudaStream_t stream) {
  validate_gla(a, "gla_append");
  IP_REQUIRE(!a.queries, "gla_append: queries are not supported (the append only updates the state; use gla_chunked)");
  if (a.n == 0) return;
  const long long elems = static_cast<long long>(a.dk) * a.dv;
  const long long blocks = (elems + kAppendThreads - 1) / kAppendThreads;
  IP_LAUNCH(static_cast<unsigned>(blocks), kAppendThreads, 0, stream, gla_append_kernel)(a.keys, a.values, a.gates,
                                                                                       a.state, a.n, a.dk, a.dv);
  IP_CUDA_CHECK(cudaGetLastError());
}

void gla_readout(const GlaReadoutArgs& a, cudaStream_t stream) {
  IP_REQUIRE(a.dk >= 1 && a.dk <= kMaxDim, "gla_readout: dk = {} outside [1, {}]", a.dk, kMaxDim);
  IP_REQUIRE(a.dv >= (a.normalise ? 2 : 1) && a.dv <= kMaxDim, "gla_readout: dv = {} outside [{}, {}]", a.dv,
             a.normalise ? 2 : 1, kMaxDim);
  IP_REQUIRE(a.heads >= 0 && a.heads <= (1 << 30), "gla_readout: heads = {} outside [0, 2^30]", a.heads);
  IP_REQUIRE(std::isfinite(a.feature_scale) && a.feature_scale >= 0.0f, "gla_readout: feature_scale = {} (must be >= 0)",
             a.feature_scale);
  if (a.heads == 0) return;
  IP_REQUIRE(a.state, "gla_readout: state is null");
  IP_REQUIRE(a.queries, "gla_readout: queries are null");
  IP_REQUIRE(a.out, "gla_readout: out is null");
  const long long bytes = (static_cast<long long>(a.dk) + a.dv) * static_cast<long long>(sizeof(float));
  const int limit = smem_optin_bytes();
  IP_REQUIRE(bytes <= limit, "gla_readout: unsupported dk + dv = {}: needs {} bytes of shared memory, the device allows {}",
             a.dk + a.dv, bytes, limit);
  if (bytes > kDefaultSmemBytes)
    IP_CUDA_CHECK(cudaFuncSetAttribute(gla_readout_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(bytes)));
  IP_LAUNCH(a.heads, kReadoutThreads, static_cast<std::size_t>(bytes), stream, gla_readout_kernel)(
      a.state, a.queries, a.out, a.dk, a.dv, a.feature_scale, a.normalise);
  IP_CUDA_CHECK(cudaGetLastError());
}

void local_inputs(const LocalInputArgs& a, cudaStream_t stream) {
  IP_REQUIRE(a.n >= 0, "local_inputs: n = {} (must be >= 0)", a.n);
  IP_REQUIRE(a.first >= 0, "local_inputs: first = {} (must be >= 0)", a.first);
  IP_REQUIRE(a.dk >= 1 && a.dk <= kMaxDim, "local_inputs: dk = {} outside [1, {}]", a.dk, kMaxDim);
  IP_REQUIRE(a.dv >= 1 && a.dv < kMaxDim, "local_inputs: dv = {} outside [1, {})", a.dv, kMaxDim);
  IP_REQUIRE(std::isfinite(a.scale) && a.scale > 0.0f, "local_inputs: scale = {} (must be > 0)", a.scale);
  validate_gates(a.gates);
  if (a.n == 0) return;
  IP_REQUIRE(a.keys && a.values, "local_inputs: keys or values are null");
  IP_REQUIRE(a.out_keys && a.out_values && a.out_gates, "local_inputs: an output (out_keys, out_values, out_gates) is null");
  const long long work = a.n * std::max(a.dk, a.dv + 1);
  const long long blocks = std::min<long long>((work + kInputThreads - 1) / kInputThreads, 1 << 16);
  IP_LAUNCH(static_cast<unsigned>(blocks), kInputThreads, 0, stream, local_inputs_kernel)(
      a.keys, a.values, a.first, a.n, a.dk, a.dv, a.scale, a.gates, a.out_keys, a.out_values, a.out_gates);
  IP_CUDA_CHECK(cudaGetLastError());
}

}  // namespace ip::cuda
