// Runs the points of a sweep, records each into the results file as it finishes, and summarizes.
#pragma once

#include <signal.h>

#include <atomic>
#include <csignal>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "cache_sim/trace.h"
#include "core/pipeline.h"
#include "core/provenance.h"
#include "experiments/config.h"
#include "experiments/results.h"

namespace ip::exp {

struct RunOptions {
  bool quiet = false;
  // --profile (Nsight): the loop inside cudaProfilerStart/Stop (ProfileCapture), in-process CUPTI off
  // (apply_profile_mode). Every run times each point once, with no warm-up or repeat loop.
  bool profile = false;
  // Set asynchronously (by a signal handler) to stop the sweep after the current point: run_points then
  // writes what `out` holds and returns the points run so far. Null: never stops early.
  const volatile std::sig_atomic_t* stop = nullptr;
  // Seconds between progress lines within a point that runs longer than that (a self-updating line on a
  // terminal, plain lines otherwise); 0: 1 s on a terminal, 30 s otherwise. INDEXPOOL_PROGRESS_INTERVAL
  // sets it (progress_interval_from_env).
  double progress_interval_s = 0;
  // Held while run_points reads or writes `out`: another thread may write it meanwhile (main.cc's stop
  // deadline, which writes the finished points when the point under way is abandoned). Null: none.
  std::mutex* out_mutex = nullptr;
};

// The signals that stop `indexpool run` (main.cc); threads that must not take them block these.
void block_stop_signals(sigset_t* set);

// INDEXPOOL_STOP_GRACE: the seconds a point under way has to finish after SIGTERM or SIGHUP before it is
// abandoned (a number >= 0 and <= 86400; unset: 20, which leaves Slurm's default KillWait of 30 s room to
// write the finished points). Throws ip::Error naming the variable for anything else (checked before any
// point runs).
double stop_grace_from_env();

// INDEXPOOL_PROGRESS_INTERVAL (seconds, > 0 and at most 3600), or 0 when unset; throws ip::Error naming the
// variable for anything else (checked before any point runs).
double progress_interval_from_env();

// What the point under way is doing, for the progress line a separate thread prints: run_point sets the
// stage and its counts between pieces of work (relaxed atomics, a few per decode step; nothing in a hot
// loop), the printer only reads them.
struct PointProgress {
  std::atomic<const char*> stage{""};  // a string literal: "generating the workload", "decoding", ...
  std::atomic<std::int64_t> requests_done{0}, requests{0};  // requests (or batched steps) finished, of
  std::atomic<std::int64_t> steps_done{0}, steps{0};        // decode steps finished, summed over the requests
  std::atomic<bool> batched{false};                         // requests_done counts batched decode steps
  void reset();
};

// A source's requests, and the fidelity references (core/pipeline.h, StepReference) that its points on
// the cpu backend computed: the exact indexer and dense attention of each request's steps, the same for
// every point on the workload, so later points read them instead of computing them again (their results
// are the same bits; their wall_s is shorter). Kept while they fit sweep.memory_limit beside the point's
// estimate, and at most the requests' own bytes; a step that does not fit is computed by every point as
// before.
struct CachedSource {
  std::vector<Workload> requests;
  std::vector<RequestReferences> references;  // by request; empty until a cpu point has run
  double input_bytes() const;                 // the requests' inputs
  double reference_bytes() const;
};
// Sources by key: generated requests keyed by their spec, imported files keyed by path.
using WorkloadCache = std::map<std::string, CachedSource>;

// Imports (and so validates) every HDF5 source the points name, before any point runs.
void preload_imports(const std::vector<Point>& points, WorkloadCache& cache);
// The sizes of an imported workload (its first request: an import holds one).
struct ImportShape {
  Index64 tokens = 0, steps = 0;
  int dim = 0, index_heads = 0, attn_dim = 0, attn_heads = 0, value_dim = 0;
};
ImportShape import_shape(const Workload& w);
// Point p with its workload spec sized from its import's shape (tokens, dims, heads, steps; one request), so
// estimate_point_bytes, estimate_reference_bytes and device_shape see the file's arrays, and request_tokens +
// append_per_step is a request's context at its first decode step as the runner checks it. A synthetic point
// as it is (pass any shape); the second form takes the shape from the preloaded import.
Point sized_point(const Point& p, const ImportShape& shape);
Point sized_point(const Point& p, const WorkloadCache& cache);

// The file output.cache_trace names for point p ("{index}" replaced by its 6-digit index), and its
// format (output.cache_trace_format; auto: from the file name).
std::string cache_trace_path(const Point& p);
cache::TraceFormat cache_trace_format(const Point& p);
// Before any point runs: every trace path can be written, no two points share one, and none exists unless
// `overwrite`, or `resume` continues `results` (opened with --resume) and the trace is of a point the file
// does not hold, written since that file's sweep began (ResultsFile::sweep_began): a trace a stopped run
// wrote before its point reached the file. The traces of points the file holds are not checked (those
// points do not run). Throws ip::Error naming the key and the path.
void check_cache_traces(const std::vector<Point>& points, bool overwrite, bool resume = false,
                        const ResultsFile* results = nullptr);
// Throws ip::Error, "KEY 'PATH' is not writable: ... REASON", unless a file can be created beside `path` (a probe
// of this process's own, removed again; nothing that was there is touched).
void require_writable_beside(const std::string& key, const std::string& path);
// Writes point p's trace crash-safely (a complete file renamed over the target).
void write_cache_trace(const Point& p, const cache::Trace& trace);

// Runs one point (or records why it cannot run: k > T, memory estimate over the limit, no backend).
// `on_request(done, total, unit)`, when given, is called after each of the point's requests has run
// (unit "request"; with select.batched on the cuda backend: after each decode step of the whole batch,
// unit "batched step").
using ProgressFn = std::function<void(std::size_t done, std::size_t total, std::string_view unit)>;
// `tracker`, when given, follows the point's stages and steps (PointProgress). `limit_source`
// (Sweep::memory_limit_source) is said with a skip for memory.
PointRecord run_point(const Point& p, double memory_limit, WorkloadCache& cache, const ProgressFn& on_request = {},
                      PointProgress* tracker = nullptr, std::string_view limit_source = {});

// How progress lines name a point: its key (the axis values), or "point i of n" (1-based) when the sweep has
// no axes.
std::string point_label(const Point& p, std::size_t sweep_points);

// Runs `points` in order, skipping those `out` already holds, appending each result to `out` (if
// any) as soon as it finishes (when it reaches the disk is out's FlushPolicy) and flushing `out` at the
// end. A workload leaves `cache` after the last of these points that uses it. Progress on stderr unless
// quiet: a self-updating line on a terminal, plain lines otherwise, and within a point that runs longer
// than opt.progress_interval_s, its stage, requests and decode steps at that interval (from a thread that
// only reads PointProgress). Returns the records of the points run now; with `out`, without their
// per-request details (those are in the file).
std::vector<PointRecord> run_points(const Sweep& sweep, const std::vector<Point>& points, const RunOptions& opt,
                                    WorkloadCache& cache, ResultsFile* out);

// The readable summary table (stdout of `indexpool run`).
std::string summary_table(const std::vector<std::string>& axis_keys, const std::vector<PointRecord>& rows);

std::string version_string();
// The CUDA devices this process sees, one per line (or why there are none).
std::string devices_string();
std::string host_name();
// "<CPU model>, <n> hardware threads" from /proc/cpuinfo.
using ip::cpu_description;  // core/provenance.h

}  // namespace ip::exp
