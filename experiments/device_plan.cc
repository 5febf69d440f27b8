#include "experiments/device_plan.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "indexpool/build_config.h"
#if IP_HAVE_CUDA
#include <cuda_runtime.h>

#include "kernels/device.h"
#endif

namespace ip::exp {
namespace {
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
}

DeviceShape device_shape(const WorkloadSpec& s) {
  return DeviceShape{static_cast<double>(s.tokens), s.dim, s.index_heads, s.attn_dim, s.attn_heads,
                     s.attn_dim > 0 ? s.value_dim : 0};
}

DeviceShape device_shape(const Workload& w) {
  DeviceShape s;
  s.tokens = static_cast<double>(w.tokens());
  s.dim = static_cast<int>(w.dim());
  s.index_heads = static_cast<int>(w.index_heads());
  if (w.has_attention()) {
    s.attn_dim = static_cast<int>(w.attn_keys.dim(1));
    s.value_dim = static_cast<int>(w.values.dim(1));
    s.attn_heads = w.attn_queries.rank() == 3 ? static_cast<int>(w.attn_queries.dim(1)) : 1;
  }
  return s;
}

DeviceBytes estimate_device_bytes(const DeviceShape& s, const PipelineParams& p) {
  const double T = s.tokens, D = s.dim, H = std::max(1, s.index_heads);
  const Weighting w = p.pool.weights.scheme;
  const double G = w == Weighting::exact ? 1.0 : static_cast<double>(std::max(1, p.pool.group_size));
  const double groups = std::ceil(T / G);
  const double rows = groups * (w == Weighting::maxmin ? 2.0 : 1.0);
  const double k = static_cast<double>(std::min<Index64>(p.topk_tokens, static_cast<Index64>(T)));
  DeviceBytes b;
  b.keys = T * D * 4.0 + T * 4.0;
  b.composites = rows * (D * element_bytes(p.pool.precision) + scale_bytes(p.pool.precision));
  b.scores = T * 4.0 + rows * 4.0 + H * D * 4.0 + H * 4.0 + 2.0 * D * 4.0;
  // ids + values of k, and a radix-select workspace of two (key, id) copies of the longest row.
  b.topk = k * 8.0 + 2.0 * std::max(T, rows) * 8.0 + (1 << 20);
  if (s.attn_dim > 0) {
    const double Ha = std::max(1, s.attn_heads), Da = s.attn_dim, Dv = s.value_dim;
    // keys, values, queries, output, dense probabilities, block list, and split-K partial states
    // (max, sum and a Dv vector per head and per 1024-token slice).
    b.attention = T * (Da + Dv) * 4.0 + Ha * Da * 4.0 + Ha * Dv * 4.0 + Ha * T * 4.0 + groups * 4.0 +
                  Ha * std::ceil(T / 1024.0) * (Dv + 2.0) * 4.0;
  }
  b.stats = T * 4.0 * 3 + groups * 16.0;
  return b;
}

std::string DeviceBytes::describe() const {
  return fmt::format(
      "keys {:.2f} GiB, composites {:.2f} GiB, scores {:.2f} GiB, top-k {:.2f} GiB, attention {:.2f} GiB, "
      "stats {:.2f} GiB; total {:.2f} GiB",
      keys / kGiB, composites / kGiB, scores / kGiB, topk / kGiB, attention / kGiB, stats / kGiB, total() / kGiB);
}

double device_headroom_bytes(double free_bytes) { return 0.05 * std::max(0.0, free_bytes) + 256.0 * (1 << 20); }

DeviceInfo query_device() {
  DeviceInfo d;
#if IP_HAVE_CUDA
  d.cuda_build = true;
  d.devices = ip::cuda::device_count();
  d.description = ip::cuda::describe_devices();
  if (d.devices > 0) {
    std::size_t free_b = 0, total_b = 0;
    if (cudaSetDevice(0) == cudaSuccess && cudaMemGetInfo(&free_b, &total_b) == cudaSuccess) {
      d.free_bytes = static_cast<double>(free_b);
      d.total_bytes = static_cast<double>(total_b);
    } else {
      const cudaError_t err = cudaGetLastError();
      d.devices = 0;
      d.description += fmt::format(" (cudaMemGetInfo failed: {})", cudaGetErrorString(err));
    }
  }
#else
  d.description = "CUDA not built";
#endif
  return d;
}

BackendPlan plan_backend(const std::string& requested, const DeviceShape& s, const PipelineParams& p,
                         const DeviceInfo& d) {
  if (requested == "cpu") return {"cpu", ""};
  IP_REQUIRE(requested == "cuda" || requested == "auto", "backend '{}' is not one of: cpu, cuda, auto", requested);
  const bool usable = d.cuda_build && d.devices > 0;
  if (!usable) {
    if (requested == "auto") return {"cpu", ""};
    if (!d.cuda_build)
      return {"cuda", "backend = cuda: this build has no CUDA (IP_HAVE_CUDA = 0: nvcc was not found at configure "
                      "time or INDEXPOOL_CUDA=OFF)"};
    // describe_devices() already says "no CUDA device (why)" when it knows why.
    if (d.description.rfind("no CUDA device", 0) == 0) return {"cuda", "backend = cuda: " + d.description};
    return {"cuda", fmt::format("backend = cuda: no CUDA device ({})", d.description)};
  }
  const DeviceBytes need = estimate_device_bytes(s, p);
  const double room = d.free_bytes - device_headroom_bytes(d.free_bytes);
  if (need.total() > room)
    return {"cuda", fmt::format("backend = {}: estimated device memory {:.2f} GiB ({}) exceeds the {:.2f} GiB free "
                                "of {:.2f} GiB less headroom {:.2f} GiB",
                                requested, need.total() / kGiB, need.describe(), d.free_bytes / kGiB,
                                d.total_bytes / kGiB, device_headroom_bytes(d.free_bytes) / kGiB)};
  return {"cuda", ""};
}

}  // namespace ip::exp
