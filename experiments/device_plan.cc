#include "experiments/device_plan.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/topk.h"
#include "experiments/config.h"
#include "indexpool/build_config.h"
#include "kernels/linear_attention_tuning.h"
#if IP_HAVE_CUDA
#include <cuda_runtime.h>

#include "kernels/attention.h"
#include "kernels/device.h"
#include "kernels/topk.h"
#endif

namespace ip::exp {
namespace {

// The largest k the GPU top-k takes (kernels/topk.h).
constexpr Index64 kGpuTopkMaxK = 4096;
#if IP_HAVE_CUDA
static_assert(kGpuTopkMaxK == ip::cuda::kTopkMaxK, "kGpuTopkMaxK must follow kernels/topk.h");
#endif

// The largest k one top-k call of a point asks for: the groups it selects, and with fidelity on the
// exact indexer's k tokens (core/pipeline.cc).
Index64 largest_topk(const DeviceShape& s, const PipelineParams& p) {
  // Adaptive groups are selected on the host (core/decode.cc select_variable): only the exact indexer's.
  if (p.adaptive.enabled) return p.fidelity ? std::min<Index64>(p.topk_tokens, static_cast<Index64>(s.tokens)) : 0;
  const Weighting w = p.pool.weights.scheme;
  const Index64 G = w == Weighting::exact ? 1 : std::max(1, p.pool.group_size);
  const auto T = static_cast<Index64>(s.tokens);
  const Index64 k = std::min<Index64>(p.topk_tokens, T);
  const Index64 k_groups = std::min<Index64>(groups_for_budget(k, static_cast<int>(G)), (T + G - 1) / G);
  return p.fidelity ? std::max(k, k_groups) : k_groups;
}

// Workspaces of the top-k and attention launchers for the largest calls of one request. With CUDA built
// they are the launchers' own sizes (topk_workspace_bytes, attention_workspace_bytes); without it, where
// no CUDA point runs, allowances of the same order.
struct Workspaces {
  double topk = 0, attention = 0;
};
Workspaces launcher_workspaces(const DeviceShape& s, const PipelineParams& p, double rows) {
  Workspaces ws;
  const double T = s.tokens;
  const double longest = std::max(T, rows);
  [[maybe_unused]] const Index64 k = std::min<Index64>(largest_topk(s, p), static_cast<Index64>(longest));
  const double Ha = std::max(1, s.attn_heads);
#if IP_HAVE_CUDA
  if (k >= 1 && k <= kGpuTopkMaxK && longest <= 2147483647.0)
    ws.topk = static_cast<double>(ip::cuda::topk_workspace_bytes(1, static_cast<long long>(longest), static_cast<int>(k)));
  if (s.attn_dim > 0 && T >= 1) {
    // The dense call (fidelity) is the largest: every token attended, one request.
    static const long long offsets[2] = {0, 0};  // only checked for null by the size query
    ip::cuda::AttentionArgs a;
    a.batch.requests = 1;
    a.batch.token_offset = offsets;
    a.batch.total_tokens = static_cast<long long>(T);
    a.dim = s.attn_dim;
    a.vdim = s.value_dim;
    a.heads = static_cast<int>(Ha);
    ws.attention = static_cast<double>(ip::cuda::attention_workspace_bytes(a, static_cast<long long>(T)));
  }
#else
  ws.topk = 2.0 * longest * 8.0 + (1 << 20);  // two (key, id) copies of the longest row, and a histogram
  if (s.attn_dim > 0) ws.attention = Ha * std::ceil(T / 1024.0) * (s.value_dim + 2.0) * 4.0;  // split-K partials
#endif
  return ws;
}
}  // namespace

DeviceShape device_shape(const WorkloadSpec& s) {
  // generate_request makes tokens + steps x append_per_step rows (a growing context's last step sees all).
  const double T =
      static_cast<double>(s.tokens) + static_cast<double>(s.steps) * static_cast<double>(s.append_per_step);
  return DeviceShape{T, s.dim, s.index_heads, s.attn_dim, s.attn_heads, s.attn_dim > 0 ? s.value_dim : 0};
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

double rotating_upload_bytes(const DeviceShape& s) {
  const double D = s.dim, widest = std::max({D, static_cast<double>(s.attn_dim), static_cast<double>(s.value_dim)});
  const double counted = D + (s.attn_dim > 0 ? static_cast<double>(s.attn_dim) + s.value_dim : 0.0);
  return s.tokens * (4.0 * widest - counted) * 4.0;
}

DeviceBytes estimate_device_bytes(const DeviceShape& s, const PipelineParams& p) {
  const double T = s.tokens, D = s.dim, H = std::max(1, s.index_heads);
  const Weighting w = p.pool.weights.scheme;
  const double G = w == Weighting::exact ? 1.0 : static_cast<double>(std::max(1, p.pool.group_size));
  const double row_bytes = D * element_bytes(p.pool.precision) + scale_bytes(p.pool.precision);
  const double per_group = w == Weighting::maxmin ? 2.0 : 1.0;
  // Adaptive groups hold 1 to 16 tokens, as many as the byte budget buys (at most one a token).
  const double groups = p.adaptive.enabled
                            ? std::min(T, std::ceil(p.adaptive.budget_bytes_per_token * T / (per_group * row_bytes)))
                            : std::ceil(T / G);
  const double rows = groups * per_group;
  const double k = static_cast<double>(std::min<Index64>(p.topk_tokens, static_cast<Index64>(T)));
  const Workspaces ws = launcher_workspaces(s, p, rows);
  DeviceBytes b;
  b.keys = T * D * 4.0 + T * 4.0;
  b.composites = rows * row_bytes;
  b.scores = T * 4.0 + rows * 4.0 + H * D * 4.0 + H * 4.0 + 2.0 * D * 4.0;
  // ids + values of k, and the radix-select workspace.
  b.topk = k * 8.0 + ws.topk;
  if (s.attn_dim > 0) {
    const double Ha = std::max(1, s.attn_heads), Da = s.attn_dim, Dv = s.value_dim;
    // keys, values, queries, output, dense probabilities, block list, and the split-K workspace.
    b.attention = T * (Da + Dv) * 4.0 + Ha * Da * 4.0 + Ha * Dv * 4.0 + Ha * T * 4.0 + groups * 4.0 + ws.attention;
  }
  b.stats = T * 4.0 * 3 + groups * 16.0;
  if (p.extended() && !p.adaptive.enabled) {
    // kernels/cuda_update.cc: keys [T, D] and the index slots in use (composites and per-token weights;
    // two when asynchronous updates double-buffer, else one), each grown with 1.5x headroom (grow_keep);
    // while a growing context grows one of them, its old allocation (at most the final size; the keys are
    // the largest) is held beside the new one. Snapshot mass and counts [T].
    const double keys = T * D * 4.0;
    const double slots = (p.async_updates ? 2.0 : 1.0) * (b.composites + T * 4.0);
    b.updates = 1.5 * (keys + slots) + (p.append_per_step > 0 ? keys : 0.0) + T * 8.0 + G * 4.0 + D * 4.0 + 256.0;
  }
  if (p.adaptive.enabled || p.append_per_step > 0) {
    // The backend keeps four resident matrices (kernels/cuda_backend.cc: index keys, attention keys, values
    // and a spare). Without a hold (adaptive groups are rebuilt on the host) or with views that change every
    // step (a growing context), uploads rotate through all four (least recently used), so each may grow to
    // the widest of them: four of T x max(D, Da, Dv), less the index keys and attention arrays counted above.
    b.keys += rotating_upload_bytes(s);
  }
  if (p.hybrid.enabled && s.attn_dim > 0) {
    // kernels/local_branch.cc over the first step's window: raw keys and values, the prepared keys,
    // values (with a ones column) and gates, the state, the queries and the output.
    const double n = std::min(T, static_cast<double>(p.hybrid.window));
    const double Ha = std::max(1, s.attn_heads), Da = s.attn_dim, Dv = s.value_dim;
    b.local = n * (3.0 * Da + 2.0 * Dv + 1.0) * 4.0 + Da * (Dv + 1.0) * 4.0 + Ha * (Da + Dv) * 4.0;
    if (p.kernels.linear == LinearForm::chunked) {
      // The chunk-parallel prefill's workspace (gla_chunked_workspace_bytes): chunks x (Da (Dv + 1) + Da)
      // floats. A chunk too large for shared memory runs smaller (local_branch.cc): count chunks of the
      // largest that fits the 48 KiB every device gives, at least as many as the device will use.
      int chunk = std::min(std::max(1, p.hybrid.chunk), 4096);
      while (chunk > 1 && ip::cuda::gla_smem_floats(s.attn_dim, chunk, false) * 4 > 48 * 1024) --chunk;
      b.local += std::ceil(n / chunk) * (Da * (Dv + 1.0) + Da) * 4.0;
    }
  }
  return b;
}

std::string DeviceBytes::describe() const {
  return fmt::format("keys {}, composites {}, scores {}, top-k {}, attention {}, stats {}, index updates {}, "
                     "local branch {}; total {}",
                     format_bytes(keys), format_bytes(composites), format_bytes(scores), format_bytes(topk),
                     format_bytes(attention), format_bytes(stats), format_bytes(updates), format_bytes(local),
                     format_bytes(total()));
}

double device_headroom_bytes(double free_bytes) { return 0.05 * std::max(0.0, free_bytes) + 256.0 * (1 << 20); }

DeviceInfo query_device() {
  DeviceInfo d;
#if IP_HAVE_CUDA
  d.cuda_build = true;
  d.devices = ip::cuda::device_count();
  if (d.devices > 0) cudaDeviceGetAttribute(&d.cc_major, cudaDevAttrComputeCapabilityMajor, 0);
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

std::string device_cannot(const DeviceShape& s, const PipelineParams& p, int cc_major) {
  const Index64 k = largest_topk(s, p);
  if (k > kGpuTopkMaxK)
    return fmt::format("the GPU top-k takes k <= {}, this point needs k = {} ({})", kGpuTopkMaxK, k,
                       k == std::min<Index64>(p.topk_tokens, static_cast<Index64>(s.tokens)) && p.fidelity
                           ? "select.topk_tokens, for the exact indexer of select.fidelity"
                           : "the groups select.topk_tokens buys");
  return unsupported_forms(p.kernels, s.dim, p.pool.weights.scheme == Weighting::maxmin, s.attn_dim, s.value_dim,
                           cc_major);
}

BackendPlan plan_backend(const std::string& requested, const DeviceShape& s, const PipelineParams& p,
                         const DeviceInfo& d) {
  if (requested == "cpu") return {"cpu", "", ""};
  IP_REQUIRE(requested == "cuda" || requested == "auto", "backend '{}' is not one of: cpu, cuda, auto", requested);
  const bool usable = d.cuda_build && d.devices > 0;
  if (!usable) {
    if (requested == "auto") return {"cpu", "", ""};
    if (!d.cuda_build)
      return {"cuda", "backend = cuda: this build has no CUDA (IP_HAVE_CUDA = 0: nvcc was not found at configure "
                      "time or INDEXPOOL_CUDA=OFF)", ""};
    // describe_devices() already says "no CUDA device (why)" when it knows why.
    if (d.description.rfind("no CUDA device", 0) == 0) return {"cuda", "backend = cuda: " + d.description, ""};
    return {"cuda", fmt::format("backend = cuda: no CUDA device ({})", d.description), ""};
  }
  // What the device cannot do: for cuda a skip, for auto the CPU with a note saying why.
  std::string why = device_cannot(s, p, d.cc_major);
  if (why.empty()) {
    const DeviceBytes need = estimate_device_bytes(s, p);
    const double room = d.free_bytes - device_headroom_bytes(d.free_bytes);
    if (need.total() > room)
      why = fmt::format("estimated device memory {} per request ({}) exceeds the room on the device, {} ({} free "
                        "of {}, less {} headroom)",
                        format_bytes(need.total()), need.describe(), format_bytes(std::max(0.0, room)),
                        format_bytes(d.free_bytes), format_bytes(d.total_bytes),
                        format_bytes(device_headroom_bytes(d.free_bytes)));
  }
  if (why.empty()) return {"cuda", "", ""};
  if (requested == "auto") return {"cpu", "", "backend = auto: " + why + "; running on the CPU"};
  return {"cuda", "backend = cuda: " + why, ""};
}

}  // namespace ip::exp
