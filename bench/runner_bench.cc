// Runner overhead benchmark: a sweep of many tiny points, run through the same code as `indexpool run`
// with a results file, reports the time per point spent outside the points' own work (sweep expansion,
// bookkeeping, the crash-safe results append), and the time to write one table of 100,000 rows.
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

#include <vector>

#include <fmt/format.h>

#include "bench/bench_util.h"
#include "experiments/config.h"
#include "experiments/h5.h"
#include "experiments/results.h"
#include "experiments/runner.h"

using namespace ip::exp;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

static double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

struct SweepRun {
  double total_s = 0, own_s = 0, file_kib = 0;
  std::size_t writes = 0;
};

// The whole sweep through run_points into a fresh results file written with `policy`.
static SweepRun run_sweep(const std::string& cfg, const std::string& out, ResultsFile::FlushPolicy policy) {
  fs::remove(out);
  SweepRun r;
  const auto t0 = Clock::now();
  const Sweep sweep = load_sweep(cfg);
  SweepMeta meta;
  meta.sweep_id = sweep.sweep_id;
  meta.tool_version = version_string();
  meta.config_text = sweep.config_text;
  meta.config_path = cfg;
  meta.axis_keys = sweep.axis_keys;
  meta.points_total = static_cast<std::int64_t>(sweep.points.size());
  {
    ResultsFile results(out, meta, false, false);
    results.set_flush_policy(policy);
    WorkloadCache cache;
    RunOptions ro;
    ro.quiet = true;
    const auto rows = run_points(sweep, sweep.points, ro, cache, &results);
    for (const auto& row : rows) r.own_s += row.summary.wall_s;
  }
  r.total_s = since(t0);
  r.file_kib = static_cast<double>(fs::file_size(out)) / 1024.0;
  return r;
}

int main(int argc, char** argv) {
  // [POINTS] [--every-append], in either order; POINTS a whole number (no 1e3, no 7abc).
  long n = 200;
  bool baseline = false, help = false, bad = false, have_n = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--every-append" && !baseline) {
      baseline = true;
    } else if (a == "--help" || a == "-h") {
      help = true;
    } else {
      char* end = nullptr;
      errno = 0;
      n = std::strtol(a.c_str(), &end, 10);
      bad = bad || have_n || a.empty() || *end != '\0' || errno != 0;
      have_n = true;
    }
  }
  if (help || bad || n < 1 || n > 10'000'000) {
    std::fprintf(help ? stdout : stderr,
                 "usage: runner_bench [POINTS] [--every-append]   (1 <= POINTS <= 10,000,000, default 200)\n"
                 "  Runs a sweep of POINTS tiny points through the runner into a results file written as\n"
                 "  `indexpool run` writes it (FlushPolicy::kBoundedOverhead) and reports the time per point\n"
                 "  outside the points' own work. --every-append first runs the same sweep with every point\n"
                 "  written at once (kEveryAppend), as a same-run baseline (make bench passes it). Then it writes one\n"
                 "  /points-like table of 100,000 rows and, as its baseline, the same number of bytes to a plain file.\n"
                 "  Times in ms (wall clock); targets: overhead <= 50 ms a point, the table <= 1000 ms.\n");
    return help ? 0 : 2;
  }
  std::printf("%s\n", ip::bench::provenance_line("runner_bench").c_str());
  const fs::path dir = fs::temp_directory_path() / ("ip_runner_bench_" + std::to_string(getpid()));
  fs::create_directories(dir);
  const std::string cfg = (dir / "tiny.ini").string(), out = (dir / "tiny.h5").string();
  std::ofstream(cfg) << fmt::format(
      "[workload]\ntokens = 256\nsteps = 1\nindex_heads = 1\nattn_heads = 1\nseed = range:0..{}\n"
      "[select]\ntopk_tokens = 16\n[output]\npath = {}\n",
      n - 1, out);

  auto report = [n](const char* what, const SweepRun& r) {
    std::printf("runner (%s): %ld points in %.3f s, of which the points' own work %.3f s\n", what, n, r.total_s,
                r.own_s);
    std::printf("runner overhead per point (%s): %.2f ms (target <= 50 ms); final file %.1f KiB\n", what,
                (r.total_s - r.own_s) / n * 1e3, r.file_kib);
  };
  SweepRun every;
  if (baseline) {
    every = run_sweep(cfg, out, ResultsFile::FlushPolicy::kEveryAppend);
    report("every point written at once", every);
  }
  const SweepRun held = run_sweep(cfg, out, ResultsFile::FlushPolicy::kBoundedOverhead);
  report("as indexpool run writes", held);
  if (baseline)
    std::printf("whole sweep: %.2fx the baseline's wall time; overhead per point %.2fx the baseline's\n",
                held.total_s / every.total_s, (held.total_s - held.own_s) / (every.total_s - every.own_s));

  // One table of 100,000 rows shaped like /points (index, key, 2 axis columns, status, reason, 14 numbers).
  {
    const std::size_t rows = 100000;
    ip::h5::Table t;
    auto& idx = t.add("index", ip::h5::Column::Kind::kInt64);
    for (std::size_t i = 0; i < rows; ++i) idx.ints.push_back(static_cast<std::int64_t>(i));
    for (const char* name : {"key", "pool.weighting", "pool.group_size", "status", "reason"}) {
      auto& c = t.add(name, ip::h5::Column::Kind::kString);
      for (std::size_t i = 0; i < rows; ++i) c.strings.push_back(fmt::format("{}-{}", name, i % 97));
    }
    for (int k = 0; k < 14; ++k) {
      auto& c = t.add(fmt::format("metric_{}", k), ip::h5::Column::Kind::kFloat64);
      for (std::size_t i = 0; i < rows; ++i) c.floats.push_back(0.5 * static_cast<double>(i + k));
    }
    const std::string tp = (dir / "table.h5").string();
    const auto t1 = Clock::now();
    {
      ip::h5::File f(tp, "w");
      f.write_table("points", t);
    }
    const double table_s = since(t1);
    // Same-run baseline: the file's bytes written as one plain binary file (no HDF5, no compound type).
    const auto bytes = static_cast<std::size_t>(fs::file_size(tp));
    const std::string raw = (dir / "raw.bin").string();
    const std::vector<char> buf(bytes, 'x');
    const auto t2 = Clock::now();
    {
      std::ofstream f(raw, std::ios::binary);
      f.write(buf.data(), static_cast<std::streamsize>(buf.size()));
    }
    const double raw_s = since(t2);
    std::printf("one /points-like table of 100,000 rows x 20 columns written in %.1f ms (target <= 1000 ms), %.1f MiB "
                "= %.2fx a plain write of its bytes (%.1f ms)\n",
                table_s * 1e3, static_cast<double>(bytes) / (1 << 20), table_s / raw_s, raw_s * 1e3);
  }
  fs::remove_all(dir);
  return 0;
}
