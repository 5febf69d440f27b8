// Profiling in the runner (issue 6): validating profile.metrics before any point runs, per-stage CUPTI
// counters and kernel records around a point's backend, profile mode for Nsight, and the HDF5 tables.
//
// Counters (profile.counters = on) wrap the point's backend: every stage call (build_index = pool,
// score_index = score, topk, attention, score_tokens and the calls inside the fidelity range =
// fidelity, update_stats = stats) runs
//   1. once outside any counter range (the call the pipeline asked for; one-time work such as uploads
//      and first-launch module loading happens here, not in a measured pass), then
//   2. once per CUPTI replay pass inside a user range named after the stage.
// Inputs are restored before every replay pass: build_index, score_*, topk and attention only read their
// inputs and overwrite their outputs, so they need nothing; update_stats changes the statistics in
// place, so they are copied before the first call and copied back before every pass, leaving them as
// one update left them. Values are aggregated per stage over the point's calls: counters (x.sum) are
// summed, ratios and percentages averaged over calls. Stage times in the steps table then include the
// replays; compare times with counters off.
//
// When counters or kernel records cannot be read (CPU backend, no GPU, no permission, another
// profiler attached) the point records why (point group attributes counters_status/counters_reason,
// kernels_status/kernels_reason), stderr says what to do once per distinct reason, and the sweep goes on.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/backend.h"
#include "experiments/config.h"
#include "experiments/h5.h"
#include "experiments/profile_types.h"

namespace ip::exp {

// Checks profile.metrics of every point with profile.counters on against the CUPTI chip (profile.chip;
// auto: device 0's chip, or GH100 without a device), with CUPTI's host API and no GPU. Throws ip::Error
// naming the metric and where it was set (file:line, command line or default). Returns one line per
// checked list ("profile.metrics: 5 metrics valid for GH100, 8 replay passes"), empty when no point
// asks for counters.
std::string validate_profiling(const Sweep& sweep, const std::vector<Point>& points);

// `indexpool run --profile`: turns in-process CUPTI off in every point (Nsight and CUPTI cannot both
// subscribe) and returns the note to print (empty when nothing was on).
std::string apply_profile_mode(std::vector<Point>& points);

// The measured region of profile mode: cudaProfilerStart on construction and cudaProfilerStop on
// destruction when a point uses the cuda backend and a device exists; otherwise prints why not and how
// to capture with NVTX instead. Either way one NVTX "sweep" range spans it.
class ProfileCapture {
 public:
  explicit ProfileCapture(const std::vector<Point>& points);
  ~ProfileCapture();
  ProfileCapture(const ProfileCapture&) = delete;
  ProfileCapture& operator=(const ProfileCapture&) = delete;
  bool capturing() const { return started_; }

 private:
  bool started_ = false;
  std::unique_ptr<struct SweepRange> range_;
};

// Counters and kernel records of one point.
class PointProfiler {
 public:
  explicit PointProfiler(const Point& p);
  ~PointProfiler();
  PointProfiler(const PointProfiler&) = delete;
  PointProfiler& operator=(const PointProfiler&) = delete;
  // The backend to run the point on: `inner` itself when nothing is on or available (the reason is
  // recorded), else a wrapper that measures and tags each stage call.
  std::unique_ptr<Backend> wrap(std::unique_ptr<Backend> inner);
  // The point's profiling record (collects the kernel records); call once, after the point ran.
  ProfileResult finish();

  struct Impl;  // defined in profiling.cc (the backend wrapper there uses it)

 private:
  std::unique_ptr<Impl> impl_;
};

// Writes point group `group`'s profiling attributes and its tables `counters` (stage, metric, value,
// unit, calls, aggregate) and `kernels` (name, stage, pass, duration_ns, grid_x/y/z, block_x/y/z,
// registers_per_thread, static_shared_bytes, dynamic_shared_bytes); a table only when it has rows.
void write_profile(h5::File& f, const std::string& group, const ProfileResult& r);

}  // namespace ip::exp
