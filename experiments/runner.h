// Runs the points of a sweep and summarizes each one.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "experiments/config.h"

namespace ip::exp {

// One point's result, averaged over requests and steps (times: median over steps of all requests).
struct PointSummary {
  std::string status = "ok";  // ok | skipped
  std::string reason;         // why a point was skipped
  double tokens = 0;          // mean context length (tokens)
  double index_bytes_per_token = 0, exact_bytes_per_token = 0;  // bytes
  double macs_per_query = 0, exact_macs_per_query = 0;          // multiply-adds
  double token_recall = 0, block_recall = 0, mass_recall = 0, output_error = 0;
  double pool_ms = 0, score_ms = 0, topk_ms = 0, attention_ms = 0;  // milliseconds, median
  double wall_s = 0;  // seconds for the whole point
};

struct RunOptions {
  bool quiet = false;
};

// Workloads by source: generated requests keyed by their spec, imported files keyed by path.
using WorkloadCache = std::map<std::string, std::vector<Workload>>;

// Imports (and so validates) every HDF5 source the sweep names, before any point runs.
void preload_imports(const Sweep& sweep, WorkloadCache& cache);

// Runs every point in order; prints progress to stderr unless quiet.
std::vector<PointSummary> run_sweep(const Sweep& sweep, const RunOptions& opt, WorkloadCache& cache);

// The readable summary table (stdout of `indexpool run`).
std::string summary_table(const Sweep& sweep, const std::vector<PointSummary>& rows);

// Writes the results CSV (comment lines say how it was made) via a temporary file and a rename, so an
// existing file is replaced only by a complete one.
void write_csv(const std::string& path, const Sweep& sweep, const std::vector<PointSummary>& rows,
               const std::string& argv_line);

std::string version_string();
// The CUDA devices this process sees, one per line (or why there are none).
std::string devices_string();

}  // namespace ip::exp
