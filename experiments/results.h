// The results file of a sweep (HDF5), written crash-safely (see ResultsFile::FlushPolicy).
//
// Layout (schema_version 1):
//   /                      attributes: schema_version (int), tool_version, git_revision, config_text,
//                          config_path, argv, host, backend, device, created_utc, started_utc (when
//                          the run that created it began: before its first point) (strings),
//                          sweep_id (string: hash of the resolved config without output path and shard),
//                          sweep_settings (string: what sweep_id hashes, a line "key=v1,v2," per setting),
//                          points_total (int: points in the whole sweep); imported_workloads (each
//                          imported file's path, size and digest: Sweep::imports) when the sweep imports;
//                          resumed_by (a line for each --resume run that wrote points: time, host,
//                          shard, tool version with its git revision, argv) once a run resumed it;
//                          merged_from (merged files)
//   /points                compound dataset, one row per finished or skipped point, in the order they
//                          were written; pandas.DataFrame(f["points"][:]) reads it directly. Columns:
//                          index (int64, position in the sweep's point list), key (fixed-length bytes,
//                          the point's identity), one fixed-length bytes column per sweep axis (named
//                          after the axis key, e.g. "pool.weighting"), status, reason, run_backend (what
//                          the point ran on: cpu or cuda; not "backend", which may be an axis column),
//                          run_device (that backend's device description) (bytes),
//                          then every
//                          PointSummary number as float64, named as in PointSummary with its unit suffix
//                          where it has one (see results.cc).
//   /point_<index>/        group per point (6-digit zero-padded index): attributes key, status, reason,
//                          git_revision (of the indexpool that wrote the point), run_backend, run_device,
//                          run_kernels (the GPU kernel forms the point's calls ran, e.g. "attention tiles,
//                          exact score bf16x3, score bf16x2, top-k chain"; "" on the cpu), and the axis
//                          values; datasets
//                            steps  compound [requests * steps]: request, step, token_recall, block_recall,
//                                   mass_recall, output_error, pool_ms, score_ms, topk_ms, attention_ms
//                            cache_levels  compound [levels]: level, policy, capacity, accesses, hits,
//                                   misses, evictions, bytes_from_below, hit_rate, opt_hit_rate
//                            cache_mrc     compound: capacity_entries, miss_ratio (exact LRU curve)
//                            composite_keys   float32 [groups(*2 for maxmin), D]   (save_tensors, request 0)
//                            selected_groups  int32 [Q, k_g]                        (save_tensors, request 0)
//                            request_<b>/composite_keys, request_<b>/selected_groups for b >= 1
//                          profiling (experiments/profiling.h): attributes counters_status, counters_reason,
//                          kernels_status, kernels_reason ("off", "ok" or "unavailable" and why), with
//                          counters on also counters_chip, counters_passes; tables
//                            counters  compound: stage, metric, value, unit, calls, aggregate (sum | mean)
//                            kernels   compound: name, stage, pass, duration_ns, grid_x/y/z, block_x/y/z,
//                                      registers_per_thread, static_shared_bytes, dynamic_shared_bytes
//
// Crash safety: every append writes a complete new file (copy of the previous one plus the new point)
// next to the target and renames it over the target, so the file on disk is always one that h5py opens,
// holding every point appended so far. A lock file (flock, released by the kernel when the process
// dies) refuses a second writer of the same path.
#pragma once

#include <cstdint>
#include <ctime>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/pipeline.h"
#include "experiments/cache_model.h"
#include "experiments/profile_types.h"
#include "core/tensor.h"

