// The run configuration: plain structs with their defaults, the table of config keys, and a minimal
// INI reader with sweep axes (comma-separated values form a grid). Nothing below experiments/ sees
// config-file types: a Point holds only core structs.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/pipeline.h"
#include "core/workload.h"
#include "experiments/cache_model.h"
#include "experiments/profile_types.h"

namespace ip::exp {

// Everything one sweep point needs. Defaults are the ones in the key table (config.cc).
struct Point {
  std::string backend = "cpu";  // cpu | cuda | auto
  int threads = 0;              // CPU threads, 0 = all
  // threads_per_request: 0 runs the point's requests one after another, each on all `threads`; N >= 1 runs
  // threads / N of them at once on the cpu backend, each on N threads (the same bits either way).
  int threads_per_request = 0;
  std::string source = "synthetic";
  WorkloadSpec workload;
  PipelineParams pipeline;
  CacheParams cache;
  std::string output_path;    // results HDF5 file ("" = none)
  bool save_tensors = false;  // store composite keys and selected groups per point
  std::string cache_trace;    // output.cache_trace: file for each point's access trace ("" = none)
  std::string cache_trace_format = "auto";  // auto | txt | csv | oracle
  ProfileParams profile;      // profile.*: CUPTI counters and kernel records (experiments/profiling.h)
  Index64 max_context = 0;    // limits.max_context: tokens a request may hold (0: no limit)
  // select.batched: on the cuda backend the point's requests decode together through the batched decoder
  // (kernels/batched_decode.h: one pool launch, then one score, top-k and attention launch per step for
  // all of them); the cpu backend runs them one after another as always, with the same selections.
  bool batched = false;
  // The axis values of this point, "key=value", in axis order (for labels).
  std::vector<std::pair<std::string, std::string>> axes;
  std::size_t index = 0;  // position in the sweep's point list
  std::string key;        // identity: the axis values, "k=v;k=v" ("-" for a single-point sweep)
};

// One config key: its canonical name ("section.key", or "key" for top-level keys), default, help.
struct KeyInfo {
  std::string name;
  std::string default_value;
  std::string help;
  std::function<void(Point&, const std::string&)> apply;  // throws ip::Error on a bad value
};
const std::vector<KeyInfo>& config_keys();

// A value as written, with where it came from.
struct Setting {
  std::string key;
  std::vector<std::string> values;  // more than one: a sweep axis
  std::string file;
  int line = 0;  // 0: command line
};

struct Sweep {
  std::string config_path;
  std::string config_text;
  std::vector<Setting> settings;               // point keys, in file order (overrides replace in place)
  std::vector<std::vector<std::string>> zips;  // [sweep] zip groups: axes that move together
  std::vector<std::string> axis_keys;          // the axes, in order (a zip group counts as its keys)
  std::vector<Point> points;                   // grid order: last axis fastest
  std::string sweep_id;  // hash of the resolved settings without output.* (shards of one sweep share it)
  // What sweep_id hashes, a line "key=v1,v2," each (results attribute sweep_settings: a refused --resume
  // names the keys that differ).
  std::string sweep_settings;
  // The imported workload files (workload.source other than synthetic) of every point, one line each: "PATH:
  // N bytes, digest H" (file_digest; "PATH: unreadable" when it cannot be read). Part of sweep_id, and the
  // results file's root attribute imported_workloads. Empty for a synthetic sweep.
  std::string imports;
  // Why each unreadable file could not be read: `run` and `list` refuse the sweep (its id needs every file,
  // also those of other shards' points); parsing alone does not.
  std::vector<std::string> import_errors;
  double memory_limit = 0;  // bytes; a point whose estimate exceeds it is skipped
  // Where memory_limit came from: "" when set (sweep.memory_limit), else the default's basis, e.g.
  // "default: 80% of the cgroup memory limit 8.0 GiB (memory.max of /sys/fs/cgroup/job)".
  std::string memory_limit_source;
};

// The memory this process may use and what limits it: the machine's RAM, or less where a cgroup (a Slurm
// job's --mem, a container's limit) or the address-space limit (ulimit -v) says so.
struct UsableMemory {
  double bytes = 0;
  std::string what;  // "RAM 23.4 GiB", "the cgroup memory limit 8.0 GiB (memory.max of DIR)", "ulimit -v 4.0 GiB"
};
UsableMemory usable_memory();
// The lowest cgroup memory limit on this process: for each cgroup v2 mount and v1 memory-controller mount in
// `mountinfo` (/proc/self/mountinfo's text), the process's cgroup (`proc_cgroup`, /proc/self/cgroup's text) and
// each of its ancestors below the mount, memory.max (v2; "max" is none) or memory.limit_in_bytes (v1; 2^60 or more
// is none). 0 bytes when none; `file` names the file of the lowest.
double cgroup_memory_limit(const std::string& mountinfo, const std::string& proc_cgroup, std::string* file);

// Reads the file, applies environment overrides (INDEXPOOL_PRECISION -> pool.precision,
// INDEXPOOL_CACHE_SIZE -> the byte capacity of the last cache level) and then
// `overrides` ("key=v1,v2" from the command line), and expands the grid.
// Throws ip::Error naming the file, line and key on any bad input, before anything runs.
//
// Value grammar: a comma-separated list is an axis; items may be integers with units (64Ki, 1Mi, 2Gi),
// `pow2:A..B` (2^A .. 2^B) or `range:A..B[:STEP]` (inclusive). `[sweep] zip = k1 k2, k3 k4` makes the
// axes of each space-separated group move together (equal lengths); `[sweep] memory_limit` (bytes,
// units allowed; default 80% of usable_memory()) skips points estimated to need more.
Sweep load_sweep(const std::string& path, const std::vector<std::string>& overrides = {});

// The points of shard `index` of `count` (point i belongs to shard i mod count).
std::vector<Point> shard_points(const Sweep& sweep, int index, int count);

// Parses "--shard i/N"; with an empty string, reads Slurm's SLURM_ARRAY_TASK_ID, _COUNT, _MIN and _STEP
// (index = (ID - MIN) / STEP), defaulting to 0/1 when they are not set. Throws on a malformed value.
std::pair<int, int> parse_shard(const std::string& spec);

// Estimated peak bytes of running point p (workload arrays of every request, index, scores, attention).
// From p.workload's sizes: for an imported workload, pass sized_point (experiments/runner.h), which takes
// them from the file.
double estimate_point_bytes(const Point& p);
// The most that the fidelity references of p's workload (core/pipeline.h, StepReference: each request's
// exact scores and top-k and dense attention per step, kept on the cpu backend for the workload's later
// points) can take beyond the estimate: at most the workload's own arrays, and the runner keeps them only
// while they fit sweep.memory_limit beside the running point's estimate. 0 on cuda or with fidelity off.
double estimate_reference_bytes(const Point& p);
// A byte count in the binary unit that shows it: "512 B", "1.0 KiB", "3.2 MiB", "80.0 GiB".
std::string format_bytes(double bytes);

// "--help-config" text: every key with its default and help.
std::string describe_keys();

}  // namespace ip::exp
