// Hardware counters through CUPTI's Range Profiler API (CUDA 12.6+/13; the Event/Metric and the older
// Profiler APIs are deprecated or gone in 13.0). Host-only header; built when CUPTI is found
// (IP_HAVE_CUPTI).
//
// Two halves:
//  - the host half (plan_metrics, supported_chips) needs no GPU: CUPTI's profiler host API checks metric
//    names and schedules them into passes from a chip name alone ("GH100" for H100/H200, "GA100" for
//    A100). The runner uses it to validate profile.metrics before any point runs.
//  - the target half (RangeProfiler) collects the metrics on a device, one user range per measured call,
//    with user replay: CUPTI needs `passes()` runs of the same work to schedule every counter, so
//    measure() runs the caller's callable once per pass and calls the caller's `restore` before every
//    pass after the first. The caller must make each pass see the same inputs: whatever the callable
//    changes (an in-place update of statistics, an output that is also an input, a cache that warms)
//    `restore` puts back. Outputs that are entirely overwritten need no restoring.
//
// Counters cannot be read with no device, without permission (ERR_NVGPUCTRPERM), or while another
// profiler (Nsight Systems or Nsight Compute) holds the counters; RangeProfiler's constructor and
// measure() then throw CountersUnavailable, whose message says what to do.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"

namespace ip::cupti {

struct MetricInfo {
  std::string name;
  std::string unit;         // CUPTI's dimension unit: "byte", "percent", "nanosecond", "" (a plain count), ...
  std::string description;  // CUPTI's one-line description
  bool sums = true;         // a counter (adds up over calls) rather than a ratio or throughput
};

// The metrics scheduled for one chip: properties in request order and the replay passes they need.
struct MetricPlan {
  std::string chip;
  std::vector<MetricInfo> metrics;
  std::size_t passes = 0;
};

// A metric name that CUPTI does not know for the chip.
class UnknownMetric : public Error {
 public:
  UnknownMetric(std::string metric, const std::string& message) : Error(message), metric_(std::move(metric)) {}
  const std::string& metric() const { return metric_; }

 private:
  std::string metric_;
};

// Why counters cannot be read here and now (the message says what the user can do about it).
// environment(): the machine's doing (no device, no permission, another profiler, an unsupported device
// or configuration), not a failure of ours; a test skips on those and fails on the others.
class CountersUnavailable : public Error {
 public:
  explicit CountersUnavailable(const std::string& what, bool environment = true)
      : Error(what), environment_(environment) {}
  bool environment() const { return environment_; }

 private:
  bool environment_ = true;
};

// True for the CUPTI results that say the machine does not let counters be read (permission, another
// profiler, no device or context, unsupported device or configuration): CountersUnavailable::environment.
bool environment_result(int cupti_result);

// The chips the installed CUPTI can schedule metrics for ("GA100", "GH100", ...). No GPU needed.
std::vector<std::string> supported_chips();

// Checks every metric against `chip` and schedules them (no GPU needed). Throws UnknownMetric naming the
// first unknown metric, ip::Error for an unknown chip or an empty list.
MetricPlan plan_metrics(const std::string& chip, const std::vector<std::string>& metrics);

// CUPTI's chip name of CUDA device `device` ("GH100"). Throws CountersUnavailable without a device.
std::string device_chip(int device);

// The message for a CUPTI result that stops counter collection, with what to do about it.
std::string explain(int cupti_result, const std::string& call);

class RangeProfiler {
 public:
  // Enables range profiling with user ranges and user replay on the primary context of `device`
  // (made current). Throws CountersUnavailable (no device, no permission, another profiler attached)
  // or UnknownMetric.
  RangeProfiler(int device, const std::vector<std::string>& metrics);
  ~RangeProfiler();
  RangeProfiler(const RangeProfiler&) = delete;
  RangeProfiler& operator=(const RangeProfiler&) = delete;

  const MetricPlan& plan() const;
  std::size_t passes() const { return plan().passes; }

  // Runs `run` once per replay pass inside one user range named `range`, with the device synchronized
  // before the range closes, and `restore` before every pass but the first. Returns one value per
  // metric, in plan order. Throws CountersUnavailable when CUPTI fails (the caller records why and
  // goes on without counters).
  std::vector<double> measure(const std::string& range, const std::function<void()>& run,
                              const std::function<void()>& restore);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ip::cupti