namespace ip::exp {

constexpr int kSchemaVersion = 1;
constexpr double kNoValue = std::numeric_limits<double>::quiet_NaN();  // a metric not measured

// One point's result, averaged over requests and steps (times: median over steps of all requests).
struct PointSummary {
  std::string status = "ok";  // ok | skipped
  std::string reason;         // why a point was skipped; for a point that ran, a note (or empty)
  std::string backend = "cpu";  // what the point ran on (cpu | cuda; for a skipped point, what it would have)
  std::string device;           // that backend's device() ("" when skipped before a backend started)
  std::string kernels;          // the GPU kernel forms its calls ran (Backend::kernel_forms; "" on the cpu)
  double tokens = 0;          // mean over requests of the context length (tokens; growing: after the last step)
  double index_bytes_per_token = 0, exact_bytes_per_token = 0;  // bytes
  double macs_per_query = 0, exact_macs_per_query = 0;          // multiply-adds
  double token_recall = 0, block_recall = 0, mass_recall = 0, output_error = 0;
  double pool_ms = 0, score_ms = 0, topk_ms = 0, attention_ms = 0;  // milliseconds, median
  double wall_s = 0;  // seconds for the whole point
  // Cache model (NaN when off or when the point has fewer levels): hit rates of levels 1..3 (fraction
  // of the accesses reaching that level), overall (accesses that hit some level), overall with every
  // level's policy replaced by Belady's OPT (a reference, not a bound: per-level Belady is not optimal
  // for a hierarchy), and Belady's OPT on one cache of all levels' capacity (the upper bound on
  // cache_hit_rate; NaN when accesses differ in size).
  double cache_l1_hit_rate = kNoValue, cache_l2_hit_rate = kNoValue, cache_l3_hit_rate = kNoValue;
  double cache_hit_rate = kNoValue, cache_opt_hit_rate = kNoValue, cache_opt_single_hit_rate = kNoValue;
  // Issue 7 (hybrid layer, index updates, adaptive compression); medians over steps like the times above.
  double layer_ms = 0;                 // per step: score + topk + sparse attention + local branch
  double local_ms = 0;                 // per step: local branch (append, read-out, combine); 0 without hybrid
  double local_prefill_ms = 0;         // per request: chunked linear attention over the window (median)
  double layer_output_error = kNoValue, layer_mass_recall = kNoValue;  // mean over steps, like output_error
  double layer_tokens_per_step = 0;    // mean tokens the layer covers per step (selection + local window)
  double repooled_fraction_mean = 0;   // mean over steps 1.. of (groups re-pooled / groups); NaN with one step
  double pool_hidden_ms = kNoValue;    // median hidden part of asynchronous updates (NaN: none, or not measured)
  double tokens_per_group = 0;         // context tokens per stored index group (G; the mean for adaptive)
};

// A skipped point measured nothing: every number NaN (not 0, which a mean over points would take as a
// recall of 0 or an error of 0). Status, reason, backend and device stay.
void clear_metrics(PointSummary& s);

struct RequestDetail {
  std::vector<StepRecord> steps;
  Tensor<float> composite_keys;        // empty unless save_tensors
  std::vector<std::int32_t> selected;  // [steps, k_groups], empty unless save_tensors
  Index64 k_groups = 0;
};

struct PointRecord {
  std::size_t index = 0;  // position in the sweep's point list
  std::string key;        // identity of the point (resume and merge compare it)
  std::vector<std::pair<std::string, std::string>> axes;  // axis key -> value, in axis order
  PointSummary summary;
  std::vector<RequestDetail> requests;  // empty for a skipped point
  CacheResult cache;                    // empty levels when the cache model is off
  ProfileResult profile;                // profiling status, counters and kernel records (profile.*)
};

// What the root attributes say about the sweep.
struct SweepMeta {
  std::string sweep_id;
  std::string tool_version, git_revision;
  std::string config_text, config_path, argv, host, backend, device;
  std::vector<std::string> axis_keys;  // the sweep's axes, in order (the table's axis columns)
  std::int64_t points_total = 0;
  // Root attribute `shard`: "i/N", the shard of the sweep the run wrote ("0/1": all of it; "": unknown); a
  // merged file lists its inputs' shards, comma-separated ("0/4,2/4").
  std::string shard;
  std::string imports;  // Sweep::imports: root attribute imported_workloads, written when not empty
  std::string sweep_settings;  // Sweep::sweep_settings: root attribute sweep_settings
  std::string started_utc;  // when the run that creates the file began (root attribute, when not empty)
};

// The start of the reason of the one skip a point's own settings decide (select.topk_tokens above a
// request's context, found once its workload is made): runner.cc writes it, skip_may_change reads it.
inline constexpr const char kSkipBudgetOverContext[] = "select.topk_tokens = ";
// Whether a point skipped for `reason` may run on another try (--resume runs it again): every skip but the
// one its settings decide, which would be skipped again after making its workload. The others (no CUDA
// build or device, device or host memory, sweep.memory_limit, the backend failing to start) depend on the
// machine and the limits.
bool skip_may_change(const std::string& reason);

class ResultsFile {
 public:
  // Takes the lock on `path` (error if another live process holds it), then:
  //  resume = false: refuses an existing file at `path` unless `overwrite` (then it is replaced only
  //                  when the first point is appended);
  //  resume = true:  opens the existing file (if any), checks schema_version and sweep_id against
  //                  `meta`, and remembers which point keys it holds.
  // Nothing at `path` is modified or truncated by a failed open.
  ResultsFile(const std::string& path, const SweepMeta& meta, bool resume, bool overwrite);
  ~ResultsFile();
  ResultsFile(const ResultsFile&) = delete;
  ResultsFile& operator=(const ResultsFile&) = delete;

