// Profiling settings of a point (config keys profile.*) and what a point records about its profiling:
// hardware counters per stage and kernel launch records. Plain types; no CUDA needed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ip::exp {

// The default counters (Nsight Compute / CUPTI metric names): DRAM bytes read and written, L2 sector
// hit rate, SM throughput as % of peak, achieved occupancy.
inline const std::vector<std::string>& default_metrics() {
  static const std::vector<std::string> m = {"dram__bytes_read.sum", "dram__bytes_write.sum",
                                             "lts__t_sector_hit_rate.pct",
                                             "sm__throughput.avg.pct_of_peak_sustained_elapsed",
                                             "sm__warps_active.avg.pct_of_peak_sustained_active"};
  return m;
}

struct ProfileParams {
  bool counters = false;                       // profile.counters
  std::vector<std::string> metrics = default_metrics();  // profile.metrics
  bool kernel_records = false;                 // profile.kernel_records
  std::string chip = "auto";                   // profile.chip: CUPTI chip name for validation, auto = device's
  // Why counters / kernel records that the config asked for were turned off before the run (--profile: Nsight
  // reads the GPU); the point records them as unavailable with this reason. Empty: not turned off.
  std::string counters_off, kernel_records_off;
};

// One metric of one stage of a point, aggregated over the stage's calls.
struct StageCounter {
  std::string stage;   // pool, score, topk, attention, fidelity, stats (see core/ranges.h)
  std::string metric;  // CUPTI metric name
  double value = 0;
  std::string unit;       // CUPTI's unit: byte, percent, ...
  std::int64_t calls = 0;  // stage calls measured
  std::string aggregate;  // "sum" (counters: summed over calls) or "mean" (ratios: mean over calls)
};

// One kernel launch (CUPTI Activity API).
struct KernelLaunch {
  std::string name;   // demangled
  std::string stage;  // stage that launched it ("" outside any measured stage)
  std::int64_t pass = 0;  // counter replay pass (0: the run itself; >= 1: replays for counters)
  double duration_ns = 0;
  std::int64_t grid_x = 0, grid_y = 0, grid_z = 0, block_x = 0, block_y = 0, block_z = 0;
  std::int64_t registers_per_thread = 0, static_shared_bytes = 0, dynamic_shared_bytes = 0;
};

// What a point records about profiling. Status: "off" (not asked for), "ok", or "unavailable" with
// the reason (no GPU, CPU backend, no permission, another profiler attached, ...).
struct ProfileResult {
  std::string counters_status = "off", counters_reason;
  std::string kernels_status = "off", kernels_reason;
  std::string chip;              // CUPTI chip the counters came from
  std::int64_t passes = 0;       // replay passes per measured call
  std::vector<StageCounter> counters;
  std::vector<KernelLaunch> kernels;
};

}  // namespace ip::exp
