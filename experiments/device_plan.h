// Which backend a point runs on (config key `backend = cpu | cuda | auto`) and the device-memory
// estimate made before a CUDA point runs (issue 5, item 3: a point that would not fit is skipped with a
// reason, never crashes the sweep). The decision is a pure function of the point and of what the
// machine offers (DeviceInfo), so it is tested on machines without a GPU; query_device() asks the
// CUDA runtime when the build has CUDA.
#pragma once

#include <string>

#include "core/pipeline.h"
#include "experiments/config.h"

namespace ip::exp {

// The sizes of one request that the device holds at once.
struct DeviceShape {
  double tokens = 0;   // T (the longest request at its last step: the CUDA backend runs a point's requests
                       // one after another, and a growing context appends steps x append_per_step tokens)
  int dim = 0;         // D, index key dimension
  int index_heads = 0; // H
  int attn_dim = 0;    // Da (0: no attention stage)
  int attn_heads = 0;  // Ha
  int value_dim = 0;   // Dv
};
DeviceShape device_shape(const WorkloadSpec& s);
DeviceShape device_shape(const Workload& longest);

// The cuda backend keeps four resident matrices (index keys, attention keys, values, a spare). When uploads
// rotate through all four (no hold: adaptive groups; views that change every step: a growing context; one
// hold after another: the batched decoder's fidelity pass, request by request), each may grow to the widest,
// T x max(D, Da, Dv): what that takes beyond the one index key, attention key and value matrix an estimate
// counts, in bytes.
double rotating_upload_bytes(const DeviceShape& s);

// Estimated device bytes of one request, by what they hold (all arrays fp32 unless the index precision
// says otherwise). With CUDA built, the top-k and attention workspaces are the launchers' own sizes
// (topk_workspace_bytes for the largest top-k call, attention_workspace_bytes for the dense call);
// without it, allowances of the same order.
struct DeviceBytes {
  double keys = 0;        // index keys [T, D] fp32, the per-token weights [T] (and a spare resident copy
                          // of the largest input matrix with adaptive groups or a growing context)
  double composites = 0;  // stored index rows (payload + per-row scales)
  double scores = 0;      // exact scores [T], compressed scores [rows], queries and head weights
  double topk = 0;        // ids and values [k] and the radix-select workspace
  double attention = 0;   // keys [T, Da], values [T, Dv], probabilities [Ha, T], output, workspace
  double stats = 0;       // access statistics: mass [T] fp32, counts [T] u32, step mass [T], ranges
  // Issue 7's decode loop (pipeline.extended(), without adaptive): the index updater's own copy of the
  // keys, its index slots and the statistics snapshot (kernels/cuda_update.cc; 1.5x headroom, and with a
  // growing context one old buffer beside its replacement); and the hybrid layer's local branch.
  double updates = 0;
  double local = 0;
  double total() const { return keys + composites + scores + topk + attention + stats + updates + local; }
  std::string describe() const;  // "keys 0.50 GiB, composites ... (total X GiB)"
};
DeviceBytes estimate_device_bytes(const DeviceShape& s, const PipelineParams& p);

// Free device memory the plan leaves unused beyond the estimate (allocator granularity, the CUDA
// context's own allocations): 5% of the free memory plus 256 MiB.
double device_headroom_bytes(double free_bytes);

// What this process can use.
struct DeviceInfo {
  bool cuda_build = false;   // IP_HAVE_CUDA
  int devices = 0;           // usable CUDA devices
  std::string description;   // describe_devices(), or why there is none
  double free_bytes = 0, total_bytes = 0;  // cudaMemGetInfo of device 0
  int cc_major = 0;                         // device 0's compute capability (major; 0: not known)
};
DeviceInfo query_device();

// What the GPU path cannot run whatever the device's memory (the top-k's k limit, kernels.* forms for these
// dimensions or this compute capability; cc_major 0: not known, its checks left out), or "". plan_backend
// skips (cuda) or sends to the CPU (auto) such a point; `list` says so before a run.
std::string device_cannot(const DeviceShape& s, const PipelineParams& p, int cc_major);

// The backend a point runs on, or why it cannot run.
struct BackendPlan {
  std::string backend;      // "cpu" or "cuda"
  std::string skip_reason;  // non-empty: skip the point
  std::string note;         // auto ran on the CPU although a device is present: why (logged by the runner)
};
// cpu: cpu. cuda: cuda when the build has CUDA, a device is present, the point's largest top-k is within
// the GPU top-k's k <= 4096, its kernel forms (p.kernels) can run it (unsupported_forms) and the memory
// estimate fits, else a skip naming what is missing. auto: cuda under the same conditions, else cpu (with a
// note when a device is present but the point does not fit it).
BackendPlan plan_backend(const std::string& requested, const DeviceShape& s, const PipelineParams& p,
                         const DeviceInfo& d);

}  // namespace ip::exp