  // When appended points reach the disk. Every write is crash-safe: a copy of the file with the new
  // points is fsynced and renamed over it, so the file always holds a complete prefix of the sweep.
  // Rewriting the file costs time in proportion to its size, so a sweep of many quick points would
  // spend ever more of its time there (O(points^2) bytes written) if every point were written at once.
  enum class FlushPolicy {
    kEveryAppend,     // append() returns once the point is on disk (the default)
    kBoundedOverhead  // append() holds points in memory until the time since the last write is at least
                      // kFlushSpacing times that write's duration (writing then costs at most about
                      // 1 / (1 + kFlushSpacing) of the run); flush() and the destructor write the rest. A
                      // killed run loses only the points held, which --resume runs again.
  };
  static constexpr double kFlushSpacing = 4.0;
  void set_flush_policy(FlushPolicy policy);

  bool has(const std::string& point_key) const;  // written or held
  std::size_t size() const;                      // points written or held
  // Resumed: points the file recorded as skipped for a reason that may have gone (skip_may_change), which
  // are not held (has() is false) and run again; the file keeps their old records until new ones are written.
  std::size_t retried() const;
  // Resumed as the whole sweep, a merged file of some shards: their list (the file's shard attribute, which
  // becomes 0/1); empty otherwise.
  std::string completes_shards() const;
  std::size_t held() const;                      // appended points not yet on disk
  // Opened an existing file with --resume; then when its sweep began (root attribute started_utc, else
  // created_utc; seconds since the epoch, -1 when it says neither).
  bool resumed() const;
  std::time_t sweep_began() const;
  void append(const PointRecord& rec);  // throws ip::Error naming the file (then the points stay held)
  void flush();                         // writes the held points now; throws ip::Error naming the file

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// What a merge wrote, and which of the sweep's points it lacks.
struct MergeSummary {
  std::int64_t points = 0;        // points in OUT
  std::int64_t points_total = 0;  // the sweep's points (attribute points_total)
  std::vector<std::int64_t> missing;  // the sweep's point indices OUT lacks, ascending
  // Shards ("i/N") that no input holds and that own a missing point (known when every input names its
  // shard with one N); and inputs' shards that lack some of their points (a run stopped early: --resume).
  std::vector<std::string> missing_shards, incomplete_shards;
  // Inputs a running indexpool is writing (it holds their lock: OUT has their points as of now), and the
  // shards of those that lack some of their points (listed here, not in incomplete_shards).
  std::vector<std::string> running, running_shards;
};

// `indexpool merge OUT IN...`: joins shard files of one sweep (same sweep_id and schema_version; each
// point key at most once — a duplicate with the same key is an error). OUT must not exist. Missing points
// are not an error (a partial merge is written and summarized).
MergeSummary merge_results(const std::string& out, const std::vector<std::string>& inputs);
// The file merge_results writes before it links it to OUT (`OUT.tmp-<pid>`): removed when the merge fails,
// by `indexpool merge`'s signal handler when it is stopped, and by the next merge to OUT when it was killed.
std::string merge_temp_path(const std::string& out);
// "1 of 2 points of the sweep are missing: point 1 (shard 1/2 has no input file)": empty when none is.
std::string describe_missing(const MergeSummary& m);

// `indexpool inspect FILE`: a readable description (attributes, point count by status, table columns,
// per-point groups and their datasets with shapes). Of more than kInspectPointGroups point groups, the first
// and last few are listed and the rest counted, unless `all_points` (inspect --all).
inline constexpr std::size_t kInspectPointGroups = 20;
std::string inspect_results(const std::string& path, bool all_points = false);

// `indexpool inspect FILE --table NAME`: the table (a 1-D compound dataset: /points, point_<i>/counters,
// point_<i>/kernels, point_<i>/steps, ...) as tab-separated text: a header of column names, then one line
// per row; numbers exactly (the shortest text that reads back to the same double), tabs, newlines and
// backslashes in strings as \t, \n and \\. Throws naming the file and the table when it is absent or not
// a table. For shells and machines without h5py (scripts/gpu-profile-check.sh reads counters with it).
std::string table_tsv(const std::string& path, const std::string& table);

}  // namespace ip::exp
